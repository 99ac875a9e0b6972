"""What a causal LM writes for a prompt, and the hidden states it wrote it from.

``generate`` answers many prompts in left-padded batches (greedy, so a rerun writes the same tokens).
``read_states`` runs one batched forward pass over each prompt followed by its response, with
``output_hidden_states``, and keeps for chosen layers (transformers' numbering: 0 the embeddings, ``L``
the last layer's output after the final norm):

- ``response``: the states at the positions that *produced* the response tokens, the last prompt
  token and every response token but the last (``n_response`` rows): what the model was in when it
  wrote each token. These are the positions an agent's own decoding visits, so a monitor can take
  them from the agent's forward pass instead of running a second one (``LocalChatModel``'s
  ``keep_hidden_layers``);
- ``prompt_end``: the state at the last prompt token (the model's summary of what it was told);
- ``boundary``: the state at the last token before the lower-priority text (the user's turn or the
  tool's output) began, when a boundary is given. ``prompt_end - boundary`` is TaskTracker's activation
  delta: how the external text moved the model.

A causal model's state at a position depends only on the tokens up to it, so one pass over prompt and
response gives all three. States are float32 numpy arrays; padding is on the right in ``read_states``,
so positions are unchanged by it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Generation:
    """A prompt's token ids and the response the model wrote (ids and decoded text)."""

    prompt_ids: list[int]
    response_ids: list[int]
    text: str


@dataclass(frozen=True)
class SequenceStates:
    """The hidden states of one prompt-and-response (see the module doc), per layer."""

    response: dict[int, np.ndarray]        # layer -> (n_response, hidden)
    prompt_end: dict[int, np.ndarray]      # layer -> (hidden,)
    boundary: dict[int, np.ndarray] | None  # layer -> (hidden,), None when no boundary was given

    def response_mean(self, layer: int) -> np.ndarray:
        return self.response[layer].mean(axis=0)

    def delta(self, layer: int) -> np.ndarray:
        """TaskTracker's activation delta at ``layer``: the last prompt state minus the boundary's."""
        if self.boundary is None:
            raise ValueError("these states were read without a boundary; give boundaries to read_states")
        return self.prompt_end[layer] - self.boundary[layer]


def generate(weights: Any, prompts: Sequence[Sequence[int]], *, max_new_tokens: int, batch_size: int = 8,
             threads: int = 2) -> list[Generation]:
    """The greedy response of ``weights`` (``gauntlet.agents.llm.local_chat.LoadedWeights``) to each
    prompt, in prompt order; prompts of similar length are batched together (left padding). Weights on
    llama.cpp (``llama_reader.LlamaWeights``) answer one prompt at a time."""
    if on_llama(weights):
        from gauntlet.controllers.latent import llama_reader

        return llama_reader.generate(weights, prompts, max_new_tokens=max_new_tokens)
    import torch

    from gauntlet.agents.llm.local_chat import torch_threads

    tokenizer, model = weights.tokenizer, weights.model
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    out: dict[int, Generation] = {}
    with weights.lock, torch_threads(threads), torch.inference_mode():
        for start in range(0, len(order), batch_size):
            batch = order[start:start + batch_size]
            ids, mask = padded([prompts[i] for i in batch], pad, left=True)
            width = ids.shape[1]
            sequences = model.generate(input_ids=ids.to(model.device), attention_mask=mask.to(model.device),
                                       max_new_tokens=max_new_tokens, do_sample=False, temperature=None,
                                       top_p=None, top_k=None, pad_token_id=pad)
            for row, i in enumerate(batch):
                response = sequences[row, width:].tolist()
                if eos in response:  # the end token and the padding after it are not part of the response
                    response = response[:response.index(eos)]
                out[i] = Generation(list(prompts[i]), response, tokenizer.decode(response, skip_special_tokens=True))
    return [out[i] for i in range(len(prompts))]


