"""A GGUF model decoded by llama.cpp in this process, as it is quantised (no dequantisation).

``LlamaRuntime`` is the native side of the ``llama:`` and ``offline`` backends and knows nothing of
LangChain: token ids in, token ids (and, on request, hidden states) out. It is built on
llama-cpp-python's low-level objects rather than its ``Llama`` class because the class cannot set
the context's evaluation callback (which is how a layer's states are read) and keeps one sequence.

Prefix cache
    A context holds the working sequence (id 0) and up to ``kept_prefixes`` kept ones. Before a
    prompt is read, the sequence sharing the longest prefix with it (the working one, or a kept one
    copied into the working slot: a copy shares the cache cells, it costs no compute) is cut to that
    prefix, and only the rest is read. After each reply the working sequence is kept too, so an
    episode that follows another (same system prompt and tools), a fork that branches off an
    earlier point, and a controller's candidate replies all start from what was read before. When
    the cache is full the oldest kept sequence is dropped and the read retried.

Persisted prefix
    ``generate(..., persist_prefix=n)`` marks the prompt's first ``n`` tokens as the part every episode
    shares (the system turn with the tools). When no sequence holds it, it is loaded from the prefix
    store on disk (``PrefixStore``: the data cache, keyed by the model file, the llama.cpp version and
    the token ids), else read and saved there, so a new process (a worker, the next command) starts from
    it instead of reading ~3,000 tokens again. The prefix is always read on its own before the rest of
    the prompt (from the longest part of it already cached), so the next process starts where this one
    would.

Hidden states
    llama.cpp names each layer's output ``l_out-<i>`` (0-based), the embeddings ``inp_embd`` and
    the final norm ``result_norm``. The evaluation callback copies the wanted tensors as they are
    computed. Layers are numbered as transformers numbers ``hidden_states``: 0 the embeddings,
    ``i`` the output of block ``i`` (``l_out-<i-1>``), ``L`` the final norm's output, negative
    numbers from the end. The callback is asked about every node of every graph, so it answers
    "no" with one set lookup when nothing is watched.

Same prompt, same numbers
    llama.cpp's numbers for a prompt depend on what the cache held when it was read, not only on the
    tokens: read after a cached prefix whose reply was decoded a token at a time, or beside kept
    sequences that move where its cells sit, the 0.5B model's last-layer state at the prompt's end
    differed from a read in an empty cache by about 2 % of its norm (measured 2026-12-05), and a
    greedy near-tie can flip. An empty cache gives the same numbers every time, in every process.
    So ``generate(..., reuse_prefix=False)`` empties the cache first and keeps nothing: a run made
    that way replays exactly, at the price of reading every prompt whole.

    ``generate(..., exact=True)`` gives those same numbers, to the bit, without reading every prompt
    whole. An empty cache reads a prompt in ``PROMPT_BATCH``-token batches from position 0, so the
    keys and values of a whole batch depend only on the tokens up to its end: the cells before it are
    the same, laid out the same (one sequence, from cell 0), and the batch has the same shape. An exact
    call keeps only such batches: it reuses the working sequence up to the last whole batch it shares
    with the new prompt (never a reply's tokens, which were decoded one at a time, nor a prompt's
    last, partial batch) and reads the rest in batches from there; it keeps no other sequence (kept
    sequences change where the cells sit), and any call that is not exact makes the next exact one
    start from an empty cache. It rereads up to a batch per call (on average about half of one) and
    what the previous reply wrote. Its shared prefix is persisted cut to whole batches, in a store of
    its own (``PrefixStore.for_model(..., exact=True)``). Equal numbers are checked between runtimes of
    one thread count (the tests and ``bench/llm_cache.py``); another count may split the arithmetic
    otherwise.

Grammar
    ``generate(..., grammar=...)`` constrains sampling with a GBNF grammar (llama.cpp's sampler),
    so a reply can be made to be exactly one well-formed call (``gauntlet.agents.llm.call_grammar``).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import logging
import os
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gauntlet.agents.llm.kept_states import WatchedLayers

# llama.cpp's OpenMP threads spin while they wait for each other. On a machine with any other work on
# it, two spinning threads on two cores collapse decoding (measured on the 0.5B model: 24 tokens/s
# quiet, 3.2 with one busy process beside it); a short spin keeps 23.4 quiet and 11.3 busy. It is read
# when libgomp loads, so it is set before llama_cpp is first imported; a value set by the user stands.
os.environ.setdefault("GOMP_SPINCOUNT", "1000")

# Qwen2.5 reads 32,768 tokens; the key-value cache of the whole window is 0.4 GB (0.5B) to 0.9 GB
# (1.5B) in f16, and it is shared by the working and kept sequences.
DEFAULT_CONTEXT = 32768
# Tokens read per llama_decode call while reading a prompt.
PROMPT_BATCH = 512
DEFAULT_KEPT_PREFIXES = 4
# Prefixes shorter than this are read, not stored: loading a file would save little.
MIN_PERSISTED_PREFIX = 256
# Files the prefix store keeps per model (each ~12 kB a token for the 0.5B model, ~28 kB for the 1.5B);
# the least recently used go first.
PERSISTED_PREFIXES_KEPT = 16
_MAGIC = b"GKVSEQ1\n"

log = logging.getLogger(__name__)


class RuntimeLoadError(RuntimeError):
    """llama.cpp could not load the model or make its context (a corrupt file, too little memory)."""


class GrammarError(ValueError):
    """llama.cpp refused a grammar (the message says which)."""


class ContextFullError(RuntimeError):
    """A prompt and its reply do not fit the context window, even with every kept sequence dropped."""


def default_threads() -> int:
    """Threads for decoding: this worker's share of the CPUs (``OMP_NUM_THREADS``, which the batch
    runner sets per worker), else every CPU the process may use."""
    share = os.environ.get("OMP_NUM_THREADS", "")
    if share.isdigit() and int(share) > 0:
        return int(share)
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


@dataclass(frozen=True)
class Sampling:
    """How a token is chosen: greedily when ``temperature`` is 0, else from top-k/top-p/min-p after the
    temperature, with llama.cpp's generator seeded by ``seed``. ``min_p`` keeps the tokens at least that
    share as likely as the most likely one (before the temperature), so a hot draw still picks among
    plausible tokens."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int | None = None
    seed: int = 0
    min_p: float = 0.0


