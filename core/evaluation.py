"""Evaluate an agent on a registered task suite: one recorded, scored episode per task.

A suite entry (registry kind ``suite``) names a task suite file (JSONL, ``gauntlet.tasks``): its
target is the file's path, or a callable returning the path or a list of ``ToolTask``. Its metadata
``env_kwargs`` (JSON) are passed to ``ToolTaskEnv``: e.g. ``{"scorer": "pkg.module:MyScorer",
"max_text_length": 65536}``. Task ``i``
runs as one episode of ``gauntlet/ToolTask-v0`` reset with seed ``i`` (which picks task ``i``), and
is recorded in ``<out>/episodes/ep-<i>.jsonl`` with the env's kwargs in its config, so ``gauntlet
replay`` and ``gauntlet report`` read an evaluation like any run. ``<out>/scores.json`` holds every
task's score; a suite given as a list of tasks is saved to ``<out>/suite.jsonl`` first.

Views: a suite entry may list its family's views in its metadata, ``views={"clean": "chem",
"noisy-high": "chem-noisy-high", ...}`` (view name -> registered suite name); ``evaluate_suite(...,
view="noisy-high")`` (``gauntlet eval chem --view noisy-high``) then runs the suite registered for that
view. Run reports: when the env's scorer has ``summarize(reports)``, it is called with every task's
score report (the ``ScoreReport`` dicts of the episodes' last steps) and its result is stored as
``report`` in ``scores.json``.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from gauntlet.batch import episode_path
from gauntlet.errors import UserError, check_arguments
from gauntlet.fileio import write_atomically
from gauntlet.registry import Entry, make_agent, registry
from gauntlet.runner import new_run_id, rollout
from gauntlet.tasks import load_suite, save_suite
from gauntlet.versions import versions

TOOL_TASK_ENV = "gauntlet/ToolTask-v0"


@dataclass(frozen=True)
class TaskResult:
    """How the agent did on one task."""

    index: int
    task_id: str
    score: float
    success: bool | None
    steps: int


@dataclass
class Evaluation:
    """An agent's results on every task of a suite, and where their episodes are."""

    suite: str
    out_dir: str
    run_id: str
    results: list[TaskResult]
    report: dict[str, Any] | None = None

    @property
    def mean_score(self) -> float:
        return sum(result.score for result in self.results) / len(self.results) if self.results else 0.0

    @property
    def success_rate(self) -> float | None:
        known = [result.success for result in self.results if result.success is not None]
        return sum(known) / len(known) if known else None


def suite_file(entry: Entry, out_dir: Path) -> Path:
    """The suite file a suite entry names (see the module docstring)."""
    loaded = entry.load()
    if callable(loaded):
        loaded = loaded()
    if isinstance(loaded, (str, os.PathLike)):
        return Path(loaded).resolve()
    if isinstance(loaded, list):
        return save_suite(loaded, out_dir / "suite.jsonl").resolve()
    raise UserError(f"suite {entry.name!r}: its entry {entry.target} gave a {type(loaded).__name__}, not a suite "
                    "file path or a list of tasks; the family that registers it must fix the entry")


def resolve_view(suite: str, view: str | None) -> str:
    """The suite registered for ``view`` of ``suite`` (see the module docstring); ``suite`` when no view."""
    if view is None:
        return suite
    views = registry.get("suite", suite).metadata.get("views")
    if not views:
        raise UserError(f"suite {suite!r} has no views; run it without --view")
    if view not in views:
        raise UserError(f"suite {suite!r} has no view {view!r}; its views are {', '.join(views)}")
    return views[view]


def evaluate_suite(suite: str, agent: str, out_dir: str | os.PathLike[str], *,
                   agent_config: dict[str, Any] | None = None,
                   progress: Callable[[TaskResult], None] | None = None, view: str | None = None) -> Evaluation:
    """Run the registered agent ``agent`` once on every task of suite ``suite`` (see the module docstring).

    An agent whose constructor takes ``suite`` (the gold agent) is given the suite file unless
    ``agent_config`` sets it. ``progress`` is called with each task's result as it finishes. ``view``
    picks the suite registered for that view of ``suite``'s family.
    """
    suite = resolve_view(suite, view)
    entry = registry.get("suite", suite)
    out = Path(out_dir)
    (out / "episodes").mkdir(parents=True, exist_ok=True)
    path = suite_file(entry, out)
    tasks = load_suite(path)
    if not tasks:
        raise UserError(f"suite {suite!r} ({path}) holds no tasks")
    config = dict(agent_config or {})
    agent_class = registry.get("agent", agent).load()
    if "suite" in inspect.signature(agent_class).parameters:
        config.setdefault("suite", str(path))
    check_arguments(agent_class, what=f"agent {agent!r}", fix="fix the agent config", **config)
    actor = make_agent(agent, **config)
    # A suite may set ToolTaskEnv options, e.g. its own scorer ("module:attr") or a larger max_text_length.
    env_kwargs = {"tasks": str(path), **entry.metadata.get("env_kwargs", {})}
    env = gym.make(TOOL_TASK_ENV, **env_kwargs)
    run_id = new_run_id()
    results: list[TaskResult] = []
    reports: list[dict[str, Any]] = []
    try:
        for index, task in enumerate(tasks):
            record = episode_path(out, index)
            for stale in (record, record.with_suffix(".npz")):
                stale.unlink(missing_ok=True)
            # Steps are kept in memory too: the task's score is in the last step's info.
            episode = rollout(env, actor, seed=index, record=record, run_id=run_id, keep_steps=True,
                              episode_id=f"{run_id}-{index:06d}", config={"run_index": index})
            final = episode.steps[-1].info if episode.steps else {}
            result = TaskResult(index=index, task_id=task.id, score=float(final.get("score", episode.outcome.score)),
                                success=episode.outcome.success, steps=len(episode.steps))
            results.append(result)
            if final.get("privileged") is not None:
                reports.append(final["privileged"])
            if progress is not None:
                progress(result)
        summarize = getattr(getattr(env.unwrapped, "scorer", None), "summarize", None)
        report = summarize(reports) if callable(summarize) else None
    finally:
        env.close()
    evaluation = Evaluation(suite=suite, out_dir=str(out), run_id=run_id, results=results, report=report)
    summary = {"suite": suite, "view": view, "suite_file": str(path), "agent": {"name": agent, "config": config},
               "run_id": run_id, "versions": versions(), "mean_score": evaluation.mean_score,
               "success_rate": evaluation.success_rate, "tasks": [asdict(result) for result in results]}
    if report is not None:
        summary["report"] = report
    write_atomically(out / "scores.json", json.dumps(summary, indent=2, default=str))
    return evaluation


__all__ = ["Evaluation", "TaskResult", "evaluate_suite", "resolve_view", "suite_file"]
