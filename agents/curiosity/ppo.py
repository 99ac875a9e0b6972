"""The curious policy trained by RL: PPO (Stable-Baselines3) maximising the ``icl_lp`` reward.

The policy sees the env's observation (the history of designs and outcomes) and is rewarded only by
equation (ICL-LP): the in-context learner's loss on the probes without minus with the new point.
It never sees θ, true LP or the information gain; those are used to evaluate it. Training
(``build``) is a deterministic function of its config (seeded, one torch thread); the policy file
lives in the data cache (``ensure_built("curiosity-ppo-policy", ...)``).

    agent = CuriousPPOAgent("smoke")   # or "default" (60k PPO steps); trains on first use
    episode = gauntlet.rollout(gym.make("gauntlet/ActiveRegression-v0"), agent, seed=0)
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from gauntlet.agent import Agent
from gauntlet.agents.curiosity.data_versions import PPO_POLICY as DATA_NAME
from gauntlet.agents.curiosity.data_versions import PPO_POLICY_VERSION as DATA_VERSION
from gauntlet.datacache import ensure_built


@dataclass(frozen=True)
class CuriousPPOConfig:
    """What is trained: env, reward, PPO budget and seed (the cache key of the policy)."""

    env_id: str = "ActiveRegression-v0"
    reward_mode: str = "icl_lp"
    total_timesteps: int = 60_000
    n_steps: int = 1024
    batch_size: int = 256
    learning_rate: float = 3e-4
    entropy_coefficient: float = 0.0
    seed: int = 0


CONFIGS = {"default": CuriousPPOConfig(), "smoke": CuriousPPOConfig(total_timesteps=256, n_steps=128, batch_size=64)}


def build(folder: Path, **params: Any) -> None:
    """Train PPO on the env's ``reward_mode`` and save ``policy.zip`` and ``training.json``."""
    import torch
    from stable_baselines3 import PPO

    config = CuriousPPOConfig(**params)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: the same policy on every machine with the same torch
    try:
        env = gym.make(f"gauntlet/{config.env_id}", reward_mode=config.reward_mode, record_true_lp=False)
        model = PPO("MultiInputPolicy", env, n_steps=config.n_steps, batch_size=config.batch_size,
                    learning_rate=config.learning_rate, ent_coef=config.entropy_coefficient, seed=config.seed,
                    device="cpu", verbose=0)
        model.learn(total_timesteps=config.total_timesteps)
        model.save(Path(folder) / "policy.zip")
    finally:
        torch.set_num_threads(threads)
    (Path(folder) / "training.json").write_text(json.dumps({"config": asdict(config)}, indent=1))


def build_named(folder: Path, config: str = "default") -> None:
    """The data builder of ``gauntlet data build curiosity-ppo-policy``: ``build`` of ``CONFIGS[config]``."""
    if config not in CONFIGS:
        raise ValueError(f"config must be one of {sorted(CONFIGS)}; got {config!r}")
    build(folder, **asdict(CONFIGS[config]))


class CuriousPPOAgent(Agent):
    """The PPO policy trained on ``icl_lp`` (deterministic actions: the policy mean)."""

    name = "curiosity-ppo"

    def __init__(self, config: str = "default"):
        if config not in CONFIGS:
            raise ValueError(f"config must be one of {sorted(CONFIGS)}; got {config!r}")
        from stable_baselines3 import PPO

        self.config_name = config
        self.training = CONFIGS[config]
        # The cache key is the config's name (none for "default"), as ``gauntlet data build`` uses it.
        folder = ensure_built(DATA_NAME, DATA_VERSION, build_named, params={} if config == "default" else
                              {"config": config})
        self.model = PPO.load(folder / "policy.zip", device="cpu")

    def config(self) -> dict[str, Any]:
        return {"config": self.config_name}

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> np.ndarray:
        action, _ = self.model.predict(observation, deterministic=True)
        return action