@dataclass
class Generation:
    """What ``generate`` wrote: the new tokens (the end token included when it ended the reply), how
    many prompt tokens came from the cache, whether an end token ended it, the states of the watched
    layers at the positions that wrote each token (``(tokens written, hidden)``), and seconds spent
    reading the prompt and writing the reply."""

    tokens: list[int]
    reused: int
    finished: bool
    states: dict[int, np.ndarray]
    prompt_s: float
    decode_s: float


@dataclass
class _Watch:
    """What the evaluation callback keeps: tensor name -> layer number, and the rows it copied."""

    names: dict[str, int] = field(default_factory=dict)
    all_rows: bool = False
    rows: dict[int, list[np.ndarray]] = field(default_factory=dict)


class LlamaRuntime(WatchedLayers):
    """One GGUF file loaded by llama.cpp, with its prefix cache (see the module docstring).

    Calls take turns on a lock: a llama.cpp context is not safe to share between threads.
    """

    def __init__(self, path: str | os.PathLike[str], *, context: int = DEFAULT_CONTEXT, threads: int | None = None,
                 kept_prefixes: int = DEFAULT_KEPT_PREFIXES):
        import llama_cpp
        from llama_cpp import _internals, _logger

        _logger.set_verbose(False)
        start = time.perf_counter()
        self.path = str(Path(path).resolve())
        self.threads = threads or default_threads()
        self.kept_prefixes = kept_prefixes
        try:
            model_params = llama_cpp.llama_model_default_params()
            model_params.use_mmap = True
            self._model = _internals.LlamaModel(path_model=self.path, params=model_params, verbose=False)
        except ValueError as exc:
            raise RuntimeLoadError(f"llama.cpp could not load {Path(path).name}: {exc}") from None
        self._blocks = int(llama_cpp.llama_model_n_layer(self._model.model))
        self.hidden_size = int(self._model.n_embd())
        self.metadata = self._model.metadata()
        self.template = self.metadata.get("tokenizer.chat_template", "")
        self._watch = _Watch()
        self._callback = llama_cpp.ggml_backend_sched_eval_callback(self._on_tensor)
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = min(context, self._model.n_ctx_train()) if self._model.n_ctx_train() > 0 else context
        params.n_batch = PROMPT_BATCH
        params.n_ubatch = PROMPT_BATCH
        params.n_threads = self.threads
        params.n_threads_batch = self.threads
        params.n_seq_max = 1 + kept_prefixes
        params.kv_unified = True
        params.no_perf = True
        params.cb_eval = self._callback
        params.cb_eval_user_data = None
        try:
            self._context = _internals.LlamaContext(model=self._model, params=params, verbose=False)
        except ValueError as exc:
            raise RuntimeLoadError(f"llama.cpp could not make a {params.n_ctx}-token context for "
                                   f"{Path(path).name}: {exc}") from None
        self.context = int(self._context.n_ctx())
        self._batch = _internals.LlamaBatch(n_tokens=PROMPT_BATCH, embd=0, n_seq_max=1)
        self._ggml = _ggml_functions()
        # Token ids held in each sequence's cache; 0 is the working sequence, the rest are kept ones.
        self._held: dict[int, list[int]] = {0: []}
        self._kept_order: list[int] = []
        # How many of the working sequence's first tokens an empty cache's read would have computed just so
        # (whole batches from position 0, nothing else in the cache): what an exact call may reuse.
        self._exact_held = 0
        self.lock = threading.Lock()
        self.watched: set[int] = set()
        self.prefix_loads = 0  # shared prefixes loaded from the store, and tokens read for ones that were not
        self.prefix_tokens_read = 0
        self.load_seconds = time.perf_counter() - start

    # Tokens --------------------------------------------------------------------------------------
    def tokenize(self, text: str) -> list[int]:
        """``text``'s token ids; special tokens written in it (``<|im_start|>``) are read as such."""
        return list(self._model.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def detokenize(self, tokens: Sequence[int]) -> str:
        """The text of ``tokens``, special tokens left out."""
        return self._model.detokenize(list(tokens), special=False).decode("utf-8", errors="replace")

    def is_end(self, token: int) -> bool:
        """Whether ``token`` ends a turn (``<|im_end|>``, ``<|endoftext|>``, ...)."""
        import llama_cpp

        return bool(llama_cpp.llama_vocab_is_eog(self._model.vocab, token))

    def _tensor_name(self, number: int) -> str:
        if number == 0:
            return "inp_embd"
        if number == self._blocks:
            return "result_norm"
        return f"l_out-{number - 1}"

    @property
    def n_blocks(self) -> int:
        return self._blocks

    @property
    def source(self) -> str:
        return f"llama.cpp:{self.path}"

    # The evaluation callback ----------------------------------------------------------------------
    def _on_tensor(self, tensor: int, ask: bool, user_data: Any) -> bool:
        names = self._watch.names
        if not names:
            return False
        name = self._ggml.name(tensor)
        if name not in names:
            return False
        if ask:
            return True
        count = int(self._ggml.nelements(tensor))
        values = np.empty(count, dtype=np.float32)
        if self._ggml.nbytes(tensor) != values.nbytes:
            return True  # not f32 (never so on the CPU): leave it rather than misread it
        self._ggml.tensor_get(tensor, values.ctypes.data_as(ctypes.c_void_p), 0, values.nbytes)
        rows = values.reshape(-1, self.hidden_size)
        kept = self._watch.rows.setdefault(names[name], [])
        kept.append(rows.copy() if self._watch.all_rows else rows[-1:].copy())
        return True

    # Reading and writing ---------------------------------------------------------------------------
    def generate(self, prompt: Sequence[int], *, max_new_tokens: int, sampling: Sampling = Sampling(),
                 grammar: str | None = None, layers: Sequence[int] = (), reuse_prefix: bool = True,
                 persist_prefix: int = 0, exact: bool = False) -> Generation:
        """Read ``prompt`` (from the longest cached prefix when ``reuse_prefix``) and write up to
        ``max_new_tokens`` tokens, stopping after an end token; ``grammar`` (GBNF, rule ``root``)
        constrains every token; ``layers``' states are kept at each position that wrote a token;
        ``persist_prefix`` tokens at the start are the shared prefix the store on disk keeps (see the
        module docstring; 0: none). Without ``reuse_prefix`` the cache is emptied first (every kept
        sequence too) and nothing is kept after: the reply is computed as a new runtime computes it,
        whatever was read before (see "Same prompt, same numbers" in the module docstring). ``exact``
        computes it so too, reusing only the whole batches such a read shares with the cache."""
        if not prompt:
            raise ValueError("the prompt is empty")
        if len(prompt) + max_new_tokens > self.context:
            raise ContextFullError(f"a {len(prompt)}-token prompt and a {max_new_tokens}-token reply do not fit the "
                                   f"{self.context}-token context")
        with self.lock:
            sampler = self._sampler(sampling, grammar)
            try:
                numbers = sorted({self.layer_number(layer) for layer in layers})
                start = time.perf_counter()
                if exact and reuse_prefix:
                    reused = self._start_exactly(list(prompt), persist_prefix)
                else:
                    self._exact_held = 0
                    if reuse_prefix and persist_prefix:
                        self._ensure_prefix(list(prompt[:min(persist_prefix, len(prompt) - 1)]))
                    reused = self._start_from_prefix(prompt) if reuse_prefix else self._clear_all()
                with self._watching(numbers, all_rows=False):
                    self._read(list(prompt[reused:]), logits_last=True)
                    # Only the pass over the prompt's last piece wrote the first token.
                    for rows in self._watch.rows.values():
                        del rows[:-1]
                    prompt_s = time.perf_counter() - start
                    tokens: list[int] = []
                    finished = False
                    while len(tokens) < max_new_tokens:
                        import llama_cpp

                        token = int(llama_cpp.llama_sampler_sample(sampler, self._context.ctx, -1))
                        tokens.append(token)
                        if self.is_end(token):
                            finished = True
                            break
                        if len(tokens) < max_new_tokens:
                            self._read([token], logits_last=True)
                    states = {number: np.concatenate(self._watch.rows.get(number, [np.empty((0, self.hidden_size),
                                                                                             np.float32)]))
                              for number in numbers}
                decode_s = time.perf_counter() - start - prompt_s
                if exact and reuse_prefix:
                    # The prompt's whole batches; its last, partial one and the reply are read again.
                    self._exact_held = len(prompt) // PROMPT_BATCH * PROMPT_BATCH
                elif reuse_prefix:
                    self._keep_working()
            finally:
                import llama_cpp

                llama_cpp.llama_sampler_free(sampler)
        # The pass that read the end token's predecessor wrote it; no pass follows the last token.
        written = len(tokens) - int(finished)
        states = {number: rows[:written] for number, rows in states.items()}
        return Generation(tokens=tokens, reused=reused, finished=finished, states=states, prompt_s=prompt_s,
                          decode_s=decode_s)

    def hidden_states(self, token_ids: Sequence[int], layers: Sequence[int]) -> dict[int, np.ndarray]:
        """The states of ``layers`` at every position of ``token_ids`` (``(len(token_ids), hidden)``),
        read afresh: the prefix cache is not used, and the kept sequences stay (the agent's cache is not
        lost to a monitor's read), so the states depend on them in the last digits (module docstring)."""
        numbers = sorted({self.layer_number(layer) for layer in layers})
        with self.lock:
            self._exact_held = 0
            self._clear_working()
            with self._watching(numbers, all_rows=True):
                self._read(list(token_ids), logits_last=False, all_outputs=True)
                states = {number: np.concatenate(self._watch.rows[number]) for number in numbers}
            self._clear_working()
        return states

    def states_after(self, token_ids: Sequence[int], start: int, layers: Sequence[int]) -> dict[int, np.ndarray]:
        """The states of ``layers`` at positions ``start`` onward of ``token_ids`` (``(len(token_ids) - start,
        hidden)``). The positions before ``start`` come from the longest cached prefix that holds them and
        are read (their states not kept) where none does, so texts that share an opening read it once. A
        state read after a cached prefix can differ from a fresh read's in the last bits (the arithmetic is
        batched differently); ``hidden_states`` reads afresh."""
        if not 0 <= start < len(token_ids):
            raise ValueError(f"start {start} is outside the {len(token_ids)} tokens")
        numbers = sorted({self.layer_number(layer) for layer in layers})
        tokens = list(token_ids)
        with self.lock:
            self._exact_held = 0
            reused = self._start_from_prefix(tokens[:start + 1])
            if reused < start:
                self._read(tokens[reused:start], logits_last=False)
            with self._watching(numbers, all_rows=True):
                self._read(tokens[start:], logits_last=False, all_outputs=True)
                return {number: np.concatenate(self._watch.rows[number]) for number in numbers}

    def _sampler(self, sampling: Sampling, grammar: str | None) -> Any:
        import llama_cpp

        chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        if grammar is not None:
            constrained = llama_cpp.llama_sampler_init_grammar(self._model.vocab, grammar.encode("utf-8"), b"root")
            if not constrained:
                llama_cpp.llama_sampler_free(chain)
                raise GrammarError("llama.cpp could not parse the call grammar")
            llama_cpp.llama_sampler_chain_add(chain, constrained)
        if sampling.temperature <= 0:
            llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_greedy())
        else:
            if sampling.top_k:
                llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_top_k(sampling.top_k))
            if sampling.top_p < 1:
                llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_top_p(sampling.top_p, 1))
            if sampling.min_p > 0:
                llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_min_p(sampling.min_p, 1))
            llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_temp(sampling.temperature))
            llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_dist(sampling.seed & 0xFFFFFFFF))
        return chain

    class _Watching:
        def __init__(self, runtime: LlamaRuntime, numbers: Sequence[int], all_rows: bool):
            self.runtime, self.numbers, self.all_rows = runtime, numbers, all_rows

        def __enter__(self) -> None:
            names = {self.runtime._tensor_name(number): number for number in self.numbers}
            self.runtime._watch = _Watch(names=names, all_rows=self.all_rows)

        def __exit__(self, *exc: object) -> None:
            self.runtime._watch = _Watch()

    def _watching(self, numbers: Sequence[int], all_rows: bool) -> LlamaRuntime._Watching:
        return LlamaRuntime._Watching(self, numbers, all_rows)

    # The key-value cache -----------------------------------------------------------------------------
    def _memory(self) -> Any:
        return self._context.memory

    def _clear_all(self) -> int:
        """Empty the cache: the working sequence and every kept one."""
        import llama_cpp

        llama_cpp.llama_memory_clear(self._memory(), False)
        self._held = {0: []}
        self._kept_order = []
        return 0

    def _clear_working(self) -> int:
        import llama_cpp

        llama_cpp.llama_memory_seq_rm(self._memory(), 0, 0, -1)
        self._held[0] = []
        return 0

    def _start_from_prefix(self, prompt: Sequence[int]) -> int:
        """Make the working sequence hold the longest cached prefix of ``prompt`` (leaving at least its
        last token to read, whose pass writes the first token); returns that prefix's length."""
        import llama_cpp

        best_seq, best = 0, shared_length(self._held[0], prompt)
        for seq in self._kept_order:
            shared = shared_length(self._held[seq], prompt)
            if shared > best:
                best_seq, best = seq, shared
        best = min(best, len(prompt) - 1)
        memory = self._memory()
        if best_seq == 0:
            llama_cpp.llama_memory_seq_rm(memory, 0, best, -1)
        else:
            llama_cpp.llama_memory_seq_rm(memory, 0, 0, -1)
            llama_cpp.llama_memory_seq_cp(memory, best_seq, 0, 0, best)
        self._held[0] = list(prompt[:best])
        return best

    def _start_exactly(self, prompt: list[int], persist_prefix: int) -> int:
        """Make the working sequence hold the longest run of whole batches an empty cache's read of
        ``prompt`` would compute just as the cache holds them (see "Same prompt, same numbers"),
        loading the persisted prefix's whole batches from the store when that is longer; returns its
        length, a multiple of ``PROMPT_BATCH``."""
        import llama_cpp

        shared = min(shared_length(self._held[0], prompt), self._exact_held, len(prompt) - 1)
        reused = shared // PROMPT_BATCH * PROMPT_BATCH
        if self._kept_order or not reused:
            reused = self._clear_all()
        else:
            llama_cpp.llama_memory_seq_rm(self._memory(), 0, reused, -1)
            self._held[0] = prompt[:reused]
        persisted = min(persist_prefix, len(prompt) - 1) // PROMPT_BATCH * PROMPT_BATCH
        if persisted > reused and persisted >= MIN_PERSISTED_PREFIX:
            prefix = prompt[:persisted]
            store = PrefixStore.for_model(self.path, exact=True)
            state = store.load(prefix)
            self._clear_all()
            if state is not None and self._set_working_state(state, prefix):
                self.prefix_loads += 1
            else:
                self._clear_all()
                self._read(prefix, logits_last=False)
                self.prefix_tokens_read += len(prefix)
                store.save(prefix, self._working_state())
            reused = persisted
        self._exact_held = reused
        return reused

    def _ensure_prefix(self, prefix: list[int]) -> None:
        """Make some sequence hold ``prefix``: it already does, or it is loaded from the prefix store,
        or it is read on its own and saved there."""
        if len(prefix) < MIN_PERSISTED_PREFIX:
            return
        if any(shared_length(self._held[seq], prefix) == len(prefix) for seq in (0, *self._kept_order)):
            return
        store = PrefixStore.for_model(self.path)
        state = store.load(prefix)
        if state is not None:
            self._clear_working()
            if self._set_working_state(state, prefix):
                self.prefix_loads += 1
                self._keep_working()
                return
        # Read it, from the longest part of it a sequence holds (a system turn whose tool list changed
        # keeps the text before the first changed tool), and store it.
        reused = self._start_from_prefix(prefix)
        self._read(prefix[reused:], logits_last=False)
        self.prefix_tokens_read += len(prefix) - reused
        store.save(prefix, self._working_state())
        self._keep_working()

    def _working_state(self) -> bytes:
        import llama_cpp

        size = int(llama_cpp.llama_state_seq_get_size(self._context.ctx, 0))
        buffer = (ctypes.c_uint8 * size)()
        written = int(llama_cpp.llama_state_seq_get_data(self._context.ctx, buffer, size, 0))
        return bytes(buffer)[:written]

    def _set_working_state(self, state: bytes, tokens: list[int]) -> bool:
        import llama_cpp

        buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        if int(llama_cpp.llama_state_seq_set_data(self._context.ctx, buffer, len(state), 0)) == 0:
            log.warning("the stored prefix of %s did not load; reading it again", Path(self.path).name)
            return False
        self._held[0] = list(tokens)
        return True

    def _keep_working(self) -> None:
        """Keep a copy of the working sequence, replacing a kept one it extends, else the oldest."""
        import llama_cpp

        if self.kept_prefixes < 1 or not self._held[0]:
            return
        current = self._held[0]
        superseded = [seq for seq in self._kept_order if current[:len(self._held[seq])] == self._held[seq]]
        free = [seq for seq in range(1, self.kept_prefixes + 1) if seq not in self._kept_order]
        seq = superseded[0] if superseded else free[0] if free else self._kept_order[0]
        if seq in self._kept_order:
            self._kept_order.remove(seq)
        memory = self._memory()
        llama_cpp.llama_memory_seq_rm(memory, seq, 0, -1)
        llama_cpp.llama_memory_seq_cp(memory, 0, seq, 0, -1)
        self._held[seq] = list(current)
        self._kept_order.append(seq)

    def _drop_oldest_kept(self) -> bool:
        import llama_cpp

        if not self._kept_order:
            return False
        seq = self._kept_order.pop(0)
        llama_cpp.llama_memory_seq_rm(self._memory(), seq, 0, -1)
        self._held.pop(seq, None)
        return True

    def _read(self, tokens: list[int], *, logits_last: bool, all_outputs: bool = False) -> None:
        """Append ``tokens`` to the working sequence, ``PROMPT_BATCH`` at a time."""
        for begin in range(0, len(tokens), PROMPT_BATCH):
            piece = tokens[begin:begin + PROMPT_BATCH]
            last_piece = begin + PROMPT_BATCH >= len(tokens)
            batch = self._batch.batch
            position = len(self._held[0])
            batch.n_tokens = len(piece)
            for index, token in enumerate(piece):
                batch.token[index] = token
                batch.pos[index] = position + index
                batch.seq_id[index][0] = 0
                batch.n_seq_id[index] = 1
                batch.logits[index] = all_outputs
            batch.logits[len(piece) - 1] = all_outputs or (logits_last and last_piece)
            self._decode()
            self._held[0].extend(piece)

    def _decode(self) -> None:
        import llama_cpp

        while True:
            status = int(llama_cpp.llama_decode(self._context.ctx, self._batch.batch))
            if status == 0:
                return
            if status == 1 and self._drop_oldest_kept():
                continue  # no room in the cache: the oldest kept sequence goes, then the same batch again
            if status == 1:
                raise ContextFullError(f"the {self.context}-token context is full")
            raise RuntimeError(f"llama_decode failed with status {status}")


