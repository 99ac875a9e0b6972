"""Chemical pricing performance suite: grounding (precision, recall, latency), quote lookup direct and over
MCP, cold start, oracle throughput.

Every figure is set against a baseline measured in the same run. Prints a table and writes JSON
(default ``bench/results/chem.json``). Uses the full catalogue and reaction set (built on first use).

    gauntlet bench chem [--quick] [--out PATH]

Figures and targets:
1. grounding accuracy on the labelled names (``data/chem/grounding_labels.json``: real names,
   abbreviations, salts, CAS numbers, SMILES, typos, OCR-like confusions, and names of compounds the
   catalogue does not sell): precision of the hits (target >= 0.99), recall on the names of compounds
   it sells, names not in the catalogue answered "not found", each match kind's precision beside the
   confidence the grounder states; vs a bare exact-name lookup in the same index. Latency of names
   found and not found (warm, OPSIN on when Java is installed; target: a name not found answers in
   <= 50 ms p50), vs OPSIN started as a fresh Java process per name (``py2opsin``, what an unknown
   name cost before the parser was kept warm).
2. grounding throughput: warm ``Grounder.ground`` on every catalogue name and abbreviation (names/s,
   p50, p99) vs a bare dict lookup of the same normalised keys; target p50 <= 2 ms.
3. quote lookup: ``select_pack`` (the pack rule answered by the catalogue's index, the server's path)
   called directly, and through a real MCP client session over stdio, vs a bare FastMCP echo tool
   over stdio (the two sessions' calls alternate in blocks of 50, so both see the same load); target
   MCP p50 <= 1.5x echo. Beside it, the CPU time per call (server and client, in-memory sessions) of
   select_pack and echo: the work a call costs, which the machine's load hardly moves.
4. cold start: spawn the stdio server and get the first ``search_chemical`` result, vs the echo
   server's first echo (runs alternate); target <= 3 s.
5. oracle evaluation: every clean reaction priced by the oracle through one MCP stdio session
   (reactions/s, the whole suite's wall time) vs the gold rule computed directly; target <= 2 minutes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import gauntlet
from gauntlet.bridges.mcp_compat import validate_once
from _reporting import bench_parser, figures_table, save_report, show

HERE = Path(__file__).resolve().parent


def _percentiles(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    return {"p50_ms": statistics.median(ordered), "p99_ms": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]}


def grounding(catalogue, limit: int | None) -> dict[str, Any]:
    from gauntlet.mcp_servers.chem.grounding import Grounder
    from gauntlet.mcp_servers.chem.names import name_key

    grounder = Grounder(catalogue, use_opsin=False)
    queries = [names[0][1] for key, names in catalogue.name_index.items()
               if any(kind in ("name", "abbreviation") for _, _, kind in names)][:limit]
    for query in queries[:200]:  # warm: indexes loaded, records cached
        grounder.ground(query)
    samples = []
    start_all = time.perf_counter()
    for query in queries:
        start = time.perf_counter()
        grounder.ground(query)
        samples.append((time.perf_counter() - start) * 1e3)
    total_s = time.perf_counter() - start_all
    index = catalogue.name_index
    start = time.perf_counter()
    for query in queries:
        index.get(name_key(query))
    dict_s = time.perf_counter() - start
    return {"n_queries": len(queries), "names_per_s": len(queries) / total_s, **_percentiles(samples),
            "dict_lookup_us": dict_s / len(queries) * 1e6, "ratio_to_dict": total_s / dict_s}


def grounding_accuracy(catalogue, quick: bool) -> dict[str, Any]:
    """Precision, recall and latency on the labelled names, against an exact lookup and per-name OPSIN."""
    from gauntlet.mcp_servers.chem import opsin
    from gauntlet.mcp_servers.chem.grounding import Grounder
    from gauntlet.mcp_servers.chem.labelled_names import (catalogue_ids, evaluate, exact_lookup_outcomes,
                                                          load_labels, percentiles, summarise)

    labels = load_labels()
    grounder = Grounder(catalogue)
    evaluate(grounder, labels)  # warm: indexes, records and the parser process
    result = {"opsin": grounder.use_opsin, "grounder": summarise(evaluate(grounder, labels)),
              "exact_lookup": summarise(exact_lookup_outcomes(catalogue, labels))}
    # Labels whose membership the file states for the default catalogue, but this catalogue disagrees with.
    result["label_mismatches"] = [label.name for label in labels
                                  if bool(catalogue_ids(catalogue, label)) != label.in_catalogue]
    unknown = [label.name for label in labels if not label.in_catalogue][:2 if quick else 5]
    if opsin.available():
        from py2opsin import py2opsin

        scratch = Path(tempfile.gettempdir()) / f"bench-opsin-{os.getpid()}.txt"
        samples = []
        for name in unknown:
            start = time.perf_counter()
            with warnings.catch_warnings():  # py2opsin warns about every name OPSIN cannot parse
                warnings.simplefilter("ignore")
                py2opsin(name, tmp_fpath=str(scratch))
            samples.append((time.perf_counter() - start) * 1e3)
        result["opsin_per_call_ms"] = percentiles(samples)
    return result


def _server_command(database: Path, reactions: Path) -> list[str]:
    import json

    from gauntlet.bridges.server_process import serve_command

    return serve_command("chem", "--server-kwargs", json.dumps({"db_path": str(database),
                                                                 "reactions_dir": str(reactions)}))


def _echo_command() -> list[str]:
    return [sys.executable, str(HERE / "_servers.py"), "echo"]


async def _open_session(stack: contextlib.AsyncExitStack, command: list[str]):
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=command[0], args=command[1:])
    read, write = await stack.enter_async_context(stdio_client(params))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return validate_once(session)


async def _session_run(command: list[str], work):
    async with contextlib.AsyncExitStack() as stack:
        return await work(await _open_session(stack, command))


async def _timed_call(session, tool: str, arguments: dict) -> float:
    start = time.perf_counter()
    result = await session.call_tool(tool, arguments)
    latency_ms = (time.perf_counter() - start) * 1e3
    if result.isError:
        raise RuntimeError(f"{tool} failed during the benchmark: {result.content}")
    return latency_ms


async def _interleaved_calls(commands: list[list[str]], calls: list[list[tuple[str, dict]]],
                             warmup: int = 20, block: int = 50) -> list[list[float]]:
    """Latency (ms) of each session's calls, ``block`` calls of each session in turn. On a shared machine
    the load's drift then falls on every series alike; whole blocks (not single calls) keep each server
    as warm as in steady use, so only a block's first call pays for waking the other process."""
    async with contextlib.AsyncExitStack() as stack:
        sessions = [await _open_session(stack, command) for command in commands]
        for session, session_calls in zip(sessions, calls):
            for tool, arguments in session_calls[:warmup]:
                await session.call_tool(tool, arguments)
        samples: list[list[float]] = [[] for _ in sessions]
        for start in range(0, max(len(session_calls) for session_calls in calls), block):
            for session, series, session_calls in zip(sessions, samples, calls):
                for tool, arguments in session_calls[start:start + block]:
                    series.append(await _timed_call(session, tool, arguments))
        return samples


