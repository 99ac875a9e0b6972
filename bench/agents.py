"""Agent harness suite: the LLM agent's cost per tool step, and many agent episodes on one server.

Both figures use a scripted model (``ScriptedChatModel``: no model time at all), so what they
measure is the harness. Prints a table and writes JSON (default ``bench/results/agents.json``).

    gauntlet bench agents [--quick] [--out PATH] [--concurrent N] [--server-kwargs JSON]
    gauntlet bench agents --backends [--quick] [--out PATH]

``--backends`` runs only the third section, the LLM backends' speed (it takes minutes; written under
"backends", default ``bench/results/agents-backends.json``).

``--server-kwargs`` goes to ``gauntlet serve chem`` (e.g. ``{"db_path": ...}`` for a catalogue
already built; the default one is built on first use).

Figures and targets:
1. harness overhead per tool step: the Gauntlet LLM agent (``LLMAgent``) through the runner
   (``rollout`` on a ``ToolTaskEnv``, recorded to disk as ``gauntlet eval`` records it) vs a bare
   LangGraph ReAct loop (a two-node ``StateGraph``, model -> tools, tools from
   ``langchain-mcp-adapters`` in one session), on the same scripted model and script, against the
   same ``gauntlet serve chem --transport http`` instance, episodes of the two interleaved in one
   run. Both open one MCP session per episode and list its tools. Wall time per tool call, median
   over trials, of the loop (from the open session to the answer; target <= 1.2x) and, for
   information, of the whole episode (session included; wall and CPU).
2. concurrency: N (16) agent episodes at once, each in its own thread with its own env, agent and
   MCP session, against ONE chem server over HTTP, vs the same N episodes one at a time (alone),
   both repeated over trials; throughput is env steps per second. Every episode makes calls
   with arguments of its own (``calculate`` on an expression naming the episode, ``get_chemical``
   of a catalogue id chosen by the episode), and each result is checked against the same call made
   directly beforehand: a result from another session's call would be caught (``leaks`` must be 0).
   Step latency is the time between the ends of consecutive env steps (agent, env and recording);
   tool-call latency is the round trip the env records. p50 and p99 of both; the threads share
   one Python process, so on few cores the 16-episode figure includes the wait for the GIL.
3. LLM backends (``--backends``, ``llm_backends``): the offline model on transformers (today's
   reference) and on llama.cpp, on the same agent prompts: prefill and decode tokens/s, the latency of
   a step on a cached prefix and of an episode's first call, the decode limit this machine's memory
   bandwidth sets, and the targets (llama.cpp 0.5B decode and step >= 3x transformers 0.5B; 1.5B
   step no slower than transformers 0.5B).
"""

from __future__ import annotations

import asyncio
import os
import platform
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

import gymnasium as gym
import numpy as np
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_mcp_adapters.tools import load_mcp_tools
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

import gauntlet
from gauntlet.agents.llm.agent import LLMAgent
from gauntlet.agents.llm.scripted import ScriptedChatModel
from gauntlet.bridges.mcp_client import BlockingMCPClient, ServerTarget, result_value
from gauntlet.bridges.server_process import spawn_http_server
from gauntlet.bridges.tool_task_env import ENV_SERVER, ToolTaskEnv
from gauntlet.episode import Episode, ToolCall
from gauntlet.runner import rollout
from gauntlet.tasks import ToolTask
from _reporting import RESULTS, bench_parser, figures_table, save_report, show
from llm_backends import measure_backends, print_backends

SYSTEM_PROMPT = "You price chemistry with the tools you are given."
# Catalogue ids the concurrency episodes read (each episode its own sequence of them).
CATALOGUE_IDS = 40


