"""The llama.cpp prefix cache three ways on an agent's calls: reused (the default), exact, and read whole.

    python bench/llm_cache.py [--quick] [--model NAME] [--out PATH]   (default bench/results/llm-cache.json)

The workload is two chem episodes played in turns, as an oversight collection plays branches: each
call reads its episode's conversation so far (the autonomous mode's system prompt, the chem tools, the
task, then per turn the model's reply and a tool result: ``get_reaction``'s, then a search's) and
writes a reply greedily under the call grammar, as the agent does. The conversations are made once, by
the read-whole mode (each reply is the one a new runtime writes), and every mode then reads the same
prompts, each on a runtime of its own (its own cache, nothing persisted):

* ``whole`` (``reuse_prefix=False``): every prompt read in an empty cache, the baseline of the numbers
  (the same in every process) and of the time;
* ``exact`` (``exact=True``): the whole prompt batches such a read shares with the cache are reused;
* ``reused`` (the default): the longest cached prefix, from the working or a kept sequence.

Figures per mode: model seconds over all calls, prompt tokens read (not reused), how many calls wrote
the same tokens as the whole read, and how many also had the same last-layer states to the bit; ratios
of time to the whole read. The modes run one after another on one thread. The exact mode must match
every call (the bench fails otherwise); the reused mode is counted, not judged (where its states differ
a greedy near-tie can go another way; where its tokens differ, one did).
"""

from __future__ import annotations

import gc
import json
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from _reporting import bench_parser, figures_table, save_report, show
from llm_backends import FIRST_REACTION, SECOND_REACTION, agent_prompts

MODES = ("whole", "exact", "reused")
# The second and later tool results of each episode: a search's, written here (only its tokens matter to the cache;
# it needs no catalogue), about the length of the chem server's.
SEARCH_RESULT = {"query": "EDC", "matches": [
    {"name": "EDC", "cas": "25952-53-8", "packs": [{"size_g": 5, "price_usd": 42.0},
                                                   {"size_g": 25, "price_usd": 151.0}]},
    {"name": "EDC hydrochloride", "cas": "25952-53-8", "packs": [{"size_g": 10, "price_usd": 58.5}]}]}


@dataclass(frozen=True)
class Size:
    turns: int  # calls per episode
    reply_tokens: int
    quick: bool  # ``agent_prompts``' quick size: one chem tool shown, not all


FULL = Size(turns=3, reply_tokens=64, quick=False)
QUICK = Size(turns=1, reply_tokens=8, quick=True)


def openings(runtime: Any, size: Size) -> tuple[list[list[int]], Any]:
    """The two episodes' first prompts (token ids: the backends bench's first and second chem task) and the
    call grammar of their tools."""
    from gauntlet.agents.llm.call_grammar import call_grammar
    from gauntlet.agents.llm.chat_template import render_messages, render_prompt

    prompts = agent_prompts(size.quick)
    return [runtime.tokenize(render_prompt(runtime.template, render_messages(messages, prompts.tools, runtime.template),
                                           prompts.tools))
            for messages in (prompts.first, prompts.second)], call_grammar(prompts.specs)


def tool_turn(runtime: Any, result: dict[str, Any]) -> list[int]:
    """The tokens that close the model's reply and hand it a tool result (Qwen2.5's chat format)."""
    return runtime.tokenize("\n<|im_start|>user\n<tool_response>\n" + json.dumps(result, ensure_ascii=False)
                            + "\n</tool_response><|im_end|>\n<|im_start|>assistant\n")


def new_runtime(path: Any) -> Any:
    from gauntlet.agents.llm.llama_runtime import LlamaRuntime

    gc.collect()  # a previous runtime's context is freed only by a collection (its callback is a cycle)
    return LlamaRuntime(path, threads=1, context=16384)


