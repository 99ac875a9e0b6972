"""An in-process transformers causal LM as a LangChain chat model that calls tools: ``LocalChatModel``.

It renders the conversation with the chat template shipped inside the model (a GGUF file or a model
folder), passing the bound tools as ``tools=`` so the template writes its own tool instructions,
generates greedily, and parses the reply with ``parse_tool_calls``: small local models write their
calls as JSON text, and neither ``langchain-huggingface`` nor the local OpenAI-compatible servers turn
that into structured ``tool_calls``. Greedy decoding and call ids that count the calls in the
conversation make a replay of the same conversation give the same message.

Prefix cache: an agent's prompts grow by a step at a time behind thousands of tokens of tool schemas,
so each call starts from the key-value cache of the longest prefix it shares with a recent sequence on
the same loaded weights (``LoadedWeights.reusable_cache``) and reads only the rest, in
``PREFILL_CHUNK``-token pieces (``prefill``).

Hidden states: while it decodes, the model keeps the states of chosen layers at the positions that
wrote each reply token (``keep_hidden_layers``, or layers a monitor asked the loaded weights to
``watch``) and the reply carries them (``gauntlet.agents.llm.kept_states``). Keeping them costs one row
copy per decoded token and layer (forward hooks, ``decoding_states``), not a second forward pass.
``hidden_states`` reads a prompt and a response afresh.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from pydantic import ConfigDict, Field

from gauntlet.agents.llm.chat_template import render_messages
from gauntlet.agents.llm.hf_weights import LoadedWeights, load_weights, torch_threads
from gauntlet.agents.llm.kept_states import with_states
from gauntlet.agents.llm.text_calls import calls_so_far, message_from_text, openai_tool_schemas, tool_names

if TYPE_CHECKING:
    import numpy as np

# A prompt is read this many tokens at a time: attention over a whole 19,000-token prompt (the disaster
# server's tool schemas when it had 119 tools; it has 132 now) at once would hold 14 heads x 19,000^2
# scores, ~20 GB in fp32.
PREFILL_CHUNK = 2048


@dataclass(frozen=True)
class HiddenStates:
    """The residual stream of a prompt and a response: ``layers[i]`` is ``(len(token_ids), hidden)``
    float32, layer ``i`` as transformers numbers them (0 the embeddings, -1 the last layer's output)."""

    token_ids: list[int]
    prompt_length: int
    layers: dict[int, np.ndarray]


def _layer_module(model: Any, number: int) -> Any:
    """The module whose output is hidden state ``number`` (0 the embeddings, L after the final norm)."""
    body = model.get_decoder() if hasattr(model, "get_decoder") else model.model
    if number == 0:
        return body.embed_tokens
    if number == int(model.config.num_hidden_layers):
        return body.norm
    return body.layers[number - 1]


@contextmanager
def decoding_states(model: Any, layers: Sequence[int]) -> Iterator[dict[int, list[Any]]]:
    """Within the block, each forward pass of ``model`` adds its last position's state of each of
    ``layers`` to the lists yielded: during ``generate``, the states that wrote each new token."""
    rows: dict[int, list[Any]] = {number: [] for number in layers}

    def hook(number: int) -> Any:
        def keep(module: Any, inputs: Any, output: Any) -> None:
            hidden = output[0] if isinstance(output, tuple) else output
            rows[number].append(hidden[0, -1].detach().float().cpu().clone())
        return keep

    handles = [_layer_module(model, number).register_forward_hook(hook(number)) for number in layers]
    try:
        yield rows
    finally:
        for handle in handles:
            handle.remove()


def prefill(model: Any, prompt: Sequence[int], cache: Any, device: str) -> Any:
    """``cache`` (None: empty) extended over ``prompt`` in ``PREFILL_CHUNK``-token pieces, leaving the last
    piece (at most a chunk, at least one token) for ``generate`` to read; unchanged for a short prompt."""
    import torch
    from transformers import DynamicCache

    done = cache.get_seq_length() if cache is not None else 0
    if len(prompt) - done <= PREFILL_CHUNK:
        return cache
    cache = cache if cache is not None else DynamicCache(config=model.config)
    while len(prompt) - done > PREFILL_CHUNK:
        piece = torch.tensor([list(prompt[done:done + PREFILL_CHUNK])], device=device)
        model(input_ids=piece, cache=cache, use_cache=True, logits_to_keep=1)
        done += PREFILL_CHUNK
    return cache


def sampling_seed(seed: Any, prompt: Sequence[int]) -> int:
    """torch's (or llama.cpp's) seed for sampling a reply to ``prompt`` in an episode seeded ``seed``."""
    digest = hashlib.sha256(json.dumps([seed, list(prompt)]).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


class LocalChatModel(BaseChatModel):
    """A local causal LM (GGUF file or model folder) that answers in text and calls tools.

    Args:
        model_path: a ``.gguf`` file or a transformers model folder on this machine.
        max_new_tokens: most tokens one reply may have (a reply cut there has finish_reason "length").
        device: torch device, "cpu" or e.g. "cuda:0".
        keep_hidden_layers: layers whose states each reply carries (see the module doc), beside any a
            monitor asked the weights to ``watch``.
        reuse_prefix: start from the kept key-value cache of the longest prefix this prompt shares with a
            recent one (the system prompt and tools, the conversation so far), so an agent's step reads
            only what is new; the reply is the one a full read gives, up to float rounding. Reused
            tokens are reported as ``usage_metadata["input_token_details"]["cache_read"]``.
        threads: torch's CPU threads during a call. One by default: on a 2-core machine shared with
            other work, two threads made the 0.5B model's decoding 3-7x slower than one (threads
            that wait on each other are descheduled), and its prompt reading slower too.
        temperature, top_p, top_k: 0 (the default) decodes greedily; above 0 samples, with torch's
            generator seeded from the call's ``sampling_seed`` (run metadata; the LLM agent sets its
            episode seed there) and the prompt's tokens, so the same episode seed and conversation
            give the same reply, and other seeds give other replies (pass^k needs attempts that
            can differ).
    """

    model_config = ConfigDict(extra="forbid")
    # A ``prompt_tools`` binding: the prompt shows those tools while calls may use every bound tool.
    takes_prompt_tools: ClassVar[bool] = True

    model_path: str
    max_new_tokens: int = Field(default=512, ge=1)
    device: str = "cpu"
    reuse_prefix: bool = True
    keep_hidden_layers: tuple[int, ...] = ()
    threads: int = Field(default=1, ge=1)
    temperature: float = Field(default=0.0, ge=0.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=1)

    @property
    def _llm_type(self) -> str:
        return "gauntlet-local"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_path": self.model_path, "max_new_tokens": self.max_new_tokens, "device": self.device,
                "reuse_prefix": self.reuse_prefix, "keep_hidden_layers": self.keep_hidden_layers,
                "threads": self.threads, "temperature": self.temperature,
                "top_p": self.top_p, "top_k": self.top_k}

    @property
    def weights(self) -> LoadedWeights:
        """The loaded tokenizer and model (loaded on first use)."""
        return load_weights(self.model_path, self.device)

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: str | None = None,
                   **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        """This model with ``tools`` shown to it on every call (LangChain tools, OpenAI function schemas
        or MCP tools). A local model cannot be forced to call a tool, so ``tool_choice`` may only be
        None or "auto"."""
        if tool_choice not in (None, "auto"):
            raise ValueError(f"a local model cannot be made to call a tool (tool_choice={tool_choice!r}); "
                             "leave tool_choice unset")
        return self.bind(tools=openai_tool_schemas(tools), **kwargs)

    def chat_messages(self, messages: Sequence[BaseMessage],
                      tools: Sequence[Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
        """The conversation as this model's chat template reads it (``render_messages``)."""
        return render_messages(messages, tools, self.weights.template)

    def prompt_ids(self, messages: Sequence[BaseMessage],
                   tools: Sequence[Mapping[str, Any]] | None = None) -> list[int]:
        """The token ids the model reads before it replies: the conversation through the chat template,
        with the tools and the assistant's turn opened."""
        tokenizer = self.weights.tokenizer
        text = tokenizer.apply_chat_template(self.chat_messages(messages, tools), tools=list(tools) if tools else None,
                                             add_generation_prompt=True, tokenize=False)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None,
                  tools: Sequence[Mapping[str, Any]] | None = None,
                  prompt_tools: Sequence[Mapping[str, Any]] | None = None, **kwargs: Any) -> ChatResult:
        import torch

        weights = self.weights
        prompt = self.prompt_ids(messages, tools if prompt_tools is None else prompt_tools)  # calls may use all tools
        input_ids = torch.tensor([prompt], device=self.device)
        options: dict[str, Any] = {"stop_strings": stop, "tokenizer": weights.tokenizer} if stop else {}
        eos = weights.tokenizer.eos_token_id
        if self.temperature > 0:
            seed = (run_manager.metadata if run_manager else {}).get("sampling_seed", 0)
            sampling: dict[str, Any] = {"do_sample": True, "temperature": self.temperature, "top_p": self.top_p,
                                        "top_k": self.top_k}
        else:
            sampling = {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        start = time.perf_counter()
        with weights.lock, torch_threads(self.threads), torch.inference_mode():
            kept_layers = sorted(weights.watched | {weights.layer_number(layer) for layer in self.keep_hidden_layers})
            if self.temperature > 0:
                torch.manual_seed(sampling_seed(seed, prompt))
            cache, reused = weights.reusable_cache(prompt) if self.reuse_prefix else (None, 0)
            cache = prefill(weights.model, prompt, cache, self.device)
            with decoding_states(weights.model, kept_layers) as rows:
                output = weights.model.generate(
                    input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                    max_new_tokens=self.max_new_tokens, **sampling,
                    pad_token_id=weights.tokenizer.pad_token_id if weights.tokenizer.pad_token_id is not None else eos,
                    cache=cache, return_dict_in_generate=True, **options)
            sequence = output.sequences[0].tolist()
            if self.reuse_prefix:
                weights.keep(sequence, output.cache)
        latency_ms = (time.perf_counter() - start) * 1000
        generated = sequence[len(prompt):]
        finished = bool(generated) and generated[-1] == eos
        text = weights.tokenizer.decode(generated, skip_special_tokens=True)
        for sequence in stop or ():
            text = text.split(sequence)[0]
        names = tool_names(tools or [])
        usage = UsageMetadata(input_tokens=len(prompt), output_tokens=len(generated),
                              total_tokens=len(prompt) + len(generated), input_token_details={"cache_read": reused})
        metadata: dict[str, Any] = {
            "model_name": Path(self.model_path).name, "latency_ms": round(latency_ms, 1),
            "finish_reason": "length" if len(generated) >= self.max_new_tokens and not finished else "stop",
            "text": text}
        if kept_layers:
            # One forward pass per token written (the prompt's, then each token's but the last's); the pass
            # that wrote the end token is left out, as the study leaves the end token out of a response.
            count = len(generated) - int(finished)
            metadata = with_states(metadata, weights.reply_states(
                {number: torch.stack(rows[number][:count]).numpy() for number in kept_layers}))
        message = message_from_text(text, names, calls_so_far(messages), usage_metadata=usage,
                                    response_metadata=metadata)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def hidden_states(self, messages: Sequence[BaseMessage], response: str = "", *,
                      tools: Sequence[Any] | None = None, layers: Sequence[int] = (-1,)) -> HiddenStates:
        """The hidden states of ``layers`` over the prompt the model reads for ``messages`` (and
        ``tools``, any form ``bind_tools`` takes) followed by the tokens of ``response``."""
        import torch

        weights = self.weights
        prompt = self.prompt_ids(messages, openai_tool_schemas(tools) if tools else None)
        token_ids = prompt + list(weights.tokenizer(response, add_special_tokens=False)["input_ids"])
        with weights.lock, torch_threads(self.threads), torch.inference_mode():
            output = weights.model(torch.tensor([token_ids], device=self.device), output_hidden_states=True)
        return HiddenStates(token_ids=token_ids, prompt_length=len(prompt),
                            layers={layer: output.hidden_states[layer][0].float().cpu().numpy() for layer in layers})


__all__ = ["PREFILL_CHUNK", "HiddenStates", "LocalChatModel", "decoding_states", "prefill", "sampling_seed"]
