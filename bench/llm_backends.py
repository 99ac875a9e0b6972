"""LLM backends: the offline model on transformers (today's reference) and on llama.cpp, on the same prompts.

A section of ``gauntlet bench agents``, run alone with ``--backends`` (it takes minutes):

    gauntlet bench agents --backends [--quick] [--out PATH]   (default bench/results/agents-backends.json)

Backends (the full size): transformers with the GGUF dequantised to fp32, 0.5B, 1 thread (today's
default, ``LocalChatModel``, called through ``invoke`` as the agent calls it); llama.cpp on the
quantised file (``LlamaRuntime.generate``), 0.5B with 1 and with 2 threads, and 1.5B with 2 threads.
The llama.cpp runtimes are made here, not shared through ``load_runtime``, so each has its thread
count and a cache of its own. Every backend reads the same token ids (checked), greedily. In each
trial the backends take turns, so a change of load over the run hits them alike; each figure is the
median over trials. Times are each backend's own model time for a call: from the prompt's token ids
to the last reply token (``latency_ms`` of transformers; ``prompt_s + decode_s`` of llama.cpp).

The prompts are an agent's on the chem server: the ``autonomous`` mode's system prompt, the chem
server's tools (listed in process, no catalogue needed) and the answer tool, and a chem suite task.

Figures:
1. prefill tokens/s: the agent prompt read with an empty cache (a one-token reply).
2. decode tokens/s: a reply of up to ``decode_tokens`` greedy tokens, unconstrained, to a prompt that
   asks for a written plan (so the reply is long), all of the prompt but its last token cached: the
   call makes one forward pass per token. The tokens each backend wrote are recorded.
3. step latency on a cached prefix: the first prompt extended by the model's ``get_reaction`` call
   and its result (the ~300 tokens read), the model's next reply (a tool call, ~35 tokens), with
   everything before the result cached. For llama.cpp also the same step of the second task under
   the call grammar (``constrain_calls``, the llama.cpp agent's default), for information.
4. episodes: the first call of an episode with an empty cache, then the first call of a second
   episode (another task, the same system prompt and tools, which are then cached).
5. the physical limit: this machine's memory bandwidth (a numpy copy, best of several, on 1 thread
   and on every CPU, counted as bytes read plus bytes written) over the bytes a decoded token
   reads: every weight matrix once (the GGUF file's tensors as stored, for llama.cpp; the fp32
   parameters, for transformers) except the token embeddings, of which one row is read (the Qwen2.5
   files have an output matrix of their own; a tied one would be counted, as the output layer reads
   it whole), plus the key-value cache at the decode context (f16 in llama.cpp, fp32 in
   transformers). Activations and the logits are left out: the limit is an upper bound.
6. ratios to the transformers baseline and the targets: llama.cpp 0.5B decode and step latency
   >= 3x transformers 0.5B (per thread count); llama.cpp 1.5B step latency no slower than
   transformers 0.5B.

``--quick`` runs llama.cpp 0.5B with 1 thread alone (transformers' first load dequantises its file
for ~100 s), on a prompt with one of the tools, a few tokens, one trial: the same code path, and
no target can be judged.
"""

from __future__ import annotations

import functools
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from _reporting import figures_table, show

