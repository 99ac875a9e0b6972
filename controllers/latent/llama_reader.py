"""The latent study's model on llama.cpp: the GGUF decoded as it is quantised, its states read by the
evaluation callback (``gauntlet.agents.llm.llama_runtime``), in place of the dequantised transformers copy.

``load_llama_weights`` gives what the study's functions take as ``weights``: a ``tokenizer`` that renders
a conversation with the chat template inside the GGUF file (as transformers renders it; the agent's own
prompts come from the same function) and tokenizes with llama.cpp's vocabulary, and the ``runtime``.
``gauntlet.controllers.latent.hidden`` and ``corpus_study`` hand such weights to the functions here:

- ``generate``: each prompt's greedy reply, one prompt at a time, read afresh (no prefix cache: a
  cached prefix changes the last bits of the logits and so, rarely, a near-tie; docs/latent_monitor.md);
- ``layer_states``: every position's states, read afresh;
- ``states_after``: the states from a position on, the shared opening read once (the corpus study's
  documents all follow the same request).

States are transformers-numbered (0 the embeddings, ``L`` the final norm's output); the test suite
checks them against a transformers forward pass of the same file dequantised (cosine >= 0.999).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gauntlet.controllers.latent.hidden import Generation


class TemplateTokenizer:
    """The two tokenizer calls the study makes (``apply_chat_template`` to text, then ids), answered
    with the GGUF's chat template and llama.cpp's vocabulary."""

    def __init__(self, runtime: Any):
        self.runtime = runtime

    def apply_chat_template(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = False,
                            tokenize: bool = False) -> str:
        from gauntlet.agents.llm.chat_template import render_prompt

        if tokenize:
            raise ValueError("render to text (tokenize=False), then tokenize the text")
        return render_prompt(self.runtime.template, messages, None, add_generation_prompt=add_generation_prompt)

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        return {"input_ids": self.runtime.tokenize(text)}

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return str(self.runtime.detokenize(token_ids))


@dataclass(frozen=True)
class LlamaWeights:
    """A GGUF model on llama.cpp, as the study's ``weights``."""

    runtime: Any
    tokenizer: TemplateTokenizer

    @property
    def source(self) -> str:
        return str(self.runtime.source)

    @property
    def n_blocks(self) -> int:
        return int(self.runtime.n_blocks)


def load_llama_weights(path: str | Path, threads: int = 1) -> LlamaWeights:
    """The GGUF file at ``path`` on llama.cpp with ``threads`` threads (one llama.cpp context)."""
    from gauntlet.agents.llm.llama_runtime import LlamaRuntime

    runtime = LlamaRuntime(path, threads=threads, context=8192, kept_prefixes=1)
    return LlamaWeights(runtime, TemplateTokenizer(runtime))


def generate(weights: LlamaWeights, prompts: Sequence[Sequence[int]], *, max_new_tokens: int) -> list[Generation]:
    """Each prompt's greedy reply (the end token left out of the response), in prompt order."""
    out = []
    for prompt in prompts:
        written = weights.runtime.generate(list(prompt), max_new_tokens=max_new_tokens, reuse_prefix=False)
        response = written.tokens[:-1] if written.finished else list(written.tokens)
        out.append(Generation(list(prompt), response, weights.runtime.detokenize(response)))
    return out


def layer_states(weights: LlamaWeights, sequences: Sequence[Sequence[int]],
                 layers: Sequence[int]) -> list[dict[int, np.ndarray]]:
    """Every position's state at ``layers`` for each sequence, read afresh."""
    runtime = weights.runtime
    out = []
    for sequence in sequences:
        states = runtime.hidden_states(list(sequence), layers)
        out.append({layer: states[runtime.layer_number(layer)] for layer in layers})
    return out


def states_after(weights: LlamaWeights, sequences: Sequence[Sequence[int]], starts: Sequence[int],
                 layers: Sequence[int]) -> list[dict[int, np.ndarray]]:
    """The states at ``layers`` from position ``starts[i]`` of each sequence on, the openings they share
    read once."""
    runtime = weights.runtime
    out = []
    for sequence, start in zip(sequences, starts, strict=True):
        states = runtime.states_after(list(sequence), start, layers)
        out.append({layer: states[runtime.layer_number(layer)] for layer in layers})
    return out


__all__ = ["LlamaWeights", "TemplateTokenizer", "generate", "layer_states", "load_llama_weights", "states_after"]
