"""Many episodes of one spec: ``run_many`` on local processes or on a Ray cluster.

A run lives in a folder (``gauntlet run`` and ``gauntlet eval`` write the same layout)::

    run.json                 the RunSpec, run id and versions (written once, atomically)
    episodes/ep-000042.jsonl one Episode file per episode (+ ep-000042.npz for large arrays)
    summary.json             every episode's summary, rewritten (atomically) at the end of each run
    scores.json              (``gauntlet eval``) the scorer's grade of every task, see ``gauntlet.evaluation``

Episode ``i`` uses ``episode_seed(spec.seed, i)``, so the same spec gives the same episodes whatever
the backend, the number of workers or the order they finish in. A spec with a ``TaskPlan`` (a task
suite) instead gives episode ``i`` a task and an attempt number, and a seed that selects that task
(see ``TaskPlan``). Re-running into the same folder skips episodes that are complete (their file
ends with an outcome) and redoes any that were cut short; a folder holding another spec is refused.
The local backend's workers write their episode files as they step; Ray workers, which may run on
other machines, send each finished episode back and the driver writes it atomically. Env kwargs
that name files (a suite path) must name them on every machine.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import multiprocessing
import os
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, wait
from pathlib import Path
from multiprocessing.context import BaseContext
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import gymnasium as gym
from pydantic import BaseModel, Field

from gauntlet.agent import Agent
from gauntlet.episode import AgentSpec
from gauntlet.fileio import exclusive_folder, write_atomically
from gauntlet.hooks import Controller, Monitor
from gauntlet.info_keys import metrics_of
from gauntlet.registry import env_spec, make_agent, make_hook, registry
from gauntlet.runner import episode_seed, new_run_id, rollout
from gauntlet.versions import versions
from gauntlet.worker_pool import worker_pool

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

BACKENDS = ("local", "ray")
T = TypeVar("T")


class TaskPlan(BaseModel):
    """Which tasks of a suite a run goes through, and how many times each (``gauntlet eval``).

    Episode ``i`` is attempt ``i % repeats`` at task ``task_indices[i // repeats]`` (every task in suite
    order when ``task_indices`` is None), so a run of the first n tasks is a prefix of a longer run.
    ``ToolTaskEnv`` resets to task ``seed % suite_size``, so attempt ``r`` at task ``t`` uses seed
    ``t + (base_seed + r) * suite_size``: a seed of its own that still selects task ``t`` (with base seed
    0, the first attempt at task ``t`` uses seed ``t``). ``suite_sha256`` ties the plan to the suite's
    content, so a run is never resumed against a changed suite.
    """

    suite: str
    suite_sha256: str
    suite_size: int = Field(ge=1)
    task_indices: list[int] | None = None
    repeats: int = Field(default=1, ge=1)

    @property
    def n_tasks(self) -> int:
        return self.suite_size if self.task_indices is None else len(self.task_indices)

    def attempt(self, index: int, base_seed: int) -> tuple[int, int, int]:
        """``(task index in the suite, attempt number, seed)`` of episode ``index``."""
        position, repeat = divmod(index, self.repeats)
        task = position if self.task_indices is None else self.task_indices[position]
        return task, repeat, task + (base_seed + repeat) * self.suite_size


class HookSpec(BaseModel):
    """A registered controller or monitor that watches every episode of a run, and its configuration."""

    kind: Literal["controller", "monitor"]
    name: str
    config: dict[str, Any] = Field(default_factory=dict)


class RunSpec(BaseModel):
    """What to run: an env, an agent, the hooks that watch it, and the seeds and limits that make the
    run reproducible."""

    env_id: str
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    agent: AgentSpec = Field(default_factory=lambda: AgentSpec(name="random"))
    seed: int = 0
    max_steps: int | None = None
    tasks: TaskPlan | None = None
    hooks: list[HookSpec] = Field(default_factory=list)

    def episode_plan(self, index: int) -> tuple[int, dict[str, Any]]:
        """Episode ``index``'s seed, and what its header's ``config`` records about its place in the run."""
        hooks = {"hooks": [hook.model_dump(mode="json") for hook in self.hooks]} if self.hooks else {}
        if self.tasks is None:
            return episode_seed(self.seed, index), {"run_index": index, **hooks}
        task, repeat, seed = self.tasks.attempt(index, self.seed)
        return seed, {"run_index": index, "task_index": task, "repeat": repeat, **hooks}


class EpisodeSummary(BaseModel):
    index: int
    episode_id: str
    seed: int
    score: float | None
    length: int
    success: bool | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    """The env's own metrics at the episode's last step (``gauntlet.info_keys.METRICS``), e.g. accuracy."""


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


def _tail(path: Path) -> bytes:
    """The last line of a file (up to 4 KiB of it)."""
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - 4096))
        return handle.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]


def is_complete(path: Path) -> bool:
    """Whether an episode file ends with its outcome line."""
    try:
        return _tail(path).startswith(b'{"kind":"outcome"')
    except OSError:
        return False


def _final_step_metrics(path: Path) -> dict[str, float]:
    """The env's metrics in the info of a complete episode file's last step (the line before the
    outcome); empty when the episode has no step or its env reports none."""
    with open(path, "rb") as handle:
        end = handle.seek(0, os.SEEK_END)
        block = 1 << 16
        while True:  # read back until the last step's line is whole (a line break before it)
            start = max(0, end - block)
            handle.seek(start)
            lines = handle.read(end - start).rstrip(b"\n").split(b"\n")
            if len(lines) >= 3 or start == 0:
                break
            block *= 4
    if len(lines) < 2:
        return {}
    record = json.loads(lines[-2])
    return metrics_of(record.get("info") or {}) if record.get("kind") == "step" else {}


def _summary_of(path: Path, index: int) -> EpisodeSummary:
    with open(path, "rb") as handle:
        header = json.loads(handle.readline())
    outcome = json.loads(_tail(path))
    return EpisodeSummary(index=index, episode_id=header["episode_id"], seed=header["seed"],
                          score=outcome.get("score"), length=int(outcome["metrics"].get("length", 0)),
                          success=outcome.get("success"), metrics=_final_step_metrics(path))


def _differences(old: Any, new: Any, where: str = "") -> list[str]:
    """The dotted names of the fields where two specs (as JSON) differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [name for key in sorted(set(old) | set(new), key=str)
                for name in _differences(old.get(key), new.get(key), f"{where}.{key}" if where else str(key))]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [name for i, (a, b) in enumerate(zip(old, new)) for name in _differences(a, b, f"{where}.{i}")]
    return [] if old == new else [where]


