"""Gold replay and truth vs gold of the disaster task suite on both realism levels (docs/results/disaster-hard.md).

    python experiments/disaster_levels.py --size smoke  --out /tmp/disaster-levels-smoke
    python experiments/disaster_levels.py --size medium --out experiments/results/disaster/levels

For each level (``clean``, ``hard``) the scenes of the size's events are built with the same seed
(``data.build_subset``, cached), the task suite over them is built (``tasks.suite_path``: every plan
executed through an in-memory MCP client session), and then:

1. **gold replay**: the gold trajectories of the first ``per_dimension`` tasks of every dimension (all
   tasks when it is None) are replayed by the ``gold`` agent through a fresh MCP session of the level's
   server (``gauntlet/ToolTask-v0``, as ``gauntlet eval disaster --view <level> --agent gold`` does) and
   graded by the DORA scorer; the run summary (DORA score, answer accuracy and trajectory metrics per
   dimension) is ``DoraScorer.summarize``'s;
2. **truth vs gold**: per dimension, the share of tasks whose gold answer (what the classical tools
   get) passes the DORA check against the generator's truth (``scoring.truth_vs_gold``): the part of
   an agent's gap to the truth that is tool error, not planning error.

The figures go to ``<out>/disaster_levels.json`` and ``<out>/disaster_levels.md``.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from gauntlet.fileio import write_atomically
from gauntlet.mcp_servers.disaster.events import EVENTS, HAZARD_TYPES
from gauntlet.mcp_servers.disaster.realism import REALISM_LEVELS

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "disaster" / "levels"


def first_of_each_hazard() -> list[str]:
    """The first catalogue event of every hazard type."""
    return [next(e.id for e in EVENTS if e.hazard == hazard) for hazard in HAZARD_TYPES]


SIZES: dict[str, dict[str, Any]] = {
    "smoke": {"events": ["ahr-2021-flood"], "size_px": 64, "per_dimension": 1},
    # One event of every hazard type at 128 x 128 cells; truth vs gold over every task, gold replay of 12
    # tasks of each dimension (a replay of all ~360 tasks a level did not fit the shared machine's time).
    "medium": {"events": first_of_each_hazard(), "size_px": 128, "per_dimension": 12},
    "full-replay": {"events": first_of_each_hazard(), "size_px": 128, "per_dimension": None},
}


def sample(tasks: list[Any], per_dimension: int | None) -> list[int]:
    """Suite indices of the first ``per_dimension`` tasks of every dimension (every task for None)."""
    taken: Counter[str] = Counter()
    chosen = []
    for index, task in enumerate(tasks):
        dimension = task.metadata["dimension"]
        if per_dimension is None or taken[dimension] < per_dimension:
            taken[dimension] += 1
            chosen.append(index)
    return chosen


def replay(level: str, suite: Path, scene_root: Path, per_dimension: int | None) -> dict[str, Any]:
    """Replay the gold trajectories through MCP sessions of the level's server; scores and the DORA summary."""
    import gymnasium as gym

    import gauntlet
    from gauntlet.agents.tool import GoldAgent
    from gauntlet.mcp_servers.disaster.scoring import DoraScorer
    from gauntlet.mcp_servers.disaster.server import build_hard_server, build_server
    from gauntlet.mcp_servers.disaster.tasks import MAX_STEPS, MAX_TEXT_LENGTH
    from gauntlet.tasks import load_suite

    tasks = load_suite(suite)
    indices = sample(tasks, per_dimension)
    n = len(indices)
    factory = functools.partial(build_server if level == "clean" else build_hard_server, scene_root)
    scorer = DoraScorer()
    env = gym.make("gauntlet/ToolTask-v0", tasks=str(suite), server=factory, scorer=scorer,
                   max_text_length=MAX_TEXT_LENGTH, max_steps=MAX_STEPS)
    agent = GoldAgent(suite=str(suite))
    scores, reports = [], []
    start = time.perf_counter()
    try:
        for index in indices:
            episode = gauntlet.rollout(env, agent, seed=index)
            scores.append(episode.outcome.score)
            reports.append(episode.steps[-1].privileged)
    finally:
        env.close()
    seconds = time.perf_counter() - start
    replayed = [tasks[i] for i in indices]
    imperfect = [task.id for task, s in zip(replayed, scores) if s < 1.0 - 1e-9]
    by_dimension: dict[str, dict[str, int]] = {}
    for task, score in zip(replayed, scores):
        row = by_dimension.setdefault(task.metadata["dimension"], {"replayed": 0, "perfect": 0})
        row["replayed"] += 1
        row["perfect"] += score >= 1.0 - 1e-9
    return {"tasks": n, "mean_score": sum(scores) / n, "perfect": n - len(imperfect), "imperfect": imperfect,
            "by_dimension": dict(sorted(by_dimension.items())), "seconds": seconds,
            "summary": scorer.summarize(reports)}