# The scripted conversation -----------------------------------------------------------------------
def tool_calls(episode: int, n_calls: int) -> list[tuple[str, dict[str, Any]]]:
    """Episode ``episode``'s tool calls: arithmetic naming the episode and catalogue records it picks."""
    return [("calculate", {"expression": f"{episode} * 1000 + {i}"}) if i % 2 == 0 else
            ("get_chemical", {"chemical_id": 1 + (7 * episode + i) % CATALOGUE_IDS}) for i in range(n_calls)]


def script(episode: int, n_calls: int, *, answer_tool: bool = True) -> ScriptedChatModel:
    """One call per model turn, then the episode's number as the answer: a call of the env's answer
    tool, as the Gauntlet agent answers, or (``answer_tool=False``) a reply without a call, which is how
    a bare LangGraph loop ends."""
    turns: list[dict[str, Any]] = [{"content": "", "tool_calls": [{"name": name, "args": args}]}
                                   for name, args in tool_calls(episode, n_calls)]
    answer = {"content": "", "tool_calls": [{"name": "submit_answer", "args": {"answer": episode}}]} \
        if answer_tool else {"content": str(episode)}
    return ScriptedChatModel(turns=[*turns, answer])


def task(episode: int, url: str) -> ToolTask:
    return ToolTask(id=f"bench-{episode:02d}", question=f"Benchmark episode {episode}: answer {episode}.",
                    server=url, answer=episode, eval_spec={"kind": "numeric"})


# The baseline: a bare LangGraph ReAct loop -------------------------------------------------------
class BareState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def bare_react_graph(model: BaseChatModel, tools: Sequence[BaseTool]) -> Any:
    """model -> tools -> model ... until a reply without calls: the loop a LangGraph user writes."""
    bound = model.bind_tools(tools)
    by_name = {tool.name: tool for tool in tools}

    async def call_model(state: BareState) -> dict[str, list[AnyMessage]]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    async def run_tools(state: BareState) -> dict[str, list[AnyMessage]]:
        reply = state["messages"][-1]
        assert isinstance(reply, AIMessage)
        return {"messages": [await by_name[call["name"]].ainvoke(call) for call in reply.tool_calls]}

    def route(state: BareState) -> str:
        reply = state["messages"][-1]
        return "run_tools" if isinstance(reply, AIMessage) and reply.tool_calls else END

    graph = StateGraph(BareState)
    graph.add_node("call_model", call_model)
    graph.add_node("run_tools", run_tools)
    graph.add_edge(START, "call_model")
    graph.add_conditional_edges("call_model", route, ["run_tools", END])
    graph.add_edge("run_tools", "call_model")
    return graph.compile()


async def bare_episode(url: str, model: BaseChatModel, question: str) -> tuple[list[AnyMessage], float]:
    """One episode of the bare loop on a session of its own (opened, tools listed, closed): its messages,
    and the seconds its loop ran (the session open and the tool list excluded)."""
    async with streamable_http_client(url) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        graph = bare_react_graph(model, await load_mcp_tools(session))
        start = time.perf_counter()
        state = await graph.ainvoke({"messages": [SystemMessage(SYSTEM_PROMPT), HumanMessage(question)]})
        return list(state["messages"]), time.perf_counter() - start