def _listed_tasks(spec: RunSpec) -> int:
    return len(spec.tasks.task_indices or ()) if spec.tasks else 0


def _same_run_other_length(recorded: RunSpec, spec: RunSpec) -> bool:
    """Whether two specs differ only in how long their task list is, one list the start of the other: every
    episode both plan has the same number, task and seed in each, so a folder grows (or is read in part)."""
    if recorded.tasks is None or spec.tasks is None:
        return False
    old, new = recorded.tasks.task_indices, spec.tasks.task_indices
    if old is None or new is None:
        return False
    shorter, longer = sorted((old, new), key=len)
    if longer[:len(shorter)] != shorter:
        return False
    return recorded.model_copy(update={"tasks": recorded.tasks.model_copy(update={"task_indices": new})}) == spec


def _with_defaults(spec: RunSpec) -> RunSpec:
    """``spec`` with the agent's and each hook's config filled in with its constructor's defaults, as JSON: a
    config that leaves a default out (one written before that option existed, say) is the run that spells it out.
    The defaults are the code's now, so a default must keep its meaning (docs/architecture.md, Run folders)."""
    agent = spec.agent.model_copy(update={"config": _filled("agent", spec.agent.name, spec.agent.config)})
    hooks = [hook.model_copy(update={"config": _filled(hook.kind, hook.name, hook.config)}) for hook in spec.hooks]
    return spec.model_copy(update={"agent": agent, "hooks": hooks})


def _filled(kind: str, name: str, config: dict[str, Any]) -> dict[str, Any]:
    try:
        parameters = inspect.signature(registry.get(kind, name).load()).parameters.values()
    except (LookupError, ImportError, AttributeError, TypeError, ValueError):
        return config  # an entry this process cannot load or inspect is compared as written
    defaults = {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty
                and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}
    return json.loads(json.dumps({**defaults, **config}, default=str))