LARGE_MODEL = "qwen2.5-coder-1.5b-instruct"
FIRST_TASK, SECOND_TASK = "RXN-0001", "RXN-0002"
# What get_reaction returns for the first task (the chem suite's clean view of RXN-0001).
FIRST_REACTION = {
    "reaction_id": "RXN-0001", "reaction_class": "amide coupling", "basis": "1 mmol of the limiting reagent",
    "components": [
        {"name": "n-acetyl-dl-methionine", "role": "limiting reagent", "equiv": 1.0, "volume_ml_per_mmol": None,
         "amount_text": "1 equiv"},
        {"name": "betacain", "role": "coupling partner", "equiv": 1.1, "volume_ml_per_mmol": None,
         "amount_text": "1.1 equiv"},
        {"name": "EDC", "role": "coupling reagent", "equiv": 1.5, "volume_ml_per_mmol": None,
         "amount_text": "1.5 equiv"},
        {"name": "HOBt", "role": "additive", "equiv": 1.5, "volume_ml_per_mmol": None, "amount_text": "1.5 equiv"},
        {"name": "DIPEA", "role": "base", "equiv": 3.0, "volume_ml_per_mmol": None, "amount_text": "3 equiv"},
        {"name": "DCM", "role": "solvent", "equiv": None, "volume_ml_per_mmol": 2.0, "amount_text": "2 mL per mmol"}],
    "product_smiles": "CSCCC(NC(C)=O)C(=O)N1C(C)CC(OC(=O)c2ccccc2)CC1(C)C", "product_molar_mass_g_mol": 420.575,
    "yield_pct": 49.0,
    "procedure": "Amide coupling: n-acetyl-dl-methionine (1 equiv) and betacain (1.1 equiv) in DCM (2 mL per mmol) "
                 "with EDC (1.5 equiv), HOBt (1.5 equiv), DIPEA (3 equiv) was stirred until complete. Work-up and "
                 "purification gave the product in 49% yield."}
SECOND_REACTION = {
    "reaction_id": "RXN-0002", "reaction_class": "Steglich esterification", "basis": "1 mmol of the limiting reagent",
    "components": [
        {"name": "4-fluorosulfonyl-1-hydroxy-2-naphthoic acid", "role": "limiting reagent", "equiv": 1.0,
         "volume_ml_per_mmol": None, "amount_text": "1 equiv"},
        {"name": "floxuridine", "role": "coupling partner", "equiv": 1.5, "volume_ml_per_mmol": None,
         "amount_text": "1.5 equiv"},
        {"name": "EDC", "role": "coupling reagent", "equiv": 1.5, "volume_ml_per_mmol": None,
         "amount_text": "1.5 equiv"},
        {"name": "DMAP", "role": "catalyst", "equiv": 0.1, "volume_ml_per_mmol": None, "amount_text": "0.1 equiv"},
        {"name": "DCM", "role": "solvent", "equiv": None, "volume_ml_per_mmol": 10.0, "amount_text": "10 mL per mmol"}],
    "product_smiles": "O=C(OC[C@H]1O[C@@H](n2cc(F)c(=O)[nH]c2=O)C[C@@H]1O)c1cc(S(=O)(=O)F)c2ccccc2c1O",
    "product_molar_mass_g_mol": 498.416, "yield_pct": 68.0,
    "procedure": "Steglich esterification: 4-fluorosulfonyl-1-hydroxy-2-naphthoic acid (1 equiv) and floxuridine "
                 "(1.5 equiv) in DCM (10 mL per mmol) with EDC (1.5 equiv), DMAP (10 mol%) was stirred until "
                 "complete. Work-up and purification gave the product in 68% yield."}
PLAN_REQUEST = ("Before you call any tool, write out your whole plan in prose: every call you will make, in order, "
                "and why, as at least ten numbered steps.")
QUICK_TOOLS = ("get_reaction",)


@dataclass(frozen=True)
class Size:
    """How much the section measures."""

    trials: int
    decode_tokens: int
    reply_tokens: int  # most tokens of an episode's or a step's reply (a tool call is ~35)
    copy_bytes: int  # the array the memory bandwidth is measured with
    copies: int
    quick: bool


FULL = Size(trials=3, decode_tokens=64, reply_tokens=64, copy_bytes=1 << 30, copies=5, quick=False)
QUICK = Size(trials=1, decode_tokens=8, reply_tokens=12, copy_bytes=1 << 26, copies=2, quick=True)


# The prompts -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Prompts:
    """The conversations every backend reads, and the tools shown with them."""

    tools: list[dict[str, Any]]  # OpenAI function schemas, as ``bind_tools`` passes them
    specs: list[Any]  # the same tools as ``ToolSpec`` (for the call grammar)
    first: list[BaseMessage]  # the first call of the first task's episode
    second: list[BaseMessage]  # the first call of the second task's episode
    plan: list[BaseMessage]  # a prompt the model answers at length (the decode figure)
    step_prefix: list[BaseMessage]  # the first task through the model's get_reaction call
    step: list[BaseMessage]  # ... and that call's result: the prompt of the step
    second_step_prefix: list[BaseMessage]
    second_step: list[BaseMessage]


