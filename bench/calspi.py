"""Cal-SPI performance suite: planner decisions/s, batched ensemble throughput, planner cost in MuJoCo steps.

Every figure is a ratio against a baseline measured in the same run. Prints a table and writes JSON
(default ``bench/results/calspi.json``).

    gauntlet bench calspi [--quick] [--domain Hopper] [--out PATH]

Figures and targets:
1. planner decisions/s at the default search budget (``SearchConfig()``: 32 simulations in waves
   of 8, depth 3, rollout horizon 4 then the learned baseline value V^b with its gradient term at
   the leaf) with the default ensemble (7 members, 5 elites, 3 x 200 hidden units), over real
   states of a baseline episode: >= 20 decisions/s, so a 1,000-step
   evaluation episode takes under a minute.
2. ensemble forward throughput: transitions/s through the elites at batch 256 vs batch 1 (the
   gain the search gets from batching each layer's calls).
3. planner cost per decision, in steps of the MuJoCo env measured in the same run.
The ensemble's training quality does not change the search's cost much, so the model is fitted for
a few epochs only.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import gauntlet
from _reporting import bench_parser, figures_table, save_report, show

HERE = Path(__file__).resolve().parent


def _timed(function, repeats: int) -> float:
    """Median seconds per call over ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure(domain: str, *, decisions: int, quick: bool) -> dict[str, Any]:
    from gauntlet.agents.calspi.agent import CalSPIAgent

    agent = CalSPIAgent(domain, 2_000 if quick else 10_000, model={"epochs": 2 if quick else 5,
                                                                     "value_steps": 100 if quick else 300})
    task = agent.task
    # Real states along a baseline episode.
    env = gym.make(task.domain.gym_id)
    observation, _ = env.reset(seed=0)
    states, step_times = [], []
    for _ in range(max(decisions, 200)):
        states.append(observation)
        action = task.baseline(observation)
        started = time.perf_counter()
        observation, _, terminated, truncated, _ = env.step(action)
        step_times.append(time.perf_counter() - started)
        if terminated or truncated:
            observation, _ = env.reset()
    step_s = statistics.median(step_times)
    rng = np.random.default_rng(0)
    agent.planner.search(states[0], rng)  # warm-up
    decision_times = []
    for state in states[:decisions]:
        started = time.perf_counter()
        agent.planner.search(state, rng)
        decision_times.append(time.perf_counter() - started)
    decision_s = statistics.median(decision_times)
    model = agent.fitted.model
    batch = np.asarray(states[:256] * (256 // len(states[:256]) + 1))[:256]
    actions = task.baseline(batch)
    single_s = _timed(lambda: model.predict(batch[:1], actions[:1]), 200 if not quick else 50)
    batched_s = _timed(lambda: model.predict(batch, actions), 50 if not quick else 10)
    return {
        "domain": domain, "search": agent.search_config(),
        "decisions_per_s": 1.0 / decision_s, "decision_ms_median": decision_s * 1e3,
        "decision_ms_p90": float(np.quantile(decision_times, 0.9)) * 1e3,
        "mujoco_step_us": step_s * 1e6, "decision_in_mujoco_steps": decision_s / step_s,
        "ensemble_transitions_per_s_batch1": 1.0 / single_s,
        "ensemble_transitions_per_s_batch256": 256.0 / batched_s,
        "ensemble_batching_gain": (256.0 / batched_s) / (1.0 / single_s),
        "episode_1000_steps_s": 1000 * decision_s,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = bench_parser("calspi", __doc__)
    parser.add_argument("--domain", action="append", help="domain(s) to measure (default: all four)")
    args = parser.parse_args(argv)
    domains = args.domain or ["InvertedPendulum", "Hopper", "HalfCheetah", "Swimmer"]
    report = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                          "gauntlet": gauntlet.__version__},
              "domains": [measure(d, decisions=20 if args.quick else 100, quick=args.quick) for d in domains]}
    _print_table(report)
    save_report(report, args.out)
    return report


def _print_table(report: dict[str, Any]) -> None:
    table = figures_table("gauntlet bench calspi (ratios vs a baseline measured in the same run)",
                          ("domain", "figure", "measured", "baseline", "ratio", "target"))
    for row in report["domains"]:
        table.add_row(row["domain"], "planner decisions/s (default budget)", f"{row['decisions_per_s']:.1f}/s",
                      f"MuJoCo step {row['mujoco_step_us']:.0f} us", f"{row['decision_in_mujoco_steps']:.0f} steps",
                      ">= 20/s")
        table.add_row(row["domain"], "ensemble throughput, batch 256",
                      f"{row['ensemble_transitions_per_s_batch256']:.0f} transitions/s",
                      f"batch 1: {row['ensemble_transitions_per_s_batch1']:.0f}/s",
                      f"{row['ensemble_batching_gain']:.1f}x", "(info)")
    show(table)


if __name__ == "__main__":
    main()
