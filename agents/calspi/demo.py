"""A short Cal-SPI episode (well under 30 s): fit and calibrate on a small dataset, act by gated search,
record the episode and print how often the agent switched away from the baseline."""

from __future__ import annotations

import pathlib
import time

import numpy as np

DOMAIN = "InvertedPendulum"
DATASET_SIZE = 2_000
STEPS = 200


def run_demo(out_dir: pathlib.Path) -> None:
    """Fit Cal-SPI on the InvertedPendulum task's 2k dataset, run one 200-step episode into
    ``out_dir/calspi-episode.jsonl`` and print the switching rate and returns."""
    import gymnasium as gym

    import gauntlet
    from gauntlet.agents.calspi.agent import CalSPIAgent

    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    agent = CalSPIAgent(DOMAIN, DATASET_SIZE, model={"hidden": 64, "layers": 2, "epochs": 15, "value_steps": 400})
    certificate = agent.fitted.certificate
    print(f"Cal-SPI on {DOMAIN}: certificate with p={certificate.p}, gamma={certificate.gamma} from "
          f"n={certificate.n} held-out transitions (rank {certificate.rank}, q_hat={certificate.q_hat:.2f}); "
          f"fitted in {time.perf_counter() - started:.1f} s")
    path = out_dir / "calspi-episode.jsonl"
    env = gym.make(f"gauntlet/CalSPI-{DOMAIN}-v0", max_episode_steps=STEPS)
    episode = gauntlet.rollout(env, agent, seed=0, record=path, keep_steps=True)
    switched = [step.events[0].data["switched"] for step in episode.steps]
    decision_ms = [step.events[0].cost_ms for step in episode.steps]
    baseline_return = float(agent.task.true_returns(agent.task.baseline, episodes=1, seed=0, max_steps=STEPS)[0])
    print(f"switched away from the baseline at {sum(switched)} of {len(switched)} decisions "
          f"({np.mean(switched):.1%}); {1e3 / np.mean(decision_ms):.0f} decisions/s")
    print(f"return {episode.total_reward:.1f} (baseline from the same start: {baseline_return:.1f}); "
          f"episode recorded to {path}")
