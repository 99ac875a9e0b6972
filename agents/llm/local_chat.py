"""An in-process transformers causal LM as a LangChain chat model that calls tools.

``LocalChatModel`` renders the conversation with the chat template shipped inside the model (a GGUF
file or a model folder), passing the bound tools as ``tools=`` so the template writes its own tool
instructions, generates greedily, and parses the reply with ``parse_tool_calls``: small local models
write their calls as JSON text, and neither ``langchain-huggingface`` nor the local OpenAI-compatible
servers turn that into structured ``tool_calls``. Greedy decoding and call ids that count the calls
in the conversation make a replay of the same conversation give the same message.

GGUF weights are dequantised to fp32 by transformers, so the model runs on CPU without a native
build (``device`` moves it to a GPU) and ``hidden_states`` can read every layer: the latent monitor
reads them there. A monitor of the agent's own replies need not read them again: while it decodes, the
model keeps the states of chosen layers at the positions that wrote each reply token (``keep_hidden_
layers``, or layers a monitor asked the loaded weights to ``watch``), filed under the reply
(``reply_key``) for ``LoadedWeights.kept_states`` to hand over. Keeping them costs one row copy per
decoded token and layer (forward hooks), not a second forward pass. Two identical replies decoded in
one process share a key and the later one's states win: in the runner's order (decode, then observe)
that is the reply observed, but a controller that decodes identical candidates before a monitor reads
the first would hand it the last one's states.

Loaded weights are shared by every ``LocalChatModel`` of one file and device in a process, so many
episodes cost one load; calls on shared weights take turns. An agent's prompts grow by a step at a
time behind thousands of tokens of tool schemas, so each call starts from the key-value cache of the
longest prefix it shares with a recent sequence and reads only the rest.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from pydantic import ConfigDict, Field

from gauntlet.agents.llm.chat_template import render_messages
from gauntlet.agents.llm.kept_states import KeptStates, reply_key
from gauntlet.agents.llm.text_calls import calls_so_far, message_from_text, openai_tool_schemas, tool_names

if TYPE_CHECKING:
    import numpy as np

# Key-value caches of recent sequences kept per loaded model, for as many conversations as share it.
PREFIXES_KEPT = 4
# A prompt is read this many tokens at a time: attention over a whole 19,000-token prompt (the disaster
# server's tool schemas when it had 119 tools; it has 132 now) at once would hold 14 heads x 19,000^2
# scores, ~20 GB in fp32.
PREFILL_CHUNK = 2048


@dataclass
class LoadedWeights(KeptStates):
    """A tokenizer and causal LM loaded from one file or folder, the lock its callers take turns on, and
    the key-value caches of the last sequences it read (``(token ids, cache)``, most recent last)."""

    tokenizer: Any
    model: Any
    lock: threading.Lock
    load_seconds: float
    prefixes: list[tuple[list[int], Any]] = field(default_factory=list)
    watched: set[int] = field(default_factory=set)
    kept: list[tuple[str, dict[int, np.ndarray]]] = field(default_factory=list)

    @property
    def template(self) -> str:
        return str(self.tokenizer.chat_template or "")

    def reusable_cache(self, prompt: list[int]) -> tuple[Any, int]:
        """A copy of the kept cache sharing the longest prefix with ``prompt``, cut to that prefix, and
        its length (None, 0 when none shares a token). At least the prompt's last token is left to read."""
        best, shared = None, 0
        for ids, cache in self.prefixes:
            length = next((index for index, (kept, new) in enumerate(zip(ids, prompt)) if kept != new),
                          min(len(ids), len(prompt)))
            if length > shared:
                best, shared = cache, length
        shared = min(shared, len(prompt) - 1)
        if best is None or shared <= 0:
            return None, 0
        cache = copy.deepcopy(best)
        cache.crop(shared - cache.get_seq_length())
        return cache, shared

    def keep(self, token_ids: list[int], cache: Any) -> None:
        """Keep ``cache`` (of the first ``cache.get_seq_length()`` of ``token_ids``) for later prompts."""
        self.prefixes = [*self.prefixes, (token_ids[:cache.get_seq_length()], cache)][-PREFIXES_KEPT:]

    @property
    def n_blocks(self) -> int:
        return int(self.model.config.num_hidden_layers)


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


@dataclass(frozen=True)
class HiddenStates:
    """The residual stream of a prompt and a response: ``layers[i]`` is ``(len(token_ids), hidden)``
    float32, layer ``i`` as transformers numbers them (0 the embeddings, -1 the last layer's output)."""

    token_ids: list[int]
    prompt_length: int
    layers: dict[int, np.ndarray]


_loaded: dict[tuple[str, str], LoadedWeights] = {}
_loading = threading.Lock()


def load_weights(model_path: str, device: str = "cpu") -> LoadedWeights:
    """The tokenizer and model at ``model_path`` (a ``.gguf`` file or a model folder) on ``device``,
    loaded once per process; nothing is downloaded."""
    key = (str(Path(model_path).resolve()), device)
    with _loading:
        if key not in _loaded:
            _loaded[key] = _load(Path(key[0]), device)
        return _loaded[key]


def _load(path: Path, device: str) -> LoadedWeights:
    start = time.perf_counter()
    if path.suffix == ".gguf":
        path = dequantised_folder(path)
    tokenizer, model = _from_pretrained(str(path), {})
    model.to(device).eval()
    return LoadedWeights(tokenizer, model, threading.Lock(), time.perf_counter() - start)


