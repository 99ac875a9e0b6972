"""Core performance suite: runner overhead, branching cost, MCP bridge latency, run_many scaling.

Every figure is a ratio against a baseline measured in the same run (absolute times on a shared
machine drift; ratios hold). Prints a table and writes JSON (default ``bench/results/core.json``).

    gauntlet bench core [--quick] [--out PATH] [--only runner,branching,bridge,run_many]

``--only`` measures the named parts and keeps the other parts of the report already at ``--out``.

Figures and targets:
1. runner overhead: ``rollout`` vs a bare ``env.step`` loop on CartPole-v1, same agent and seeds,
   median over trials. Recording to disk <= 1.5x, recording off <= 1.1x. Measured on full-length
   episodes (a balancing controller, 500 steps) where per-step cost dominates, and on a random
   agent's short episodes (about 22 steps) where the per-episode cost of the record shows. Each
   ratio is given in wall time and in the process's CPU time (``cpu_ratio_*``), which other work
   on a shared machine disturbs less.
2. branching: snapshot + restore of InvertedPendulum-v5, in env steps (<= 3).
3. MCP bridge: ``step`` round trip of ``gauntlet serve env:CartPole-v1`` over stdio and over
   streamable HTTP vs a bare FastMCP echo tool on the same transport and log level; p50 ratio
   <= 1.5. Measured with Gauntlet's client and with the MCP SDK's stock client (see
   ``gauntlet.bridges.validation`` for why they differ).
4. run_many: episodes/s with the local backend on 2 workers vs 1 process (>= 1.6x).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import gauntlet
from gauntlet.agent import Agent
from gauntlet.batch import RunSpec, run_many
from gauntlet.branching import branchable
from gauntlet.bridges.mcp_compat import validate_once
from gauntlet.episode import AgentSpec, EpisodeWriter
from gauntlet.runner import rollout
from _reporting import bench_parser, figures_table, save_report, show

HERE = Path(__file__).resolve().parent


class BalancingAgent(Agent):
    """A linear state-feedback controller that keeps CartPole up for all 500 steps."""

    name = "balance"

    def act(self, observation: Any, info: dict[str, Any]) -> int:
        x, x_dot, theta, theta_dot = observation
        return int(theta + 0.5 * theta_dot + 0.05 * x + 0.1 * x_dot > 0)


def _episodes(env, agent, seeds) -> int:
    """The baseline: a bare step loop, with the same resets and agent calls rollout makes."""
    steps = 0
    for seed in seeds:
        observation, info = env.reset(seed=seed)
        agent.reset(seed=seed, observation_space=env.observation_space, action_space=env.action_space)
        while True:
            observation, _, terminated, truncated, info = env.step(agent.act(observation, info))
            steps += 1
            if terminated or truncated:
                break
    return steps


def runner_overhead(trials: int, episodes_long: int, episodes_short: int, scratch: Path) -> dict[str, Any]:
    env = gym.make("CartPole-v1")
    results: dict[str, Any] = {}
    for label, agent, n in (("full-length episodes (balancing agent, 500 steps)", BalancingAgent(), episodes_long),
                            ("short episodes (random agent)", gauntlet.make_agent("random"), episodes_short)):
        seeds = range(n)
        ratios: dict[str, list[float]] = {}
        step_us = []
        for trial in range(trials):
            start, cpu_start = time.perf_counter(), time.process_time()
            steps = _episodes(env, agent, seeds)
            bare, bare_cpu = time.perf_counter() - start, time.process_time() - cpu_start
            step_us.append(bare / steps * 1e6)
            writer = EpisodeWriter(scratch / f"overhead-{trial}.jsonl")
            record: str | EpisodeWriter
            for mode, record in (("disk", writer), ("off", "none"), ("memory", "memory")):
                start, cpu_start = time.perf_counter(), time.process_time()
                for seed in seeds:
                    rollout(env, agent, seed=seed, record=record)
                ratios.setdefault(f"ratio_{mode}", []).append((time.perf_counter() - start) / bare)
                ratios.setdefault(f"cpu_ratio_{mode}", []).append((time.process_time() - cpu_start) / bare_cpu)
            writer.close()
        results[label] = {"bare_us_per_step": statistics.median(step_us),
                          **{name: statistics.median(values) for name, values in ratios.items()}}
    return results


def branching_cost(repeats: int, n: int) -> dict[str, Any]:
    env = branchable(gym.make("InvertedPendulum-v5"))
    env.reset(seed=0)
    action = np.zeros(1, dtype=np.float32)
    ratios = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(n):
            env.step(action)
        step = (time.perf_counter() - start) / n
        snapshot = env.snapshot()
        start = time.perf_counter()
        for _ in range(n):
            env.restore(env.snapshot())
        branch = (time.perf_counter() - start) / n
        env.restore(snapshot)
        ratios.append(branch / step)
    return {"step_us": step * 1e6, "snapshot_restore_us": branch * 1e6, "ratio_steps": statistics.median(ratios)}


# MCP bridge --------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _server_command(target: str, transport: str, port: int | None) -> list[str]:
    command = [sys.executable, str(HERE / "_servers.py"), target, "--transport", transport]
    return command + (["--port", str(port)] if port else [])


async def _time_calls(session, tool: str, arguments_for, n: int, warmup: int) -> list[float]:
    latencies = []
    for i in range(n + warmup):
        start = time.perf_counter()
        result = await session.call_tool(tool, arguments_for(i))
        elapsed = (time.perf_counter() - start) * 1e3
        if result.isError:
            raise RuntimeError(f"{tool} failed during the benchmark: {result.content}")
        if i >= warmup:
            latencies.append(elapsed)
    return latencies


async def _measure(target: str, transport: str, n: int, client: str) -> list[float]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamablehttp_client

    async def run(session: ClientSession) -> list[float]:
        await session.initialize()
        if client == "gauntlet":
            validate_once(session)
        if target == "echo":
            return await _time_calls(session, "echo", lambda i: {"value": i % 2}, n, warmup=20)
        await session.call_tool("reset", {"seed": 0})
        latencies, episodes = [], 0
        for i in range(n + 20):
            start = time.perf_counter()
            result = await session.call_tool("step", {"action": i % 2})
            elapsed = (time.perf_counter() - start) * 1e3
            if result.isError:
                raise RuntimeError(f"step failed during the benchmark: {result.content}")
            if i >= 20:
                latencies.append(elapsed)
            payload = result.structuredContent or {}
            if payload.get("terminated") or payload.get("truncated"):
                episodes += 1  # resets are not timed: the figure is the step round trip
                await session.call_tool("reset", {"seed": episodes})
        return latencies

    if transport == "stdio":
        params = StdioServerParameters(command=sys.executable, args=_server_command(target, "stdio", None)[1:])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            return await run(session)
    port = _free_port()
    process = subprocess.Popen(_server_command(target, "http", port), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            await asyncio.sleep(0.1)
        async with streamablehttp_client(f"http://127.0.0.1:{port}/mcp") as (read, write, _), \
                ClientSession(read, write) as session:
            return await run(session)
    finally:
        process.terminate()
        process.wait(timeout=10)


def bridge_latency(n: int) -> dict[str, Any]:
    """Both clients: the MCP SDK's own (which re-checks each output schema against the meta-schema on
    every call) and Gauntlet's (the same check, validator compiled once)."""
    results: dict[str, Any] = {}
    for transport, client in itertools.product(("stdio", "http"), ("gauntlet", "sdk")):
        echo = asyncio.run(_measure("echo", transport, n, client))
        step = asyncio.run(_measure("env:CartPole-v1", transport, n, client))
        results[f"{transport}, {client} client"] = {
            "echo_p50_ms": float(np.percentile(echo, 50)), "echo_p99_ms": float(np.percentile(echo, 99)),
            "step_p50_ms": float(np.percentile(step, 50)), "step_p99_ms": float(np.percentile(step, 99)),
            "p50_ratio": float(np.percentile(step, 50) / np.percentile(echo, 50)),
        }
    return results


