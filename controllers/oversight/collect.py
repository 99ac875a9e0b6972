"""Collecting branched rows at scale: resumable, on local worker processes or a Ray cluster.

A collection lives in a folder::

    meta.json    what is collected (benchmark, options, utility config, actions, draws, prefixes,
                 expert strengths): written once, atomically; a folder holding another collection is refused
    rows.jsonl   the rows, append-only: each job's rows, then a line ``{"done": {...}}`` closing that job
    job_stats.jsonl  append-only, a line per job after its rows: its counts and seconds, so a resumed
                 collection still knows what the jobs of earlier runs cost (``recorded_stats``); kept apart
                 so the rows file is the same bytes whoever ran the jobs and however long they took

A job is one (episode, expert strength): ``collect_episode`` over it is the unit of work, and its rows
and its ``done`` line go to the file in one ``write`` on a descriptor opened for appending, by the
driver only (workers return rows). So the file is always whole jobs plus, after a kill, at most one torn
tail: resuming cuts the tail back to the last ``done`` line and runs only the jobs that have none.
Branched rows are the expensive part, so jobs fan out through the fan-out ``gauntlet run`` and
``gauntlet eval`` use (``gauntlet.batch.fan_out``): ``workers`` local processes that die with the driver
(spawned: the text benchmarks run a JVM or a game interpreter that must not be forked), or Ray tasks on
a cluster. Workers return each job's rows; the driver writes them in the order jobs finish.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gauntlet.batch import BACKENDS, fan_out
from gauntlet.controllers.oversight.benchmarks import BENCHMARKS, Benchmark, get_benchmark
from gauntlet.controllers.oversight.protocol import CollectStats, Prefixes, Row, collect_episode
from gauntlet.controllers.oversight.utility import ACTIONS, UtilityConfig
from gauntlet.fileio import exclusive_folder, write_atomically

META, ROWS, STATS = "meta.json", "rows.jsonl", "job_stats.jsonl"
FORMAT = 1


class CollectionError(ValueError):
    """A collection folder that cannot take this collection (another collection's, or unreadable)."""


@dataclass(frozen=True)
class CollectSpec:
    """What a collection gathers: everything that decides its rows' content."""

    benchmark: str
    episodes: tuple[int, ...]
    options: dict[str, Any] = field(default_factory=dict)
    config: UtilityConfig = field(default_factory=UtilityConfig)
    actions: tuple[str, ...] = ACTIONS
    draws: int = 1
    prefixes: Any = "all"
    strengths: tuple[float, ...] = (1.0,)

    def __post_init__(self) -> None:
        if self.benchmark not in BENCHMARKS:
            raise ValueError(f"unknown oversight benchmark {self.benchmark!r}; expected one of {sorted(BENCHMARKS)}")
        unknown = sorted(set(self.actions) - set(ACTIONS))
        if unknown:
            raise ValueError(f"unknown overseer actions {unknown}; expected some of {list(ACTIONS)}")
        if not self.episodes:
            raise ValueError("a collection needs at least one episode")
        if self.draws < 1:
            raise ValueError(f"draws must be at least 1, not {self.draws}")
        if not self.strengths or any(not 0.0 <= s <= 1.0 for s in self.strengths):
            raise ValueError(f"expert strengths must lie in [0, 1]; got {list(self.strengths)}")

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["episodes"] = list(self.episodes)
        data["actions"] = list(self.actions)
        data["strengths"] = list(self.strengths)
        data["prefixes"] = self.prefixes if isinstance(self.prefixes, (str, int)) else list(self.prefixes)
        return {"format": FORMAT, **data}

    def jobs(self) -> list[tuple[int, float]]:
        return [(episode, strength) for strength in self.strengths for episode in self.episodes]


@dataclass
class CollectResult:
    out_dir: str
    rows: int
    jobs_run: int
    jobs_resumed: int
    stats: CollectStats
    """This run's jobs."""
    wall_s: float
    all_stats: CollectStats = field(default_factory=CollectStats)
    """Every whole job in the folder, this run's and earlier runs' (``recorded_stats``)."""
    jobs_unmeasured: int = 0
    """Whole jobs ``job_stats.jsonl`` has no line for (an older folder's, or a kill between the two writes)."""

    @property
    def rows_per_s(self) -> float:
        """Rows collected per second of wall time (all workers together)."""
        collected = self.stats.rows
        return collected / self.wall_s if self.wall_s > 0 else 0.0


LOCK = ".collecting.lock"


def _make_folder(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CollectionError(f"cannot create {out} ({exc.strerror}); choose a writable --out folder") from None


def _open_folder(out: Path, spec: CollectSpec) -> None:
    meta = out / META
    wanted = spec.as_json()
    if meta.exists():
        try:
            recorded = json.loads(meta.read_text())
        except ValueError:
            raise CollectionError(f"{meta} is not a collection's meta file; choose an empty --out folder") from None
        if isinstance(recorded.get("config"), dict):
            # Prices added to UtilityConfig since the folder was written take their defaults there.
            try:
                recorded["config"] = asdict(UtilityConfig(**recorded["config"]))
            except (TypeError, ValueError):
                pass  # a price this version does not have: reported below as a difference in config
        if recorded != wanted:
            differing = sorted(k for k in set(recorded) | set(wanted) if recorded.get(k) != wanted.get(k))
            if _extends(recorded, wanted, differing):
                # More episodes or expert strengths than before, everything else equal: the rows already
                # collected are rows of the larger collection too, so it grows in place.
                write_atomically(meta, json.dumps(wanted, indent=2))
                return
            raise CollectionError(f"{out} holds another collection (it differs in {', '.join(differing)}); resume it "
                                  "with the options it was started with (more episodes or expert strengths grow "
                                  "it), or choose another --out folder")
        return
    write_atomically(meta, json.dumps(wanted, indent=2))


def _extends(recorded: dict[str, Any], wanted: dict[str, Any], differing: list[str]) -> bool:
    """Whether ``wanted`` only adds episodes and/or expert strengths to the ``recorded`` collection."""
    if not differing or not set(differing) <= {"episodes", "strengths"}:
        return False
    return all(isinstance(recorded.get(key), list) and set(recorded[key]) <= set(wanted[key]) for key in differing)


def _read_jobs(rows_file: Path) -> tuple[set[tuple[int, float]], int]:
    """The jobs ``rows_file`` holds whole, and the byte offset where the last whole job ends (what follows
    is a torn tail, a killed write). Reads only."""
    done: set[tuple[int, float]] = set()
    good_end = 0
    if not rows_file.exists():
        return done, good_end
    with rows_file.open("rb") as handle:
        offset = 0
        for line in handle:
            offset += len(line)
            if not line.endswith(b"\n"):
                break
            if line.startswith(b'{"done"'):
                try:
                    marker = json.loads(line)["done"]
                    job = (int(marker["episode"]), float(marker["expert_strength"]))
                except (ValueError, KeyError, TypeError):
                    break
                done.add(job)
                good_end = offset
    return done, good_end


def _done_jobs(rows_file: Path) -> set[tuple[int, float]]:
    """The jobs the file holds whole; cuts a torn tail back to the last ``done`` line."""
    done, good_end = _read_jobs(rows_file)
    if rows_file.exists() and good_end != rows_file.stat().st_size:
        with rows_file.open("r+b") as handle:
            handle.truncate(good_end)
    return done


def load_rows(out_dir: str | os.PathLike[str]) -> list[Row]:
    """Every row of the whole jobs in a collection folder (a torn tail is ignored, not cut)."""
    path = Path(out_dir) / ROWS
    if not path.exists():
        raise FileNotFoundError(f"no {ROWS} in {out_dir}; collect rows first (gauntlet oversight collect)")
    rows: list[Row] = []
    pending: list[Row] = []
    with path.open("rb") as handle:
        for line in handle:
            if not line.endswith(b"\n"):
                break
            record = json.loads(line)
            if "done" in record:
                rows.extend(pending)
                pending = []
            else:
                pending.append(record)
    return rows


def recorded_stats(out_dir: str | os.PathLike[str]) -> tuple[CollectStats, int]:
    """The summed stats of every whole job in a collection folder (``job_stats.jsonl``), and the number of
    whole jobs it has no line for (an older folder's, or a kill between a job's rows and its line)."""
    done, _ = _read_jobs(Path(out_dir) / ROWS)
    parts: dict[tuple[int, float], dict[str, Any]] = {}
    path = Path(out_dir) / STATS
    if path.exists():
        with path.open("rb") as handle:
            for line in handle:
                try:  # a line torn by a kill (and whatever was appended onto it) is skipped
                    record = json.loads(line)
                    parts[(int(record["episode"]), float(record["expert_strength"]))] = record["stats"]
                except (ValueError, KeyError, TypeError):
                    continue
    total = CollectStats()
    for job in done & set(parts):
        _merge(total, parts[job])
    return total, len(done - set(parts))


def load_meta(out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    path = Path(out_dir) / META
    if not path.exists():
        raise FileNotFoundError(f"no {META} in {out_dir}; is it a collection folder (gauntlet oversight collect)?")
    result: dict[str, Any] = json.loads(path.read_text())
    return result


# Workers ----------------------------------------------------------------------------------------
_benchmarks: dict[str, Benchmark] = {}


def _benchmark(name: str, options: dict[str, Any]) -> Benchmark:
    key = json.dumps([name, options], sort_keys=True)
    if key not in _benchmarks:
        _benchmarks[key] = get_benchmark(name, **options)
    return _benchmarks[key]


def run_job(spec_json: dict[str, Any], episode: int, strength: float
            ) -> tuple[int, float, list[Row], dict[str, Any]]:
    """One job, a worker's task: ``(episode, strength, rows, stats)`` for the rows of ``episode`` with an
    expert of ``strength``."""
    import gauntlet  # noqa: F401  (registers the gauntlet/ envs in spawned workers)

    config = UtilityConfig(**spec_json["config"])
    stats = CollectStats()
    prefixes: Prefixes = spec_json["prefixes"]
    rows = collect_episode(_benchmark(spec_json["benchmark"], spec_json["options"]), episode, config=config,
                           actions=tuple(spec_json["actions"]), draws=spec_json["draws"], prefixes=prefixes,
                           strength_expert=strength, stats=stats)
    return episode, strength, rows, stats.as_dict()


def _append(rows_file: Path, rows: list[Row], episode: int, strength: float) -> None:
    lines = [json.dumps(row, separators=(",", ":")) for row in rows]
    lines.append(json.dumps({"done": {"episode": episode, "expert_strength": strength, "rows": len(rows)}}))
    _append_lines(rows_file, lines)


def _end_line(path: Path) -> None:
    """End a line torn by a kill, so the next appended line stands on its own (the torn one is skipped)."""
    if path.exists() and path.stat().st_size:
        with path.open("rb") as handle:
            handle.seek(-1, os.SEEK_END)
            whole = handle.read(1) == b"\n"
        if not whole:
            _append_lines(path, [""])


def _append_lines(path: Path, lines: list[str]) -> None:
    """``lines`` at the end of ``path`` in one ``write`` on a descriptor opened for appending, synced."""
    payload = ("\n".join(lines) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = 0
        while written < len(payload):
            written += os.write(fd, payload[written:])
        os.fsync(fd)
    finally:
        os.close(fd)


def _merge(total: CollectStats, part: dict[str, Any]) -> None:
    for name in ("episodes", "rows", "branches", "env_steps", "restores", "replays_matched", "replays"):
        setattr(total, name, getattr(total, name) + int(part.get(name, 0)))
    total.seconds += float(part.get("seconds", 0.0))
    total.restore_s += float(part.get("restore_s", 0.0))
    for name, seconds in (part.get("action_s") or {}).items():
        total.add_time(name, float(seconds))


def collect(spec: CollectSpec, out_dir: str | os.PathLike[str], *, workers: int = 1, backend: str = "local",
            ray_address: str | None = None,
            progress: Callable[[int, int, CollectStats], None] | None = None) -> CollectResult:
    """Collect ``spec``'s rows into ``out_dir``, resuming what a previous (killed) collection left.

    ``progress(done, total, stats)`` is called after each job. ``stats.seconds`` sums the workers'
    busy time; the result's ``rows_per_s`` is per second of wall time.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    if ray_address is not None and backend != "ray":
        raise ValueError("ray_address goes with backend='ray'")
    out = Path(out_dir)
    _make_folder(out)
    busy = lambda: CollectionError(f"another collection is writing to {out}; wait for it to finish (or stop it), "
                                   "or choose another --out folder")
    with exclusive_folder(out, LOCK, busy):
        return _collect(spec, out, workers, backend, ray_address, progress)


def _collect(spec: CollectSpec, out: Path, workers: int, backend: str, ray_address: str | None,
             progress: Callable[[int, int, CollectStats], None] | None) -> CollectResult:
    _open_folder(out, spec)
    rows_file = out / ROWS
    done = _done_jobs(rows_file)
    _end_line(out / STATS)
    jobs = [job for job in spec.jobs() if job not in done]
    spec_json = spec.as_json()
    stats = CollectStats()
    started = time.perf_counter()
    total = len(spec.jobs())
    finished = total - len(jobs)
    if progress is not None:
        progress(finished, total, stats)
    if jobs:
        # Spawned workers: the text benchmarks run a JVM or a game interpreter that must not be forked.
        results = fan_out(run_job, [(spec_json, episode, strength) for episode, strength in jobs], backend=backend,
                          workers=min(workers, len(jobs)) if backend == "local" else workers,
                          ray_address=ray_address, context=multiprocessing.get_context("spawn"))
        for episode, strength, rows, part in results:
            _append(rows_file, rows, episode, strength)
            _append_lines(out / STATS, [json.dumps({"episode": episode, "expert_strength": strength, "stats": part},
                                                   separators=(",", ":"))])
            _merge(stats, part)
            finished += 1
            if progress is not None:
                progress(finished, total, stats)
    wall = time.perf_counter() - started
    everything, unmeasured = recorded_stats(out)
    return CollectResult(out_dir=str(out), rows=len(load_rows(out)), jobs_run=len(jobs),
                         jobs_resumed=total - len(jobs), stats=stats, wall_s=wall, all_stats=everything,
                         jobs_unmeasured=unmeasured)
