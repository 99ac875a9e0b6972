"""Env sessions behind the env MCP server: one env per client, its snapshots, and the operator's view.

This module knows nothing of MCP. ``EnvSession`` is what one connected client acts on: a Gymnasium
env made Branchable, the snapshots the client took, the rewards and privileged state of the episode
so far, and (when the operator asked for a record) an Episode JSONL of everything the client did.
``EnvControl`` is the operator's side: every session the server has seen, with rewards and episode
summaries, which the agent-facing tools never show.

Errors a client can fix (step before reset, an action outside the space, an unknown snapshot id)
are raised as ``EnvSessionError`` with a message naming the fix.
"""

from __future__ import annotations

import copy
import io
import itertools
import logging
import os
import re
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from pydantic import BaseModel, Field

from gauntlet.branching import Snapshot, branchable
from gauntlet.episode import AgentSpec, EpisodeHeader, EpisodeWriter, Outcome, to_plain
from gauntlet.errors import UserError
from gauntlet.info_keys import PRIVILEGED, success_of
from gauntlet.registry import env_spec
from gauntlet.spaces import describe, from_json, to_json
from gauntlet.versions import versions

# Arrays with more elements than this (camera images, say) reach the client as a summary; the
# client sees the picture with render().
INLINE_OBSERVATION_MAX = 16_384
# Snapshots are small, but a client that never stops taking them must not exhaust the server.
MAX_SNAPSHOTS_PER_SESSION = 256
# Info keys that carry the reward signal under another name (MuJoCo's reward_forward, safety cost).
_REWARD_KEY = re.compile(r"reward|^cost$", re.IGNORECASE)

_log = logging.getLogger("gauntlet.server.env")


class EnvSessionError(ValueError):
    """A request the client can fix; the message says how."""


