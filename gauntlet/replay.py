"""Replay and branch recorded episodes.

``replay_episode`` re-executes an episode from its header alone (env id, the env kwargs recorded in
its config, seed) with the replay agent on its recorded actions, and compares what the env returns
with what was recorded, step by step: observation, reward, terminated, truncated. ``branch_episode``
re-executes the first K steps the same way, snapshots the env there (``gauntlet.branching``) and
rolls out a different future from the snapshot with ``rollout_from``: a given action, then an agent.
The branched episode carries the re-executed prefix, so it replays from its seed like any other.

Values are compared in recorded form: a replayed value is encoded exactly as the episode writer
encodes it, so float32 observations compare bit for bit through their shortest decimal form, and
observations kept in the sidecar ``.npz`` are loaded and encoded the same way.
"""

from __future__ import annotations

import copy
import os
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from gauntlet.agent import Agent
from gauntlet.basic_agents import RandomAgent, ReplayAgent
from gauntlet.branching import BranchableEnv, Snapshot, branchable, outputs_identical
from gauntlet.episode import AgentSpec, Episode, EpisodeFormatError, EpisodeWriter, Outcome, Step, dumps, to_plain
from gauntlet.errors import UserError
from gauntlet.registry import UnknownEntryError, make_agent
from gauntlet.runner import new_run_id, rollout
from gauntlet.spaces import from_json
from gauntlet.versions import versions


BRANCHED_FROM = "branched_from"
"""The header config key of a branched episode: ``{"episode_id": parent id, "at": step index}``, the
episode it shares its first ``at`` steps with. Known before the first step, so a viewer can link a
branch to its parent even when the branch was cut short."""


class ReplayDivergedError(UserError):
    """The env no longer reproduces a recording (a different env version, or a non-deterministic env)."""


@dataclass(frozen=True)
class EpisodeStart:
    """How an episode began, read from its header: what it takes to begin it again.

    The config holds the env kwargs under ``env_kwargs`` (``rollout`` and the env server record them
    so) and any reset ``options`` under ``options``. ``not_replayable`` says why the start cannot be
    re-created, when it cannot.
    """

    env_kwargs: dict[str, Any]
    reset_options: dict[str, Any] | None
    not_replayable: str | None


def episode_start(episode: Episode) -> EpisodeStart:
    """How ``episode`` began (see ``EpisodeStart``)."""
    config = episode.config
    kwargs, options = dict(config.get("env_kwargs") or {}), config.get("options") or None
    reason = None
    if episode.env_id is None:
        reason = "it records a tool task, not an env"
    elif "restored_from" in config:
        reason = f"it starts from snapshot {config['restored_from']} of an MCP session, not from a reset"
    elif episode.seed is None:
        reason = "its env was reset without a seed"
    return EpisodeStart(kwargs, options, reason)


def make_env(episode: Episode) -> gym.Env:
    """A fresh env like the one that recorded ``episode``: same id, same recorded kwargs."""
    start = episode_start(episode)
    if start.not_replayable is not None or episode.env_id is None:
        raise UserError(f"episode {episode.episode_id} cannot be re-executed: {start.not_replayable}")
    try:
        return gym.make(episode.env_id, **start.env_kwargs)
    except TypeError as exc:
        raise UserError(f"cannot re-create {episode.env_id} with the recorded kwargs {start.env_kwargs} ({exc}); "
                        "the episode was recorded with a different version of the env") from None


