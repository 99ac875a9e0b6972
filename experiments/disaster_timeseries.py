"""What the disaster time series costs, and its T4 tasks' gold against the generator's truth (docs/results/disaster.md).

    python experiments/disaster_timeseries.py --size smoke  --out /tmp/disaster-timeseries-smoke
    python experiments/disaster_timeseries.py --size medium --out experiments/results/disaster/timeseries-medium
    python experiments/disaster_timeseries.py --size full   --out experiments/results/disaster/timeseries-full

1. **build cost**: every event of the size's sample is built twice, back to back (same machine load): the
   scene alone (``build_event(..., time_series=False)``, what the builder wrote before the time series) and
   the scene with its time series (the default). Time (s) and disk (bytes of distinct files: the ``pre`` and
   ``peak`` dates are hard links to the scene's images) per event, and their ratio: the four extra dates
   cost ``with / without - 1`` times the scene alone. An untimed small build first loads the libraries.
2. **T4 tasks**: the T4 templates (``tasks_temporal.py``) of every event, their gold plans run through an
   in-memory MCP session of the real server, as ``tasks.build_tasks`` runs them; per category: tasks,
   plans that failed (a template that does not apply), and the share whose gold answer passes the DORA
   check against the generator's truth (truth vs gold: how far the tools are from the truth).
3. **gold replay through stdio**: the T4 tasks saved as a suite (as ``build_tasks`` saves them) and
   replayed by the gold agent through ``gauntlet/ToolTask-v0`` with the DORA scorer, the server a real
   ``gauntlet serve disaster`` process over stdio (one per episode): the mean score (1.0 expected) and
   how many tasks scored below 1. A server process per episode is slow on a loaded machine, so the
   sample is, for the first event of every hazard type, its trend task and its task with the longest
   gold plan (every task of the smoke size).

The figures go to ``<out>/disaster_timeseries.json`` and ``<out>/disaster_timeseries.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from gauntlet.fileio import write_atomically
from gauntlet.mcp_servers.disaster.events import EVENTS, HAZARD_TYPES, get_event
from gauntlet.mcp_servers.disaster.scenes import _write_json, build_event

SIZES: dict[str, dict[str, Any]] = {
    "smoke": {"events": ["ahr-2021-flood"], "size_px": 64},
    # the first event of every hazard type at the published scene size (256 x 256 cells)
    "medium": {"events": [next(e.id for e in EVENTS if e.hazard == h) for h in HAZARD_TYPES], "size_px": 256},
    # every catalogue event, at the test scenes' size (128 x 128 cells), to fit a 30-minute run
    "full": {"events": [e.id for e in EVENTS], "size_px": 128},
}


def disk_bytes(folder: Path) -> int:
    """Bytes of the distinct files under ``folder`` (a hard-linked file counts once)."""
    seen, total = set(), 0
    for path in folder.rglob("*"):
        if path.is_file():
            stat = path.stat()
            if (stat.st_dev, stat.st_ino) not in seen:
                seen.add((stat.st_dev, stat.st_ino))
                total += stat.st_size
    return total


def measure_cost(events: list[str], size_px: int, scratch: Path, keep: Path) -> list[dict[str, Any]]:
    build_event(scratch / "warm", get_event(events[0]), size_px=64, seed=0)
    rows = []
    for number, event_id in enumerate(events, start=1):
        event = get_event(event_id)
        row: dict[str, Any] = {"event": event_id, "hazard": event.hazard}
        for label, with_series in (("scene", False), ("with_time_series", True)):
            folder = keep if with_series else scratch / "plain"
            started = time.perf_counter()
            build_event(folder, event, size_px=size_px, seed=0, time_series=with_series)
            row[f"{label}_s"] = round(time.perf_counter() - started, 3)
            row[f"{label}_bytes"] = sum(disk_bytes(folder / side / event_id) for side in ("scenes", "truth"))
        shutil.rmtree(scratch / "plain", ignore_errors=True)
        row["time_ratio"] = round(row["with_time_series_s"] / row["scene_s"], 3)
        row["disk_ratio"] = round(row["with_time_series_bytes"] / row["scene_bytes"], 3)
        rows.append(row)
        print(f"[{number}/{len(events)}] {event_id}: {row['scene_s']:.1f} s -> {row['with_time_series_s']:.1f} s, "
              f"{row['scene_bytes'] / 1e6:.1f} MB -> {row['with_time_series_bytes'] / 1e6:.1f} MB", flush=True)
    return rows


def measure_t4(events: list[str], root: Path) -> tuple[dict[str, Any], list[Any]]:
    import anyio

    from gauntlet.mcp_servers.disaster.scoring import grade_answer
    from gauntlet.mcp_servers.disaster.tasks import PlanFailed, _eval_spec, _manifest, execute_plan
    from gauntlet.mcp_servers.disaster.tasks_temporal import temporal_templates
    from gauntlet.tasks import ToolTask

    catalogue = [{"id": e.id, "hazard": e.hazard, "place": e.place} for e in map(get_event, events)]
    _write_json(root / "scenes" / "events.json", {"events": catalogue})
    per_category: dict[str, dict[str, int]] = defaultdict(lambda: {"tasks": 0, "failed": 0, "truth_passes": 0})
    per_hazard: dict[str, dict[str, int]] = defaultdict(lambda: {"tasks": 0, "truth_passes": 0})
    steps: list[int] = []
    suite: list[ToolTask] = []

    async def run() -> None:
        from mcp.shared.memory import create_connected_server_and_client_session

        from gauntlet.mcp_servers.disaster.server import build_server

        server = build_server(root / "scenes", workspace_dir=root / ".workspace")
        async with create_connected_server_and_client_session(server) as session:
            for event in catalogue:
                for spec in temporal_templates(event, root / "scenes"):
                    row = per_category[spec.category]
                    try:
                        trajectory, results = await execute_plan(session, spec.plan)
                    except PlanFailed:
                        row["failed"] += 1
                        continue
                    truth, answer = spec.truth({}) if spec.truth else None, spec.answer(results)
                    passes = grade_answer(spec.eval_spec, truth, answer)[1]
                    suite.append(ToolTask(
                        id=f"{event['id']}/{spec.category}", server="disaster", question=spec.question,
                        inputs=_manifest(root / "scenes", event["id"], spec.layers), gold_trajectory=trajectory,
                        answer=answer, eval_spec=_eval_spec(spec.eval_spec),
                        metadata={"dimension": spec.dimension, "category": spec.category, "event": event["id"],
                                  "hazard": event["hazard"], "eval_spec": spec.eval_spec,
                                  "tool_plan": [{"call": t, "args": a} for t, a in spec.plan.steps],
                                  "answer_format": spec.answer_format, "truth_answer": truth}))
                    row["tasks"] += 1
                    row["truth_passes"] += passes
                    per_hazard[event["hazard"]]["tasks"] += 1
                    per_hazard[event["hazard"]]["truth_passes"] += passes
                    steps.append(len(trajectory))

    anyio.run(run)
    tasks = sum(row["tasks"] for row in per_category.values())
    return {"tasks": tasks, "failed": sum(row["failed"] for row in per_category.values()),
            "truth_passes": sum(row["truth_passes"] for row in per_category.values()),
            "mean_steps": round(sum(steps) / max(len(steps), 1), 2), "per_category": dict(sorted(per_category.items())),
            "per_hazard": dict(sorted(per_hazard.items()))}, suite


def replay_sample(tasks: list[Any], every: bool) -> list[Any]:
    """The tasks the stdio replay runs (see module doc)."""
    if every:
        return tasks
    first: dict[str, str] = {}
    for task in tasks:
        first.setdefault(task.metadata["hazard"], task.metadata["event"])
    chosen = []
    for event in first.values():
        own = [task for task in tasks if task.metadata["event"] == event]
        longest = max(own, key=lambda task: len(task.gold_trajectory))
        chosen += [task for task in own if task.metadata["category"] == "t4_trend" or task is longest]
    return chosen


def replay_gold_stdio(tasks: list[Any], scene_root: Path, folder: Path) -> dict[str, Any]:
    """Replay the gold trajectories of ``tasks`` through ``gauntlet serve disaster`` over stdio."""
    import gymnasium as gym

    import gauntlet
    from gauntlet.agents.tool import GoldAgent
    from gauntlet.mcp_servers.disaster.scoring import DoraScorer
    from gauntlet.mcp_servers.disaster.tasks import MAX_TEXT_LENGTH
    from gauntlet.tasks import save_suite

    suite = folder / "t4-tasks.jsonl"
    save_suite(tasks, suite)
    command = [str(Path(sys.executable).with_name("gauntlet")), "serve", "disaster", "--server-kwargs",
               json.dumps({"data_root": str(scene_root)})]
    env = gym.make("gauntlet/ToolTask-v0", tasks=str(suite), server=command, scorer=DoraScorer(),
                   max_text_length=MAX_TEXT_LENGTH)
    scores = []
    try:
        for index in range(len(tasks)):
            episode = gauntlet.rollout(env, GoldAgent(suite=str(suite)), seed=index, record="memory")
            scores.append(float(episode.steps[-1].info["score"]))
    finally:
        env.close()
    return {"tasks": len(scores), "mean_score": round(sum(scores) / max(len(scores), 1), 4),
            "below_1": sum(score < 1.0 - 1e-9 for score in scores)}


def table(result: dict[str, Any]) -> str:
    cost, t4 = result["cost"], result["t4"]
    total = {key: sum(row[key] for row in cost) for key in ("scene_s", "with_time_series_s", "scene_bytes",
                                                             "with_time_series_bytes")}
    lines = [f"Build cost ({len(cost)} events, {result['size_px']} x {result['size_px']} cells; same run)", "",
             "| | scene alone | scene + time series | extra dates / scene alone |", "|---|---|---|---|",
             f"| time per event (s, mean) | {total['scene_s'] / len(cost):.1f} | "
             f"{total['with_time_series_s'] / len(cost):.1f} | "
             f"{total['with_time_series_s'] / total['scene_s'] - 1:.2f}x |",
             f"| disk per event (MB, mean) | {total['scene_bytes'] / len(cost) / 1e6:.2f} | "
             f"{total['with_time_series_bytes'] / len(cost) / 1e6:.2f} | "
             f"{total['with_time_series_bytes'] / total['scene_bytes'] - 1:.2f}x |", "",
             f"T4 tasks: {t4['tasks']} over {len(cost)} events ({t4['failed']} plans failed), "
             f"{t4['mean_steps']} tool calls per gold plan on average; gold passes the DORA check against the "
             f"generator's truth in {t4['truth_passes']}/{t4['tasks']} "
             f"({100 * t4['truth_passes'] / max(t4['tasks'], 1):.0f}%)", "",
             *([f"Gold replay through `gauntlet serve disaster` over stdio, DORA scorer: mean score "
                f"{t4['gold_replay_stdio']['mean_score']:.3f} over {t4['gold_replay_stdio']['tasks']} tasks "
                f"({t4['gold_replay_stdio']['below_1']} below 1)", ""] if "gold_replay_stdio" in t4 else []),
             "| category | tasks | truth vs gold |", "|---|---|---|"]
    for name, row in t4["per_category"].items():
        lines.append(f"| {name} | {row['tasks']} | {row['truth_passes']}/{row['tasks']} |")
    lines += ["", "| hazard | tasks | truth vs gold |", "|---|---|---|"]
    for name, row in t4["per_hazard"].items():
        lines.append(f"| {name} | {row['tasks']} | {row['truth_passes']}/{row['tasks']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="smoke")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    size = SIZES[args.size]
    with tempfile.TemporaryDirectory(prefix="disaster-timeseries-") as tmp:
        scratch = Path(tmp)
        cost = measure_cost(size["events"], size["size_px"], scratch, scratch / "dated")
        t4, tasks = measure_t4(size["events"], scratch / "dated")
        print(table({"size_px": size["size_px"], "cost": cost, "t4": t4}), flush=True)
        t4["gold_replay_stdio"] = replay_gold_stdio(replay_sample(tasks, args.size == "smoke"),
                                                    scratch / "dated" / "scenes", scratch)
    result = {"size": args.size, "size_px": size["size_px"], "events": size["events"], "cost": cost, "t4": t4}
    text = table(result)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    write_atomically(args.out / "disaster_timeseries.json", json.dumps(result, indent=1, sort_keys=True))
    write_atomically(args.out / "disaster_timeseries.md", text + "\n")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