def observation_json(space: spaces.Space, observation: Any) -> Any:
    """The observation as JSON, with arrays over ``INLINE_OBSERVATION_MAX`` elements summarised."""
    if isinstance(space, spaces.Dict):
        return {key: observation_json(sub, observation[key]) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return [observation_json(sub, item) for sub, item in zip(space.spaces, observation, strict=True)]
    if isinstance(space, spaces.Box) and np.asarray(observation).size > INLINE_OBSERVATION_MAX:
        array = np.asarray(observation)
        return {"summary": "array too large to inline; call render() to see the scene",
                "shape": list(array.shape), "dtype": str(array.dtype), "min": float(array.min()),
                "max": float(array.max()), "mean": float(array.mean())}
    return to_json(space, observation)


def agent_info(info: dict[str, Any], *, expose_reward: bool, expose_privileged: bool) -> dict[str, Any]:
    """``info`` as a client may see it: reward-like keys and privileged state removed unless exposed."""
    visible = {}
    for key, value in info.items():
        if key == PRIVILEGED and not expose_privileged:
            continue
        if key != PRIVILEGED and not expose_reward and _REWARD_KEY.search(str(key)):
            continue
        visible[str(key)] = to_plain(value)
    return visible


def _check_json_kinds(space: spaces.Space, data: Any, where: str = "the action") -> None:
    """``ValueError`` unless ``data`` has the JSON kinds ``space`` encodes to: decoding alone would read
    the string "0" as the integer 0 or true as 1, and an agent sending them has misread the space."""
    def numbers(value: Any, integers: bool) -> bool:
        if isinstance(value, list):
            return all(numbers(item, integers) for item in value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        return isinstance(value, int) or not integers

    if isinstance(space, spaces.Discrete):
        if isinstance(data, bool) or not isinstance(data, int):
            raise ValueError(f"{where} must be a JSON integer such as {int(space.start)}, not {data!r}; "
                             f"the space is {describe(space)}")
    elif isinstance(space, (spaces.Box, spaces.MultiBinary, spaces.MultiDiscrete)):
        integers = not isinstance(space, spaces.Box) or np.issubdtype(space.dtype, np.integer)
        if not numbers(data, integers):
            kind = "integers" if integers else "numbers"
            raise ValueError(f"{where} must be JSON {kind}, not {data!r}; the space is {describe(space)}")
    elif isinstance(space, spaces.Dict):
        if isinstance(data, dict):
            for key, sub in space.spaces.items():
                if key in data:
                    _check_json_kinds(sub, data[key], f"{where}[{key!r}]")
    elif isinstance(space, spaces.Tuple):
        if isinstance(data, list):
            for index, (sub, item) in enumerate(zip(space.spaces, data, strict=False)):
                _check_json_kinds(sub, item, f"{where}[{index}]")
    elif isinstance(space, spaces.Text) and not isinstance(data, str):
        raise ValueError(f"{where} must be a JSON string, not {data!r}; the space is {describe(space)}")


def png_bytes(frame: np.ndarray) -> bytes:
    """Encode an RGB(A) or grey frame as PNG."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(frame)).save(buffer, format="PNG")
    return buffer.getvalue()


class EpisodeSummary(BaseModel):
    """One finished episode of a session, as the operator sees it."""

    episode_id: str
    seed: int | None = None
    length: int
    total_reward: float
    terminated: bool
    truncated: bool
    ended_by: str = Field(description="'reset', 'restore' or 'close': what ended the episode")


class SessionSummary(BaseModel):
    """The operator's view of one client session: its episode so far and the episodes before it."""

    session_id: str
    client: str
    env_id: str
    open: bool
    episode_id: str | None = None
    seed: int | None = None
    step: int = Field(0, description="steps taken in the current episode")
    rewards: list[float] = Field(default_factory=list, description="reward of each step so far")
    total_reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    privileged: Any = Field(None, description="info['privileged'] of the last step, if the env has it")
    snapshot_ids: list[str] = Field(default_factory=list)
    episodes: list[EpisodeSummary] = Field(default_factory=list)
    record_path: str | None = None


@dataclass
class _Stored:
    """A snapshot plus the episode bookkeeping needed to stand exactly where it was taken."""

    snapshot: Snapshot
    observation: Any
    info: dict[str, Any]
    rewards: list[float]
    terminated: bool
    truncated: bool
    seed: int | None


class EnvSession:
    """One client's env: reset/step/render/snapshot/restore with operator bookkeeping.

    The env is created on the first ``reset``. If ``record_path`` is set, each episode (from a
    reset or a restore to the next reset, restore or close) is appended to that Episode JSONL file
    with rewards and privileged state.
    """

    def __init__(self, session_id: str, env_id: str, env_kwargs: dict[str, Any] | None = None, *,
                 client: str = "unknown", record_path: Path | None = None, run_id: str = ""):
        self.session_id, self.env_id, self.env_kwargs = session_id, env_id, dict(env_kwargs or {})
        self.client, self.record_path, self.run_id = client, record_path, run_id
        self.env: Any = None
        self.observation: Any = None
        self.info: dict[str, Any] = {}
        self.episode_id: str | None = None
        self.seed: int | None = None
        self.rewards: list[float] = []
        self.terminated = self.truncated = False
        self.episodes: list[EpisodeSummary] = []
        self.closed = False
        self._recorded_steps = 0
        self._snapshots: OrderedDict[str, _Stored] = OrderedDict()
        self._snapshot_counter = itertools.count(1)
        self._writer: EpisodeWriter | None = None
        self._lock = threading.Lock()

    # Env lifecycle ---------------------------------------------------------------------------
    def _make_env(self) -> Any:
        kwargs = dict(self.env_kwargs)
        if "render_mode" not in kwargs and "rgb_array" in _render_modes(self.env_id):
            kwargs["render_mode"] = "rgb_array"
        # The passive checker is a development aid; its first-call bookkeeping does not survive
        # restoring a snapshot twice, and a served env has no use for it.
        kwargs.setdefault("disable_env_checker", True)
        return branchable(gym.make(self.env_id, **kwargs))

    def _require_episode(self) -> None:
        if self.env is None or self.episode_id is None:
            raise EnvSessionError("no episode in progress: call reset first")

    # Client actions --------------------------------------------------------------------------
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Start a new episode; returns the raw observation and info."""
        with self._lock:
            if self.env is None:
                self.env = self._make_env()
            self._end_episode("reset")
            observation, info = self.env.reset(seed=seed, options=options)
            self.seed = seed
            self._begin_episode(observation, info, config={"options": to_plain(options or {})})
            return observation, info

    def step(self, action_json: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Decode ``action_json`` into the action space and take one step; returns the raw step output."""
        with self._lock:
            self._require_episode()
            if self.terminated or self.truncated:
                ended = "terminated" if self.terminated else "was truncated"
                raise EnvSessionError(f"the episode {ended}; call reset, or restore a snapshot")
            try:
                _check_json_kinds(self.env.action_space, action_json)
                action = from_json(self.env.action_space, action_json)
            except ValueError as exc:
                raise EnvSessionError(f"invalid action: {exc}") from None
            observation, reward, terminated, truncated, info = self.env.step(action)
            reward = float(reward)
            self.observation, self.info = observation, info
            self.rewards.append(reward)
            self.terminated, self.truncated = bool(terminated), bool(truncated)
            if self._writer is not None:
                # Step indices count from the start of the recorded episode (a restored branch starts at 0).
                self._writer.step(self._recorded_steps, observation, action_json, reward, self.terminated,
                                  self.truncated, _recorded_info(info), privileged=_privileged(info))
                self._recorded_steps += 1
            return observation, reward, self.terminated, self.truncated, info

    def render(self) -> bytes:
        """The current frame as PNG bytes."""
        with self._lock:
            self._require_episode()
            if self.env.render_mode != "rgb_array":
                raise EnvSessionError(f"{self.env_id} cannot render images (render mode "
                                      f"{self.env.render_mode!r}); observe through reset and step")
            try:
                frame = self.env.render()
            except Exception:
                # Missing pygame or OpenGL is the server's limitation, not the agent's input: the agent
                # learns rendering is unavailable (no exception text, which may hold paths); the
                # operator gets the traceback.
                _log.warning("rendering %s failed", self.env_id, exc_info=True)
                raise EnvSessionError(f"rendering {self.env_id} is not available on this server; "
                                      "observe through reset and step") from None
            return png_bytes(np.asarray(frame))

    def snapshot(self) -> str:
        """Capture the env and episode state; returns the snapshot id."""
        with self._lock:
            self._require_episode()
            snapshot_id = f"snap-{next(self._snapshot_counter)}"
            self._snapshots[snapshot_id] = _Stored(
                snapshot=self.env.snapshot(), observation=copy.deepcopy(self.observation),
                info=copy.deepcopy(self.info), rewards=list(self.rewards), terminated=self.terminated,
                truncated=self.truncated, seed=self.seed)
            while len(self._snapshots) > MAX_SNAPSHOTS_PER_SESSION:
                self._snapshots.popitem(last=False)
            return snapshot_id

    def restore(self, snapshot_id: str) -> tuple[Any, dict[str, Any]]:
        """Return to a snapshot (a new recorded episode branches from it); returns observation and info."""
        with self._lock:
            stored = self._snapshots.get(snapshot_id)
            if stored is None:
                known = ", ".join(self._snapshots) or "none taken yet"
                raise EnvSessionError(f"unknown snapshot id {snapshot_id!r} (known: {known}); "
                                      "take one with snapshot()")
            parent = self.episode_id
            self._end_episode("restore")
            self.env.restore(stored.snapshot)
            self.seed = stored.seed
            self._begin_episode(copy.deepcopy(stored.observation), copy.deepcopy(stored.info),
                                config={"restored_from": snapshot_id, "parent_episode_id": parent,
                                        "start_step": len(stored.rewards)})
            self.rewards = list(stored.rewards)
            self.terminated, self.truncated = stored.terminated, stored.truncated
            return self.observation, self.info

    @property
    def snapshot_ids(self) -> list[str]:
        return list(self._snapshots)

    def close(self) -> None:
        """End the episode in progress and release the env (safe to call twice)."""
        with self._lock:
            if self.closed:
                return
            self._end_episode("close")
            if self._writer is not None:
                self._writer.close()
            if self.env is not None:
                self.env.close()
                self.env = None  # the operator keeps the summary of a closed session, not its env
            self._snapshots.clear()
            self.rewards, self.observation, self.info = [], None, {}
            self.closed = True

    # Recording -------------------------------------------------------------------------------
    def _begin_episode(self, observation: Any, info: dict[str, Any], config: dict[str, Any]) -> None:
        self.episode_id = f"{self.session_id}-{uuid.uuid4().hex[:8]}"
        self.observation, self.info = observation, info
        self.rewards, self.terminated, self.truncated = [], False, False
        self._recorded_steps = 0
        if self.record_path is None:
            return
        if self._writer is None:
            self._writer = EpisodeWriter(self.record_path)
        header = EpisodeHeader(run_id=self.run_id, episode_id=self.episode_id, env_id=self.env_id,
                               seed=self.seed, agent=AgentSpec(name="mcp-client", config={"client": self.client}),
                               config={"session_id": self.session_id, "env_kwargs": to_plain(self.env_kwargs),
                                       **config},
                               versions=versions(), initial_observation=observation,
                               reset_info=_recorded_info(info))
        self._writer.begin(header)

    def _end_episode(self, ended_by: str) -> None:
        if self.episode_id is None:
            return
        total = float(sum(self.rewards))
        self.episodes.append(EpisodeSummary(episode_id=self.episode_id, seed=self.seed, length=len(self.rewards),
                                            total_reward=total, terminated=self.terminated,
                                            truncated=self.truncated, ended_by=ended_by))
        if self._writer is not None:
            self._writer.end(Outcome(score=total, success=success_of(self.info),
                                     metrics={"return": total, "length": len(self.rewards),
                                              "recorded_steps": self._recorded_steps, "ended_by": ended_by}))
        self.episode_id = None

    # Views -----------------------------------------------------------------------------------
    def summary(self) -> SessionSummary:
        """The operator's view of this session."""
        with self._lock:
            return SessionSummary(
                session_id=self.session_id, client=self.client, env_id=self.env_id, open=not self.closed,
                episode_id=self.episode_id, seed=self.seed, step=len(self.rewards), rewards=list(self.rewards),
                total_reward=float(sum(self.rewards)), terminated=self.terminated, truncated=self.truncated,
                privileged=to_plain(_privileged(self.info)), snapshot_ids=list(self._snapshots),
                episodes=list(self.episodes), record_path=str(self.record_path) if self.record_path else None)


def _render_modes(env_id: str) -> list[str]:
    # Render modes live on the env class; load it (not instantiate it) to read them.
    entry_point = env_spec(env_id).entry_point
    if entry_point is None:
        return []
    if callable(entry_point):
        return list(getattr(entry_point, "metadata", {}).get("render_modes", []))
    from gauntlet.registry import load_target

    return list(getattr(load_target(entry_point), "metadata", {}).get("render_modes", []))


def _privileged(info: dict[str, Any]) -> Any:
    return info.get(PRIVILEGED)


def _recorded_info(info: dict[str, Any]) -> dict[str, Any]:
    # Privileged state has its own field in the record.
    return {key: value for key, value in info.items() if key != PRIVILEGED}


class EnvControl:
    """The operator's side of one env server: every session it has opened, never shown to clients.

    ``record`` names a folder; each session appends its episodes to ``<record>/<session_id>.jsonl``
    (``gauntlet.load_episodes(record)`` reads them all).
    """

    def __init__(self, env_id: str, env_kwargs: dict[str, Any] | None = None, *,
                 record: str | os.PathLike[str] | None = None):
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self.record = Path(record) if record is not None else None
        if self.record is not None and self.record.suffix == ".jsonl":
            raise UserError(f"record names a folder (one .jsonl per client session is written in it), "
                             f"not a file: got {self.record}")
        self.run_id = f"serve-{uuid.uuid4().hex[:8]}"
        self._sessions: dict[str, EnvSession] = {}
        self._counter = itertools.count(1)
        self._lock = threading.Lock()

    def open_session(self, client: str = "unknown") -> EnvSession:
        """A new session for one client (its env is made on its first reset)."""
        with self._lock:
            session_id = f"session-{next(self._counter):03d}"
            record_path = self.record / f"{session_id}.jsonl" if self.record is not None else None
            session = EnvSession(session_id=session_id, env_id=self.env_id, env_kwargs=self.env_kwargs,
                                 client=client, record_path=record_path, run_id=self.run_id)
            self._sessions[session_id] = session
            return session

    def session(self, session_id: str) -> EnvSession:
        try:
            return self._sessions[session_id]
        except KeyError:
            known = ", ".join(self._sessions) or "none yet"
            raise KeyError(f"unknown session {session_id!r} (known: {known})") from None

    def sessions(self) -> list[SessionSummary]:
        """Summaries of every session, open or closed, oldest first."""
        with self._lock:
            current = list(self._sessions.values())
        return [session.summary() for session in current]

    def summary(self, session_id: str) -> SessionSummary:
        return self.session(session_id).summary()

    def close(self) -> None:
        """Close every session (ends and records their episodes in progress)."""
        with self._lock:
            current = list(self._sessions.values())
        for session in current:
            session.close()


def describe_spaces(env_id: str, env_kwargs: dict[str, Any] | None = None) -> tuple[spaces.Space, spaces.Space]:
    """The action and observation spaces of ``env_id`` (from a probe instance, closed at once)."""
    probe = gym.make(env_spec(env_id), **(env_kwargs or {}))
    try:
        return probe.action_space, probe.observation_space
    finally:
        probe.close()