def prepare_run_folder(out_dir: Path, spec: RunSpec) -> str:
    """Create or reopen a run folder for ``spec``; return its run id.

    A spec may reopen a folder whose recorded task list starts with its own, or is the start of its own:
    the run grows (``run.json`` then records the longer list) or is read in part. A config that leaves out
    a default the other spells out is no difference; any other difference is refused.
    """
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
            recorded = RunSpec.model_validate(existing["spec"])
        except (ValueError, KeyError):
            raise RunFolderError(f"{run_file} is not a Gauntlet run file; choose an empty --out folder") from None
        if recorded != spec:
            recorded, filled = _with_defaults(recorded), _with_defaults(spec)
            if recorded != filled and not _same_run_other_length(recorded, filled):
                differing = _differences(recorded.model_dump(mode="json"), filled.model_dump(mode="json"))
                raise RunFolderError(f"{out_dir} holds another run (it differs in {', '.join(differing[:4])}); "
                                     "resume it with the options it was started with, or choose another --out folder")
            if _listed_tasks(spec) > _listed_tasks(recorded):
                write_atomically(run_file, json.dumps({**existing, "spec": spec.model_dump(mode="json")}, indent=2))
        return str(existing["run_id"])
    run_id = new_run_id()
    payload = {"run_id": run_id, "spec": spec.model_dump(mode="json"), "versions": versions()}
    write_atomically(run_file, json.dumps(payload, indent=2))
    return run_id


# Worker side -----------------------------------------------------------------------------------
def make_env_and_agent(spec: RunSpec) -> tuple[gym.Env, Agent]:
    import gauntlet  # noqa: F401  (registers the gauntlet/ envs in spawned workers)

    return gym.make(spec.env_id, **spec.env_kwargs), make_agent(spec.agent.name, **spec.agent.config)


def make_hooks(spec: RunSpec) -> list[Monitor | Controller]:
    """The spec's controllers and monitors, built from the registry (each checked against its protocol)."""
    return [make_hook(hook.kind, hook.name, **hook.config) for hook in spec.hooks]


# A worker process keeps its env, agent and hooks for the spec it runs, for as long as the pool lives.
_worker_cache: dict[str, tuple[gym.Env, Agent, list[Monitor | Controller]]] = {}


def _cached_env_and_agent(spec: RunSpec) -> tuple[gym.Env, Agent, list[Monitor | Controller]]:
    key = spec.model_dump_json()
    if key not in _worker_cache:
        _worker_cache[key] = (*make_env_and_agent(spec), make_hooks(spec))
    return _worker_cache[key]


def run_episode(spec: RunSpec, run_id: str, index: int, path: Path, env: gym.Env, agent: Agent,
                hooks: list[Monitor | Controller] | None = None) -> EpisodeSummary:
    """Run episode ``index`` of a run and write it to ``path`` (replacing any partial file)."""
    for stale in (path, path.with_suffix(".npz"), path.with_name(path.name + ".tmp")):
        stale.unlink(missing_ok=True)
    seed, config = spec.episode_plan(index)
    episode = rollout(env, agent, seed=seed, max_steps=spec.max_steps, record=path, run_id=run_id,
                      episode_id=f"{run_id}-{index:06d}", config=config, hooks=hooks or (), env_id=spec.env_id)
    outcome = episode.outcome
    assert outcome is not None  # rollout returns only finished episodes
    # The episode is on disk only (its steps are not kept in memory): its last step's metrics are read back.
    return EpisodeSummary(index=index, episode_id=episode.episode_id, seed=seed, score=outcome.score,
                          length=outcome.metrics["length"], success=outcome.success,
                          metrics=_final_step_metrics(path))


def _run_chunk(spec: RunSpec, run_id: str, out_dir: str, indices: list[int]) -> list[EpisodeSummary]:
    env, agent, hooks = _cached_env_and_agent(spec)
    return [run_episode(spec, run_id, i, episode_path(Path(out_dir), i), env, agent, hooks) for i in indices]


def _run_chunk_detached(spec_json: str, run_id: str, indices: list[int]) -> list[tuple[dict, bytes, bytes | None]]:
    """Ray task: run episodes in a scratch folder and return their files' bytes to the driver."""
    spec = RunSpec.model_validate_json(spec_json)
    env, agent, hooks = _cached_env_and_agent(spec)
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        for index in indices:
            path = episode_path(Path(scratch), index)
            path.parent.mkdir(parents=True, exist_ok=True)
            summary = run_episode(spec, run_id, index, path, env, agent, hooks)
            sidecar = path.with_suffix(".npz")
            results.append((summary.model_dump(), path.read_bytes(),
                            sidecar.read_bytes() if sidecar.exists() else None))
    return results


