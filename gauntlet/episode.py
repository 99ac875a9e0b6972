"""The Episode record: what happened in one run of an agent, in a form any reader can load.

An episode file is JSON Lines. The first line of an episode is its ``header`` (ids, env or task,
seed, agent, config, versions, initial observation), then one ``step`` line per step, flushed as it
happens, then an ``outcome`` line. Several episodes may follow each other in one file. Arrays
larger than ``INLINE_ARRAY_MAX`` elements go to a sidecar ``.npz`` next to the file and the JSON
holds a summary that names the array's key. A crash leaves a readable prefix: the reader skips a
torn last line with a warning and returns the episode without an outcome (``complete`` is False).

A step's tool call (server, name, arguments, result, is_error, latency_ms) lives in its ``info`` under
``gauntlet.info_keys.TOOL_CALL``, as the env reported it, and nowhere else; ``Step.tool_call`` reads it
from there. Files written before this held it in a step-level ``tool_call`` field; the reader moves it
into ``info``, so old and new files load alike.

Readers need only this module (or any JSON reader): nothing here depends on the code that wrote the
episode.
"""

from __future__ import annotations

import io
import os
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
import orjson
from pydantic import BaseModel, ConfigDict, Field, model_validator

from gauntlet.fileio import write_atomically
from gauntlet.info_keys import TOOL_CALL

SCHEMA_VERSION = 1
INLINE_ARRAY_MAX = 64
_DUMP_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
_LINE_OPTIONS = _DUMP_OPTIONS | orjson.OPT_APPEND_NEWLINE
_orjson_dumps = orjson.dumps


class EpisodeFormatError(ValueError):
    """An episode file that cannot be read as Episode JSONL (other than a torn last line)."""


class AgentSpec(BaseModel):
    """Which agent acted, with the configuration that reproduces it."""

    name: str
    config: dict[str, Any] = Field(default_factory=dict)


class ToolCall(BaseModel):
    """One call to a tool server, with its result and how long it took."""

    server: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: Any = None
    is_error: bool = False
    latency_ms: float = 0.0


class Message(BaseModel):
    """One LLM turn (system, user, assistant or tool)."""

    model_config = ConfigDict(extra="allow")
    role: str
    content: Any = None


class Event(BaseModel):
    """Something a monitor or controller said about a step, and what it cost to say it.

    An agent reports its own events too: ``model_call`` (one call of a language model: tokens in
    and out, latency, model, cost when priced) and ``note``.
    """

    source: str
    kind: Literal["monitor", "decision", "intervention", "note", "model_call"]
    data: dict[str, Any] = Field(default_factory=dict)
    cost_ms: float = 0.0


class Step(BaseModel):
    """One transition: the action taken and what the environment returned for it.

    The tool call the step made is ``info['tool_call']`` (a ``ToolCall``), read as ``tool_call``.
    ``Step(tool_call=...)`` and the step-level ``tool_call`` of files written before both land there.
    """

    index: int
    observation: Any = None
    action: Any = None
    reward: float = 0.0
    cost: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = Field(default_factory=dict)
    messages: list[Message] = Field(default_factory=list)
    events: list[Event] = Field(default_factory=list)
    privileged: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _tool_call_in_info(cls, data: Any) -> Any:
        """Put a step-level ``tool_call`` into ``info`` and read a call in ``info`` as a ``ToolCall``.

        Runs on every step the runner builds, so the common case (a ``ToolCall`` already in ``info``,
        or no call) costs two lookups. The caller's dicts are copied, never changed.
        """
        if type(data) is not dict:
            return data
        info = data.get("info")
        if "tool_call" in data:
            data = dict(data)
            call = data.pop("tool_call")
            if call is not None:
                info = dict(info or {})
                if info.get(TOOL_CALL) is not None:
                    raise ValueError("a step's tool call is given twice, as 'tool_call' and as "
                                     f"info[{TOOL_CALL!r}]; give it once, in info")
                info[TOOL_CALL] = call
                data["info"] = info
        if type(info) is dict:
            call = info.get(TOOL_CALL)
            if call is not None and type(call) is not ToolCall:
                data = {**data, "info": {**info, TOOL_CALL: ToolCall.model_validate(call)}}
        return data

    @property
    def tool_call(self) -> ToolCall | None:
        """The tool call this step made (its one home is ``info['tool_call']``), or None."""
        call = self.info.get(TOOL_CALL)
        return call if call is None or type(call) is ToolCall else ToolCall.model_validate(call)