def run(size: str, out: Path) -> dict[str, Any]:
    from gauntlet.mcp_servers.disaster import data
    from gauntlet.mcp_servers.disaster.scoring import truth_vs_gold
    from gauntlet.mcp_servers.disaster.tasks import suite_path
    from gauntlet.tasks import load_suite

    plan = SIZES[size]
    results: dict[str, Any] = {"size": size, "events": plan["events"], "size_px": plan["size_px"], "levels": {}}
    out.mkdir(parents=True, exist_ok=True)
    for level in sorted(REALISM_LEVELS, key=lambda name: name != "hard"):  # the hard level first
        start = time.perf_counter()
        scene_root = data.build_subset(plan["events"], size_px=plan["size_px"], realism=level) / "scenes"
        suite = suite_path({"events": plan["events"], "size_px": plan["size_px"], "realism": level})
        built_s = time.perf_counter() - start
        tasks = load_suite(suite)
        results["levels"][level] = {
            "build_seconds": built_s, "tasks": len(tasks),
            "by_dimension": dict(sorted(Counter(t.metadata["dimension"] for t in tasks).items())),
            "truth_vs_gold": truth_vs_gold(tasks), "gold": replay(level, suite, scene_root, plan["per_dimension"])}
        print(f"{level}: {len(tasks)} tasks, gold {results['levels'][level]['gold']['mean_score']:.3f}", flush=True)
        # written after each level, so a long run's first level is on disk before the second starts
        write_atomically(out / "disaster_levels.json", _json(results))
        write_atomically(out / "disaster_levels.md", markdown(results))
    return results


def _json(results: dict[str, Any]) -> str:
    import json

    return json.dumps(results, indent=1, sort_keys=True)


def markdown(results: dict[str, Any]) -> str:
    """The tables docs/results/disaster-hard.md shows: gold replay and truth vs gold per level and dimension."""
    lines = ["| level | dimension | tasks | gold replay: perfect / replayed | gold DORA answer score | "
             "gold answer passes vs the truth |", "|---|---|---|---|---|---|"]
    for level, row in results["levels"].items():
        gold = row["gold"]
        dims = gold["summary"]["levels"].get(level, {}).get("dimensions", {})
        for dim, count in row["by_dimension"].items():
            truth = row["truth_vs_gold"].get(dim)
            agreement = "-" if truth is None else f"{truth['gold_passes']}/{truth['with_truth']} ({truth['share']:.0%})"
            replayed = gold["by_dimension"].get(dim, {"replayed": 0, "perfect": 0})
            answer = dims.get(dim, {}).get("answer_score")
            lines.append(f"| {level} | {dim} | {count} | {replayed['perfect']} / {replayed['replayed']} |"
                         f" {'-' if answer is None else f'{answer:.3f}'} | {agreement} |")
        score = gold["summary"]["levels"].get(level, {}).get("dora_score")
        lines.append(f"| {level} | all | {row['tasks']} | {gold['perfect']} / {gold['tasks']} |"
                     f" {'-' if score is None else f'{score:.3f} (DORA score)'} | |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="smoke")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    results = run(args.size, args.out)
    sys.stdout.write(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