def shared_length(held: Sequence[int], prompt: Sequence[int]) -> int:
    length = min(len(held), len(prompt))
    for index in range(length):
        if held[index] != prompt[index]:
            return index
    return length


@dataclass(frozen=True)
class _GgmlFunctions:
    name: Any
    nelements: Any
    nbytes: Any
    tensor_get: Any


def _ggml_functions() -> _GgmlFunctions:
    """The four ggml functions the evaluation callback reads a tensor with (from llama-cpp-python's
    bundled ggml library)."""
    from llama_cpp._ggml import libggml

    name = libggml.ggml_get_name
    name.argtypes, name.restype = [ctypes.c_void_p], ctypes.c_char_p
    nelements = libggml.ggml_nelements
    nelements.argtypes, nelements.restype = [ctypes.c_void_p], ctypes.c_int64
    nbytes = libggml.ggml_nbytes
    nbytes.argtypes, nbytes.restype = [ctypes.c_void_p], ctypes.c_size_t
    tensor_get = libggml.ggml_backend_tensor_get
    tensor_get.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
    tensor_get.restype = None

    def decoded_name(tensor: int) -> str:
        return (name(tensor) or b"").decode("utf-8", errors="replace")

    return _GgmlFunctions(decoded_name, nelements, nbytes, tensor_get)


