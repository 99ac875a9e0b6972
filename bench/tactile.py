"""Tactile suite: env-steps/s of the Tactile MNIST envs with full tactile RGB, and memory per env.

    gauntlet bench tactile [--quick] [--out PATH]

Figures (64 x 64 tactile RGB images, TactileMNIST-v0, fixed random actions):
1. single env: steps/s, against the depth-only path of the same env (baseline measured in the same
   run: the sensor's contact depth map without the photometric model);
2. native vector env, n = 1, 8, 64: env-steps/s, against a naive loop over n single envs (n = 8)
   measured in the same run;
3. memory per env: bytes allocated by a vector env per extra env (tracemalloc, n = 64 vs n = 1),
   plus the memory-mapped object set shared by all envs.
Targets from the issue: >= 5,000 env-steps/s single, >= 20,000 batched, on 2 CPU cores. For scale,
the reference package (tactile-mnist 0.13.0) was reported at 128 env-steps/s single / 346 with 8
envs (depth only) and 31 with its Taxim rendering on 2 CPU cores; those are quoted, not
measured here.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

from gauntlet.envs.tactile.env import TactilePerceptionEnv, TactilePerceptionVectorEnv
from reporting import bench_parser, figures_table, save_report, show

HERE = Path(__file__).resolve().parent
REFERENCE = {"single_depth": 128, "vector8_depth": 346, "single_taxim": 31}
OBJECTS = 500  # objects per split: speed does not depend on it, building the full set takes longer


def _actions(num_envs: int, count: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"action": rng.uniform(-1, 1, (num_envs, 2)).astype(np.float32),
             "prediction": rng.normal(size=(num_envs, 10)).astype(np.float32)} for _ in range(count)]


def _rate(run, steps: int, trials: int) -> float:
    """Median steps/s of ``run()`` (which takes ``steps`` env-steps) over ``trials``."""
    rates = []
    for _ in range(trials):
        start = time.perf_counter()
        run()
        rates.append(steps / (time.perf_counter() - start))
    return statistics.median(rates)


def single_env(steps: int, trials: int) -> dict[str, float]:
    actions = [{key: value[0] for key, value in action.items()} for action in _actions(1, steps)]
    results = {}
    for label, rgb in (("rgb", True), ("depth_only", False)):
        env = TactilePerceptionEnv(objects_per_split=OBJECTS)
        env.sim.render_rgb = rgb
        env.reset(seed=0)

        def run():
            for t, action in enumerate(actions):
                _, _, terminated, _, _ = env.step(action)
                if terminated:
                    env.reset()

        run()  # warm up
        results[label] = _rate(run, steps, trials)
    results["rgb_vs_depth_only"] = results["rgb"] / results["depth_only"]
    return results


def vector_env(sizes: tuple[int, ...], env_steps: int, trials: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for n in sizes:
        env = TactilePerceptionVectorEnv(n, objects_per_split=OBJECTS)
        env.reset(seed=0)
        actions = _actions(n, max(4, env_steps // n))

        def run():
            for action in actions:
                env.step(action)

        run()
        results[f"n={n}"] = _rate(run, n * len(actions), trials)
    # the baseline: a loop over 8 single envs, the way a generic vectoriser steps them
    n = 8
    singles = [TactilePerceptionEnv(objects_per_split=OBJECTS) for _ in range(n)]
    for i, env in enumerate(singles):
        env.reset(seed=i)
    actions = _actions(n, max(4, env_steps // n))

    def loop():
        for action in actions:
            for i, env in enumerate(singles):
                _, _, terminated, _, _ = env.step({"action": action["action"][i], "prediction": action["prediction"][i]})
                if terminated:
                    env.reset()

    loop()
    results["loop_of_8_singles"] = _rate(loop, n * len(actions), trials)
    results["n=8_vs_loop"] = results["n=8"] / results["loop_of_8_singles"]
    return results


def memory_per_env() -> dict[str, float]:
    def allocated(n: int) -> int:
        tracemalloc.start()
        env = TactilePerceptionVectorEnv(n, objects_per_split=OBJECTS)
        env.reset(seed=0)
        env.step(_actions(n, 1)[0])
        current, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        del env
        return current

    allocated(1)  # load the object set and imports first, so they are not counted below
    one, many = allocated(1), allocated(64)
    objects = TactilePerceptionEnv(objects_per_split=OBJECTS).sim.task.objects
    return {"bytes_per_env": (many - one) / 63, "shared_object_set_bytes": float(objects.fields.nbytes)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = bench_parser("tactile", __doc__)
    args = parser.parse_args(argv)
    steps, trials = (200, 2) if args.quick else (3000, 5)
    report = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "image_size": [64, 64],
        "single": single_env(steps, trials),
        "vector": vector_env((1, 8, 64), steps * 4, trials),
        "memory": memory_per_env(),
        "reference_quoted": REFERENCE,
    }
    _print_table(report)
    save_report(report, args.out)
    return report


def _print_table(report: dict[str, Any]) -> None:
    table = figures_table("gauntlet bench tactile (64x64 tactile RGB; ratios vs baselines measured in the same run)", ("figure", "measured", "baseline (same run)", "ratio", "target"))
    single = report["single"]
    table.add_row("single env, env-steps/s", f"{single['rgb']:.0f}", f"depth-only path {single['depth_only']:.0f}",
                  f"{single['rgb_vs_depth_only']:.2f}x", ">= 5,000")
    vector = report["vector"]
    for n in (1, 8, 64):
        baseline = f"loop of 8 single envs {vector['loop_of_8_singles']:.0f}" if n == 8 else ""
        ratio = f"{vector['n=8_vs_loop']:.2f}x" if n == 8 else ""
        table.add_row(f"vector env n={n}, env-steps/s", f"{vector[f'n={n}']:.0f}", baseline, ratio,
                      ">= 20,000" if n > 1 else "")
    memory = report["memory"]
    table.add_row("memory per env", f"{memory['bytes_per_env'] / 1024:.0f} KiB",
                  f"shared object set {memory['shared_object_set_bytes'] / 2 ** 20:.1f} MiB (memory-mapped)", "", "")
    reference = report["reference_quoted"]
    table.add_row("reference package (quoted, not measured)", f"{reference['single_taxim']} (Taxim)",
                  f"{reference['single_depth']} single / {reference['vector8_depth']} n=8 (depth)", "", "")
    show(table)


if __name__ == "__main__":
    main()