def chem_tool_specs(names: Sequence[str] | None) -> list[Any]:
    """The chem server's tools as ``ToolTaskEnv`` lists them (all, or ``names``), then the answer tool."""
    import anyio

    from gauntlet.agents.llm.calls import ToolSpec
    from gauntlet.agents.llm.modes import AUTONOMOUS, answer_spec
    from gauntlet.bridges.tool_server import ToolServer
    from gauntlet.bridges.tool_task_env import DEFAULT_ANSWER_TOOL
    from gauntlet.mcp_servers.chem.server import TOOLS

    server = ToolServer(TOOLS, None, name="chem", instructions="listing only")  # listing needs no state
    listed = [tool for tool in anyio.run(server.list_tools) if names is None or tool.name in names]
    specs = [ToolSpec.of({"name": tool.name, "description": tool.description or "", "input_schema": tool.inputSchema})
             for tool in listed]
    return [*specs, answer_spec(AUTONOMOUS, DEFAULT_ANSWER_TOOL)]


def agent_prompts(quick: bool) -> Prompts:
    from gauntlet.agents.llm.modes import AUTONOMOUS, user_prompt
    from gauntlet.bridges.tool_task_env import task_text
    from gauntlet.mcp_servers.chem.suite import question
    from gauntlet.tasks import ToolTask

    specs = chem_tool_specs(QUICK_TOOLS if quick else None)

    def opening(reaction_id: str, before: str = "") -> list[BaseMessage]:
        inputs = {"reaction_id": reaction_id, "view": "clean"}
        task = ToolTask(id=reaction_id, question=question(reaction_id, "clean"), server="chem", inputs=inputs,
                        answer=0.0, eval_spec={"kind": "numeric"})
        text = user_prompt(AUTONOMOUS, task_text(task))
        return [SystemMessage(AUTONOMOUS.system_prompt), HumanMessage(f"{before}\n\n{text}" if before else text)]

    def read_reaction(opened: list[BaseMessage],
                      reaction: dict[str, Any]) -> tuple[list[BaseMessage], list[BaseMessage]]:
        call = AIMessage(content="", tool_calls=[{"name": "get_reaction", "id": "call_0",
                                                  "args": {"reaction_id": reaction["reaction_id"], "view": "clean"}}])
        prefix = [*opened, call]
        return prefix, [*prefix, ToolMessage(json.dumps(reaction, ensure_ascii=False), tool_call_id="call_0")]

    first, second = opening(FIRST_TASK), opening(SECOND_TASK)
    step_prefix, step = read_reaction(first, FIRST_REACTION)
    second_step_prefix, second_step = read_reaction(second, SECOND_REACTION)
    return Prompts(tools=[spec.as_openai() for spec in specs], specs=specs, first=first, second=second,
                   plan=opening(FIRST_TASK, before=PLAN_REQUEST), step_prefix=step_prefix, step=step,
                   second_step_prefix=second_step_prefix, second_step=second_step)


# The backends ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Reply:
    """One call: tokens of the prompt, of them read from the cache, tokens written, and model seconds."""

    prompt_tokens: int
    reused: int
    new_tokens: int
    seconds: float


class Backend(Protocol):
    key: str
    label: str
    has_call_grammar: bool

    def clear_cache(self) -> None: ...

    def reply(self, messages: Sequence[BaseMessage], max_new_tokens: int, constrained: bool = False) -> Reply: ...

    def bytes_per_token(self, context: int) -> int: ...


def kv_bytes(blocks: int, kv_heads: int, head_dim: int, value_bytes: int, positions: int) -> int:
    """Bytes of keys and values held for ``positions`` tokens (what one decoded token's attention reads)."""
    return 2 * blocks * kv_heads * head_dim * value_bytes * positions