def run_many_scaling(n_episodes: int, scratch: Path) -> dict[str, Any]:
    spec = RunSpec(env_id="InvertedPendulum-v5", agent=AgentSpec(name="random"), max_steps=1000)
    # Warm up first, so neither measurement pays the one-time imports (MuJoCo) and env construction.
    run_many(spec, 20, scratch / "run-many-warmup", workers=1, progress=False)
    rates = {}
    for workers in (1, 2):
        out = scratch / f"run-many-{workers}"
        shutil.rmtree(out, ignore_errors=True)
        start = time.perf_counter()
        run_many(spec, n_episodes, out, workers=workers, progress=False)
        rates[workers] = n_episodes / (time.perf_counter() - start)
    return {"episodes_per_s_1": rates[1], "episodes_per_s_2": rates[2], "speedup": rates[2] / rates[1],
            "cpus": os.cpu_count()}


PARTS = {"runner": "runner_overhead", "branching": "branching", "bridge": "mcp_bridge", "run_many": "run_many"}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = bench_parser("core", __doc__)
    parser.add_argument("--only", default=",".join(PARTS),
                        help=f"comma-separated parts to measure, of {', '.join(PARTS)} (default: all)")
    args = parser.parse_args(argv)
    only = [part.strip() for part in args.only.split(",") if part.strip()]
    unknown = [part for part in only if part not in PARTS]
    if unknown or not only:
        parser.error(f"--only takes parts of {', '.join(PARTS)}; got {args.only!r}")
    quick = args.quick
    measure = {
        "runner": lambda scratch: runner_overhead(trials=3 if quick else 7, episodes_long=2 if quick else 20,
                                                  episodes_short=50 if quick else 500, scratch=scratch),
        "branching": lambda scratch: branching_cost(repeats=3 if quick else 7, n=200 if quick else 2000),
        "bridge": lambda scratch: bridge_latency(n=50 if quick else 500),
        "run_many": lambda scratch: run_many_scaling(n_episodes=40 if quick else 2000, scratch=scratch),
    }
    out = Path(args.out)
    report: dict[str, Any] = json.loads(out.read_text()) if len(only) < len(PARTS) and out.exists() else {}
    report["machine"] = {"python": platform.python_version(), "cpus": os.cpu_count(), "gauntlet": gauntlet.__version__}
    with tempfile.TemporaryDirectory() as tmp:
        for part in only:
            report[PARTS[part]] = measure[part](Path(tmp))
    _print_table(report)
    save_report(report, out)
    return report


