"""The judge-free scorer: accuracy at tolerance, relative errors, components found, and failure stage.

For each task it compares the submitted answer with the gold price (relative error
``|answer - gold| / gold``; CTA@k: within k %, abstention counts as a failure) and reads the agent's
logged tool calls against the gold rule's intermediate values (``metadata['gold']`` of the task):

* components: the chemical ids the agent acted on (the ``chemical_id`` of its successful
  ``get_chemical``, ``get_supplier_quotes``, ``select_pack`` and ``convert_quantity`` calls) against
  the gold components. Identity is the catalogue id, so any alias of the right chemical counts
  (alias-aware precision and recall);
* stage of the first failure, for answers outside 25 %: ``grounding`` (a gold component never
  acted on), ``retrieval`` (a gold component never priced: no successful ``get_supplier_quotes``
  or ``select_pack`` for it), ``procurement`` (a gold component's pack cost appears nowhere: neither a
  ``select_pack`` total nor a number in a ``calculate`` expression within 0.5 %), else
  ``arithmetic``. ``abstained`` when no number was submitted, ``correct`` within 25 %.

A number within 25 % is ``correct`` however it was reached, so the summary also counts the correct
answers that did not price the reaction (``correct_unpriced``: some gold component never acted on):
a small model that submits a number it was shown (the product's molar mass, a pack price) lands within
25 % of the gold price now and then, and ``cta@25_priced`` is CTA@25 over the attempts that acted on
every gold component.

``ChemScorer`` is the per-task form for ``ToolTaskEnv`` (the chem suites name it in their registry
``env_kwargs``): the task's eval spec grades the answer, and the diagnosis rides in the report's
``details["chem"]``, so every recorded episode carries it; ``ChemScorer.summarize`` turns a run's
reports into the summary above.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gauntlet.episode import ToolCall
from gauntlet.tasks import NO_ANSWER, Scorer, ScoreReport, ToolTask

CTA_LEVELS_PCT = (10, 25, 50)
ACTING_TOOLS = ("get_chemical", "get_supplier_quotes", "select_pack", "convert_quantity")
PRICING_TOOLS = ("get_supplier_quotes", "select_pack")
COST_MATCH_REL = 0.005
NUMBER = re.compile(r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
STAGES = ("correct", "abstained", "grounding", "retrieval", "procurement", "arithmetic")


@dataclass(frozen=True)
class TaskDiagnosis:
    task_id: str
    gold_usd_per_g: float
    answer_usd_per_g: float | None
    relative_error: float | None
    stage: str
    component_precision: float
    component_recall: float


def _successful_calls(calls: Sequence[ToolCall | dict]) -> list[tuple[str, dict, Any]]:
    """(name, arguments, result) of the calls that did not fail; dicts use ToolCall's field names."""
    out = []
    for call in calls:
        data = call.model_dump() if isinstance(call, ToolCall) else call
        if not data.get("is_error"):
            out.append((data["name"], dict(data.get("arguments") or {}), data.get("result")))
    return out


def _answer_value(answer: Any) -> float | None:
    if answer is NO_ANSWER or isinstance(answer, bool):
        return None
    try:
        value = float(answer.replace(",", "").strip()) if isinstance(answer, str) else float(answer)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def diagnose(task: ToolTask, answer: Any, calls: Sequence[ToolCall | dict]) -> TaskDiagnosis:
    """Grade one attempt (see the module docstring); ``answer`` is ``NO_ANSWER`` when none was given."""
    gold = task.metadata["gold"]
    gold_value = float(task.answer)
    value = _answer_value(answer)
    error = abs(value - gold_value) / gold_value if value is not None else None
    made = _successful_calls(calls)
    acted = {int(args["chemical_id"]) for name, args, _ in made
             if name in ACTING_TOOLS and isinstance(args.get("chemical_id"), int)}
    gold_ids = {component["chemical_id"] for component in gold["components"]}
    precision = len(acted & gold_ids) / len(acted) if acted else 0.0
    recall = len(acted & gold_ids) / len(gold_ids) if gold_ids else 1.0
    if error is not None and error <= task.eval_spec.rel_tol:  # the suite's CTA@25 tolerance
        stage = "correct"
    elif value is None:
        stage = "abstained"
    elif recall < 1.0:
        stage = "grounding"
    elif not all(any(name in PRICING_TOOLS and args.get("chemical_id") == component["chemical_id"]
                     for name, args, _ in made) for component in gold["components"]):
        stage = "retrieval"
    elif not all(_cost_seen(component, made) for component in gold["components"]):
        stage = "procurement"
    else:
        stage = "arithmetic"
    return TaskDiagnosis(task.id, gold_value, value, error, stage, precision, recall)


def _cost_seen(component: dict, made: list[tuple[str, dict, Any]]) -> bool:
    target = component["cost_usd"]

    def close(number: float) -> bool:
        return math.isclose(number, target, rel_tol=COST_MATCH_REL)

    for name, args, result in made:
        if (name == "select_pack" and args.get("chemical_id") == component["chemical_id"]
                and isinstance(result, dict) and close(float(result.get("total_usd", -1)))):
            return True
        if name == "calculate" and any(close(float(n)) for n in NUMBER.findall(str(args.get("expression", "")))):
            return True
    return False


