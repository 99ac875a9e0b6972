"""Disaster server benchmark: data build, perception accuracy, task suite, gold replay, tool latency.

    gauntlet bench disaster [--quick] [--out bench/results/disaster.json]

Every latency figure is a ratio against a baseline measured in the same run: a tool called directly
in-process, the same tool through MCP (stdio, the server's own process), and a bare FastMCP echo
tool through the same transport. ``--quick`` uses six events at 128 x 128 cells instead of the full
catalogue at 256 x 256.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from _reporting import bench_parser, save_report

HERE = Path(__file__).resolve().parent
QUICK_EVENTS = ["ahr-2021-flood", "turkiye-2023-earthquake", "lahaina-2023-wildfire", "la-palma-2021-eruption",
                "wayanad-2024-landslide", "haiyan-2013-cyclone"]


def build_scenes_only(quick: bool) -> Path:
    """The scene root (cached after the first build): six events at 128 x 128 cells, or every event."""
    from gauntlet.mcp_servers.disaster import data

    return (data.build_subset(QUICK_EVENTS, size_px=128) if quick else data.build_default()) / "scenes"


def build_data(quick: bool) -> tuple[Path, Path, dict[str, float]]:
    """Scenes and task suite (cached after the first build); returns their paths and build seconds."""
    from gauntlet.mcp_servers.disaster import tasks

    params = {"events": QUICK_EVENTS, "size_px": 128} if quick else None
    start = time.perf_counter()
    scenes = build_scenes_only(quick).parent
    scene_s = time.perf_counter() - start
    start = time.perf_counter()
    suite = tasks.suite_path(params)
    return scenes / "scenes", suite, {"scenes_s": scene_s, "tasks_s": time.perf_counter() - start}


def perception_accuracy(scene_root: Path) -> dict[str, Any]:
    from gauntlet.mcp_servers.disaster import accuracy

    events = json.loads((scene_root / "events.json").read_text())["events"]
    rows = [accuracy.measure(scene_root, event["id"]) for event in events]
    return accuracy.summarise(rows)


def objects_accuracy(scene_root: Path) -> dict[str, Any]:
    """Object detectors and SAR damage against the truth: precision / recall / F1 with counts summed over events."""
    from gauntlet.mcp_servers.disaster import accuracy

    events = json.loads((scene_root / "events.json").read_text())["events"]
    return accuracy.summarise_objects([accuracy.measure_objects(scene_root, event["id"]) for event in events])


def suite_summary(suite: Path) -> dict[str, Any]:
    """Tasks per dimension (with DORA's proportions: ``tasks.proportion_check``), events, gold calls, truth
    vs gold, and the suite's cache version (tests read the proportions of the version they belong to)."""
    from gauntlet.mcp_servers.disaster.data import scene_entry
    from gauntlet.mcp_servers.disaster.scoring import truth_vs_gold
    from gauntlet.mcp_servers.disaster.tasks import proportion_check, tasks_version
    from gauntlet.tasks import load_suite

    tasks = load_suite(suite)
    by_dimension = dict(sorted(Counter(t.metadata["dimension"] for t in tasks).items()))
    return {"tasks": len(tasks), "by_dimension": by_dimension, "proportions": proportion_check(by_dimension),
            "tasks_version": tasks_version(scene_entry("clean")[1]),
            "events": len({t.metadata["event"] for t in tasks}),
            "gold_calls": sum(len(t.gold_trajectory) for t in tasks), "truth_vs_gold": truth_vs_gold(tasks)}


def gold_replay(scene_root: Path, suite: Path, limit: int | None = None, start_index: int = 0,
                scorers: tuple[str, ...] = ("core", "dora")) -> dict[str, Any]:
    """Replay the gold trajectories (tasks ``start_index`` onwards: all, or ``limit`` of them) through an
    MCP session (ToolTaskEnv + GoldAgent), with each of ``scorers``; lists the tasks scoring below 1."""
    import gymnasium as gym

    import gauntlet
    from gauntlet.agents.tool import GoldAgent
    from gauntlet.mcp_servers.disaster.scoring import DoraScorer
    from gauntlet.mcp_servers.disaster.server import build_server
    from gauntlet.mcp_servers.disaster.tasks import MAX_STEPS, MAX_TEXT_LENGTH
    from gauntlet.tasks import load_suite

    total = len(load_suite(suite))
    indices = range(start_index, min(total, start_index + (limit or 10**9)))
    n = len(indices)
    factory = functools.partial(build_server, scene_root)
    out: dict[str, Any] = {}
    for label, scorer in (("core", None), ("dora", DoraScorer())):
        if label not in scorers:
            continue
        env = gym.make("gauntlet/ToolTask-v0", tasks=str(suite), server=factory, scorer=scorer,
                       max_text_length=MAX_TEXT_LENGTH, max_steps=MAX_STEPS)
        agent = GoldAgent(suite=str(suite))
        scores = []
        start = time.perf_counter()
        try:
            for index in indices:
                episode = gauntlet.rollout(env, agent, seed=index, record="none")
                scores.append(episode.outcome.score)
        finally:
            env.close()
        elapsed = time.perf_counter() - start
        out[label] = {"mean_score": float(np.mean(scores)), "perfect": int(sum(s >= 1.0 - 1e-9 for s in scores)),
                      "tasks": n, "first_task": start_index, "tasks_per_s": n / elapsed,
                      "imperfect": [i for i, s in zip(indices, scores) if s < 1.0 - 1e-9]}
    return out


CHEAP_TOOLS = [("calc_add", {"a": 1.0, "b": 2.0}), ("ras_info", {"image": "data/{event}/dem.tif"}),
               ("vec_count", {"layer": "data/{event}/pois.geojson"})]
HEAVY_TOOLS = [("seg_water_mndwi", {"image": "data/{event}/post_s2.tif"}),
               ("seg_building_damage", {"pre_image": "data/{event}/pre_optical.tif",
                                        "post_image": "data/{event}/post_optical.tif",
                                        "buildings": "data/{event}/buildings.geojson"})]
# Figure tools (PNG written into the workspace, returned as MCP image content too): their p50 is reported.
FIGURE_TOOLS = [("viz_bar_chart", {"labels": ["A", "B", "C"], "values": [5200.0, 1830.0, 940.0]}),
                ("viz_before_after_panel", {"before": "data/{event}/pre_optical.tif",
                                            "after": "data/{event}/post_optical.tif"}),
                ("viz_heatmap", {"image": "data/{event}/post_optical.tif", "points": "data/{event}/pois.geojson"})]


def _args(args: dict[str, Any], event: str) -> dict[str, Any]:
    return {k: v.format(event=event) if isinstance(v, str) else v for k, v in args.items()}


def tool_latency(scene_root: Path, n: int) -> dict[str, Any]:
    """p50/p99 per tool: direct call, MCP over stdio, and the bare echo baseline over stdio, measured
    interleaved (direct, MCP, echo in turn) so that the three see the same machine load."""
    import tempfile
    from contextlib import AsyncExitStack

    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from gauntlet.bridges.mcp_compat import validate_once
    from gauntlet.bridges.server_process import serve_command
    from gauntlet.mcp_servers.disaster.server import tool_specs
    from gauntlet.mcp_servers.disaster.workspace import Workspace

    event = json.loads((scene_root / "events.json").read_text())["events"][0]["id"]
    specs = {spec.name: spec for spec in tool_specs()}
    ws = Workspace(scene_root, tempfile.mkdtemp(prefix="bench-disaster-"))

    async def session(stack: AsyncExitStack, command: list[str]) -> ClientSession:
        read, write = await stack.enter_async_context(stdio_client(StdioServerParameters(command=command[0],
                                                                                         args=command[1:])))
        client = await stack.enter_async_context(ClientSession(read, write))
        await client.initialize()
        return validate_once(client)

    async def timed(coroutine) -> float:
        start = time.perf_counter()
        result = await coroutine
        if result.isError:
            raise RuntimeError(f"a call failed during the benchmark: {result.content}")
        return (time.perf_counter() - start) * 1e3

    async def measure() -> dict[str, Any]:
        async with AsyncExitStack() as stack:
            served = await session(stack, serve_command("disaster", "--server-kwargs",
                                                        json.dumps({"data_root": str(scene_root)})))
            echo = await session(stack, [sys.executable, str(HERE / "_servers.py"), "echo"])
            rows: dict[str, Any] = {}
            for name, raw in CHEAP_TOOLS + HEAVY_TOOLS + FIGURE_TOOLS:
                args = _args(raw, event)
                count = n if (name, raw) in CHEAP_TOOLS else max(5, n // 20)
                direct, mcp, base = [], [], []
                for i in range(count + 3):
                    start = time.perf_counter()
                    specs[name].fn(ws, **args)
                    d = (time.perf_counter() - start) * 1e3
                    m = await timed(served.call_tool(name, args))
                    e = await timed(echo.call_tool("echo", {"value": i % 2}))
                    if i >= 3:
                        direct.append(d), mcp.append(m), base.append(e)
                d50, m50, e50 = (float(np.percentile(x, 50)) for x in (direct, mcp, base))
                rows[name] = {"direct_p50_ms": d50, "direct_p99_ms": float(np.percentile(direct, 99)),
                              "mcp_p50_ms": m50, "mcp_p99_ms": float(np.percentile(mcp, 99)),
                              "echo_p50_ms": e50, "echo_p99_ms": float(np.percentile(base, 99)),
                              "mcp_over_direct": m50 / d50, "mcp_over_echo": m50 / e50,
                              "cheap": any(name == c for c, _ in CHEAP_TOOLS),
                              "figure": any(name == c for c, _ in FIGURE_TOOLS)}
            return rows

    rows = asyncio.run(measure())
    cheap = [row for row in rows.values() if row["cheap"]]
    return {"echo_p50_ms": float(np.median([r["echo_p50_ms"] for r in cheap])),
            "echo_p99_ms": float(np.median([r["echo_p99_ms"] for r in cheap])), "tools": rows}


LARGE_PIPELINE = """
import json, resource, sys, time
from pathlib import Path
from gauntlet.mcp_servers.disaster import largescale as L
folder, size = Path(sys.argv[1]), int(sys.argv[2])
start = time.perf_counter()
extent = L.flood_extent_blocks(folder / "pre.tif", folder / "post.tif", folder / "mask.tif")
polygons = L.polygon_stats_blocks(folder / "mask.tif")
route = L.route_on_mask(folder / "mask.tif", 500, (0, 0), (size - 500, 0))
print(json.dumps({"seconds": time.perf_counter() - start, "extent": extent, "polygons": polygons, "route": route,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""
BASELINE_PROCESS = """
import json, resource
from gauntlet.mcp_servers.disaster import largescale  # the same imports, no work
print(json.dumps({"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def large_scene(size_px: int) -> dict[str, Any]:
    """Peak RSS of a block-wise flood-extent + vectorise + routing pipeline on a size_px x size_px pair
    of 2-band images, in a fresh process, against the same process doing only its imports."""
    import subprocess
    import tempfile

    from gauntlet.mcp_servers.disaster import largescale

    with tempfile.TemporaryDirectory(prefix="bench-disaster-large-") as tmp:
        start = time.perf_counter()
        largescale.write_synthetic_pair(Path(tmp) / "pre.tif", Path(tmp) / "post.tif", size_px)
        write_s = time.perf_counter() - start
        run = subprocess.run([sys.executable, "-c", LARGE_PIPELINE, tmp, str(size_px)], capture_output=True,
                             text=True, check=True)
        base = subprocess.run([sys.executable, "-c", BASELINE_PROCESS], capture_output=True, text=True, check=True)
    result = json.loads(run.stdout)
    raster_mb = size_px * size_px * 2 * 2 / 2**20  # one image: 2 bands of uint16
    return {"size_px": size_px, "write_s": write_s, **result, "baseline_rss_mb": json.loads(base.stdout)["peak_rss_mb"],
            "raster_mb": raster_mb, "rss_over_raster": result["peak_rss_mb"] / raster_mb}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = bench_parser("disaster", __doc__, quick_help="six events at 128 x 128 cells")
    parser.add_argument("--large-px", type=int, default=None, help="side of the large scene (default 10000; "
                        "2000 with --quick)")
    parser.add_argument("--large-only", action="store_true", help="only the large-scene figure, added to --out")
    parser.add_argument("--latency-only", action="store_true", help="only the tool-latency figure (scenes only, "
                        "no task suite; with --quick the six small scenes), replacing it in --out")
    parser.add_argument("--skip-large", action="store_true", help="leave out the large-scene figure")
    parser.add_argument("--accuracy-only", action="store_true", help="only perception and object-detector accuracy "
                        "and the suite summary (no replay, latency or large scene), replacing them in --out")
    parser.add_argument("--replay-limit", type=int, default=None, help="replay only the first N tasks")
    parser.add_argument("--replay-only", action="store_true", help="only the gold replay (DORA scorer), from "
                        "--replay-start, written under 'gold_replay_from_<start>' in --out")
    parser.add_argument("--replay-start", type=int, default=0, help="first task index of --replay-only")
    args = parser.parse_args(argv)
    large_px = args.large_px or (2000 if args.quick else 10000)
    if args.large_only:
        out = Path(args.out)
        report = json.loads(out.read_text()) if out.exists() else {}
        report["large_scene"] = large_scene(large_px)
        save_report(report, out)
        _print_large(report["large_scene"])
        return report
    if args.latency_only:
        out = Path(args.out)
        report = json.loads(out.read_text()) if out.exists() else {}
        report["latency"] = tool_latency(build_scenes_only(args.quick), 200)
        _print_latency(report["latency"])
        save_report(report, out)
        return report
    scene_root, suite, build = build_data(args.quick)
    if args.replay_only:
        out = Path(args.out)
        row = gold_replay(scene_root, suite, args.replay_limit, args.replay_start, scorers=("dora",))["dora"]
        report = json.loads(out.read_text()) if out.exists() else {}
        report[f"gold_replay_from_{args.replay_start}"] = row
        save_report(report, out)
        print(json.dumps(row))
        return report
    if args.accuracy_only:
        out = Path(args.out)
        report = json.loads(out.read_text()) if out.exists() else {}
        report.update(quick=args.quick, build=build, perception=perception_accuracy(scene_root),
                      objects=objects_accuracy(scene_root), suite=suite_summary(suite))
        # measured on another suite; `gauntlet eval disaster --agent gold` replays this one
        report.pop("gold_replay", None)
        report.pop("replay_limit", None)
        _print_accuracy(report)
        save_report(report, out)
        return report
    report = {"quick": args.quick, "cpus": os.cpu_count(), "build": build,
              "perception": perception_accuracy(scene_root), "objects": objects_accuracy(scene_root),
              "suite": suite_summary(suite),
              "gold_replay": gold_replay(scene_root, suite, args.replay_limit),
              "latency": tool_latency(scene_root, 30 if args.quick else 200)}
    if not args.skip_large:
        report["large_scene"] = large_scene(large_px)
    _print_tables(report)
    if "large_scene" in report:
        _print_large(report["large_scene"])
    save_report(report, args.out)
    return report


def _print_large(row: dict[str, Any]) -> None:
    from rich.console import Console

    Console().print(f"large scene {row['size_px']} x {row['size_px']} (one image {row['raster_mb']:.0f} MB in memory): "
                    f"flood extent + vectorise + routing peak RSS {row['peak_rss_mb']:.0f} MB "
                    f"({row['rss_over_raster']:.2f}x one image; the same process doing only its imports: "
                    f"{row['baseline_rss_mb']:.0f} MB), {row['seconds']:.1f} s; target < 2048 MB")


def _print_accuracy(report: dict[str, Any], with_suite: bool = True) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title="perception vs generator truth (mean / min over events)")
    for column in ("metric", "mean", "min", "events"):
        table.add_column(column)
    for metric, row in report["perception"].items():
        table.add_row(metric, f"{row['mean']:.3f}", f"{row['min']:.3f}", str(row["events"]))
    console.print(table)
    table = Table(title="object detectors vs generator truth (counts summed over events)")
    for column in ("detector", "precision", "recall", "F1", "TP / FP / FN", "events"):
        table.add_column(column)
    for name, row in report.get("objects", {}).items():
        if "f1" in row:
            table.add_row(name, f"{row['precision']:.3f}", f"{row['recall']:.3f}", f"{row['f1']:.3f}",
                          f"{row['tp']} / {row['fp']} / {row['fn']}", str(row["events"]))
        else:
            table.add_row(name, f"3-class accuracy {row['accuracy']:.3f}", "", "", f"{row['buildings']} buildings", "")
    console.print(table)
    if with_suite:
        console.print(_suite_table(report["suite"], f"suite: {report['suite']['tasks']} tasks over "
                                                    f"{report['suite']['events']} events"))


def _suite_table(suite: dict[str, Any], title: str):
    """Tasks by dimension and how often the gold answer passes against the generator's truth."""
    from rich.table import Table

    table = Table(title=title)
    for column in ("figure", "value"):
        table.add_column(column)
    table.add_row("tasks by dimension", json.dumps(suite["by_dimension"]))
    for dim, row in suite.get("proportions", {}).items():
        table.add_row(f"{dim}: share (DORA's), minimum for 1,500 tasks", f"{row['count']} = {row['share']:.1%} "
                      f"({row['dora_share']:.1%}), minimum {row['minimum']}"
                      + (f", SHORT by {row['shortfall']}" if row["shortfall"] else ", held"))
    for dim, row in suite["truth_vs_gold"].items():
        table.add_row(f"gold answer passes vs truth, {dim}", f"{row['gold_passes']}/{row['with_truth']} "
                                                             f"({row['share']:.0%})")
    return table


def _print_tables(report: dict[str, Any]) -> None:
    from rich.console import Console

    console = Console()
    _print_accuracy(report, with_suite=False)
    suite = report["suite"]
    table = _suite_table(suite, f"suite: {suite['tasks']} tasks over {suite['events']} events, "
                                f"{suite['gold_calls']} gold calls")
    for label, row in report["gold_replay"].items():
        table.add_row(f"gold replay through MCP ({label} scorer)",
                      f"mean {row['mean_score']:.3f}, {row['perfect']}/{row['tasks']} perfect, "
                      f"{row['tasks_per_s']:.2f} tasks/s")
    build = report["build"]
    table.add_row("data build (s; ~0 when cached)", f"scenes {build['scenes_s']:.1f}, tasks {build['tasks_s']:.1f}")
    console.print(table)
    _print_latency(report["latency"])


def _print_latency(latency: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"tool latency, stdio, interleaved with a bare echo tool (echo p50 "
                        f"{latency['echo_p50_ms']:.2f} ms, p99 {latency['echo_p99_ms']:.2f} ms)")
    for column in ("tool", "direct p50/p99 ms", "MCP p50/p99 ms", "MCP/direct", "MCP/echo", "target"):
        table.add_column(column)
    for name, row in latency["tools"].items():
        table.add_row(name, f"{row['direct_p50_ms']:.2f} / {row['direct_p99_ms']:.2f}",
                      f"{row['mcp_p50_ms']:.2f} / {row['mcp_p99_ms']:.2f}", f"{row['mcp_over_direct']:.2f}x",
                      f"{row['mcp_over_echo']:.2f}x",
                      "<= 1.5x echo" if row["cheap"] else "p50 reported" if row.get("figure") else "(info)")
    Console().print(table)


if __name__ == "__main__":
    main()
