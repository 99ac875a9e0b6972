"""Evaluate an agent on a registered task suite: recorded, scored episodes on the runner's machinery.

A suite entry (registry kind ``suite``) names a task suite file (JSONL, ``gauntlet.tasks``): its
target is the file's path, or a callable returning the path or a list of ``ToolTask``. Its metadata
``env_kwargs`` (JSON) are passed to ``ToolTaskEnv``: e.g. ``{"scorer": "pkg.module:MyScorer",
"max_text_length": 65536}``.

An evaluation is a run of ``gauntlet.batch.run_many`` whose spec holds a ``TaskPlan``: the tasks
(all, or those ``task_ids`` names, the first ``limit`` of them) and how many attempts each gets
(``repeats``). Each attempt is one episode of ``gauntlet/ToolTask-v0`` whose reset seed selects the
task, so it runs on local worker processes or on Ray, and re-running into the same folder finishes
only the episodes not yet complete. The run folder is ``gauntlet run``'s (``run.json``,
``episodes/``, ``summary.json``) plus ``scores.json``: every attempt's score read back from its
episode file (the last step's ``info``), the mean, and, when the env's scorer has
``summarize(reports)``, its run report over the attempts' score reports (``report``); when the scorer
reports metrics beside the score (``ScoreReport.metrics``, the episode's metrics: an attack view's
``utility``, ``attack_success`` and ``injection_seen``), every attempt's and their means (``metrics``).
A suite given as a list of tasks is saved to ``<out>/suite.jsonl`` first. ``gauntlet replay`` and
``gauntlet report`` read an evaluation like any run.

Attempts. Each attempt's row also says what it cost: its wall time (the outcome's ``wall_s``) and the
tokens (and, for priced models, dollars) of the model calls an LLM agent records as ``model_call``
events. ``scores.json``'s ``pass_k`` section holds, per task, how many of its n attempts succeeded (c)
and their mean tokens and seconds, and the suite's pass@k and pass^k for k = 1..n with bootstrap CIs
over tasks (``gauntlet.pass_k``). An attempt that reports no success (an episode that ended in an
error) counts as a failure; a suite whose env reports success for no attempt has no pass@k table.

Views: a suite entry may list its family's views in its metadata, ``views={"clean": "chem",
"noisy-high": "chem-noisy-high", ...}`` (view name -> registered suite name); ``evaluate_suite(...,
view="noisy-high")`` (``gauntlet eval chem --view noisy-high``) then runs the suite registered for that
view.

Modes: ``mode`` is always the suite's, never the agent's own option of that name (which an agent config
sets). A suite entry may list the ways its tasks can be put to an agent in its metadata, ``modes={"ap":
{"agent_config": {"mode": "autonomous"}, "env_kwargs": {"scorer": ...}}, ...}``; ``evaluate_suite(...,
mode="ap")`` (``gauntlet eval disaster --mode ap``) merges the mode's ``env_kwargs`` over the suite's and
gives an agent the mode's ``agent_config`` keys its constructor takes (an agent that has no such option,
like ``gold``, runs as it is). A suite's ``default_mode`` is the mode of a run that names none, for an
agent that takes the mode's options and whose config sets none of them (``gauntlet eval chem --agent
llm`` runs the chem suites' ``chemcost`` mode). ``scores.json`` records the mode. A mode named by the agent
option value it implies (``--mode autonomous`` for ``ap``) is refused with the suite mode to write.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from statistics import fmean
from pathlib import Path
from typing import Any

import gymnasium as gym
from pydantic import ValidationError

from gauntlet.batch import EpisodeSummary, HookSpec, RunSpec, TaskPlan, episode_path, prepare_run_folder, run_many
from gauntlet.episode import AgentSpec, Episode, read_episode_file
from gauntlet.errors import UserError, check_arguments
from gauntlet.fileio import write_atomically
from gauntlet.pass_k import PassK, pass_k_table
from gauntlet.registry import Entry, registry
from gauntlet.tasks import ToolTask, parse_suite, suite_content
from gauntlet.versions import versions

TOOL_TASK_ENV = "gauntlet/ToolTask-v0"
# ToolTaskEnv's last step reports the task's score under this info key (the episode's return may
# differ by invalid-action penalties).
TASK_SCORE = "score"
# The event kind an LLM agent records each model call as (data: input_tokens, output_tokens, latency_ms,
# cost_usd for priced models).
MODEL_CALL = "model_call"


@dataclass(frozen=True)
class TaskResult:
    """How the agent did on one attempt at one task."""

    index: int
    task_id: str
    repeat: int
    seed: int
    score: float
    success: bool | None
    steps: int
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    # The scorer's figures beside the score (an attack view's utility, attack success, injection seen).
    metrics: dict[str, float] = field(default_factory=dict)
    # Differs between any two runs of the same attempt, so results compare without it.
    wall_s: float | None = field(default=None, compare=False)


@dataclass(frozen=True)
class TaskTally:
    """One task's attempts: how many there were (n), how many succeeded (c), and their mean cost."""

    index: int
    task_id: str
    attempts: int
    successes: int
    mean_score: float
    mean_tokens: float
    mean_input_tokens: float
    mean_output_tokens: float
    mean_cost_usd: float | None
    mean_seconds: float | None