class _Recording:
    """One episode's recorded values, with observations held in the sidecar ``.npz`` resolved."""

    def __init__(self, episode: Episode):
        self.episode = episode
        self._arrays: dict[str, np.ndarray] | None = None

    def _array(self, key: str) -> np.ndarray:
        if self._arrays is None:
            if self.episode.sidecar is None or not Path(self.episode.sidecar).exists():
                raise EpisodeFormatError(f"episode {self.episode.episode_id} keeps arrays in a sidecar .npz "
                                         "that is missing; copy it next to the episode file")
            with np.load(self.episode.sidecar) as arrays:
                self._arrays = {name: arrays[name] for name in arrays.files}
        if key not in self._arrays:
            raise EpisodeFormatError(f"{self.episode.sidecar} lacks array {key!r} of episode "
                                     f"{self.episode.episode_id}; the sidecar belongs to another file")
        return self._arrays[key]

    def resolve(self, value: Any) -> Any:
        if isinstance(value, dict):
            if "__array__" in value:
                return to_plain(self._array(value["__array__"]))
            return {key: self.resolve(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        return value

    def observation_differs(self, recorded: Any, observation: Any) -> bool:
        return not outputs_identical(self.resolve(recorded), to_plain(observation))

    def first_difference(self, recorded: Step, observation: Any, reward: SupportsFloat, terminated: bool,
                         truncated: bool) -> str | None:
        """The name of the first field where a re-executed step differs from ``recorded``, or None."""
        if self.observation_differs(recorded.observation, observation):
            return "observation"
        if not outputs_identical(float(to_plain(reward)), float(recorded.reward)):
            return "reward"
        if bool(terminated) != recorded.terminated:
            return "terminated"
        if bool(truncated) != recorded.truncated:
            return "truncated"
        return None


def _start(episode: Episode, env: gym.Env, recording: _Recording) -> tuple[Any, dict[str, Any], ReplayAgent, bool]:
    """Reset ``env`` with the episode's seed and ready a replay agent; report whether reset matched."""
    observation, info = env.reset(seed=episode.seed, options=episode_start(episode).reset_options)
    agent = ReplayAgent(episode)
    agent.reset(seed=episode.seed, observation_space=env.observation_space, action_space=env.action_space)
    reset_matches = not recording.observation_differs(episode.initial_observation, observation)
    return observation, info, agent, reset_matches


@dataclass
class ReplayCheck:
    """Whether re-executing an episode gave back what was recorded, and if not, where it first differed."""

    episode_id: str
    recorded_steps: int
    replayed_steps: int
    recorded_return: float
    replayed_return: float
    divergence: str | None = None
    not_replayable: str | None = None

    @property
    def matches(self) -> bool:
        return self.divergence is None and self.not_replayable is None


def replay_episode(episode: Episode, env: gym.Env | None = None) -> ReplayCheck:
    """Re-execute ``episode`` and compare it with its recording, step by step.

    ``env`` (made from the episode's header when not given) is reset with the episode's seed; the
    comparison stops at the first step that differs. An episode whose start cannot be re-created
    (see ``episode_start``) is reported as not replayable.
    """
    reason = episode_start(episode).not_replayable
    if reason is not None:
        return ReplayCheck(episode.episode_id, len(episode.steps), 0, episode.total_reward, 0.0, not_replayable=reason)
    own_env = env is None
    env = make_env(episode) if env is None else env
    try:
        return _check(episode, env)
    finally:
        if own_env:
            env.close()


def _check(episode: Episode, env: gym.Env) -> ReplayCheck:
    recording = _Recording(episode)
    observation, info, agent, reset_matches = _start(episode, env, recording)
    check = ReplayCheck(episode.episode_id, len(episode.steps), 0, episode.total_reward, 0.0,
                        None if reset_matches else "reset: initial observation")
    last = len(episode.steps) - 1
    for recorded in episode.steps if reset_matches else ():
        observation, reward, terminated, truncated, info = env.step(agent.act(observation, info))
        check.replayed_steps += 1
        check.replayed_return += float(reward)
        # The runner marks the step where it stopped an episode (max_steps, a halting controller) as
        # truncated; the env cannot know that, so a truncation recorded at the last step stands.
        if recorded.index == last and recorded.truncated and not terminated:
            truncated = True
        difference = recording.first_difference(recorded, observation, reward, terminated, truncated)
        if difference is not None:
            check.divergence = f"step {recorded.index}: {difference}"
            break
    return check


def replay_episodes(episodes: Iterable[Episode]) -> Iterator[ReplayCheck]:
    """``replay_episode`` for each episode, reusing one env per (env id, recorded kwargs)."""
    envs: dict[bytes, gym.Env] = {}
    try:
        for episode in episodes:
            start = episode_start(episode)
            if start.not_replayable is not None:
                yield replay_episode(episode)
                continue
            key = dumps([episode.env_id, start.env_kwargs])
            if key not in envs:
                envs[key] = make_env(episode)
            yield replay_episode(episode, envs[key])
    finally:
        for env in envs.values():
            env.close()


class _ResumeAt(gym.Wrapper):
    """An env whose ``reset`` returns to a snapshot, so ``rollout`` continues from there."""

    def __init__(self, env: BranchableEnv, snapshot: Snapshot, observation: Any, info: dict[str, Any]):
        super().__init__(env)
        self._branchable = env
        self._snapshot, self._observation, self._info = snapshot, observation, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._branchable.restore(self._snapshot)
        return copy.deepcopy(self._observation), copy.deepcopy(self._info)


def rollout_from(env: BranchableEnv, snapshot: Snapshot, observation: Any, info: dict[str, Any], agent: Agent,
                 *, seed: int | None = None, max_steps: int | None = None) -> Episode:
    """Roll ``agent`` out from ``snapshot`` of ``env`` (taken where ``observation`` and ``info`` were seen).

    The agent is reset with ``seed``. The returned Episode holds only the new steps, numbered from 0,
    and its initial observation is ``observation``.
    """
    return rollout(_ResumeAt(env, snapshot, observation, info), agent, seed=seed, max_steps=max_steps,
                   keep_steps=True)


class _ActionThenAgent(Agent):
    """Takes one given action, then hands over to an agent: the first step of a branch."""

    def __init__(self, action: Any, agent: Agent):
        self._action, self._agent = action, agent
        self._taken = False
        self.name = agent.name

    def spec(self) -> AgentSpec:  # the branch is recorded under the agent that carries it on
        return self._agent.spec()

    def reset(self, *, seed: int | None, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        self._taken = False
        self._agent.reset(seed=seed, observation_space=observation_space, action_space=action_space)

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        if not self._taken:
            self._taken = True
            return self._action
        return self._agent.act(observation, info)


def default_branch_agent(episode: Episode) -> Agent:
    """The agent that carries a branch on when none is given: the episode's own if registered, else random."""
    try:
        return make_agent(episode.agent.name, **episode.agent.config)
    except UnknownEntryError:
        return RandomAgent()


def branch_episode(episode: Episode, at: int, *, action: Any = None, agent: Agent | None = None,
                   max_steps: int | None = None, record: str | os.PathLike[str] | None = None) -> Episode:
    """Re-execute the first ``at`` steps of ``episode``, then take another course from there.

    At step ``at`` the branch takes ``action`` (JSON, decoded into the action space) when given,
    and ``agent`` (default: ``default_branch_agent``) acts from then on. ``max_steps`` caps the
    branch's total length, prefix included. ``record`` is a file the branched episode is written
    to (replacing any file there). Raises ``ReplayDivergedError`` if the prefix does not reproduce.
    The branch's header config names its parent and branch point under ``BRANCHED_FROM``.
    """
    if not 0 <= at < len(episode.steps):
        raise UserError(f"cannot branch at step {at}: episode {episode.episode_id} has steps 0 to "
                        f"{len(episode.steps) - 1}; choose a step in that range")
    if max_steps is not None and max_steps <= at:
        raise UserError(f"a max_steps of {max_steps} leaves no step after the branch point {at}; "
                        f"give more than {at}")
    actor = agent if agent is not None else default_branch_agent(episode)
    env = branchable(make_env(episode))
    try:
        if action is not None:
            try:
                decoded = from_json(env.action_space, action)
            except ValueError as exc:
                raise UserError(f"branch action: {exc}; give an action in the env's action space") from None
            actor = _ActionThenAgent(decoded, actor)
        prefix, observation, info, initial = _reexecute_prefix(episode, env, at)
        snapshot = env.snapshot()
        limit = None if max_steps is None else max_steps - at
        continuation = rollout_from(env, snapshot, observation, info, actor, seed=episode.seed, max_steps=limit)
    finally:
        env.close()
    steps = prefix + [step.model_copy(update={"index": at + step.index}) for step in continuation.steps]
    total_reward = float(sum(step.reward for step in steps))
    run_id = new_run_id()
    branched = Episode(
        run_id=run_id, episode_id=f"{episode.episode_id}-branch{at}-{uuid.uuid4().hex[:6]}",
        env_id=episode.env_id, seed=episode.seed, agent=actor.spec(),
        config={**episode.config, BRANCHED_FROM: {"episode_id": episode.episode_id, "at": at}},
        versions=versions(), initial_observation=initial, reset_info=dict(episode.reset_info), steps=steps,
        outcome=Outcome(score=total_reward,
                        success=continuation.outcome.success if continuation.outcome is not None else None,
                        metrics={"return": total_reward, "length": len(steps),
                                 "cost": float(sum(step.cost for step in steps)),
                                 "branch": {"from_episode": episode.episode_id, "at": at,
                                            "action": action, "agent": actor.spec().model_dump()}}))
    if record is not None:
        _write_replacing(Path(record), branched)
    return branched


def _reexecute_prefix(episode: Episode, env: BranchableEnv, at: int) -> tuple[list[Step], Any, dict[str, Any], Any]:
    """Step ``env`` through the episode's first ``at`` actions, checking each against the recording."""
    recording = _Recording(episode)
    observation, info, agent, reset_matches = _start(episode, env, recording)
    initial = observation
    if not reset_matches:
        raise ReplayDivergedError(f"the env no longer reproduces episode {episode.episode_id}: its reset "
                                  "observation differs; `gauntlet replay` shows the details")
    prefix: list[Step] = []
    for recorded in episode.steps[:at]:
        action = agent.act(observation, info)
        observation, reward, terminated, truncated, info = env.step(action)
        difference = recording.first_difference(recorded, observation, reward, terminated, truncated)
        if difference is not None:
            raise ReplayDivergedError(f"the env no longer reproduces episode {episode.episode_id} at step "
                                      f"{recorded.index} ({difference}); branch at an earlier step, "
                                      "or see `gauntlet replay`")
        # Keep the recorded step (info, events, messages) but with the live values, so large arrays
        # go to the branch's own sidecar rather than pointing into the original's.
        prefix.append(recorded.model_copy(update={"observation": observation, "action": action}))
    return prefix, observation, info, initial


def _write_replacing(path: Path, episode: Episode) -> None:
    for stale in (path, path.with_suffix(".npz")):
        stale.unlink(missing_ok=True)
    with EpisodeWriter(path) as writer:
        writer.write_episode(episode)


__all__ = ["BRANCHED_FROM", "EpisodeStart", "ReplayCheck", "ReplayDivergedError", "branch_episode",
           "default_branch_agent", "episode_start", "make_env", "replay_episode", "replay_episodes", "rollout_from"]
