"""The Cal-SPI task envs: a MuJoCo domain bundled with its baseline, datasets and true-return evaluator."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from gauntlet.envs.calspi.baselines import LinearPolicy, load_baseline
from gauntlet.envs.calspi.datasets import DEFAULT_NOISE_STD, OfflineDataset, load_dataset
from gauntlet.envs.calspi.domains import Domain, get_domain


class CalSPITaskEnv(gym.Env[np.ndarray, np.ndarray]):
    """## Description
    An offline safe-policy-improvement task (Cal-SPI) on a MuJoCo domain from ``gymnasium[mujoco]``:
    the env itself is the domain's ``-v5`` env, and the task bundles what an offline method gets
    and what judges it: the frozen ``baseline`` policy (linear, ARS-trained, of middling quality),
    the offline ``dataset`` collected by the baseline with Gaussian exploration noise, and
    ``true_returns(policy, ...)``, the real return of a policy measured in the simulator.

    ## Action Space
    The domain's: ``Box(-1, 1, (1,))`` scaled to ``[-3, 3]`` for InvertedPendulum, ``Box(-1, 1, (3,))``
    for Hopper, ``Box(-1, 1, (6,))`` for HalfCheetah, ``Box(-1, 1, (2,))`` for Swimmer (joint torques).
    An action outside the box, of the wrong shape, or not finite is refused with a ``ValueError``
    naming the expected space.

    ## Observation Space
    The domain's ``-v5`` observation (4, 11, 17 and 8 dimensions respectively).

    ## Rewards
    The domain's ``-v5`` reward, unchanged.

    ## Starting State
    The domain's ``-v5`` random initial state, from ``reset(seed=...)``.

    ## Episode End
    The domain's termination rule (``gauntlet.envs.calspi.domains``); truncation at 1000 steps.

    ## Arguments
    ``domain`` (``"InvertedPendulum"``, ``"Hopper"``, ``"HalfCheetah"``, ``"Swimmer"``), ``dataset_size``
    (transitions; 2k, 10k, 50k, 200k are the documented sizes), ``dataset_seed``, ``noise_std``
    (exploration noise as a fraction of the half action range).

    ## Branching
    ``snapshot()``/``restore()``: the full MuJoCo integration state (``mj_getState``) and every RNG.

    ## Version History
    - v0: initial release.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 50}
    observation_space: spaces.Box
    action_space: spaces.Box

    def __init__(self, domain: str, dataset_size: int = 10_000, dataset_seed: int = 0,
                 noise_std: float = DEFAULT_NOISE_STD, render_mode: str | None = None):
        from gauntlet.branching import branchable
        from gauntlet.envs.calspi.gl import choose_gl_backend

        choose_gl_backend()  # before the MuJoCo env exists: its renderer reads the choice
        self.domain: Domain = get_domain(domain)
        self.dataset_size, self.dataset_seed, self.noise_std = int(dataset_size), int(dataset_seed), float(noise_std)
        self.render_mode = render_mode
        # The raw MuJoCo env: the task's TimeLimit (from its registration) is the only one.
        self._physics = branchable(gym.make(self.domain.gym_id, render_mode=render_mode).unwrapped, "mujoco")
        # every domain (``domains.DOMAINS``) observes and acts in boxes
        self.observation_space = cast(spaces.Box, self._physics.observation_space)
        self.action_space = cast(spaces.Box, self._physics.action_space)
        self.baseline: LinearPolicy
        self.baseline, self.baseline_record = load_baseline(self.domain.name)
        self._dataset: OfflineDataset | None = None

    # The bundle ----------------------------------------------------------------------------------
    @property
    def dataset(self) -> OfflineDataset:
        """The task's offline dataset (built into the data cache on first use)."""
        if self._dataset is None:
            self._dataset = load_dataset(self.domain.name, self.dataset_size, seed=self.dataset_seed,
                                         noise_std=self.noise_std)
        return self._dataset

    def is_terminal(self, next_observations: np.ndarray) -> np.ndarray:
        """The domain's termination rule on a batch of observations."""
        return self.domain.is_terminal(np.atleast_2d(next_observations))

    def true_returns(self, policy: Callable[[np.ndarray], np.ndarray], *, episodes: int = 5, seed: int = 0,
                     max_steps: int | None = None) -> np.ndarray:
        """Undiscounted real returns of ``policy`` over ``episodes`` fresh episodes of this domain."""
        env = gym.make(self.domain.gym_id, max_episode_steps=max_steps or self.domain.max_episode_steps)
        returns = []
        for episode in range(episodes):
            observation, _ = env.reset(seed=seed + episode)
            total, done = 0.0, False
            while not done:
                observation, reward, terminated, truncated, _ = env.step(policy(observation))
                total += float(reward)
                done = terminated or truncated
            returns.append(total)
        env.close()
        return np.asarray(returns)

    # Gymnasium API -------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        return self._physics.reset(seed=seed, options=options)

    def step(self, action: Any):
        array = np.asarray(action, dtype=self.action_space.dtype)
        space = self.action_space
        if array.shape != space.shape or not np.isfinite(array).all() or not space.contains(array):
            raise ValueError(f"action {action!r} is not in the action space {self.action_space} "
                             f"(expected finite values of shape {self.action_space.shape} within its bounds)")
        return self._physics.step(array)

    def render(self):
        return self._physics.render()

    def close(self) -> None:
        self._physics.close()

    # Branchable ----------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        return {"physics": self._physics.snapshot(), "rng": copy.deepcopy(self.np_random.bit_generator.state)}

    def restore(self, snapshot: dict[str, Any]) -> None:
        self._physics.restore(snapshot["physics"])
        self.np_random.bit_generator.state = copy.deepcopy(snapshot["rng"])
