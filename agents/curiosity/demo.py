"""Curious policies' designs on location finding, as a saved plot (trains nothing; seconds).

Three policies on the same hidden sources, each with the final posterior particles of its history:
the trained curious policy ``curiosity-belief`` (REINFORCE on the icl_lp reward, weights shipped with
the package), the untrained curious policy ``GreedyLPAgent`` (each design maximises the expected
learning progress the in-context learner predicts for itself) and the random policy.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import numpy as np

import gauntlet
from gauntlet.agents.curiosity.belief import CuriousBeliefAgent
from gauntlet.agents.curiosity.policies import GreedyLPAgent, RandomDesignAgent
from gauntlet.envs.curiosity.location_finding import LocationFindingEnv
from gauntlet.envs.curiosity.location_finding_model import DESIGN_BOUND

# Small enough to run in seconds; the env's defaults (4096 particles, T = 30) are for experiments.
DEMO_ENV: dict[str, Any] = {"horizon": 12, "n_particles": 256, "n_probes": 16, "reward_mode": "none",
                            "record_true_lp": False}


def run_demo(out_dir: Path) -> None:
    """Write ``curiosity_location_finding.png`` into ``out_dir`` and print where it is."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    figure, axes = plt.subplots(1, 3, figsize=(15, 5), sharex=True, sharey=True)
    policies = (("trained curious\n(REINFORCE on ICL-LP)", CuriousBeliefAgent()),
                ("untrained curious\n(greedy expected ICL-LP)",
                 GreedyLPAgent("LocationFinding-v0", n_outcomes=2, **DEMO_ENV)),
                ("random", RandomDesignAgent("LocationFinding-v0", **DEMO_ENV)))
    for axis, (title, agent) in zip(axes, policies):
        env = gym.make("gauntlet/LocationFinding-v0", **DEMO_ENV)
        episode = gauntlet.rollout(env, agent, seed=0, record="memory")
        privileged = [step.privileged or {} for step in episode.steps]
        designs = np.array([info["design"] for info in privileged])
        outcomes = np.array([info["outcome"] for info in privileged])
        theta = np.array(privileged[0]["theta"])
        learner = cast(LocationFindingEnv, env.unwrapped).exact_learner
        weights = np.exp(learner.log_weights(designs[None], outcomes[None], np.ones((1, len(designs)), bool))[0])
        particles = learner.particles.reshape(-1, 2)
        axis.scatter(particles[:, 0], particles[:, 1], s=40 * np.repeat(weights, 2) / weights.max(), c="tab:blue",
                     alpha=0.4, label="posterior particles (size = weight)")
        axis.scatter(theta[:, 0], theta[:, 1], marker="*", s=250, c="gold", edgecolors="k", label="hidden sources")
        points = axis.scatter(designs[:, 0], designs[:, 1], c=np.arange(len(designs)), cmap="viridis", s=30,
                              edgecolors="k", label="designs (colour = order)")
        axis.set(title=title, xlim=(-DESIGN_BOUND, DESIGN_BOUND), ylim=(-DESIGN_BOUND, DESIGN_BOUND), aspect="equal")
    axes[0].legend(loc="lower left", fontsize=7)
    figure.colorbar(points, ax=axes, label="design index t", shrink=0.8)
    path = out_dir / "curiosity_location_finding.png"
    scratch = out_dir / ".curiosity_location_finding.tmp.png"
    figure.savefig(scratch, dpi=110, bbox_inches="tight")
    os.replace(scratch, path)
    plt.close(figure)
    print(f"curious designs on location finding: {path}")
