"""Oversight performance suite: branched rows per second with 1 and 2 collection workers.

    gauntlet bench oversight [--quick] [--ray] [--out PATH]

Branched rows are the expensive part of prefix-branching oversight, so collection runs on the
runner's backends: local spawn workers, or a Ray cluster. Figures, every one measured in the same run
on the same jobs (each configuration collects into a fresh folder, so nothing is resumed):

1. rows per second of wall time with 1 worker (the baseline) and with 2, per benchmark, and the
   speed-up 2 workers give (linear is 2.0 on a machine with 2 free cores);
2. the workers' busy time (the sum over workers of the time spent collecting), so a speed-up lost to
   process start-up or to a machine shared with other work shows as busy time well under
   workers x wall time;
3. with ``--ray``, the same with Ray's local cluster (2 workers), its start-up included.

The rows of every configuration must be identical (collection is seeded); the suite checks it and
fails otherwise. The 1-minute load average is recorded with the figures.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import gauntlet  # noqa: F401  (registers the gauntlet/ envs)
from gauntlet.controllers.oversight.collect import CollectSpec, collect, load_rows
from _reporting import bench_parser, figures_table, save_report, show

# Benchmark -> (episodes, full size; episodes, --quick). Corridor episodes are short and cheap, Taxi's
# longer: between them a per-job start-up cost and a compute-bound job are both seen.
SIZES = {"corridor": (1200, 16), "taxi": (300, 8)}


def _rows_key(rows: list[dict[str, Any]]) -> list[str]:
    """The rows' content without their timings, in a fixed order: equal across worker counts."""
    keyed = []
    for row in rows:
        record = {key: value for key, value in row.items() if "seconds" not in key and not key.endswith("_s")}
        keyed.append(json.dumps(record, sort_keys=True, default=float))
    return sorted(keyed)


def measure(benchmark: str, episodes: int, workers: int, backend: str) -> dict[str, Any]:
    spec = CollectSpec(benchmark=benchmark, episodes=tuple(range(episodes)), prefixes="all")
    with tempfile.TemporaryDirectory(prefix=f"bench-oversight-{benchmark}-") as folder:
        started = time.perf_counter()
        result = collect(spec, Path(folder) / "rows", workers=workers, backend=backend)
        wall = time.perf_counter() - started
        rows = load_rows(Path(folder) / "rows")
    return {"benchmark": benchmark, "backend": backend, "workers": workers, "episodes": episodes,
            "rows": len(rows), "wall_s": wall, "rows_per_s": len(rows) / wall, "busy_s": result.stats.seconds,
            "replay_match": result.stats.replays_matched / max(result.stats.replays, 1),
            "key": _rows_key(rows)}


def main() -> int:
    parser = bench_parser("oversight", __doc__)
    parser.add_argument("--ray", action="store_true", help="also measure Ray's local cluster with 2 workers")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    results: list[dict[str, Any]] = []
    for benchmark, (full, quick) in SIZES.items():
        episodes = quick if args.quick else full
        configurations = [(1, "local"), (2, "local")] + ([(2, "ray")] if args.ray else [])
        measure(benchmark, 1, 1, "local")  # warm-up, not reported: builds or loads the benchmark's cached data
        measured = [measure(benchmark, episodes, workers, backend) for workers, backend in configurations]
        baseline, baseline_key = measured[0], measured[0]["key"]
        for figure in measured:
            if figure["key"] != baseline_key:
                raise SystemExit(f"{benchmark}: rows with {figure['workers']} {figure['backend']} workers differ "
                                 "from 1 worker's; collection is not deterministic")
            figure["speedup"] = figure["rows_per_s"] / baseline["rows_per_s"]
            del figure["key"]
        results.extend(measured)
    table = figures_table("Oversight collection: rows/s by workers (baseline 1 local worker, same run)",
                          ("bench", "backend", "workers", "rows", "wall s", "rows/s", "gain", "busy s", "match"))
    for figure in results:
        table.add_row(figure["benchmark"], figure["backend"], str(figure["workers"]), str(figure["rows"]),
                      f"{figure['wall_s']:.1f}", f"{figure['rows_per_s']:.1f}", f"{figure['speedup']:.2f}x",
                      f"{figure['busy_s']:.1f}", f"{figure['replay_match']:.2f}")
    show(table)
    save_report({"suite": "oversight", "quick": args.quick, "cpus": os.cpu_count(), "load_1min": load,
                 "results": results}, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
