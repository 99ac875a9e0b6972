"""The T5 situation-report tasks over the catalogue: how many there are, that their gold replays score 1.000,
and how far the gold reports are from the generator's truth (docs/results/disaster-figures.md, "T5 situation reports").

    python experiments/disaster_reports.py --size smoke  --out /tmp/disaster-reports-smoke
    python experiments/disaster_reports.py --size medium --out experiments/results/disaster/reports
    python experiments/disaster_reports.py --size full --no-replay --part 1/2 --out /tmp/reports-1
    python experiments/disaster_reports.py --size full --no-replay --part 2/2 --out /tmp/reports-2

For every event of the size's sample the scene (with its time series) is built into a scratch folder, the
report templates (``tasks_report.report_templates``) are instantiated, and each gold plan is executed through
an in-memory MCP session as ``tasks.build_tasks`` does (a plan whose tool returns an error is *skipped*:
the template does not apply to that scene). Then every task is **replayed**: ``GoldAgent`` in
``ToolTaskEnv`` with the DORA scorer, a fresh server session whose workspace lies in the data cache, so the
scorer reads each figure back from there (``report_scoring``). Per variant: tasks, skipped, mean replay
score, perfect replays, and truth-vs-gold: the share of gold reports whose every field passes its DORA check
against the truth, and the share of fields that pass. Writes ``<out>/disaster_reports.json`` and ``.md``.
``--no-replay`` counts and checks against the truth only (the gold answers are still computed through MCP);
``--part K/N`` runs the K-th of N equal slices of the size's events (so a long size fits in shorter runs).
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from gauntlet.fileio import write_atomically
from gauntlet.mcp_servers.disaster.events import EVENTS, HAZARD_TYPES

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "disaster" / "reports"
SIZES: dict[str, dict[str, Any]] = {
    "smoke": {"events": ["ahr-2021-flood"], "size_px": 64},
    "medium": {"events": [next(e.id for e in EVENTS if e.hazard == h) for h in HAZARD_TYPES], "size_px": 128},
    "full": {"events": [e.id for e in EVENTS], "size_px": 128},
}


def event_tasks(scene_root: Path, event_id: str) -> tuple[list[Any], list[dict[str, str]]]:
    """The T5 tasks of one event (gold run through MCP) and the templates skipped."""
    import anyio
    from mcp.shared.memory import create_connected_server_and_client_session

    from gauntlet.mcp_servers.disaster.server import build_server
    from gauntlet.mcp_servers.disaster.tasks import (MAX_ANSWER_CHARS, PlanFailed, _eval_spec, _manifest,
                                                     execute_plan, truth_context)
    from gauntlet.mcp_servers.disaster.tasks_report import report_templates
    from gauntlet.tasks import ToolTask

    event = next(e for e in json.loads((scene_root / "events.json").read_text())["events"] if e["id"] == event_id)
    tasks: list[ToolTask] = []
    skipped: list[dict[str, str]] = []

    async def run() -> None:
        server = build_server(scene_root)
        async with create_connected_server_and_client_session(server) as session:
            truth = truth_context(scene_root, event_id)
            for spec in report_templates(event, truth, scene_root):
                try:
                    trajectory, results = await execute_plan(session, spec.plan)
                except PlanFailed as exc:
                    skipped.append({"event": event_id, "category": spec.category, "reason": str(exc)})
                    continue
                answer = spec.answer(results)
                assert len(json.dumps({"answer": answer})) <= MAX_ANSWER_CHARS
                tasks.append(ToolTask(
                    id=f"{event_id}/{spec.category}", server="disaster", question=spec.question,
                    inputs=_manifest(scene_root, event_id, spec.layers), gold_trajectory=trajectory, answer=answer,
                    eval_spec=_eval_spec(spec.eval_spec),
                    metadata={"dimension": spec.dimension, "category": spec.category, "event": event_id,
                              "eval_spec": spec.eval_spec, "truth_answer": spec.truth(truth) if spec.truth else None}))

    anyio.run(run)
    return tasks, skipped


def replay(scene_root: Path, tasks: list[Any]) -> list[tuple[float, int]]:
    """Each task's score when GoldAgent replays it through ToolTaskEnv with the DORA scorer (fresh sessions),
    and how many of its calls gave another result than the gold trajectory records (GoldAgent's notes)."""
    import gymnasium as gym

    import gauntlet
    from gauntlet.agents.tool import GoldAgent
    from gauntlet.mcp_servers.disaster.scoring import DoraScorer
    from gauntlet.mcp_servers.disaster.server import build_server
    from gauntlet.mcp_servers.disaster.tasks import MAX_TEXT_LENGTH

    env = gym.make("gauntlet/ToolTask-v0", tasks=tasks, server=functools.partial(build_server, scene_root),
                   scorer=DoraScorer(), max_text_length=MAX_TEXT_LENGTH, max_steps=64)
    agent = GoldAgent(suite=tasks)
    out = []
    try:
        for index in range(len(tasks)):
            episode = gauntlet.rollout(env, agent, seed=index, record="memory")
            notes = sum(e.kind == "note" for step in episode.steps for e in step.events)
            out.append((episode.steps[-1].info["score"], notes))
        return out
    finally:
        env.close()


def truth_rows(task: Any) -> dict[str, bool]:
    """Whether each field of a gold report passes its DORA check against the truth (by field name; the
    per-date extents as ``extent_m2``)."""
    from gauntlet.mcp_servers.disaster.report_scoring import field_value, grade_field

    spec, truth = task.metadata["eval_spec"], task.metadata["truth_answer"]
    return {name: grade_field(field, field_value(truth, name), field_value(task.answer, name))[1]
            for name, field in spec["fields"].items()}


def run(size: str, out: Path, *, replay_gold: bool = True, part: tuple[int, int] = (1, 1)) -> dict[str, Any]:
    from gauntlet.mcp_servers.disaster.scenes import build_scenes

    index, parts = part
    events = SIZES[size]["events"]
    chunk = -(-len(events) // parts)
    params = {**SIZES[size], "events": events[(index - 1) * chunk:index * chunk]}
    rows: dict[str, dict[str, Any]] = {}
    by_field: dict[str, list[int]] = {}
    mismatches = 0
    skipped: list[dict[str, str]] = []
    started = time.perf_counter()
    for number, event_id in enumerate(params["events"], start=1):
        scratch = Path(tempfile.mkdtemp(prefix="disaster-reports-"))
        try:
            build_scenes(scratch, events=[event_id], size_px=params["size_px"], seed=0)
            tasks, missed = event_tasks(scratch / "scenes", event_id)
            replays = replay(scratch / "scenes", tasks) if replay_gold else []
            scores = [score for score, _ in replays] or [None] * len(tasks)
            mismatches += sum(notes for _, notes in replays)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        skipped += missed
        for task, score in zip(tasks, scores):
            row = rows.setdefault(task.metadata["category"], {"tasks": 0, "skipped": 0, "replay_scores": [],
                                                              "truth_all_fields": 0, "truth_fields": [0, 0]})
            row["tasks"] += 1
            if score is not None:
                row["replay_scores"].append(score)
            passes = truth_rows(task)
            row["truth_all_fields"] += all(passes.values())
            row["truth_fields"] = [row["truth_fields"][0] + sum(passes.values()), row["truth_fields"][1] + len(passes)]
            for name, ok in passes.items():
                counts = by_field.setdefault(name.split(".")[0] if name.startswith("extent_m2.") else name, [0, 0])
                counts[0] += ok
                counts[1] += 1
        for miss in missed:
            rows.setdefault(miss["category"], {"tasks": 0, "skipped": 0, "replay_scores": [], "truth_all_fields": 0,
                                               "truth_fields": [0, 0]})["skipped"] += 1
        print(f"[{number}/{len(params['events'])}] {event_id}: {len(tasks)} tasks, {len(missed)} skipped, "
              f"replay min {_f(min((s for s in scores if s is not None), default=None))} "
              f"({time.perf_counter() - started:.0f} s)", flush=True)
    table = {}
    for category, row in sorted(rows.items()):
        n = row["tasks"]
        table[category] = {"tasks": n, "skipped": row["skipped"],
                           "replay_mean": (sum(row["replay_scores"]) / len(row["replay_scores"])
                                           if row["replay_scores"] else None),
                           "replay_perfect": sum(s == 1.0 for s in row["replay_scores"]),
                           "truth_report_share": row["truth_all_fields"] / n if n else None,
                           "truth_field_share": row["truth_fields"][0] / max(1, row["truth_fields"][1])}
    total = sum(r["tasks"] for r in table.values())
    results = {"size": size, "part": f"{index}/{parts}", "replayed": replay_gold, "events": params["events"],
               "size_px": params["size_px"], "tasks": total,
               "perfect_replays": sum(r["replay_perfect"] for r in table.values()),
               "replay_obs_mismatches": mismatches, "variants": table,
               "truth_by_field": {name: {"passes": p, "fields": n, "share": p / n} for name, (p, n) in
                                  sorted(by_field.items())},
               "skipped": skipped, "seconds": round(time.perf_counter() - started, 1)}
    lines = ["| variant | tasks | skipped | gold replay mean | perfect | truth: whole report | truth: fields |",
             "|---|---|---|---|---|---|---|"]
    for category, r in table.items():
        lines.append(f"| {category} | {r['tasks']} | {r['skipped']} | {_f(r['replay_mean'])} | {r['replay_perfect']} "
                     f"| {_f(r['truth_report_share'])} | {_f(r['truth_field_share'])} |")
    lines.append(f"| all | {total} | {len(skipped)} | | {results['perfect_replays']} | | |")
    if replay_gold:
        lines.append(f"\nReplayed calls whose result differs from the gold trajectory's: {mismatches}.")
    lines += ["", "| field (all variants) | gold passes the truth check | of |", "|---|---|---|"]
    lines += [f"| {name} | {r['share']:.3f} | {r['fields']} |" for name, r in results["truth_by_field"].items()]
    out.mkdir(parents=True, exist_ok=True)
    write_atomically(out / "disaster_reports.json", json.dumps(results, indent=1, sort_keys=True))
    write_atomically(out / "disaster_reports.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    return results


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="smoke")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--no-replay", action="store_true", help="skip the gold replays (count and truth only)")
    parser.add_argument("--part", default="1/1", help="K/N: run the K-th of N equal slices of the events")
    args = parser.parse_args()
    try:
        index, parts = (int(v) for v in args.part.split("/"))
        if not 1 <= index <= parts:
            raise ValueError
    except ValueError:
        parser.error(f"--part must be K/N with 1 <= K <= N, e.g. 1/2; got {args.part!r}")
    run(args.size, args.out, replay_gold=not args.no_replay, part=(index, parts))


if __name__ == "__main__":
    main()
