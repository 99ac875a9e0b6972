"""Comparison agents of the Cal-SPI experiments that are not search variants: the baseline itself and
behaviour cloning (an MLP regressing the dataset's actions on its observations, mean-squared error)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import numpy as np

from gauntlet.agent import Agent

if TYPE_CHECKING:
    from gauntlet.envs.calspi.tasks import CalSPITaskEnv


def _task(domain: str, dataset_size: int, dataset_seed: int) -> CalSPITaskEnv:
    import gymnasium as gym

    env = gym.make(f"gauntlet/CalSPI-{domain}-v0", dataset_size=dataset_size, dataset_seed=dataset_seed)
    return cast("CalSPITaskEnv", env.unwrapped)


class BaselineAgent(Agent):
    """Acts with the task's frozen baseline policy pi_b."""

    name = "calspi-baseline"

    def __init__(self, domain: str, dataset_size: int = 10_000, *, dataset_seed: int = 0):
        self.domain, self.dataset_size, self.dataset_seed = domain, dataset_size, dataset_seed
        self.task = _task(domain, dataset_size, dataset_seed)

    def config(self) -> dict[str, Any]:
        return {"domain": self.domain, "dataset_size": self.dataset_size, "dataset_seed": self.dataset_seed}

    def act(self, observation: Any, info: dict[str, Any]) -> np.ndarray:
        return self.task.baseline(observation).astype(self.task.action_space.dtype)


class BehaviourCloningAgent(Agent):
    """pi_BC = argmin_theta sum_i ||f_theta(s_i) - a_i||^2 over the dataset (behaviour cloning)."""

    name = "calspi-bc"

    def __init__(self, domain: str, dataset_size: int = 10_000, *, dataset_seed: int = 0, seed: int = 0,
                 hidden: int = 256, epochs: int = 30):
        import torch
        from torch import nn

        self.domain, self.dataset_size, self.dataset_seed, self.seed = domain, dataset_size, dataset_seed, seed
        self.task = _task(domain, dataset_size, dataset_seed)
        data = self.task.dataset.validate(self.task.observation_space.shape[0], self.task.action_space.shape[0])
        torch.manual_seed(seed)
        torch.set_num_threads(1)
        self.obs_mean, self.obs_std = data.observations.mean(0), np.maximum(data.observations.std(0), 1e-6)
        x = torch.as_tensor((data.observations - self.obs_mean) / self.obs_std, dtype=torch.float32)
        y = torch.as_tensor(data.actions, dtype=torch.float32)
        self.network = nn.Sequential(nn.Linear(x.shape[1], hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                     nn.Linear(hidden, y.shape[1]))
        optimiser = torch.optim.Adam(self.network.parameters(), lr=1e-3)
        generator = torch.Generator().manual_seed(seed)
        for _ in range(epochs):
            order = torch.randperm(len(x), generator=generator)
            for start in range(0, len(x), 256):
                index = order[start:start + 256]
                loss = ((self.network(x[index]) - y[index]) ** 2).mean()
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()

    def config(self) -> dict[str, Any]:
        return {"domain": self.domain, "dataset_size": self.dataset_size, "dataset_seed": self.dataset_seed,
                "seed": self.seed}

    def act(self, observation: Any, info: dict[str, Any]) -> np.ndarray:
        import torch

        with torch.no_grad():
            x = torch.as_tensor((np.asarray(observation) - self.obs_mean) / self.obs_std, dtype=torch.float32)
            action = self.network(x).numpy()
        space = self.task.action_space
        return np.clip(action, space.low, space.high).astype(space.dtype)