@dataclass
class Evaluation:
    """An agent's results on the tasks of a suite (every attempt at each), and where their episodes are."""

    suite: str
    out_dir: str
    run_id: str
    results: list[TaskResult]
    report: dict[str, Any] | None = None
    repeats: int = 1
    ran: int = 0
    resumed: int = 0

    @property
    def mean_score(self) -> float:
        return sum(result.score for result in self.results) / len(self.results) if self.results else 0.0

    @property
    def success_rate(self) -> float | None:
        known = [result.success for result in self.results if result.success is not None]
        return sum(known) / len(known) if known else None

    @property
    def mean_metrics(self) -> dict[str, float]:
        """Each metric the scorer reported, averaged over the attempts that report it (empty when none did)."""
        reported: dict[str, list[float]] = {}
        for result in self.results:
            for name, value in result.metrics.items():
                reported.setdefault(name, []).append(value)
        return {name: fmean(values) for name, values in reported.items()}

    def attempts(self) -> dict[str, list[TaskResult]]:
        """Every task's attempts, in attempt order (the k results pass@k and pass^k are computed from)."""
        by_task: dict[str, list[TaskResult]] = {}
        for result in self.results:
            by_task.setdefault(result.task_id, []).append(result)
        return by_task

    def tallies(self) -> list[TaskTally]:
        """Every task's successes out of its attempts, and what an attempt cost on average, in suite order."""
        return [_tally(attempts) for attempts in self.attempts().values()]

    def pass_k(self) -> list[PassK]:
        """The suite's pass@k and pass^k for k = 1..n with 95% bootstrap CIs over tasks (``gauntlet.pass_k``);
        empty when no attempt reported success or failure."""
        if self.success_rate is None:
            return []
        tallies = self.tallies()
        return pass_k_table([tally.attempts for tally in tallies], [tally.successes for tally in tallies])


def _tally(attempts: list[TaskResult]) -> TaskTally:
    first = attempts[0]
    costs = [attempt.cost_usd for attempt in attempts if attempt.cost_usd is not None]
    seconds = [attempt.wall_s for attempt in attempts if attempt.wall_s is not None]
    return TaskTally(index=first.index, task_id=first.task_id, attempts=len(attempts),
                     successes=sum(attempt.success is True for attempt in attempts),
                     mean_score=fmean(attempt.score for attempt in attempts),
                     mean_tokens=fmean(attempt.input_tokens + attempt.output_tokens for attempt in attempts),
                     mean_input_tokens=fmean(attempt.input_tokens for attempt in attempts),
                     mean_output_tokens=fmean(attempt.output_tokens for attempt in attempts),
                     mean_cost_usd=sum(costs) / len(attempts) if costs else None,
                     mean_seconds=fmean(seconds) if seconds else None)


@dataclass(frozen=True)
class _Suite:
    """A suite's tasks, the file the env reads them from, and that file's content (not yet written
    when ``write`` is set: a suite given as a list of tasks)."""

    path: Path
    tasks: list[ToolTask]
    content: bytes
    write: bool = field(default=False)