class PrefixStore:
    """Key-value states of shared prompt prefixes of one model file, on disk in the data cache
    (``<cache>/llm-prefix/<model key>/<prefix digest>.kv``). A file holds the prefix's token ids and
    llama.cpp's state of the sequence that read them; it is written atomically, checked against the
    prompt's tokens when read, and anything unreadable is read from the prompt again (never an error).
    The model key names the file (path, size, modification time) and the llama.cpp version whose state
    format it is."""

    def __init__(self, folder: Path, kept: int = PERSISTED_PREFIXES_KEPT):
        self.folder = folder
        self.kept = kept

    @classmethod
    def for_model(cls, model_path: str, *, exact: bool = False) -> PrefixStore:
        """The store of ``model_path``'s prefixes; ``exact``: of prefixes read in whole batches from an empty
        cache (``LlamaRuntime.generate(..., exact=True)``), kept apart from the others, which were read
        after whatever the cache held."""
        import llama_cpp

        from gauntlet.datacache import cache_root, params_key

        status = os.stat(model_path)
        key = params_key({"model": str(Path(model_path).resolve()), "size": status.st_size,
                          "mtime_ns": status.st_mtime_ns, "llama_cpp": llama_cpp.__version__})
        return cls(cache_root() / "llm-prefix" / f"{Path(model_path).stem}-{key}{'-exact' if exact else ''}")

    def path(self, tokens: Sequence[int]) -> Path:
        digest = hashlib.sha256(np.asarray(tokens, dtype="<i4").tobytes()).hexdigest()[:32]
        return self.folder / f"{digest}.kv"

    def load(self, tokens: Sequence[int]) -> bytes | None:
        path = self.path(tokens)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        head = len(_MAGIC) + 4
        if len(data) < head or not data.startswith(_MAGIC):
            return None
        (count,) = struct.unpack("<I", data[len(_MAGIC):head])
        stored = np.frombuffer(data, dtype="<i4", count=count, offset=head) if len(data) >= head + 4 * count else None
        if stored is None or stored.tolist() != list(tokens):
            return None
        with contextlib.suppress(OSError):  # evicted by another process meanwhile: the bytes are read
            _touch(path)  # most recently used
        return data[head + 4 * count:]

    def save(self, tokens: Sequence[int], state: bytes) -> None:
        path = self.path(tokens)
        # A scratch name of this process's own: two workers may store the same prefix at once.
        scratch = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            scratch.write_bytes(_MAGIC + struct.pack("<I", len(tokens)) + np.asarray(tokens, dtype="<i4").tobytes()
                                + state)
            os.replace(scratch, path)
            _touch(path)
            files = sorted(self.folder.glob("*.kv"), key=_modified)
            for old in files[:max(0, len(files) - self.kept)]:
                old.unlink(missing_ok=True)
        except OSError as exc:  # a full or read-only disk costs the next process a read, nothing else
            scratch.unlink(missing_ok=True)
            log.warning("could not store a prompt prefix in %s: %s", self.folder, exc)


def _touch(path: Path) -> None:
    """Mark ``path`` used now, to the nanosecond (a file system's own clock may tick every few ms)."""
    now = time.time_ns()
    os.utime(path, ns=(now, now))


def _modified(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:  # another process's store evicted it meanwhile
        return 0


_loaded: dict[str, LlamaRuntime] = {}
_loading = threading.Lock()


def load_runtime(path: str | os.PathLike[str], threads: int | None = None) -> LlamaRuntime:
    """The runtime of the GGUF file at ``path``, loaded once per process (with ``threads``, or the
    default, at that first load): every model and monitor of one file shares it, its prefix cache and
    its watched layers."""
    key = str(Path(path).resolve())
    with _loading:
        if key not in _loaded:
            _loaded[key] = LlamaRuntime(key, threads=threads)
        return _loaded[key]