def on_llama(weights: Any) -> bool:
    """Whether ``weights`` are a GGUF model on llama.cpp (``llama_reader.LlamaWeights``), not transformers'."""
    return hasattr(weights, "runtime")


def padded(sequences: Sequence[Sequence[int]], pad: int, *, left: bool = False) -> tuple[Any, Any]:
    """Token ids and attention mask of ``sequences`` padded to one width, on the right (positions
    unchanged, for reading states) or on the left (for generating after the prompt)."""
    import torch

    width = max(len(sequence) for sequence in sequences)
    ids = torch.full((len(sequences), width), pad, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, sequence in enumerate(sequences):
        where = slice(width - len(sequence), width) if left else slice(0, len(sequence))
        ids[row, where] = torch.tensor(list(sequence))
        mask[row, where] = 1
    return ids, mask


def layer_states(weights: Any, sequences: Sequence[Sequence[int]], layers: Sequence[int], *, batch_size: int = 8,
                 threads: int = 2) -> list[dict[int, np.ndarray]]:
    """Every position's state at ``layers`` for each sequence (``(len, hidden)`` float32), in input order:
    one forward pass per batch of sequences of similar length, padded on the right (on llama.cpp: one
    sequence at a time)."""
    if on_llama(weights):
        from gauntlet.controllers.latent import llama_reader

        return llama_reader.layer_states(weights, sequences, layers)
    import torch

    from gauntlet.agents.llm.local_chat import torch_threads

    model = weights.model
    pad = weights.tokenizer.pad_token_id if weights.tokenizer.pad_token_id is not None else 0
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
    out: dict[int, dict[int, np.ndarray]] = {}
    with weights.lock, torch_threads(threads), torch.inference_mode():
        for start in range(0, len(order), batch_size):
            batch = order[start:start + batch_size]
            ids, mask = padded([sequences[i] for i in batch], pad)
            hidden = model(input_ids=ids.to(model.device), attention_mask=mask.to(model.device),
                           output_hidden_states=True, logits_to_keep=1).hidden_states
            for row, i in enumerate(batch):
                out[i] = {layer: hidden[layer][row, :len(sequences[i])].float().cpu().numpy() for layer in layers}
    return [out[i] for i in range(len(sequences))]


def read_states(weights: Any, generations: Sequence[Generation], layers: Sequence[int], *,
                boundaries: Sequence[int] | None = None, batch_size: int = 8, threads: int = 2) -> list[SequenceStates]:
    """The hidden states of ``layers`` for each generation (see the module doc). ``boundaries[i]`` is the
    number of prompt tokens before the lower-priority text of generation ``i``."""
    if boundaries is not None and len(boundaries) != len(generations):
        raise ValueError(f"{len(boundaries)} boundaries for {len(generations)} generations")
    for i, generation in enumerate(generations):
        if boundaries is not None and not 0 < boundaries[i] <= len(generation.prompt_ids):
            raise ValueError(f"boundary {boundaries[i]} is outside the prompt of {len(generation.prompt_ids)} tokens")
    # The response's last token produced nothing: the pass reads the prompt and the rest.
    read = layer_states(weights, [g.prompt_ids + g.response_ids[:-1] for g in generations], layers,
                        batch_size=batch_size, threads=threads)
    out: list[SequenceStates] = []
    for i, (generation, states) in enumerate(zip(generations, read, strict=True)):
        end = len(generation.prompt_ids)
        stop = end - 1 + max(len(generation.response_ids), 1)
        boundary = None if boundaries is None else {layer: states[layer][boundaries[i] - 1] for layer in layers}
        out.append(SequenceStates(response={layer: states[layer][end - 1:stop] for layer in layers},
                                  prompt_end={layer: states[layer][end - 1] for layer in layers}, boundary=boundary))
    return out


__all__ = ["Generation", "SequenceStates", "generate", "layer_states", "padded", "read_states"]