def conversations(path: Any, size: Size) -> tuple[list[list[int]], Any]:
    """The calls' prompts in the order they are made: built by reading every prompt whole, each reply the
    next prompt's assistant turn."""
    runtime = new_runtime(path)
    prompts, grammar = openings(runtime, size)
    results = [[FIRST_REACTION, SEARCH_RESULT], [SECOND_REACTION, SEARCH_RESULT]]
    calls = []
    for turn in range(size.turns):
        for episode in (0, 1):
            calls.append(list(prompts[episode]))
            written = runtime.generate(prompts[episode], max_new_tokens=size.reply_tokens, grammar=grammar,
                                       reuse_prefix=False)
            prompts[episode] = prompts[episode] + written.tokens + tool_turn(
                runtime, results[episode][min(turn, len(results[episode]) - 1)])
    return calls, grammar


def play(path: Any, mode: str, calls: list[list[int]], grammar: Any, size: Size) -> list[dict[str, Any]]:
    """Every call on a runtime of its own in ``mode``: tokens written, last-layer states, tokens read, seconds."""
    runtime = new_runtime(path)
    last = runtime.layer_number(-1)
    options = {"whole": {"reuse_prefix": False}, "exact": {"exact": True}, "reused": {}}[mode]
    made = []
    for prompt in calls:
        written = runtime.generate(prompt, max_new_tokens=size.reply_tokens, grammar=grammar, layers=(-1,), **options)
        made.append({"tokens": written.tokens, "states": written.states[last], "read": len(prompt) - written.reused,
                     "seconds": written.prompt_s + written.decode_s})
    return made


def measure(model: str, quick: bool) -> dict[str, Any]:
    from gauntlet.agents.llm.offline_model import model_path

    size = QUICK if quick else FULL
    path = model_path(model)
    calls, grammar = conversations(path, size)
    played = {}
    for mode in MODES:
        start = time.perf_counter()
        played[mode] = play(path, mode, calls, grammar, size)
        print(f"{mode}: {len(calls)} calls in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    whole = played["whole"]
    results = {}
    for mode in MODES:
        pairs = list(zip(played[mode], whole, strict=True))
        same_tokens = sum(call["tokens"] == base["tokens"] for call, base in pairs)
        same = sum(call["tokens"] == base["tokens"] and np.array_equal(call["states"], base["states"])
                   for call, base in pairs)
        seconds = sum(call["seconds"] for call in played[mode])
        results[mode] = {"seconds": seconds, "tokens_read": sum(call["read"] for call in played[mode]),
                         "same_tokens_as_whole": same_tokens, "same_as_whole": same, "calls": len(calls),
                         "time_vs_whole": seconds / sum(call["seconds"] for call in whole)}
    if results["exact"]["same_as_whole"] != len(calls):
        raise RuntimeError(f"the exact mode matched the whole read on {results['exact']['same_as_whole']} of "
                           f"{len(calls)} calls; it must match every one")
    return {"model": path.name, "size": "quick" if quick else "full", "turns": size.turns,
            "reply_tokens": size.reply_tokens, "prompt_tokens": [len(prompt) for prompt in calls],
            "results": results}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = bench_parser("llm-cache", __doc__ or "")
    parser.add_argument("--model", default="small", help="an offline model's name (default small: the 0.5B)")
    args = parser.parse_args(argv)
    report = measure(args.model, args.quick)
    calls = len(report["prompt_tokens"])
    table = figures_table(f"Prefix cache on two chem episodes in turns: {report['model']}, {calls} "
                          f"calls, prompts {min(report['prompt_tokens'])}-{max(report['prompt_tokens'])} tokens",
                          ("mode", "model s", "x whole", "tokens read", "same tokens as whole",
                           "same tokens and states"))
    for mode, row in report["results"].items():
        table.add_row(mode, f"{row['seconds']:.1f}", f"{row['time_vs_whole']:.2f}", str(row["tokens_read"]),
                      f"{row['same_tokens_as_whole']}/{row['calls']}", f"{row['same_as_whole']}/{row['calls']}")
    show(table)
    save_report(report, args.out)
    return report


if __name__ == "__main__":
    main()