def _read_suite(entry: Entry, out_dir: Path) -> _Suite:
    """The suite a suite entry names (see the module docstring)."""
    loaded = entry.load()
    if callable(loaded):
        loaded = loaded()
    if isinstance(loaded, (str, os.PathLike)):
        path = Path(loaded).resolve()
        content = path.read_bytes()
        return _Suite(path, parse_suite(content, source=str(path)), content)
    if isinstance(loaded, list):
        tasks = [task if isinstance(task, ToolTask) else ToolTask.model_validate(task) for task in loaded]
        return _Suite((out_dir / "suite.jsonl").resolve(), tasks, suite_content(tasks), write=True)
    raise UserError(f"suite {entry.name!r}: its entry {entry.target} gave a {type(loaded).__name__}, not a suite "
                    "file path or a list of tasks; the family that registers it must fix the entry")


def suite_tasks(suite: str) -> list[ToolTask]:
    """The tasks of the registered suite ``suite`` (built on first use, as ``evaluate_suite`` reads them)."""
    return _read_suite(registry.get("suite", suite), Path.cwd()).tasks


def _suite_option(suite: str, option: str, value: str) -> Any:
    """What the registered suite's metadata ``<option>s`` (views, modes) gives ``value``; a ``UserError``
    naming the valid values when it gives nothing."""
    choices = registry.get("suite", suite).metadata.get(f"{option}s")
    if not choices:
        raise UserError(f"suite {suite!r} has no {option}s; run it without --{option}")
    if value not in choices:
        raise UserError(f"suite {suite!r} has no {option} {value!r}; its {option}s are {', '.join(choices)} "
                        f"(e.g. --{option} {next(iter(choices))})")
    return choices[value]


def resolve_view(suite: str, view: str | None) -> str:
    """The suite registered for ``view`` of ``suite`` (see the module docstring); ``suite`` when no view."""
    return suite if view is None else str(_suite_option(suite, "view", view))


def resolve_mode(suite: str, mode: str | None) -> dict[str, Any]:
    """The settings of ``mode`` of the registered suite ``suite`` (see the module docstring); {} when no mode.

    ``mode`` is the suite's mode, never the agent's: an agent option value given for it (``autonomous``) is
    refused with the suite mode that sets it (``ap``)."""
    if mode is None:
        return {}
    modes = registry.get("suite", suite).metadata.get("modes") or {}
    if mode not in modes:
        for name, settings in modes.items():
            for key, value in settings.get("agent_config", {}).items():
                if value == mode:
                    raise UserError(f"--mode {mode} is an agent's {key}, not a mode of suite {suite!r} (its modes: "
                                    f"{', '.join(modes)}); for the agent's {key} {mode!r} write --mode {name}")
    return dict(_suite_option(suite, "mode", mode))


def _default_mode(entry: Any, agent: str, agent_config: dict[str, Any]) -> str | None:
    """The suite's ``default_mode`` for a run that names no mode, unless the agent takes none of the
    mode's options or its config already sets one of them (the user's choice stands)."""
    default = entry.metadata.get("default_mode")
    if default is None:
        return None
    options = entry.metadata["modes"][default].get("agent_config", {})
    accepted = inspect.signature(registry.get("agent", agent).load()).parameters
    if not any(key in accepted for key in options) or any(key in agent_config for key in options):
        return None
    return str(default)


def _mode_agent_config(mode: str | None, settings: dict[str, Any], agent_class: Any, config: dict[str, Any]) -> None:
    """Give ``config`` the mode's agent options that ``agent_class`` takes (an agent config that sets one
    differently is refused: the run would not be the mode it says)."""
    accepted = inspect.signature(agent_class).parameters
    for key, value in settings.get("agent_config", {}).items():
        if key not in accepted:
            continue
        if config.setdefault(key, value) != value:
            raise UserError(f"--agent-config sets {key} {config[key]!r} but --mode {mode} means {key} {value!r}; "
                            "drop one of them")


