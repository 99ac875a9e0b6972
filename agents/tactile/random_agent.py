"""The blind baseline of the tactile envs: random moves, a prediction that ignores every touch."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from gauntlet.agent import Agent
from gauntlet.envs.tactile.env import component_shape


class TactileRandomAgent(Agent):
    """Moves the sensor uniformly at random and predicts uniform logits (classification) or zeros.

    Its normalised loss is exactly 1 on classification tasks (cross-entropy of uniform logits is
    log K): the floor every learned agent must beat.
    """

    name = "tactile-random"

    def reset(self, *, seed: int | None, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        self._rng = np.random.default_rng(seed)
        self._move_shape = component_shape(action_space, "action")
        self._prediction = np.zeros(component_shape(action_space, "prediction"), np.float32)

    def act(self, observation: Any, info: dict[str, Any]) -> dict[str, np.ndarray]:
        return {"action": self._rng.uniform(-1.0, 1.0, self._move_shape).astype(np.float32),
                "prediction": self._prediction.copy()}
