"""The agent every env supports: uniform random.

Replay of a recorded episode is core's own agent (``gauntlet.replay_agent``), since the replayer needs it.
"""

from __future__ import annotations

import copy
from typing import Any

from gymnasium import spaces

from gauntlet.agent import Agent


class RandomAgent(Agent):
    """Samples actions uniformly from the action space, seeded by the episode seed."""

    name = "random"

    def __init__(self) -> None:
        self._source: spaces.Space | None = None

    def reset(self, *, seed: int | None, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        # A private copy, so sampling never disturbs the env's own action-space RNG.
        if action_space is not self._source:
            self._source, self._space = action_space, copy.deepcopy(action_space)
            self._sample = self._space.sample
        self._space.seed(seed)

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        return self._sample()