# Driver side -----------------------------------------------------------------------------------
def _chunks(indices: list[int], workers: int) -> list[list[int]]:
    size = max(1, len(indices) // (workers * 8))
    return [indices[i:i + size] for i in range(0, len(indices), size)]


# Libraries whose native thread pools do not survive fork: once the driver has used one (torch's
# GNU OpenMP pool, say, when an agent is built to check its config), a forked worker waits forever
# in the pool's barrier. NumPy's OpenBLAS pool re-initialises after fork and needs no such care.
_FORK_UNSAFE_MODULES = ("torch", "tensorflow", "jax", "llama_cpp")
_THREAD_POOL_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _start_method() -> str:
    # fork is fastest, but forking a process with live threads (Python or native) can deadlock the child.
    safe = threading.active_count() == 1 and not any(name in sys.modules for name in _FORK_UNSAFE_MODULES)
    return "fork" if safe and "fork" in multiprocessing.get_all_start_methods() else "spawn"


def _share_cpus(threads: int) -> None:
    # A worker's native pools (OpenMP, MKL) default to one thread per CPU; N workers would then
    # oversubscribe the machine N-fold, and small torch ops slow down many times. Each worker gets
    # its share instead, unless the operator set the width. Runs before the worker imports them.
    for name in _THREAD_POOL_VARIABLES:
        os.environ.setdefault(name, str(threads))


def run_many(spec: RunSpec, n_episodes: int, out_dir: str | os.PathLike[str], *, backend: str = "local",
             workers: int | None = None, ray_address: str | None = None,
             progress: bool | Callable[[EpisodeSummary], None] = True, label: str | None = None) -> RunResult:
    """Run episodes ``0 .. n_episodes-1`` of ``spec`` into ``out_dir`` (see the module docstring).

    ``workers`` defaults to the number of CPUs (local) or the cluster's CPUs (Ray); one local worker
    runs the episodes in this process. ``progress`` shows a progress bar (titled ``label``, default
    the env id), or is called with each finished episode's summary.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of {BACKENDS}")
    if n_episodes < 0:
        raise ValueError("n_episodes must be >= 0")
    if spec.tasks is not None and n_episodes > spec.tasks.n_tasks * spec.tasks.repeats:
        raise ValueError(f"the spec's task plan has {spec.tasks.n_tasks * spec.tasks.repeats} episodes, "
                         f"not {n_episodes}")
    if backend == "local" and ray_address is not None:
        raise ValueError("--ray-address goes with --backend ray")
    env_spec(spec.env_id)  # fail fast, in the driver, on an unknown env id
    out = Path(out_dir)
    run_id = prepare_run_folder(out, spec)
    busy = lambda: RunFolderError(f"another run is writing to {out}; wait for it to finish (or stop it), "
                                  "or choose another --out folder")
    with exclusive_folder(out, ".running.lock", busy):
        return _run_many(spec, run_id, n_episodes, out, backend, workers, ray_address, progress, label)


def _run_many(spec: RunSpec, run_id: str, n_episodes: int, out: Path, backend: str, workers: int | None,
              ray_address: str | None, progress: bool | Callable[[EpisodeSummary], None],
              label: str | None) -> RunResult:
    pending = [i for i in range(n_episodes) if not is_complete(episode_path(out, i))]
    skipped = n_episodes - len(pending)
    todo = set(pending)
    done = {i: _summary_of(episode_path(out, i), i) for i in range(n_episodes) if i not in todo}
    with _Progress(progress, total=n_episodes, completed=skipped, label=label or spec.env_id) as report:
        if pending:
            runner = _run_local if backend == "local" else _run_ray
            for summary in runner(spec, run_id, out, pending, workers, ray_address, report.start):
                done[summary.index] = summary
                report(summary)
    result = RunResult(out_dir=str(out), run_id=run_id, ran=len(pending), skipped=skipped,
                       episodes=[done[i] for i in sorted(done)])
    write_atomically(out / "summary.json", result.model_dump_json(indent=1))
    return result


def _run_local(spec: RunSpec, run_id: str, out: Path, pending: list[int], workers: int | None,
               ray_address: str | None, start_display: Callable[[], None]) -> Iterator[EpisodeSummary]:
    workers = max(1, min(workers or os.cpu_count() or 1, len(pending)))
    if workers == 1:
        # In this process, and closed afterwards: a cached env would outlive the run (and its threads,
        # an MCP client's say, would make the next pool spawn instead of fork).
        env, agent = make_env_and_agent(spec)
        hooks = make_hooks(spec)
        try:
            start_display()
            for index in pending:
                yield run_episode(spec, run_id, index, episode_path(out, index), env, agent, hooks)
        finally:
            env.close()
        return
    threads = max(1, (os.cpu_count() or 1) // workers)
    jobs = [(spec, run_id, str(out), chunk) for chunk in _chunks(pending, workers)]
    # start_display only once the jobs are submitted: the progress bar's thread must not exist when workers fork.
    for summaries in fan_out(_run_chunk, jobs, workers=workers, initializer=_share_cpus, initargs=(threads,),
                             started=start_display):
        yield from summaries


def _run_ray(spec: RunSpec, run_id: str, out: Path, pending: list[int], workers: int | None,
             ray_address: str | None, start_display: Callable[[], None]) -> Iterable[EpisodeSummary]:
    with ray_cluster(workers, ray_address) as cpus:
        jobs = [(spec.model_dump_json(), run_id, chunk) for chunk in _chunks(pending, workers or cpus)]
        for results in fan_out(_run_chunk_detached, jobs, backend="ray", started=start_display):
            for summary, episode_bytes, sidecar_bytes in results:
                path = episode_path(out, summary["index"])
                if sidecar_bytes is not None:
                    write_atomically(path.with_suffix(".npz"), sidecar_bytes)
                write_atomically(path, episode_bytes)
                yield EpisodeSummary.model_validate(summary)


# The job fan-out (``run``, ``eval`` and ``oversight collect``) -------------------------------------
@contextlib.contextmanager
def ray_cluster(workers: int | None = None, address: str | None = None) -> Iterator[int]:
    """Ray for the length of the block, yielding the cluster's CPU count. Unless Ray is already running in
    this process, it joins the cluster at ``address``, or starts a local one of ``workers`` CPUs (default:
    this machine's), and shuts it down at the end of the block."""
    try:
        import ray
    except ImportError:
        raise RuntimeError("the ray backend needs Ray: pip install 'gauntlet[ray]'") from None
    started_here = not ray.is_initialized()
    if started_here:
        kwargs: dict[str, Any] = {"address": address} if address else {"num_cpus": workers or os.cpu_count()}
        ray.init(log_to_driver=False, include_dashboard=False, **kwargs)
    try:
        yield int(ray.cluster_resources().get("CPU", 1))
    finally:
        if started_here:
            ray.shutdown()


def fan_out(function: Callable[..., T], jobs: Iterable[tuple[Any, ...]], *, backend: str = "local",
            workers: int | None = None, ray_address: str | None = None, context: BaseContext | None = None,
            initializer: Callable[..., object] | None = None, initargs: tuple[Any, ...] = (),
            started: Callable[[], None] | None = None) -> Iterator[T]:
    """``function(*job)`` of every job, yielded as each finishes (in the order they finish).

    ``backend="local"``: one worker (the default) runs the jobs in this process, in order; more run them
    on a ``gauntlet.worker_pool`` of ``workers`` processes (which die with this one) started by ``context``
    (default: fork where that is safe, else spawn), each running ``initializer(*initargs)`` first.
    ``backend="ray"``: one Ray task per job, on the cluster of ``ray_cluster(workers, ray_address)``.
    ``function`` must be importable by name in a worker (a module-level function). ``started()`` is
    called once every job has been handed out.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of {BACKENDS}")
    if backend == "ray":
        with ray_cluster(workers, ray_address):
            import ray

            task = ray.remote(function)
            refs = [task.remote(*job) for job in jobs]
            if started is not None:
                started()
            while refs:
                ready, refs = ray.wait(refs, num_returns=1)
                yield ray.get(ready[0])
        return
    if workers is None or workers == 1:
        if started is not None:
            started()
        for job in jobs:
            yield function(*job)
        return
    context = context or multiprocessing.get_context(_start_method())
    with worker_pool(workers, context, initializer=initializer, initargs=initargs) as pool:
        futures = {pool.submit(function, *job) for job in jobs}
        if started is not None:
            started()
        while futures:
            finished, futures = wait(futures, return_when=FIRST_COMPLETED)
            for future in finished:
                yield future.result()


class _Progress:
    """A rich progress bar, a callback, or nothing; the bar's thread starts only on ``start()``."""

    def __init__(self, progress: bool | Callable[[EpisodeSummary], None], total: int, completed: int, label: str):
        self._callback = progress if callable(progress) else None
        self._bar: Progress | None = None
        self._task: TaskID | None = None
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
        if self._bar is not None and self._task is not None:
            self._bar.advance(self._task)

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


__all__ = ["EpisodeSummary", "RunFolderError", "RunResult", "RunSpec", "TaskPlan", "episode_path", "fan_out",
           "is_complete", "ray_cluster", "run_many"]