class TransformersBackend:
    """``LocalChatModel`` (the GGUF dequantised to fp32), called through ``invoke`` as the agent calls it."""

    has_call_grammar = False

    def __init__(self, key: str, label: str, path: Path, threads: int, prompts: Prompts):
        from gauntlet.agents.llm.local_chat import LocalChatModel

        self.key, self.label, self.prompts = key, label, prompts
        self.model = LocalChatModel(model_path=str(path), threads=threads)
        self.model.weights  # noqa: B018 - load (and on a first run, convert) before anything is timed
        self.reply([HumanMessage("Warm-up.")], 1)  # as each llama.cpp runtime is warmed up
        self.clear_cache()

    def clear_cache(self) -> None:
        self.model.weights.prefixes = []  # the key-value caches the loaded weights keep

    def reply(self, messages: Sequence[BaseMessage], max_new_tokens: int, constrained: bool = False) -> Reply:
        if constrained:
            raise ValueError("the transformers backend has no call grammar")
        model = self.model.model_copy(update={"max_new_tokens": max_new_tokens})
        message = model.bind_tools(self.prompts.tools).invoke(list(messages))
        usage = message.usage_metadata or {}
        return Reply(prompt_tokens=usage["input_tokens"], reused=usage["input_token_details"]["cache_read"],
                     new_tokens=usage["output_tokens"], seconds=message.response_metadata["latency_ms"] / 1e3)

    def bytes_per_token(self, context: int) -> int:
        model = self.model.weights.model
        config = model.config
        embedding, output = model.get_input_embeddings().weight, model.get_output_embeddings().weight
        weights = sum(parameter.numel() * parameter.element_size() for parameter in model.parameters()
                      if parameter is not embedding or embedding is output)
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        return int(weights) + kv_bytes(config.num_hidden_layers, config.num_key_value_heads, head_dim, 4, context)