# Figure 1: overhead per tool step ----------------------------------------------------------------
class StepClock(gym.Wrapper):
    """Notes when each step (and the reset) returns: the gaps are the episode's step latencies."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.stamps: list[float] = []

    def reset(self, **kwargs: Any) -> Any:
        result = self.env.reset(**kwargs)
        self.stamps = [time.perf_counter()]
        return result

    def step(self, action: Any) -> Any:
        result = self.env.step(action)
        self.stamps.append(time.perf_counter())
        return result


def answered(episode: Episode) -> bool:
    """Whether the episode ended with the right answer (each episode's answer is its own number)."""
    return episode.outcome is not None and episode.outcome.success is True


def server_calls(episode: Episode) -> list[ToolCall]:
    """The episode's calls that went to the tool server (not the answer, which the env takes itself)."""
    return [step.tool_call for step in episode.steps if step.tool_call is not None
            and step.tool_call.server != ENV_SERVER]


def overhead(url: str, trials: int, n_calls: int, scratch: Path) -> dict[str, Any]:
    """ms per tool call of both loops, episodes interleaved (the first of each is a warm-up): the loop
    alone (from the open session to the answer: the harness's cost per step), and whole episodes
    (session opened and tools listed, wall and CPU).

    The Gauntlet side keeps one env and one agent across its episodes, as a run's worker does; each
    reset opens a new session. The bare side opens its session and builds its graph per episode.
    """
    env = StepClock(ToolTaskEnv([task(0, url)], max_steps=n_calls + 1))
    # The bare loop has no number check, and the scripted calls name ids no result showed: both run every call.
    agent = LLMAgent(model=script(0, n_calls), system_prompt=SYSTEM_PROMPT, max_steps=n_calls + 1,
                     check_numbers=False)
    times: dict[str, list[tuple[float, float, float]]] = {"gauntlet": [], "bare": []}
    try:
        for trial in range(trials + 1):
            start, cpu = time.perf_counter(), time.process_time()
            episode = rollout(env, agent, seed=0, record=scratch / f"overhead-{trial}.jsonl", keep_steps=True)
            measured = (env.stamps[-1] - env.stamps[0], time.perf_counter() - start, time.process_time() - cpu)
            calls = server_calls(episode)
            if len(calls) != n_calls or any(call.is_error for call in calls) or not answered(episode):
                raise RuntimeError(f"the Gauntlet agent's episode did not make its {n_calls} calls and answer")
            if trial:
                times["gauntlet"].append(measured)
            start, cpu = time.perf_counter(), time.process_time()
            messages, loop_s = asyncio.run(bare_episode(url, script(0, n_calls, answer_tool=False),
                                                        task(0, url).question))
            measured = (loop_s, time.perf_counter() - start, time.process_time() - cpu)
            results = [message for message in messages if isinstance(message, ToolMessage)]
            if len(results) != n_calls or any(message.status == "error" for message in results):
                raise RuntimeError(f"the bare loop's episode did not make its {n_calls} calls")
            if trial:
                times["bare"].append(measured)
    finally:
        env.close()
    report: dict[str, Any] = {"tool_calls_per_episode": n_calls, "trials": trials}
    for k, figure in enumerate(("loop", "episode", "episode_cpu")):
        for side, runs in times.items():
            report[f"{side}_{figure}_ms_per_call"] = statistics.median(run[k] for run in runs) / n_calls * 1e3
        report[f"{figure}_ratio"] = report[f"gauntlet_{figure}_ms_per_call"] / report[f"bare_{figure}_ms_per_call"]
    return report


# Figure 2: concurrent episodes on one server -----------------------------------------------------
def expected_results(url: str, episodes: int, n_calls: int) -> dict[tuple[int, int], Any]:
    """Every episode's calls made directly, one at a time, on one session: what each call must give."""
    client = BlockingMCPClient(ServerTarget(url=url))
    client.open()
    try:
        return {(episode, i): result_value(client.call_tool(name, args))
                for episode in range(episodes) for i, (name, args) in enumerate(tool_calls(episode, n_calls))}
    finally:
        client.close()


def concurrent_episodes(url: str, episodes: Sequence[int], n_calls: int) -> dict[str, Any]:
    """The agent episodes numbered ``episodes``, started together in threads; what they got and their step
    latencies (ms)."""
    barrier = threading.Barrier(len(episodes))
    outcomes: dict[int, Any] = {}

    def run(episode: int) -> None:
        env = StepClock(ToolTaskEnv([task(episode, url)], max_steps=n_calls + 1))
        agent = LLMAgent(model=script(episode, n_calls), system_prompt=SYSTEM_PROMPT, max_steps=n_calls + 1,
                         check_numbers=False)
        try:
            barrier.wait()
            record = rollout(env, agent, seed=0)
            outcomes[episode] = (record, np.diff(env.stamps) * 1e3)
        except BaseException as exc:  # reported by the main thread with the episode it belongs to
            outcomes[episode] = exc
        finally:
            env.close()

    threads = [threading.Thread(target=run, args=(episode,), name=f"episode-{episode}") for episode in episodes]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    failed = {episode: outcome for episode, outcome in outcomes.items() if isinstance(outcome, BaseException)}
    if failed:
        episode, exc = next(iter(failed.items()))
        raise RuntimeError(f"{len(failed)} of {len(episodes)} concurrent episodes failed; episode {episode}: "
                           f"{exc!r}")
    return {"outcomes": outcomes, "wall_s": wall}


def leaks(outcomes: dict[int, Any], expected: dict[tuple[int, int], Any], n_calls: int) -> tuple[int, int]:
    """(calls whose arguments or result are not the episode's own, episodes that did not answer their number)."""
    wrong = unanswered = 0
    for episode, (record, _) in outcomes.items():
        calls = server_calls(record)
        made = [(call.name, call.arguments) for call in calls]
        wrong += sum(a != b for a, b in zip(made, tool_calls(episode, n_calls), strict=False))
        wrong += abs(len(made) - n_calls)
        wrong += sum(call.result != expected[(episode, i)] for i, call in enumerate(calls[:n_calls]))
        unanswered += not answered(record)
    return wrong, unanswered


def latency_summary(outcomes: dict[int, Any]) -> dict[str, float]:
    steps = np.concatenate([step_ms for _, step_ms in outcomes.values()])
    calls = np.array([call.latency_ms for record, _ in outcomes.values() for call in server_calls(record)])
    return {"step_p50_ms": float(np.percentile(steps, 50)), "step_p99_ms": float(np.percentile(steps, 99)),
            "call_p50_ms": float(np.percentile(calls, 50)), "call_p99_ms": float(np.percentile(calls, 99)),
            "steps": int(steps.size)}


def concurrency(url: str, episodes: int, n_calls: int, trials: int) -> dict[str, Any]:
    """The same ``episodes`` episodes, ``trials`` times over: one at a time ("alone"), then all at once."""
    expected = expected_results(url, episodes, n_calls)
    concurrent_episodes(url, [0], n_calls)  # warm-up: imports, the first graph compiled
    report: dict[str, Any] = {"episodes": episodes, "tool_calls_per_episode": n_calls, "trials": trials}
    groups = {"alone": [[episode] for episode in range(episodes)], "concurrent": [list(range(episodes))]}
    for label, runs in groups.items():
        records: list[Any] = []
        wall = 0.0
        bad = unanswered = 0
        for _ in range(trials):
            for group in runs:
                run = concurrent_episodes(url, group, n_calls)
                wrong, missing = leaks(run["outcomes"], expected, n_calls)
                bad, unanswered, wall = bad + wrong, unanswered + missing, wall + run["wall_s"]
                records.extend(run["outcomes"].values())
        steps_done = sum(len(record.steps) for record, _ in records)
        report[label] = {**latency_summary(dict(enumerate(records))), "leaks": bad, "unanswered": unanswered,
                         "steps_per_s": steps_done / wall}
    alone, together = report["alone"], report["concurrent"]
    report.update({f"{key}_ratio": together[f"{key}_ms"] / alone[f"{key}_ms"]
                   for key in ("step_p50", "step_p99", "call_p50", "call_p99")})
    report["throughput_ratio"] = together["steps_per_s"] / alone["steps_per_s"]
    return report


# The suite ---------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = bench_parser("agents", __doc__)
    parser.add_argument("--concurrent", type=int, default=16, help="agent episodes at once on one server (16)")
    parser.add_argument("--server-kwargs", default=None, help="JSON options for `gauntlet serve chem`")
    parser.add_argument("--backends", action="store_true",
                        help="only the LLM backends section (minutes; default out bench/results/agents-backends.json)")
    args = parser.parse_args(argv)
    if args.concurrent < 1:
        parser.error("--concurrent takes a positive number of episodes")
    quick = args.quick
    report: dict[str, Any] = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                                          "gauntlet": gauntlet.__version__}}
    load_at_start = os.getloadavg()[0]
    if args.backends:
        report["backends"] = measure_backends(quick)
        report["machine"]["load_average_1min"] = {"start": load_at_start, "end": os.getloadavg()[0]}
        print_backends(report["backends"])
        # Its own file by default: the harness figures of a default run stay where they are.
        save_report(report, RESULTS / "agents-backends.json" if args.out == parser.get_default("out") else args.out)
        return report
    options = ["--server-kwargs", args.server_kwargs] if args.server_kwargs else []
    # Generous: the first serve of the default catalogue builds it.
    with tempfile.TemporaryDirectory() as tmp, spawn_http_server("chem", *options, startup_timeout_s=600) as served:
        report["overhead"] = overhead(served.url, trials=2 if quick else 15, n_calls=4 if quick else 20,
                                      scratch=Path(tmp))
        report["concurrency"] = concurrency(served.url, args.concurrent, n_calls=4 if quick else 10,
                                            trials=1 if quick else 3)
    # Ratios to a same-run baseline absorb most of the load; latencies do not, so record it.
    report["machine"]["load_average_1min"] = {"start": load_at_start, "end": os.getloadavg()[0]}
    _print_table(report)
    save_report(report, args.out)
    return report