class Outcome(BaseModel):
    """How the episode ended: a score, success flag, and named metrics.

    ``events`` holds what a hook said when there was no step to carry it: a controller that halts
    the episode before its first step (``gauntlet.runner`` describes where every halt is recorded).
    """

    score: float | None = None
    success: bool | None = None
    metrics: dict[str, Any] = Field(default_factory=dict)
    events: list[Event] = Field(default_factory=list)


class EpisodeHeader(BaseModel):
    """Everything needed to reproduce an episode, known before its first step."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    episode_id: str
    env_id: str | None = None
    task_id: str | None = None
    seed: int | None = None
    agent: AgentSpec
    config: dict[str, Any] = Field(default_factory=dict)
    versions: dict[str, str] = Field(default_factory=dict)
    created_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat())
    initial_observation: Any = None
    reset_info: dict[str, Any] = Field(default_factory=dict)


class Episode(EpisodeHeader):
    """A header, its steps, and (once the episode has ended) its outcome."""

    steps: list[Step] = Field(default_factory=list)
    outcome: Outcome | None = None
    sidecar: str | None = Field(default=None, description="path of the .npz holding large arrays")

    @property
    def complete(self) -> bool:
        return self.outcome is not None

    @property
    def total_reward(self) -> float:
        return float(sum(step.reward for step in self.steps))

    @property
    def actions(self) -> list[Any]:
        return [step.action for step in self.steps]

    def array(self, key: str) -> np.ndarray:
        """Load one sidecar array named by an observation summary's ``__array__`` key."""
        if self.sidecar is None:
            raise KeyError(f"episode {self.episode_id} has no sidecar arrays")
        with np.load(self.sidecar) as arrays:
            return arrays[key]

    def header(self) -> EpisodeHeader:
        return EpisodeHeader.model_validate(self.model_dump(include=set(EpisodeHeader.model_fields)))


_EPISODE_ONLY_FIELDS = tuple(name for name in Episode.model_fields if name not in EpisodeHeader.model_fields)