def _select(suite: str, tasks: list[ToolTask], task_ids: Sequence[str] | None) -> list[int] | None:
    """The suite indices of ``task_ids`` in the order given (None: every task)."""
    if task_ids is None:
        return None
    index_of = {task.id: index for index, task in enumerate(tasks)}
    unknown = [task_id for task_id in task_ids if task_id not in index_of]
    if unknown:
        examples = ", ".join(task.id for task in tasks[:3])
        raise UserError(f"suite {suite!r} has no task {unknown[0]!r}; give ids of its tasks to --tasks, "
                        f"e.g. {examples}")
    return [index_of[task_id] for task_id in dict.fromkeys(task_ids)]


def evaluate_suite(suite: str, agent: str, out_dir: str | os.PathLike[str], *,
                   agent_config: dict[str, Any] | None = None, view: str | None = None, mode: str | None = None,
                   task_ids: Sequence[str] | None = None, limit: int | None = None, repeats: int = 1,
                   seed: int = 0, backend: str = "local", workers: int | None = None, ray_address: str | None = None,
                   progress: bool | Callable[[EpisodeSummary], None] = False,
                   hooks: Sequence[HookSpec] = ()) -> Evaluation:
    """Run the registered agent ``agent`` on tasks of suite ``suite`` and score it (see the module docstring).

    ``view`` picks the suite registered for that view of ``suite``'s family; ``mode`` one of its modes
    (module docstring); ``task_ids`` picks tasks
    by id (default: all, in suite order), ``limit`` keeps the first that many; each task gets
    ``repeats`` attempts, attempt ``r`` at task ``t`` seeded as ``TaskPlan`` says. An agent whose
    constructor takes ``suite`` (the gold agent) is given the suite file unless ``agent_config`` sets
    it. ``backend``, ``workers``, ``ray_address`` and ``progress`` are ``run_many``'s; ``hooks`` are the
    registered controllers and monitors that watch every attempt (recorded in its episode file).
    """
    name = resolve_view(suite, view)
    entry = registry.get("suite", name)
    mode = mode if mode is not None else _default_mode(entry, agent, agent_config or {})
    mode_settings = resolve_mode(name, mode)
    out = Path(out_dir)
    source = _read_suite(entry, out)
    if not source.tasks:
        raise UserError(f"suite {name!r} ({source.path}) holds no tasks")
    plan = TaskPlan(suite=name, suite_sha256=hashlib.sha256(source.content).hexdigest(),
                    suite_size=len(source.tasks), task_indices=_select(name, source.tasks, task_ids), repeats=repeats)
    config = dict(agent_config or {})
    agent_class = registry.get("agent", agent).load()
    if "suite" in inspect.signature(agent_class).parameters:
        config.setdefault("suite", str(source.path))
    _mode_agent_config(mode, mode_settings, agent_class, config)
    check_arguments(agent_class, what=f"agent {agent!r}", fix="fix the agent config", **config)
    try:
        agent_class(**config)  # built once here too, so a config the agent rejects fails before any worker starts
    except ValidationError as exc:
        problem = exc.errors()[0]
        raise UserError(f"agent {agent!r} rejects its config ({'.'.join(map(str, problem['loc']))}: "
                        f"{problem['msg']}); fix the agent config") from None
    # A suite may set ToolTaskEnv options, e.g. its own scorer ("module:attr") or a larger max_text_length.
    env_kwargs = {"tasks": str(source.path), **entry.metadata.get("env_kwargs", {}),
                  **mode_settings.get("env_kwargs", {})}
    spec = RunSpec(env_id=TOOL_TASK_ENV, env_kwargs=env_kwargs, agent=AgentSpec(name=agent, config=config),
                   seed=seed, tasks=plan, hooks=list(hooks))
    # Made here first, so a bad scorer or env option fails once, before the folder is touched.
    scorer = _scorer({**env_kwargs, "tasks": source.tasks})
    prepare_run_folder(out, spec)  # refuses another run's folder before anything is written into it
    if source.write:
        write_atomically(source.path, source.content)
    n_tasks = plan.n_tasks if limit is None else min(limit, plan.n_tasks)
    run = run_many(spec, n_tasks * repeats, out, backend=backend, workers=workers, ray_address=ray_address,
                   progress=progress, label=f"{name} with {agent}")
    results, reports = _read_back(out, run.episodes, plan, seed, source.tasks)
    summarize = getattr(scorer, "summarize", None)
    run_report = summarize(reports) if callable(summarize) else None
    evaluation = Evaluation(suite=name, out_dir=str(out), run_id=run.run_id, results=results, report=run_report,
                            repeats=repeats, ran=run.ran, resumed=run.skipped)
    scores = {"suite": name, "view": view, "mode": mode, "suite_file": str(source.path),
              "agent": {"name": agent, "config": config},
              "run_id": run.run_id, "versions": versions(), "repeats": repeats, "seed": seed,
              "mean_score": evaluation.mean_score, "success_rate": evaluation.success_rate,
              "tasks": [asdict(result) for result in results], "pass_k": _pass_k_section(evaluation)}
    if evaluation.mean_metrics:
        scores["metrics"] = evaluation.mean_metrics
    if run_report is not None:
        scores["report"] = run_report
    write_atomically(out / "scores.json", json.dumps(scores, indent=2, default=str))
    return evaluation