def _print_table(report: dict[str, Any]) -> None:
    table = figures_table("gauntlet bench agents (scripted model, one chem server over HTTP)",
                          ("figure", "measured", "baseline", "ratio", "target"))
    over = report["overhead"]
    calls = over["tool_calls_per_episode"]
    table.add_row(f"per tool call, LLM agent via runner ({calls} calls/episode)",
                  f"{over['gauntlet_loop_ms_per_call']:.1f} ms",
                  f"bare LangGraph loop {over['bare_loop_ms_per_call']:.1f}",
                  f"{over['loop_ratio']:.2f}x", "<= 1.2x")
    table.add_row("  the same, with session open (wall; CPU)",
                  f"{over['gauntlet_episode_ms_per_call']:.1f}; {over['gauntlet_episode_cpu_ms_per_call']:.1f} ms",
                  f"{over['bare_episode_ms_per_call']:.1f}; {over['bare_episode_cpu_ms_per_call']:.1f}",
                  f"{over['episode_ratio']:.2f}x; {over['episode_cpu_ratio']:.2f}x", "(info)")
    conc = report["concurrency"]
    alone, together, n = conc["alone"], conc["concurrent"], conc["episodes"]
    for what, key in (("step latency", "step"), ("tool-call round trip", "call")):
        ratio = f"{conc[f'{key}_p50_ratio']:.2f}x; {conc[f'{key}_p99_ratio']:.2f}x"
        table.add_row(f"{what}, {n} episodes at once",
                      f"p50 {together[f'{key}_p50_ms']:.1f} ms, p99 {together[f'{key}_p99_ms']:.1f}",
                      f"1 episode: {alone[f'{key}_p50_ms']:.1f}, {alone[f'{key}_p99_ms']:.1f}", ratio, "(info)")
    table.add_row(f"throughput, {n} episodes at once", f"{together['steps_per_s']:.1f} steps/s",
                  f"1 episode: {alone['steps_per_s']:.1f}", f"{conc['throughput_ratio']:.2f}x", "(info)")
    table.add_row(f"leaked calls, unanswered episodes ({n} at once)", f"{together['leaks']}, {together['unanswered']}",
                  f"1 episode: {alone['leaks']}, {alone['unanswered']}", "", "0, 0")
    show(table)


if __name__ == "__main__":
    main()