def summarize(diagnoses: Sequence[TaskDiagnosis]) -> dict[str, Any]:
    """CTA@10/25/50, mean and median relative error (answered tasks), component P/R, stage counts, and the
    correct answers reached without acting on every gold component (``correct_unpriced``, ``cta@25_priced``)."""
    n = len(diagnoses)
    errors = [d.relative_error for d in diagnoses if d.relative_error is not None]
    summary: dict[str, Any] = {"n_tasks": n, "n_answered": len(errors)}
    for level in CTA_LEVELS_PCT:
        hits = sum(1 for d in diagnoses if d.relative_error is not None and d.relative_error <= level / 100)
        summary[f"cta@{level}"] = hits / n if n else 0.0
    summary["mean_relative_error"] = statistics.fmean(errors) if errors else None
    summary["median_relative_error"] = statistics.median(errors) if errors else None
    summary["component_precision"] = statistics.fmean(d.component_precision for d in diagnoses) if n else 0.0
    summary["component_recall"] = statistics.fmean(d.component_recall for d in diagnoses) if n else 0.0
    unpriced = sum(1 for d in diagnoses if d.stage == "correct" and d.component_recall < 1.0)
    summary["correct_unpriced"] = unpriced
    summary["cta@25_priced"] = (summary["cta@25"] * n - unpriced) / n if n else 0.0
    counts = Counter(d.stage for d in diagnoses)
    summary["stages"] = {stage: counts.get(stage, 0) for stage in STAGES}
    return summary


def score_episodes(tasks: Sequence[ToolTask], episodes: Sequence[Any]) -> tuple[list[TaskDiagnosis], dict[str, Any]]:
    """Diagnose recorded ``ToolTaskEnv`` episodes (``gauntlet.episode.Episode``) of ``tasks``."""
    by_id = {task.id: task for task in tasks}
    diagnoses = []
    for episode in episodes:
        task_id = next((step.info.get("task_id") for step in episode.steps if step.info.get("task_id")), None)
        if task_id is None:
            raise ValueError("an episode without a task_id in its steps' info is not a ToolTaskEnv episode")
        task = by_id[task_id]
        calls = [step.tool_call for step in episode.steps if step.tool_call is not None]
        server_calls = [call for call in calls if call.name != "submit_answer"]
        answer_calls = [call for call in calls if call.name == "submit_answer" and not call.is_error]
        answer = answer_calls[-1].arguments.get("answer") if answer_calls else NO_ANSWER
        diagnoses.append(diagnose(task, answer, server_calls))
    return diagnoses, summarize(diagnoses)


class ChemScorer(Scorer):
    """``gauntlet.tasks.Scorer`` for chem tasks: the eval spec's grade (CTA@25: within 25 % of the gold
    price), plus the diagnosis of ``diagnose`` in ``details["chem"]`` (see the module docstring)."""

    def score(self, task: ToolTask, answer: Any = NO_ANSWER, calls: Sequence[Any] = ()) -> ScoreReport:
        report = super().score(task, answer, calls)
        server_calls = [call for call in calls if _call_name(call) != "submit_answer"]
        report.details["chem"] = asdict(diagnose(task, answer, server_calls))
        return report

    @staticmethod
    def summarize(reports: Sequence[ScoreReport | dict]) -> dict[str, Any]:
        """The run summary (``summarize``) of per-task reports that carry ``details["chem"]``."""
        details = [(r.details if isinstance(r, ScoreReport) else r.get("details", {})).get("chem") for r in reports]
        return summarize([TaskDiagnosis(**d) for d in details if d])


def _call_name(call: Any) -> str | None:
    return call.get("name") if isinstance(call, dict) else getattr(call, "name", None)


def as_json(diagnoses: Sequence[TaskDiagnosis]) -> list[dict[str, Any]]:
    return [asdict(d) for d in diagnoses]


def score_run(run_dir: str | Path) -> dict[str, Any]:
    """Score a ``gauntlet eval`` output folder of a chem suite; writes ``chem_report.json`` (atomically)."""
    from gauntlet.episode import load_episodes
    from gauntlet.tasks import load_suite

    run = Path(run_dir)
    scores = json.loads((run / "scores.json").read_text())
    tasks = load_suite(scores["suite_file"])
    diagnoses, summary = score_episodes(tasks, load_episodes(run / "episodes"))
    report = {"suite": scores["suite"], "agent": scores["agent"], "summary": summary, "tasks": as_json(diagnoses)}
    tmp = run / "chem_report.json.tmp"
    tmp.write_text(json.dumps(report, indent=1))
    os.replace(tmp, run / "chem_report.json")
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description="Score a `gauntlet eval` run of a chem suite: CTA@10/25/50, "
                                                 "relative errors, component precision/recall, failure stages.")
    parser.add_argument("run_dir", help="the --out folder of `gauntlet eval chem...`")
    report = score_run(parser.parse_args().run_dir)
    print(json.dumps({"suite": report["suite"], "agent": report["agent"]["name"], **report["summary"]}, indent=1))


if __name__ == "__main__":
    main()