def _pass_k_section(evaluation: Evaluation) -> dict[str, Any]:
    """scores.json's ``pass_k``: per task c of n with mean tokens and seconds; per k pass@k and pass^k."""
    tallies = evaluation.tallies()
    seconds = [tally.mean_seconds for tally in tallies if tally.mean_seconds is not None]
    return {"estimators": "pass@k = mean over tasks of 1 - C(n-c, k)/C(n, k); "
                          "pass^k = mean over tasks of C(c, k)/C(n, k)",
            "ci": "95% percentile bootstrap over tasks",
            "k": [asdict(row) for row in evaluation.pass_k()],
            "mean_tokens_per_attempt": fmean(tally.mean_tokens for tally in tallies),
            "mean_seconds_per_attempt": fmean(seconds) if seconds else None,
            "tasks": [asdict(tally) for tally in tallies]}


def _usage(episode: Episode) -> dict[str, Any]:
    """The attempt's model calls, tokens and dollars (from its ``model_call`` events) and wall time."""
    outcome_events = episode.outcome.events if episode.outcome is not None else []
    calls = [event.data for event in [*(e for step in episode.steps for e in step.events), *outcome_events]
             if event.kind == MODEL_CALL]
    costs = [float(call["cost_usd"]) for call in calls if call.get("cost_usd") is not None]
    wall_s = episode.outcome.metrics.get("wall_s") if episode.outcome is not None else None
    return {"model_calls": len(calls), "input_tokens": sum(int(call.get("input_tokens") or 0) for call in calls),
            "output_tokens": sum(int(call.get("output_tokens") or 0) for call in calls),
            "cost_usd": sum(costs) if costs else None, "wall_s": None if wall_s is None else float(wall_s)}


def _read_back(out: Path, summaries: list[EpisodeSummary], plan: TaskPlan, seed: int, tasks: list[ToolTask]
               ) -> tuple[list[TaskResult], list[dict[str, Any]]]:
    """Every attempt's result and score report, read from its episode file (its last step's info)."""
    results: list[TaskResult] = []
    reports: list[dict[str, Any]] = []
    for summary in summaries:
        task_index, repeat, _ = plan.attempt(summary.index, seed)
        # One episode per file: run_many wrote it, and summarises only complete ones.
        episode = read_episode_file(episode_path(out, summary.index))[0]
        final = episode.steps[-1] if episode.steps else None
        info = final.info if final is not None else {}
        outcome_score = episode.outcome.score if episode.outcome is not None else None
        results.append(TaskResult(index=task_index, task_id=tasks[task_index].id, repeat=repeat, seed=summary.seed,
                                  score=float(info.get(TASK_SCORE, outcome_score or 0.0)), success=summary.success,
                                  steps=len(episode.steps), metrics=summary.metrics, **_usage(episode)))
        report = final.privileged if final is not None else None
        if report is not None:
            reports.append(report)
    return results, reports


def _scorer(env_kwargs: dict[str, Any]) -> Any:
    """The scorer the suite's env grades with, from an env made (and closed) in this process."""
    env = gym.make(TOOL_TASK_ENV, **env_kwargs)
    try:
        return getattr(env.unwrapped, "scorer", None)
    finally:
        env.close()


__all__ = ["MODEL_CALL", "Evaluation", "TaskResult", "TaskTally", "evaluate_suite", "resolve_mode", "resolve_view",
           "suite_tasks"]
