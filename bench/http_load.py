"""HTTP load suite: 32 client sessions at once on one server, against a bare FastMCP echo server.

Every server runs in its own process, started as ``gauntlet serve TARGET --transport http``; the
baseline is a FastMCP server with one ``echo`` tool (``bench/_servers.py echo``, served by the same
``gauntlet.bridges.serving.serve`` over streamable HTTP, at the same log level). Prints a table and
writes JSON (default ``bench/results/http_load.json``).

    gauntlet bench http_load [--quick] [--out PATH] [--sessions 32] [--calls N] [--trials T]
                             [--server-kwargs '{"chem": {"db_path": ...}, "disaster": {"data_root": ...}}']

``--server-kwargs`` gives a server's ``--server-kwargs`` by name (default: the full built data,
built on first use).

What is measured, per server: ``--sessions`` MCP client sessions (the SDK's ``ClientSession`` over
streamable HTTP, each on its own connection, all on one asyncio loop in this process, with the
tool-result check compiled once as Gauntlet's client does) each make ``--calls`` calls of one
cheap, representative tool, all sessions at once:

* echo: ``echo`` (the transport and the MCP machinery alone);
* chem: ``get_chemical`` of a catalogue id the session picks (one SQLite read);
* disaster: ``ras_info`` of a scene's post-event image (path checks, one GeoTIFF header read);
* env bridge: ``step`` of ``env:CartPole-v1`` (each session its own env; resets are not timed).

Throughput is calls per second from the moment every session is connected and warmed up to the
last answer; latency is each call's round trip (p50, p99); both are compared with echo measured in
the same run (throughput ratio = server / echo, p50 ratio = server / echo). Each trial measures
every server once, in turn, each trial starting with the next server; the table gives the median
throughput over trials and percentiles over all calls. Answers of the stateless tools are checked
against the same call made alone beforehand, so an answer meant for another session is counted
(``wrong`` must be 0). Client and servers share this machine's cores: the figures are for a whole
single-machine setup, and the one client process driving all sessions is part of what is measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

import gauntlet
from gauntlet.bridges.mcp_compat import validate_once
from gauntlet.bridges.server_process import spawn_http_server
from _reporting import bench_parser, figures_table, save_report, show

HERE = Path(__file__).resolve().parent
ECHO = "echo"
ENV_TARGET = "env:CartPole-v1"
CATALOGUE_IDS = 40  # chem sessions read catalogue ids 1..40 (the smallest test catalogue has them)
WARMUP_CALLS = 3
STARTUP_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Workload:
    """One server under load: the tool every session calls, its arguments for session ``s``'s call ``i``,
    and whether its answer depends only on those arguments (then it is checked)."""

    tool: str
    arguments: Callable[[int, int], dict[str, Any]]
    stateless: bool


def workloads(scene_image: str) -> dict[str, Workload]:
    return {
        ECHO: Workload("echo", lambda s, i: {"value": s * 1_000_000 + i}, stateless=True),
        "chem": Workload("get_chemical", lambda s, i: {"chemical_id": 1 + (7 * s + i) % CATALOGUE_IDS},
                         stateless=True),
        "disaster": Workload("ras_info", lambda s, i: {"image": scene_image}, stateless=True),
        ENV_TARGET: Workload("step", lambda s, i: {"action": (s + i) % 2}, stateless=False),
    }


# Servers -------------------------------------------------------------------------------------------
@contextlib.contextmanager
def spawn_echo() -> Iterator[str]:
    """The echo baseline over streamable HTTP in a child process; yields its URL, stops it after."""
    command = [sys.executable, str(HERE / "_servers.py"), ECHO, "--transport", "http", "--port", "0"]
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    announced: list[str] = []
    found = threading.Event()

    def read_stderr() -> None:
        assert process.stderr is not None  # asked for with stderr=PIPE
        # Drained for the child's whole life, so it never blocks on a full pipe.
        for line in process.stderr:
            match = re.search(r"serving \S+ at (http://\S+)", line)
            if match and not found.is_set():
                announced.append(match.group(1))
                found.set()
        found.set()

    threading.Thread(target=read_stderr, name="echo-server-stderr", daemon=True).start()
    try:
        if not found.wait(STARTUP_TIMEOUT_S) or not announced:
            raise RuntimeError(f"{' '.join(command)} did not start")
        yield announced[0]
    finally:
        process.terminate()
        process.wait(30)


def scene_image(data_root: Path) -> str:
    """A post-event image of the first scene in ``data_root``, as the disaster tools name it."""
    images = sorted(data_root.glob("*/post_optical.tif"))
    if not images:
        raise RuntimeError(f"no scene with a post_optical.tif under {data_root}; build the scenes first")
    return f"data/{images[0].parent.name}/{images[0].name}"


def disaster_data_root(options: dict[str, Any]) -> Path:
    if "data_root" in options:
        return Path(options["data_root"])
    from gauntlet.mcp_servers.disaster.server import default_data_root

    return default_data_root()


# Load ----------------------------------------------------------------------------------------------
async def _session_load(url: str, workload: Workload, session_index: int, calls: int, expected: dict[str, Any],
                        ready: asyncio.Barrier, go: asyncio.Event) -> tuple[list[float], int]:
    """One session: connect, warm up, wait for every other session, then make ``calls`` timed calls."""
    async with streamable_http_client(url) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        validate_once(session)
        if workload.tool == "step":
            await session.call_tool("reset", {"seed": session_index})
        for i in range(WARMUP_CALLS):
            await _call(session, workload, session_index, -1 - i)
        await ready.wait()
        await go.wait()
        latencies, wrong = [], 0
        for i in range(calls):
            start = time.perf_counter()
            payload = await _call(session, workload, session_index, i)
            latencies.append((time.perf_counter() - start) * 1e3)
            if workload.stateless and payload != expected[_key(workload.arguments(session_index, i))]:
                wrong += 1
            if workload.tool == "step" and (payload.get("terminated") or payload.get("truncated")):
                await session.call_tool("reset", {"seed": session_index * 1000 + i})
        return latencies, wrong


async def _call(session: ClientSession, workload: Workload, session_index: int, i: int) -> dict[str, Any]:
    result = await session.call_tool(workload.tool, workload.arguments(session_index, i))
    if result.isError:
        raise RuntimeError(f"{workload.tool} failed under load: {result.content}")
    return result.structuredContent or {}


def _key(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True)


async def _expected_answers(url: str, workload: Workload, sessions: int, calls: int) -> dict[str, Any]:
    """The answer to every distinct call of a stateless workload, each made alone in one session."""
    if not workload.stateless:
        return {}
    wanted = {_key(workload.arguments(s, i)): workload.arguments(s, i) for s in range(sessions) for i in range(calls)}
    async with streamable_http_client(url) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        validate_once(session)
        return {key: (await session.call_tool(workload.tool, arguments)).structuredContent
                for key, arguments in wanted.items()}


async def _load(url: str, workload: Workload, sessions: int, calls: int, expected: dict[str, Any]) -> dict[str, Any]:
    ready, go = asyncio.Barrier(sessions + 1), asyncio.Event()
    tasks = [asyncio.create_task(_session_load(url, workload, s, calls, expected, ready, go)) for s in range(sessions)]
    barrier = asyncio.create_task(ready.wait())
    # A session that fails while connecting would leave the barrier waiting: wait for either.
    await asyncio.wait([barrier, *tasks], return_when=asyncio.FIRST_COMPLETED)
    if not barrier.done():
        barrier.cancel()
        await asyncio.gather(*tasks)  # raises the failure
    start = time.perf_counter()
    go.set()
    results = await asyncio.gather(*tasks)
    wall_s = time.perf_counter() - start
    latencies = [latency for session_latencies, _ in results for latency in session_latencies]
    return {"latencies_ms": latencies, "wall_s": wall_s, "calls_per_s": len(latencies) / wall_s,
            "wrong": sum(wrong for _, wrong in results)}


def measure(urls: dict[str, str], loads: dict[str, Workload], sessions: int, calls: int,
            trials: int) -> dict[str, Any]:
    """Every server's figures, the servers measured in turn within each trial."""
    expected = {name: asyncio.run(_expected_answers(url, loads[name], sessions, calls)) for name, url in urls.items()}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in urls}
    names = list(urls)
    for trial in range(trials):
        # Each trial starts with another server, so none always runs first (or right after another).
        for name in names[trial % len(names):] + names[:trial % len(names)]:
            runs[name].append(asyncio.run(_load(urls[name], loads[name], sessions, calls, expected[name])))
    figures: dict[str, Any] = {}
    for name, name_runs in runs.items():
        latencies = np.concatenate([run["latencies_ms"] for run in name_runs])
        figures[name] = {"tool": loads[name].tool, "calls": int(latencies.size),
                         "calls_per_s": statistics.median(run["calls_per_s"] for run in name_runs),
                         "calls_per_s_by_trial": [run["calls_per_s"] for run in name_runs],
                         "p50_ms": float(np.percentile(latencies, 50)), "p99_ms": float(np.percentile(latencies, 99)),
                         "wrong": sum(run["wrong"] for run in name_runs)}
    echo = figures[ECHO]
    for row in figures.values():
        row["throughput_ratio"] = row["calls_per_s"] / echo["calls_per_s"]
        row["p50_ratio"] = row["p50_ms"] / echo["p50_ms"]
    return figures


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = bench_parser("http_load", __doc__)
    parser.add_argument("--sessions", type=int, default=32, help="client sessions at once (default 32)")
    parser.add_argument("--calls", type=int, default=None, help="timed calls per session (default 100; quick 5)")
    parser.add_argument("--trials", type=int, default=None, help="measurements of each server (default 3; quick 1)")
    parser.add_argument("--server-kwargs", default="{}",
                        help='options of each server by name, e.g. \'{"chem": {"db_path": "catalogue.sqlite"}}\'')
    args = parser.parse_args(argv)
    server_options: dict[str, dict[str, Any]] = json.loads(args.server_kwargs)
    unknown = sorted(set(server_options) - {"chem", "disaster"})
    if unknown:
        parser.error(f"--server-kwargs names servers chem and disaster; got {', '.join(unknown)}")
    calls = args.calls if args.calls is not None else (5 if args.quick else 100)
    trials = args.trials if args.trials is not None else (1 if args.quick else 3)
    if args.sessions < 1 or calls < 1 or trials < 1:
        parser.error("--sessions, --calls and --trials must be at least 1")

    loads = workloads(scene_image(disaster_data_root(server_options.get("disaster", {}))))
    with contextlib.ExitStack() as stack:
        urls = {ECHO: stack.enter_context(spawn_echo())}
        for name in ("chem", "disaster"):
            options = ["--server-kwargs", json.dumps(server_options[name])] if name in server_options else []
            urls[name] = stack.enter_context(spawn_http_server(name, *options, startup_timeout_s=STARTUP_TIMEOUT_S)).url
        urls[ENV_TARGET] = stack.enter_context(spawn_http_server(ENV_TARGET)).url
        figures = measure(urls, loads, args.sessions, calls, trials)

    machine = {"python": platform.python_version(), "cpus": os.cpu_count(), "gauntlet": gauntlet.__version__}
    report = {"machine": machine, "sessions": args.sessions, "calls_per_session": calls, "trials": trials,
              "servers": figures}
    _print_table(report)
    save_report(report, args.out)
    wrong = {name: row["wrong"] for name, row in figures.items() if row["wrong"]}
    if wrong:
        raise SystemExit(f"answers meant for other calls came back under load: {wrong}")
    return report


def _print_table(report: dict[str, Any]) -> None:
    table = figures_table(f"gauntlet bench http_load ({report['sessions']} sessions at once, "
                          f"{report['calls_per_session']} calls each, {report['trials']} trial(s); vs echo, same run)",
                          ("server", "tool", "calls/s", "p50 ms", "p99 ms", "calls/s vs echo", "p50 vs echo"))
    for name, row in report["servers"].items():
        table.add_row(name, row["tool"], f"{row['calls_per_s']:.0f}", f"{row['p50_ms']:.1f}", f"{row['p99_ms']:.1f}",
                      f"{row['throughput_ratio']:.2f}x", f"{row['p50_ratio']:.2f}x")
    show(table)


if __name__ == "__main__":
    main()
