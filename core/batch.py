"""Many episodes of one spec: ``run_many`` on local processes or on a Ray cluster.

A run lives in a folder::

    run.json                 the RunSpec, run id and versions (written once, atomically)
    episodes/ep-000042.jsonl one Episode file per episode (+ ep-000042.npz for large arrays)

Episode ``i`` uses ``episode_seed(spec.seed, i)``, so the same spec gives the same episodes whatever
the backend, the number of workers or the order they finish in. Re-running into the same folder
skips episodes that are complete (their file ends with an outcome) and redoes any that were cut
short. The local backend's workers write their episode files as they step; Ray workers, which may
run on other machines, send each finished episode back and the driver writes it atomically.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import tempfile
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

import gymnasium as gym
from pydantic import BaseModel, Field

from gauntlet.episode import AgentSpec
from gauntlet.fileio import write_atomically
from gauntlet.registry import make_agent
from gauntlet.runner import episode_seed, new_run_id, rollout
from gauntlet.versions import versions

BACKENDS = ("local", "ray")


class RunSpec(BaseModel):
    """What to run: an env, an agent, and the seeds and limits that make the run reproducible."""

    env_id: str
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    agent: AgentSpec = Field(default_factory=lambda: AgentSpec(name="random"))
    seed: int = 0
    max_steps: int | None = None


class EpisodeSummary(BaseModel):
    index: int
    episode_id: str
    seed: int
    score: float | None
    length: int
    success: bool | None = None


class RunResult(BaseModel):
    """What ``run_many`` did: where the run is, and a summary of every episode in it."""

    out_dir: str
    run_id: str
    ran: int
    skipped: int
    episodes: list[EpisodeSummary]


class RunFolderError(ValueError):
    """The output folder cannot hold this run (another run's folder, or not writable)."""


def episode_path(out_dir: Path, index: int) -> Path:
    return out_dir / "episodes" / f"ep-{index:06d}.jsonl"


def _is_complete(path: Path) -> bool:
    """Whether an episode file ends with its outcome line."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 4096))
            tail = handle.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    except OSError:
        return False
    return tail.startswith(b'{"kind":"outcome"')


def _summary_of(path: Path, index: int) -> EpisodeSummary:
    with open(path, "rb") as handle:
        header = json.loads(handle.readline())
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - 4096))
        outcome = json.loads(handle.read().rstrip(b"\n").rsplit(b"\n", 1)[-1])
    return EpisodeSummary(index=index, episode_id=header["episode_id"], seed=header["seed"],
                          score=outcome.get("score"), length=int(outcome["metrics"].get("length", 0)),
                          success=outcome.get("success"))


def prepare_run_folder(out_dir: Path, spec: RunSpec) -> str:
    """Create or reopen a run folder for ``spec``; return its run id."""
    run_file = out_dir / "run.json"
    try:
        (out_dir / "episodes").mkdir(parents=True, exist_ok=True)
        probe = out_dir / ".write-probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise RunFolderError(f"cannot write to {out_dir} ({exc.strerror}); choose a writable --out folder") from None
    if run_file.exists():
        try:
            existing = json.loads(run_file.read_text())
            same = RunSpec.model_validate(existing["spec"]) == spec
        except (ValueError, KeyError):
            raise RunFolderError(f"{run_file} is not a Gauntlet run file; choose an empty --out folder") from None
        if not same:
            raise RunFolderError(f"{out_dir} holds a different run ({existing['spec']['env_id']}, "
                                 f"agent {existing['spec']['agent']['name']}); choose another --out folder")
        return existing["run_id"]
    run_id = new_run_id()
    payload = {"run_id": run_id, "spec": spec.model_dump(mode="json"), "versions": versions()}
    write_atomically(run_file, json.dumps(payload, indent=2))
    return run_id


# Worker side -----------------------------------------------------------------------------------
_worker_cache: dict[str, tuple[gym.Env, Any]] = {}


def _env_and_agent(spec: RunSpec) -> tuple[gym.Env, Any]:
    key = spec.model_dump_json()
    if key not in _worker_cache:
        import gauntlet  # noqa: F401  (registers the gauntlet/ envs in spawned workers)

        env = gym.make(spec.env_id, **spec.env_kwargs)
        _worker_cache[key] = (env, make_agent(spec.agent.name, **spec.agent.config))
    return _worker_cache[key]


def run_episode(spec: RunSpec, run_id: str, index: int, path: Path) -> EpisodeSummary:
    """Run episode ``index`` of a run and write it to ``path`` (replacing any partial file)."""
    env, agent = _env_and_agent(spec)
    for stale in (path, path.with_suffix(".npz")):
        stale.unlink(missing_ok=True)
    seed = episode_seed(spec.seed, index)
    episode = rollout(env, agent, seed=seed, max_steps=spec.max_steps, record=path, run_id=run_id,
                      episode_id=f"{run_id}-{index:06d}", config={"run_index": index})
    return EpisodeSummary(index=index, episode_id=episode.episode_id, seed=seed,
                          score=episode.outcome.score, length=episode.outcome.metrics["length"],
                          success=episode.outcome.success)


def _run_chunk(spec: RunSpec, run_id: str, out_dir: str, indices: list[int]) -> list[EpisodeSummary]:
    return [run_episode(spec, run_id, i, episode_path(Path(out_dir), i)) for i in indices]


def _run_chunk_detached(spec_json: str, run_id: str, indices: list[int]) -> list[tuple[dict, bytes, bytes | None]]:
    """Ray task: run episodes in a scratch folder and return their files' bytes to the driver."""
    spec = RunSpec.model_validate_json(spec_json)
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        for index in indices:
            path = episode_path(Path(scratch), index)
            path.parent.mkdir(parents=True, exist_ok=True)
            summary = run_episode(spec, run_id, index, path)
            sidecar = path.with_suffix(".npz")
            results.append((summary.model_dump(), path.read_bytes(),
                            sidecar.read_bytes() if sidecar.exists() else None))
    return results


# Driver side -----------------------------------------------------------------------------------
def _chunks(indices: list[int], workers: int) -> list[list[int]]:
    size = max(1, len(indices) // (workers * 8))
    return [indices[i:i + size] for i in range(0, len(indices), size)]


def _start_method() -> str:
    # fork is fastest, but forking a process with live threads can deadlock the child.
    return "fork" if threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods() else "spawn"


def run_many(spec: RunSpec, n_episodes: int, out_dir: str | os.PathLike[str], *, backend: str = "local",
             workers: int | None = None, ray_address: str | None = None,
             progress: bool | Callable[[EpisodeSummary], None] = True) -> RunResult:
    """Run episodes ``0 .. n_episodes-1`` of ``spec`` into ``out_dir`` (see the module docstring).

    ``workers`` defaults to the number of CPUs (local) or the cluster's CPUs (Ray). ``progress``
    shows a progress bar, or is called with each finished episode's summary.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of {BACKENDS}")
    if n_episodes < 0:
        raise ValueError("n_episodes must be >= 0")
    if backend == "local" and ray_address is not None:
        raise ValueError("--ray-address goes with --backend ray")
    gym.spec(spec.env_id)  # fail fast, in the driver, on an unknown env id
    out = Path(out_dir)
    run_id = prepare_run_folder(out, spec)
    pending = [i for i in range(n_episodes) if not _is_complete(episode_path(out, i))]
    skipped = n_episodes - len(pending)
    todo = set(pending)
    done = {i: _summary_of(episode_path(out, i), i) for i in range(n_episodes) if i not in todo}
    with _Progress(progress, total=n_episodes, completed=skipped, label=spec.env_id) as report:
        if pending:
            runner = _run_local if backend == "local" else _run_ray
            for summary in runner(spec, run_id, out, pending, workers, ray_address, report.start):
                done[summary.index] = summary
                report(summary)
    return RunResult(out_dir=str(out), run_id=run_id, ran=len(pending), skipped=skipped,
                     episodes=[done[i] for i in sorted(done)])


def _run_local(spec, run_id, out, pending, workers, ray_address, start_display) -> Iterable[EpisodeSummary]:
    workers = max(1, min(workers or os.cpu_count() or 1, len(pending)))
    if workers == 1:
        start_display()
        for index in pending:
            yield run_episode(spec, run_id, index, episode_path(out, index))
        return
    context = multiprocessing.get_context(_start_method())
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(_run_chunk, spec, run_id, str(out), chunk) for chunk in _chunks(pending, workers)}
        start_display()  # only now: the progress bar's thread must not exist when workers fork
        while futures:
            finished, futures = wait(futures, return_when=FIRST_COMPLETED)
            for future in finished:
                yield from future.result()


def _run_ray(spec, run_id, out, pending, workers, ray_address, start_display) -> Iterable[EpisodeSummary]:
    try:
        import ray
    except ImportError:
        raise RuntimeError("the ray backend needs Ray: pip install 'gauntlet[ray]'") from None
    started_here = not ray.is_initialized()
    if started_here:
        kwargs: dict[str, Any] = {"address": ray_address} if ray_address else {"num_cpus": workers or os.cpu_count()}
        ray.init(log_to_driver=False, include_dashboard=False, **kwargs)
    try:
        task = ray.remote(_run_chunk_detached)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        refs = [task.remote(spec.model_dump_json(), run_id, chunk) for chunk in _chunks(pending, workers or cpus)]
        start_display()
        while refs:
            finished, refs = ray.wait(refs, num_returns=1)
            for summary, episode_bytes, sidecar_bytes in ray.get(finished[0]):
                path = episode_path(out, summary["index"])
                if sidecar_bytes is not None:
                    write_atomically(path.with_suffix(".npz"), sidecar_bytes)
                write_atomically(path, episode_bytes)
                yield EpisodeSummary.model_validate(summary)
    finally:
        if started_here:
            ray.shutdown()


class _Progress:
    """A rich progress bar, a callback, or nothing; the bar's thread starts only on ``start()``."""

    def __init__(self, progress: bool | Callable[[EpisodeSummary], None], total: int, completed: int, label: str):
        self._callback = progress if callable(progress) else None
        self._bar = None
        self._args = (total, completed, label)
        self._enabled = progress is True

    def start(self) -> None:
        if self._enabled and self._bar is None:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)

            total, completed, label = self._args
            self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("episodes"), TimeElapsedColumn(), TimeRemainingColumn(),
                                 transient=False)
            self._bar.start()
            self._task = self._bar.add_task(label, total=total, completed=completed)

    def __call__(self, summary: EpisodeSummary) -> None:
        if self._callback is not None:
            self._callback(summary)
        if self._bar is not None:
            self._bar.advance(self._task)

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


__all__ = ["RunSpec", "RunResult", "EpisodeSummary", "RunFolderError", "run_many", "episode_path"]