def quote_lookup(catalogue, database: Path, reactions: Path, n: int) -> dict[str, Any]:
    from gauntlet.mcp_servers.chem.procurement import select_pack_in_store

    n_chemicals = catalogue.snapshot["n_chemicals"]
    requests = [{"chemical_id": 1 + (i * 37) % n_chemicals, "required_amount": 0.5 + (i % 7) * 0.25,
                 "unit": "mmol"} for i in range(n)]
    direct = []
    for request in requests:
        start = time.perf_counter()
        record = catalogue.chemical(request["chemical_id"])
        select_pack_in_store(catalogue, request["chemical_id"],
                             request["required_amount"] * record.molar_mass_g_mol / 1000)
        direct.append((time.perf_counter() - start) * 1e3)
    mcp, echo = asyncio.run(_interleaved_calls(
        [_server_command(database, reactions), _echo_command()],
        [[("select_pack", request) for request in requests], [("echo", {"value": i % 2}) for i in range(n)]]))
    result = {"direct": _percentiles(direct), "mcp_stdio": _percentiles(mcp), "echo_stdio": _percentiles(echo)}
    result["mcp_over_echo_p50"] = result["mcp_stdio"]["p50_ms"] / result["echo_stdio"]["p50_ms"]
    result["mcp_over_direct_p50"] = result["mcp_stdio"]["p50_ms"] / result["direct"]["p50_ms"]
    cpu, echo_cpu = _in_memory_cpu_per_call(database, reactions, requests)
    result["cpu_per_call_ms"] = {"select_pack": statistics.median(cpu), "echo": statistics.median(echo_cpu)}
    result["cpu_over_echo"] = statistics.median(cpu) / statistics.median(echo_cpu)
    return result