def _from_pretrained(folder: str, extra: dict[str, str]) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, **extra)
    model: Any = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=torch.float32, **extra)
    return tokenizer, model.eval()


# Reading a GGUF file with transformers takes 90-100 s on two cores (most of it parsing the file and
# converting its tokenizer, not the dequantisation; 65-70 s with one parse, ``_one_gguf_parse``), a saved
# fp32 folder 2 s: the folder is kept.
DEQUANTISED_DATA = "llm-dequantised"
DEQUANTISED_VERSION = "1"
CONVERSION_RECORD = "conversion.json"
_PROBE = [{"role": "system", "content": "You answer in one word."}, {"role": "user", "content": "Name a colour."}]


def dequantised_folder(gguf: Path) -> Path:
    """A transformers folder (fp32 safetensors, tokenizer, chat template) holding exactly what
    transformers reads from ``gguf``, made once per file and kept in the data cache under the file's
    SHA-256: the cache checks its files on use, and the conversion is checked before it is kept."""
    from gauntlet.datacache import ensure_built, sha256_of

    digest = sha256_of(gguf)
    return ensure_built(DEQUANTISED_DATA, DEQUANTISED_VERSION, functools.partial(save_dequantised, gguf),
                        params={"gguf_sha256": digest})


@contextmanager
def _one_gguf_parse() -> Iterator[None]:
    """One parsed ``gguf.GGUFReader`` per file for the block. transformers opens a GGUF file three times
    (config, tokenizer, weights) and parses its header each time, 20 s of the conversion's 105 s here; the
    reader is a read-only memory map, so the three can share one."""
    import gguf

    original = gguf.GGUFReader
    readers: dict[tuple[str, str], Any] = {}

    def shared(path: str | os.PathLike[str], mode: Literal["r", "r+", "c"] = "r") -> Any:
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = original(path, mode)
        return readers[key]

    gguf.GGUFReader = shared  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        gguf.GGUFReader = original  # type: ignore[misc]


def save_dequantised(gguf: Path, folder: Path, gguf_sha256: str) -> None:
    """Write the GGUF model ``gguf`` to ``folder`` as a transformers folder, then load that folder back
    and refuse it unless it tokenises a probe conversation alike and gives bit-identical logits."""
    import torch
    from safetensors.torch import save_model

    from gauntlet.datacache import sha256_of

    if sha256_of(gguf) != gguf_sha256:
        raise ValueError(f"{gguf.name} changed while it was being converted; convert it again")
    with _one_gguf_parse():
        tokenizer, model = _from_pretrained(str(gguf.parent), {"gguf_file": gguf.name})
    config = model.config.to_dict()
    config.pop("quantization_config", None)  # the weights are plain fp32 now; transformers refuses to save a GGUF model
    type(model.config).from_dict(config).save_pretrained(folder)
    save_model(model, str(Path(folder) / "model.safetensors"))  # handles the tied embedding and output weights
    tokenizer.save_pretrained(folder)
    saved_tokenizer, saved_model = _from_pretrained(str(folder), {})
    ids = tokenizer.apply_chat_template(_PROBE, add_generation_prompt=True, return_dict=False)
    same_ids = saved_tokenizer.apply_chat_template(_PROBE, add_generation_prompt=True, return_dict=False) == ids
    with torch.no_grad():
        difference = float((model(torch.tensor([ids])).logits - saved_model(torch.tensor([ids])).logits).abs().max())
    if not same_ids or saved_tokenizer.chat_template != tokenizer.chat_template or difference != 0.0:
        raise ValueError(f"{gguf.name} did not convert faithfully (same tokens: {same_ids}, largest logit "
                         f"difference {difference}); load it with a transformers version that does")
    record = {"gguf_file": gguf.name, "gguf_sha256": gguf_sha256, "probe_tokens": len(ids),
              "max_logit_difference": difference}
    (Path(folder) / CONVERSION_RECORD).write_text(json.dumps(record, indent=1))


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """torch's intra-op thread count set to ``count`` for the block (it is per process: callers hold
    the weights' lock, so one call at a time changes it)."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


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
    """torch's seed for sampling a reply to ``prompt`` in an episode seeded ``seed``."""
    digest = hashlib.sha256(json.dumps([seed, list(prompt)]).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


class LocalChatModel(BaseChatModel):
    """A local causal LM (GGUF file or model folder) that answers in text and calls tools.

    Args:
        model_path: a ``.gguf`` file or a transformers model folder on this machine.
        max_new_tokens: most tokens one reply may have (a reply cut there has finish_reason "length").
        device: torch device, "cpu" or e.g. "cuda:0".
        keep_hidden_layers: layers whose states to keep while decoding each reply (see the module doc),
            beside any a monitor asked the weights to ``watch``.
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
                  tools: Sequence[Mapping[str, Any]] | None = None, **kwargs: Any) -> ChatResult:
        import torch

        weights = self.weights
        prompt = self.prompt_ids(messages, tools)
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
        metadata = {"model_name": Path(self.model_path).name, "latency_ms": round(latency_ms, 1),
                    "finish_reason": "length" if len(generated) >= self.max_new_tokens and not finished else "stop",
                    "text": text}
        message = message_from_text(text, names, calls_so_far(messages), usage_metadata=usage,
                                    response_metadata=metadata)
        if kept_layers:
            # One forward pass per token written (the prompt's, then each token's but the last's); the pass
            # that wrote the end token is left out, as the study leaves the end token out of a response.
            count = len(generated) - int(finished)
            weights.file_states(reply_key(message), {number: torch.stack(rows[number][:count]).numpy()
                                                     for number in kept_layers})
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

