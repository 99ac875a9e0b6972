"""The agents every env supports: uniform random, and replay of a recorded episode.

They live in core because core's replayer is built on them (the replay agent re-executes a recording,
the random agent carries a branch on when the episode's own agent is unknown), and core depends on no family.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from gymnasium import spaces

from gauntlet.agent import Agent
from gauntlet.episode import Episode, load_episodes
from gauntlet.spaces import from_json


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


class ReplayAgent(Agent):
    """Plays back the actions of a recorded episode, decoded into the env's action space.

    Pass ``episode`` (an Episode, or the path of an episode file or run folder) and, for files with
    several episodes, ``index``. When the recording runs out the agent raises ``IndexError``.
    """

    name = "replay"

    def __init__(self, episode: Episode | str | Path, index: int = 0):
        self._source = str(episode) if not isinstance(episode, Episode) else None
        self._index = index
        if isinstance(episode, Episode):
            self.episode = episode
        else:
            episodes = load_episodes(episode)
            if not episodes:
                raise ValueError(f"{episode} holds no episodes")
            if not 0 <= index < len(episodes):
                raise ValueError(f"{episode} holds {len(episodes)} episodes; index {index} is out of range")
            self.episode = episodes[index]
        self._actions: list[Any] = []
        self._cursor = 0

    def config(self) -> dict[str, Any]:
        return {"episode": self._source, "index": self._index} if self._source else {}

    def reset(self, *, seed: int | None, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        self._actions = [from_json(action_space, step.action) for step in self.episode.steps]
        self._cursor = 0

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        if self._cursor >= len(self._actions):
            raise IndexError(f"the recording of {self.episode.episode_id} has only {len(self._actions)} actions")
        action = self._actions[self._cursor]
        self._cursor += 1
        return action