def _print_table(report: dict[str, Any]) -> None:
    table = figures_table("gauntlet bench core (ratios vs a baseline measured in the same run)",
                          ("figure", "measured", "baseline", "ratio (wall; CPU)", "target"))
    for label, row in report.get("runner_overhead", {}).items():
        base = f"bare loop {row['bare_us_per_step']:.1f} us/step"
        short = "500-step episodes" if label.startswith("full") else "random agent, ~22-step episodes"
        for mode, name, target in (("disk", "rollout to disk", "<= 1.5x"), ("off", "rollout, recording off", "<= 1.1x"),
                                   ("memory", "rollout, steps in memory", "(info)")):
            cpu = row.get(f"cpu_ratio_{mode}")
            ratio = f"{row[f'ratio_{mode}']:.2f}x" + ("" if cpu is None else f"; {cpu:.2f}x")
            table.add_row(f"{name} ({short})", "", base, ratio, target)
    if "branching" in report:
        branch = report["branching"]
        table.add_row("snapshot+restore InvertedPendulum-v5", f"{branch['snapshot_restore_us']:.1f} us",
                      f"env step {branch['step_us']:.1f} us", f"{branch['ratio_steps']:.2f} steps", "<= 3 steps")
    for transport, row in report.get("mcp_bridge", {}).items():
        table.add_row(f"MCP step round trip ({transport})",
                      f"p50 {row['step_p50_ms']:.2f} ms, p99 {row['step_p99_ms']:.2f} ms",
                      f"echo p50 {row['echo_p50_ms']:.2f} ms, p99 {row['echo_p99_ms']:.2f} ms",
                      f"{row['p50_ratio']:.2f}x", "p50 <= 1.5x" if "gauntlet" in transport else "(info)")
    if "run_many" in report:
        many = report["run_many"]
        table.add_row("run_many local, 2 workers", f"{many['episodes_per_s_2']:.0f} episodes/s",
                      f"1 process {many['episodes_per_s_1']:.0f} episodes/s", f"{many['speedup']:.2f}x", ">= 1.6x")
    show(table)


if __name__ == "__main__":
    main()