def _in_memory_cpu_per_call(database: Path, reactions: Path, requests: list[dict], block: int = 50
                            ) -> tuple[list[float], list[float]]:
    """CPU time (ms) per ``select_pack`` and per echo call, server and client together, through in-memory
    MCP client sessions in this process, one figure per block of ``block`` calls, the two alternating.
    CPU time, unlike latency, hardly moves with the machine's load: it is the work a call costs."""
    import functools

    from _servers import echo_server

    from gauntlet.bridges.mcp_client import BlockingMCPClient, ServerTarget
    from gauntlet.mcp_servers.chem.server import build_server

    clients = [BlockingMCPClient(ServerTarget(factory=functools.partial(build_server, database, reactions))),
               BlockingMCPClient(ServerTarget(factory=echo_server))]
    calls = [[("select_pack", request) for request in requests],
             [("echo", {"value": i % 2}) for i in range(len(requests))]]
    samples: list[list[float]] = [[], []]
    for client in clients:
        client.open()
    try:
        for client, series in zip(clients, calls):
            for tool, arguments in series[:20]:  # warm
                client.call_tool(tool, arguments)
        for start in range(0, len(requests), block):
            for client, series, out in zip(clients, calls, samples):
                began = time.process_time()
                for tool, arguments in series[start:start + block]:
                    if client.call_tool(tool, arguments).isError:
                        raise RuntimeError(f"{tool} failed during the benchmark")
                out.append((time.process_time() - began) * 1e3 / len(series[start:start + block]))
    finally:
        for client in clients:
            client.close()
    return samples[0], samples[1]


def cold_start(database: Path, reactions: Path, repeats: int) -> dict[str, Any]:
    async def first_search(session):
        result = await session.call_tool("search_chemical", {"query": "HATU"})
        assert not result.isError

    async def first_echo(session):
        await session.call_tool("echo", {"value": 1})

    def timed(command, work) -> float:
        start = time.perf_counter()
        asyncio.run(_session_run(command, work))
        return time.perf_counter() - start

    server, echo = [], []
    for _ in range(repeats):  # alternated, so both see the same load
        server.append(timed(_server_command(database, reactions), first_search))
        echo.append(timed(_echo_command(), first_echo))
    return {"server_s": statistics.median(server), "echo_s": statistics.median(echo),
            "ratio": statistics.median(server) / statistics.median(echo)}


def oracle_throughput(database: Path, reactions: Path, limit: int | None) -> dict[str, Any]:
    from gauntlet.mcp_servers.chem.gold import price_reaction
    from gauntlet.mcp_servers.chem.reaction_data import ReactionSet
    from gauntlet.mcp_servers.chem.solver import oracle
    from gauntlet.mcp_servers.chem.store import CatalogueStore

    reaction_set = ReactionSet(reactions)
    ids = reaction_set.ids()[:limit]
    records = reaction_set.records

    async def price_all(session):
        correct = 0
        for reaction_id in ids:
            solver = oracle(reaction_id, "clean")
            try:
                name, arguments = next(solver)
                while True:
                    result = await session.call_tool(name, arguments)
                    name, arguments = solver.send((bool(result.isError), result.structuredContent))
            except StopIteration as stop:
                gold = records[reaction_id].gold["clean"].cost_per_g_usd
                correct += stop.value is not None and abs(stop.value - gold) <= 0.25 * gold
        return correct

    start = time.perf_counter()
    correct = asyncio.run(_session_run(_server_command(database, reactions), price_all))
    mcp_s = time.perf_counter() - start
    store = CatalogueStore(database)
    start = time.perf_counter()
    for reaction_id in ids:
        price_reaction(records[reaction_id].reaction, store)
    direct_s = time.perf_counter() - start
    return {"n_reactions": len(ids), "cta@25": correct / len(ids), "mcp_s": mcp_s,
            "reactions_per_s": len(ids) / mcp_s, "direct_reactions_per_s": len(ids) / direct_s,
            "ratio_to_direct": mcp_s / direct_s}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from gauntlet.mcp_servers.chem.build import catalogue_path
    from gauntlet.mcp_servers.chem.reaction_data import reactions_dir
    from gauntlet.mcp_servers.chem.store import CatalogueStore

    parser = bench_parser("chem", __doc__)
    args = parser.parse_args(argv)
    quick = args.quick
    database, reactions = catalogue_path(), reactions_dir()
    catalogue = CatalogueStore(database)
    load_at_start = os.getloadavg()[0]
    report = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "gauntlet": gauntlet.__version__},
        "catalogue": {key: catalogue.snapshot[key] for key in ("snapshot_date", "n_chemicals", "n_quotes",
                                                               "content_sha256")},
        "grounding_accuracy": grounding_accuracy(catalogue, quick),
        "grounding": grounding(catalogue, 500 if quick else None),
        "quote_lookup": quote_lookup(catalogue, database, reactions, 100 if quick else 1000),
        "cold_start": cold_start(database, reactions, 1 if quick else 3),
        "oracle": oracle_throughput(database, reactions, 100 if quick else None),
    }
    # Ratios to a same-run baseline absorb most of the load; the absolute times do not, so record it.
    report["machine"]["load_average_1min"] = {"start": load_at_start, "end": os.getloadavg()[0]}
    _print_table(report)
    save_report(report, args.out)
    return report