def _default(value: Any) -> Any:
    """orjson fallback for values it does not know: numpy scalars of odd kinds, sets, objects."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):  # orjson serialises only C-contiguous arrays natively
        return value.tolist()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, BaseModel):
        if type(value).__module__ != __name__:  # someone else's model: honour its serialisers
            return value.model_dump(mode="json")
        extra = value.__pydantic_extra__  # our records: plain fields, so the fields as they are
        fields = value.__dict__
        if len(fields) > len(type(value).model_fields):
            # An attribute kept in memory only (pydantic keeps an underscored name in the instance's
            # __dict__ but never among its fields; a reply's layer states on its record): never written.
            fields = {key: item for key, item in fields.items() if not key.startswith("_")}
        return {**fields, **extra} if extra else fields
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return repr(value)


def step_extra(step: Step) -> dict[str, Any]:
    """The fields of ``step`` that ``EpisodeWriter.step`` takes as ``extra``, left out when at their default."""
    return {"cost": step.cost or None, "messages": step.messages, "events": step.events,
            "privileged": step.privileged}


def dumps(value: Any) -> bytes:
    """Serialise a JSON-able value (numpy arrays and scalars allowed) to compact JSON bytes."""
    return orjson.dumps(value, default=_default, option=_DUMP_OPTIONS)


def to_plain(value: Any) -> Any:
    """``value`` as plain JSON data, exactly as it reads back from an episode file (numpy arrays to
    lists, numpy scalars to numbers, models to objects, NaN to null, other objects to their repr)."""
    return orjson.loads(dumps(value))


class EpisodeWriter:
    """Appends episodes to a JSONL file, one flushed line per step.

    Arrays larger than ``inline_array_max`` elements are kept for the sidecar ``.npz`` (written
    atomically when the episode ends) and replaced in the JSON by a summary naming their key.
    """

    def __init__(self, path: str | os.PathLike[str], *, inline_array_max: int = INLINE_ARRAY_MAX):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.sidecar_path = self.path.with_suffix(".npz")
        self.inline_array_max = inline_array_max
        # Opened by the first line written, so that a new file appears with its first line whole
        # (see ``_write``): a process killed at any moment leaves no empty episode file behind.
        self._file: io.FileIO | None = None
        self._arrays: dict[str, np.ndarray] = {}
        self._episode_id: str | None = None
        self._sidecar_exists: bool | None = None  # asked of the disk once, then kept by this writer

    # Large arrays -----------------------------------------------------------------------------
    def _externalise(self, value: Any, key: str) -> Any:
        if isinstance(value, np.ndarray):
            if value.size <= self.inline_array_max:
                return value
            array_key = f"{self._episode_id}/{key}"
            self._arrays[array_key] = np.array(value, copy=True)
            summary: dict[str, Any] = {"__array__": array_key, "shape": list(value.shape),
                                       "dtype": str(value.dtype)}
            if value.dtype.kind in "biuf" and value.size:
                summary.update(min=float(value.min()), max=float(value.max()),
                               mean=float(value.mean()))
            return summary
        if isinstance(value, dict):
            return {k: self._externalise(v, f"{key}.{k}") for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._externalise(v, f"{key}.{i}") for i, v in enumerate(value)]
        return value

    def _write(self, record: dict[str, Any]) -> None:
        # Unbuffered file: each line reaches the OS in one write, so it is flushed as it happens.
        line = orjson.dumps(record, default=_default, option=_LINE_OPTIONS)
        if self._file is None:
            if not self.path.exists() or not self.path.stat().st_size:
                write_atomically(self.path, line)  # the file appears holding its first line
                line = b""
            self._file = open(self.path, "ab", buffering=0)
            self._write_bytes = self._file.write
        if line:
            self._file.write(line)

    # Public API --------------------------------------------------------------------------------
    def begin(self, header: EpisodeHeader) -> None:
        """Record an episode's header (an ``Episode`` may stand for its header: its steps and outcome are
        recorded by ``step`` and ``end``)."""
        self._episode_id = header.episode_id
        # The fields as they are (orjson serialises them; ``_default`` handles nested models), which
        # costs a fraction of ``model_dump`` on the per-episode path.
        record = {"kind": "header", **header.__dict__,
                  "initial_observation": self._externalise(header.initial_observation, "obs.0")}
        for name in _EPISODE_ONLY_FIELDS:
            record.pop(name, None)
        self._write(record)

    def step(self, index: int, observation: Any, action: Any, reward: float,
             terminated: bool, truncated: bool, info: dict[str, Any], **extra: Any) -> None:
        """Record one step: one dict, one orjson call, one unbuffered write.

        ``extra`` may carry the other ``Step`` fields (``cost``, ``messages``, ``events``,
        ``privileged``); those given as None or empty are left out and read back as their defaults.
        A tool call is part of ``info`` (``info['tool_call']``).
        """
        if type(observation) is not np.ndarray or observation.size > self.inline_array_max:
            observation = self._externalise(observation, f"obs.{index + 1}")
        record = {"kind": "step", "index": index, "observation": observation, "action": action,
                  "reward": reward, "terminated": terminated, "truncated": truncated, "info": info}
        if extra:
            record.update({k: v for k, v in extra.items() if v is not None and v != []})
        self._write_bytes(_orjson_dumps(record, default=_default, option=_LINE_OPTIONS))

    def end(self, outcome: Outcome) -> None:
        if self._arrays:
            self._flush_sidecar()
        self._write({"kind": "outcome", "episode_id": self._episode_id, **outcome.__dict__})
        self._episode_id = None

    @property
    def has_sidecar(self) -> bool:
        """Whether the file has a sidecar ``.npz`` (written by this writer or an earlier one)."""
        if self._sidecar_exists is None:
            self._sidecar_exists = self.sidecar_path.exists()
        return self._sidecar_exists

    def _flush_sidecar(self) -> None:
        # Rewrite the sidecar with the arrays already there plus the new ones, atomically.
        # Any: savez_compressed's stub types ``**arrays`` so that a key could be its ``allow_pickle`` flag.
        existing: dict[str, Any] = {}
        if self.has_sidecar:
            with np.load(self.sidecar_path) as old:
                existing = {k: old[k] for k in old.files}
        existing.update(self._arrays)
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **existing)
        write_atomically(self.sidecar_path, buffer.getvalue())
        self._sidecar_exists = True
        self._arrays = {}

    def write_episode(self, episode: Episode) -> None:
        self.begin(episode)
        for step in episode.steps:
            self.step(step.index, step.observation, step.action, step.reward, step.terminated,
                      step.truncated, step.info, **step_extra(step))
        if episode.outcome is not None:
            self.end(episode.outcome)

    def close(self) -> None:
        if self._file is not None and not self._file.closed:
            self._file.close()

    def __enter__(self) -> EpisodeWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    lines = path.read_bytes().split(b"\n")
    while lines and not lines[-1].strip():
        lines.pop()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            if number == len(lines):
                warnings.warn(f"{path}: skipped a torn last line (line {number}); "
                              "the episode up to it is returned", stacklevel=3)
                return
            raise EpisodeFormatError(f"{path}: line {number} is not JSON ({exc}); "
                                     "the file is not an episode record or was edited") from None
        if not isinstance(record, dict) or "kind" not in record:
            raise EpisodeFormatError(f"{path}: line {number} has no 'kind'; "
                                     "expected header/step/outcome records")
        yield number, record


def read_episode_file(path: str | os.PathLike[str]) -> list[Episode]:
    """Read every episode in one JSONL file (see the module docstring for the format)."""
    path = Path(path)
    sidecar = path.with_suffix(".npz")
    episodes: list[Episode] = []
    current: dict[str, Any] | None = None
    try:
        for number, record in _read_records(path):
            kind = record.pop("kind")
            if kind == "header":
                if current is not None:
                    episodes.append(_finish(current, path))
                current = {**record, "steps": [], "outcome": None,
                           "sidecar": str(sidecar) if sidecar.exists() else None}
            elif current is None:
                raise EpisodeFormatError(f"{path}: line {number} is a '{kind}' before any header")
            elif kind == "step":
                current["steps"].append(record)
            elif kind == "outcome":
                record.pop("episode_id", None)
                current["outcome"] = record
            else:
                raise EpisodeFormatError(f"{path}: line {number} has unknown kind '{kind}'")
    except (OSError, UnicodeDecodeError) as exc:
        raise EpisodeFormatError(f"{path}: cannot read ({exc})") from None
    if current is not None:
        episodes.append(_finish(current, path))
    return episodes


def _finish(record: dict[str, Any], path: Path) -> Episode:
    try:
        return Episode.model_validate(record)
    except ValueError as exc:
        first = str(exc).splitlines()[0:3]
        raise EpisodeFormatError(f"{path}: episode {record.get('episode_id')!r} does not match "
                                 f"schema v{SCHEMA_VERSION}: {' '.join(first)}") from None


def episode_files(path: str | os.PathLike[str]) -> list[Path]:
    """The episode JSONL files at ``path``: the file itself, or every ``*.jsonl`` below a folder."""
    path = Path(path)
    if path.is_dir():
        return sorted(p for p in path.rglob("*.jsonl") if _looks_like_episode_file(p))
    if not path.exists():
        raise FileNotFoundError(f"no episode file or run folder at {path}")
    return [path]


def _looks_like_episode_file(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(32).startswith(b'{"kind":"header"')


def load_episodes(path: str | os.PathLike[str]) -> list[Episode]:
    """Load the episodes in an episode file or a run folder, as typed records.

    A torn last line is skipped with a warning; an episode cut short has ``outcome`` None.
    """
    return [episode for file in episode_files(path) for episode in read_episode_file(file)]