class LlamaBackend:
    """A ``LlamaRuntime`` of its own (its thread count, its cache), called with the prompt's token ids."""

    has_call_grammar = True

    def __init__(self, key: str, label: str, path: Path, threads: int, prompts: Prompts):
        from gauntlet.agents.llm.call_grammar import call_grammar

        self.key, self.label, self.path, self.threads, self.prompts = key, label, path, threads, prompts
        self.grammar = call_grammar(prompts.specs)
        self.clear_cache()

    def clear_cache(self) -> None:
        """A fresh runtime (nothing cached), warmed up on a text no prompt starts with."""
        from gauntlet.agents.llm.llama_runtime import LlamaRuntime

        # The old runtime goes before the new one is made: it holds its context (key-value cache and
        # buffers, ~0.5-1 GB) in a reference cycle (its evaluation callback), so only a collection frees it.
        self.runtime = None
        gc.collect()
        self.runtime = LlamaRuntime(self.path, threads=self.threads)
        self.runtime.generate(self.runtime.tokenize("Warm-up."), max_new_tokens=1)

    def reply(self, messages: Sequence[BaseMessage], max_new_tokens: int, constrained: bool = False) -> Reply:
        from gauntlet.agents.llm.chat_template import render_messages, render_prompt

        runtime, tools = self.runtime, self.prompts.tools
        prompt = runtime.tokenize(render_prompt(runtime.template, render_messages(messages, tools, runtime.template),
                                                tools))
        generation = runtime.generate(prompt, max_new_tokens=max_new_tokens,
                                      grammar=self.grammar if constrained else None)
        return Reply(prompt_tokens=len(prompt), reused=generation.reused, new_tokens=len(generation.tokens),
                     seconds=generation.prompt_s + generation.decode_s)

    def bytes_per_token(self, context: int) -> int:
        metadata = self.runtime.metadata
        arch = metadata["general.architecture"]
        head_dim = int(metadata.get(f"{arch}.attention.key_length")
                       or int(metadata[f"{arch}.embedding_length"]) // int(metadata[f"{arch}.attention.head_count"]))
        kv_heads = int(metadata[f"{arch}.attention.head_count_kv"])
        return gguf_weight_bytes(self.path) + kv_bytes(int(metadata[f"{arch}.block_count"]), kv_heads, head_dim, 2,
                                                       context)


@functools.lru_cache(maxsize=4)
def gguf_weight_bytes(path: Path) -> int:
    """Bytes of the tensors of the GGUF file at ``path`` that decoding a token reads: all of them but the
    token embeddings (one row is read) when the file has an output matrix of its own (Qwen2.5's do)."""
    import gguf

    sizes = {tensor.name: int(tensor.n_bytes) for tensor in gguf.GGUFReader(str(path)).tensors}
    untied = "output.weight" in sizes
    return sum(size for name, size in sizes.items() if not (untied and name == "token_embd.weight"))


def make_backends(prompts: Prompts, quick: bool) -> list[Backend]:
    """The backends compared, the transformers baseline first (none in the quick size)."""
    from gauntlet.agents.llm.offline_model import model_path

    small = model_path("small")
    if quick:
        return [LlamaBackend("llama-0.5b-1t", "llama.cpp Q4_K_M 0.5B, 1 thread", small, 1, prompts)]
    return [TransformersBackend("transformers-0.5b-1t", "transformers fp32 0.5B, 1 thread", small, 1, prompts),
            LlamaBackend("llama-0.5b-1t", "llama.cpp Q4_K_M 0.5B, 1 thread", small, 1, prompts),
            LlamaBackend("llama-0.5b-2t", "llama.cpp Q4_K_M 0.5B, 2 threads", small, 2, prompts),
            LlamaBackend("llama-1.5b-2t", "llama.cpp Q4_K_M 1.5B, 2 threads", model_path(LARGE_MODEL), 2, prompts)]


# One trial of one backend ------------------------------------------------------------------------
def trial(backend: Backend, prompts: Prompts, size: Size) -> dict[str, Reply]:
    """Every call the figures time, each after the calls that put its prefix in the cache."""
    replies: dict[str, Reply] = {}
    backend.clear_cache()
    replies["prefill"] = backend.reply(prompts.first, 1)
    backend.reply(prompts.plan, 1)  # the plan prompt cached, for decoding alone
    replies["decode"] = backend.reply(prompts.plan, size.decode_tokens)
    backend.clear_cache()
    replies["first_episode"] = backend.reply(prompts.first, size.reply_tokens)
    replies["later_episode"] = backend.reply(prompts.second, size.reply_tokens)
    backend.reply(prompts.step_prefix, 1)
    replies["step"] = backend.reply(prompts.step, size.reply_tokens)
    if backend.has_call_grammar:
        backend.reply(prompts.second_step_prefix, 1)
        replies["step_grammar"] = backend.reply(prompts.second_step, size.reply_tokens, constrained=True)
    if replies["prefill"].reused or replies["first_episode"].reused:
        raise RuntimeError(f"{backend.label}: a read meant to start from an empty cache reused tokens")
    if replies["decode"].reused != replies["decode"].prompt_tokens - 1:
        raise RuntimeError(f"{backend.label}: the decode prompt was not cached")
    return replies


def figures(backend: Backend, trials: list[dict[str, Reply]], bandwidth_b_s: float) -> dict[str, Any]:
    """A backend's figures: medians over trials; token counts from the first trial (greedy: the same)."""
    def median(name: str, value: Callable[[Reply], float]) -> float:
        return statistics.median(value(replies[name]) for replies in trials)

    first = trials[0]
    decode = first["decode"]
    bytes_per_token = backend.bytes_per_token(decode.prompt_tokens + decode.new_tokens // 2)
    report: dict[str, Any] = {
        "label": backend.label,
        "prompt_tokens": first["prefill"].prompt_tokens,
        "prefill_tok_s": median("prefill", lambda r: r.prompt_tokens / r.seconds),
        "decode_tokens": decode.new_tokens,
        "decode_tok_s": median("decode", lambda r: r.new_tokens / r.seconds),
        "decode_bytes_per_token": bytes_per_token,
        "decode_limit_tok_s": bandwidth_b_s / bytes_per_token,
        "first_episode_ms": median("first_episode", lambda r: r.seconds * 1e3),
        "first_episode_reply_tokens": first["first_episode"].new_tokens,
        "later_episode_ms": median("later_episode", lambda r: r.seconds * 1e3),
        "later_episode_cached_tokens": first["later_episode"].reused,
        "later_episode_reply_tokens": first["later_episode"].new_tokens,
        "step_ms": median("step", lambda r: r.seconds * 1e3),
        "step_read_tokens": first["step"].prompt_tokens - first["step"].reused,
        "step_reply_tokens": first["step"].new_tokens,
    }
    report["decode_limit_fraction"] = report["decode_tok_s"] / report["decode_limit_tok_s"]
    if "step_grammar" in first:
        report["step_grammar_ms"] = median("step_grammar", lambda r: r.seconds * 1e3)
        report["step_grammar_read_tokens"] = first["step_grammar"].prompt_tokens - first["step_grammar"].reused
        report["step_grammar_reply_tokens"] = first["step_grammar"].new_tokens
    return report


# The physical limit ------------------------------------------------------------------------------
def memory_bandwidth(size_bytes: int, copies: int) -> dict[str, Any]:
    """Best-of-``copies`` numpy copy of a ``size_bytes`` array, on 1 thread and on every CPU (slices
    copied in threads; numpy lets go of the GIL while it copies). Each byte copied counts twice, read
    and written; the cache-line reads a write allocates are not counted (as STREAM counts)."""
    source = np.ones(size_bytes, dtype=np.uint8)
    target = np.zeros_like(source)  # written once before timing, so no page is first touched while timed
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    measured: dict[str, Any] = {"array_bytes": size_bytes, "copies": copies}
    for threads in sorted({1, cpus}):
        share = -(-size_bytes // threads)
        bounds = [(begin, min(begin + share, size_bytes)) for begin in range(0, size_bytes, share)]
        best = float("inf")
        with ThreadPoolExecutor(threads) as pool:
            for _ in range(copies + 1):  # the first copy warms up
                start = time.perf_counter()
                list(pool.map(lambda span: np.copyto(target[span[0]:span[1]], source[span[0]:span[1]]), bounds))
                best = min(best, time.perf_counter() - start)
        measured[f"threads_{threads}_gb_s"] = 2 * size_bytes / best / 1e9
    measured["bandwidth_gb_s"] = max(value for key, value in measured.items() if key.startswith("threads_"))
    return measured


# Ratios and targets ------------------------------------------------------------------------------
def ratios(results: dict[str, dict[str, Any]], baseline: str) -> dict[str, dict[str, float]]:
    """Each backend against the baseline: how many times its throughput, how many times faster its calls."""
    base = results[baseline]
    return {key: {"prefill": row["prefill_tok_s"] / base["prefill_tok_s"],
                  "decode": row["decode_tok_s"] / base["decode_tok_s"],
                  "step": base["step_ms"] / row["step_ms"],
                  "first_episode": base["first_episode_ms"] / row["first_episode_ms"],
                  "later_episode": base["later_episode_ms"] / row["later_episode_ms"]}
            for key, row in results.items() if key != baseline}


def targets(results: dict[str, dict[str, Any]], speedups: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    """The issue's targets, each met, missed or (when a backend was not run) not judged (None)."""
    judged: list[dict[str, Any]] = []
    for key in ("llama-0.5b-1t", "llama-0.5b-2t"):
        for figure in ("decode", "step"):
            ratio = speedups.get(key, {}).get(figure)
            judged.append({"target": f"{key} {figure} >= 3x transformers-0.5b-1t", "ratio": ratio,
                           "met": None if ratio is None else ratio >= 3})
    ratio = speedups.get("llama-1.5b-2t", {}).get("step")
    judged.append({"target": "llama-1.5b-2t step latency <= transformers-0.5b-1t", "ratio": ratio,
                   "met": None if ratio is None else ratio >= 1})
    return judged


# The section -------------------------------------------------------------------------------------
def model_of(key: str) -> str:
    """The model a backend key names (``llama-0.5b-2t`` -> ``0.5b``)."""
    return key.split("-")[1]


def measure_backends(quick: bool) -> dict[str, Any]:
    """The section's figures (see the module docstring)."""
    size = QUICK if quick else FULL
    memory = memory_bandwidth(size.copy_bytes, size.copies)
    prompts = agent_prompts(quick)
    backends = make_backends(prompts, quick)
    runs: dict[str, list[dict[str, Reply]]] = {backend.key: [] for backend in backends}
    for number in range(1, size.trials + 1):
        for backend in backends:
            start = time.perf_counter()
            runs[backend.key].append(trial(backend, prompts, size))
            print(f"trial {number}/{size.trials}: {backend.key} in {time.perf_counter() - start:.0f} s "
                  f"(load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
    # Backends of one model must read the same tokens (the comparison is of runtimes, not prompts); the
    # 0.5B and 1.5B GGUFs' tokenizers may differ by a token or two on the same conversation.
    read = {backend.key: runs[backend.key][0]["prefill"].prompt_tokens for backend in backends}
    for model in {model_of(key) for key in read}:
        lengths = {key: tokens for key, tokens in read.items() if model_of(key) == model}
        if len(set(lengths.values())) != 1:
            raise RuntimeError(f"the backends of the {model} model read prompts of different lengths: {lengths}")
    bandwidth = memory["bandwidth_gb_s"] * 1e9
    results = {backend.key: figures(backend, runs[backend.key], bandwidth) for backend in backends}
    baseline = "transformers-0.5b-1t"
    speedups = ratios(results, baseline) if baseline in results else {}
    return {"size": "quick" if quick else "full", "trials": size.trials, "decode_tokens": size.decode_tokens,
            "reply_tokens": size.reply_tokens, "tools": len(prompts.tools), "baseline": baseline, "memory": memory,
            "results": results, "ratios": speedups, "targets": targets(results, speedups)}


def print_backends(report: dict[str, Any]) -> None:
    """Two tables: the figures (a column per backend, with its ratio to the baseline), and the targets."""
    results, speedups = report["results"], report["ratios"]
    first = next(iter(results.values()))
    memory = report["memory"]
    table = figures_table(f"LLM backends on one chem agent prompt ({first['prompt_tokens']} tokens, {report['tools']} "
                          f"tools), median of {report['trials']}",
                          ("figure", *(key for key in results)))

    def add(figure: str, value: Callable[[dict[str, Any]], str], ratio: str | None = None) -> None:
        cells = []
        for key, row in results.items():
            times = speedups.get(key, {}).get(ratio) if ratio else None
            cells.append(value(row) if times is None else f"{value(row)} ({times:.1f}x)")
        table.add_row(figure, *cells)

    add("prefill tok/s, empty cache", lambda row: f"{row['prefill_tok_s']:.0f}", "prefill")
    add(f"decode tok/s (<= {report['decode_tokens']} tokens)", lambda row: f"{row['decode_tok_s']:.1f}", "decode")
    add("  tokens written", lambda row: str(row["decode_tokens"]))
    add(f"  limit: {memory['bandwidth_gb_s']:.1f} GB/s / bytes per token",
        lambda row: f"{row['decode_limit_tok_s']:.0f} ({row['decode_bytes_per_token'] / 1e6:.0f} MB)")
    add("step ms, prefix cached", lambda row: f"{row['step_ms']:.0f}", "step")
    add("  tokens read + written", lambda row: f"{row['step_read_tokens']} + {row['step_reply_tokens']}")
    add("  with the call grammar", lambda row: f"{row['step_grammar_ms']:.0f} ({row['step_grammar_reply_tokens']} "
                                               "written)" if "step_grammar_ms" in row else "-")
    add("first call of an episode ms, empty cache", lambda row: f"{row['first_episode_ms']:.0f}", "first_episode")
    add("first call of a later episode ms", lambda row: f"{row['later_episode_ms']:.0f}", "later_episode")
    add("  tokens cached", lambda row: str(row["later_episode_cached_tokens"]))
    table.caption = (f"(Nx): against {report['baseline']}, throughput ratio or times faster. Memory bandwidth: numpy "
                     "copy, bytes read + written; bytes per token: weights + KV cache at the decode context.")
    show(table)
    verdicts = figures_table("LLM backend targets", ("target", "measured", "met"))
    for target in report["targets"]:
        ratio = target["ratio"]
        verdicts.add_row(target["target"], "not run" if ratio is None else f"{ratio:.2f}x",
                         {True: "met", False: "MISSED", None: "not judged"}[target["met"]])
    show(verdicts)