def _print_table(report: dict[str, Any]) -> None:
    table = figures_table("gauntlet bench chem (ratios vs a baseline measured in the same run)",
                          ("figure", "measured", "baseline", "ratio", "target"))
    a = report["grounding_accuracy"]
    ours, exact = a["grounder"], a["exact_lookup"]
    table.add_row(f"grounding precision of hits ({ours['n']} labelled names, {ours['n_not_in_catalogue']} not in "
                  "the catalogue)", f"{ours['precision']:.3f} ({ours['correct_hits']}/{ours['hits']})",
                  f"exact lookup {exact['precision']:.3f} ({exact['correct_hits']}/{exact['hits']})", "",
                  ">= 0.99")
    table.add_row("grounding recall on names the catalogue sells", f"{ours['recall_in_catalogue']:.3f}",
                  f"exact lookup {exact['recall_in_catalogue']:.3f}", "", "(info)")
    table.add_row("names not in the catalogue answered not found",
                  f"{1 - ours['wrong_hits_not_in_catalogue'] / ours['n_not_in_catalogue']:.3f}",
                  f"exact lookup {1 - exact['wrong_hits_not_in_catalogue'] / exact['n_not_in_catalogue']:.3f}", "",
                  "(info)")
    kinds = ", ".join(f"{kind} {k['precision']:.3f} of {k['hits']} (stated {k['stated_confidence']})"
                      for kind, k in ours["match_kinds"].items())
    table.add_row("precision by match kind (calibration)", kinds, "", "", "(info)")
    found, missed = ours["latency_found_ms"], ours["latency_not_found_ms"]
    table.add_row("grounding latency, names found", f"p50 {found['p50']:.3f} ms, p99 {found['p99']:.2f} ms",
                  f"exact lookup p50 {exact['latency_found_ms']['p50']:.3f} ms", "", "(info)")
    opsin = a.get("opsin_per_call_ms")
    table.add_row(f"grounding latency, names not found (OPSIN {'warm' if a['opsin'] else 'off: no Java'})",
                  f"p50 {missed['p50']:.2f} ms, p99 {missed['p99']:.1f} ms",
                  f"OPSIN as a fresh process per name p50 {opsin['p50']:.0f} ms" if opsin else "",
                  f"{opsin['p50'] / missed['p50']:.0f}x faster" if opsin else "", "p50 <= 50 ms")
    if a["label_mismatches"]:
        table.add_row("labels whose catalogue membership disagrees", str(len(a["label_mismatches"])), "", "",
                      "0 on the default catalogue")
    g = report["grounding"]
    table.add_row(f"search_chemical direct, warm ({g['n_queries']} names)",
                  f"{g['names_per_s']:.0f} names/s, p50 {g['p50_ms']:.3f} ms, p99 {g['p99_ms']:.3f} ms",
                  f"dict lookup {g['dict_lookup_us']:.2f} us", f"{g['ratio_to_dict']:.1f}x", "p50 <= 2 ms")
    q = report["quote_lookup"]
    table.add_row("select_pack direct", f"p50 {q['direct']['p50_ms']:.3f} ms, p99 {q['direct']['p99_ms']:.3f} ms",
                  "", "", "(info)")
    table.add_row("select_pack over MCP stdio",
                  f"p50 {q['mcp_stdio']['p50_ms']:.2f} ms, p99 {q['mcp_stdio']['p99_ms']:.2f} ms",
                  f"echo p50 {q['echo_stdio']['p50_ms']:.2f} ms, p99 {q['echo_stdio']['p99_ms']:.2f} ms",
                  f"{q['mcp_over_echo_p50']:.2f}x echo, {q['mcp_over_direct_p50']:.0f}x direct", "p50 <= 1.5x echo")
    table.add_row("select_pack CPU per call, server + client (in-memory MCP)",
                  f"{q['cpu_per_call_ms']['select_pack']:.3f} ms", f"echo {q['cpu_per_call_ms']['echo']:.3f} ms",
                  f"{q['cpu_over_echo']:.2f}x echo", "(info: load-independent work)")
    c = report["cold_start"]
    table.add_row("cold start to first search (stdio)", f"{c['server_s']:.2f} s", f"echo {c['echo_s']:.2f} s",
                  f"{c['ratio']:.2f}x", "<= 3 s")
    o = report["oracle"]
    table.add_row(f"oracle over MCP stdio, {o['n_reactions']} clean reactions",
                  f"{o['reactions_per_s']:.1f} reactions/s, {o['mcp_s']:.1f} s, CTA@25 {o['cta@25']:.3f}",
                  f"gold rule direct {o['direct_reactions_per_s']:.0f} reactions/s", f"{o['ratio_to_direct']:.1f}x",
                  "whole suite <= 120 s")
    show(table)
    load = report["machine"]["load_average_1min"]
    print(f"load average (1 min) on {report['machine']['cpus']} CPUs: {load['start']:.2f} at start, "
          f"{load['end']:.2f} at end")


if __name__ == "__main__":
    main()
