"""The DORA scorer: answer checks by answer type, trajectory metrics, AP and IF modes.

Answer checks (``metadata['eval_spec']['type']``):

* ``numeric``: correct when ``|answer - y| <= 1 + 0.2 |y|``;
* ``exact``: equal after trimming, collapsing whitespace and case-folding;
* ``set``: F1 of the answer's elements against the expected ones (correct at F1 = 1);
* ``kendall``: Kendall's tau between the answer's order and the expected order (items the answer
  leaves out are appended in expected order); score ``(tau + 1) / 2``, correct at tau = 1;
* ``point``: correct when the answer point lies within ``max_pixels`` pixels (``pixel_size_m`` each);
* ``polygon``: correct when the IoU of the answer polygon with the expected one is >= ``min_iou``;
* ``report``: a T5 situation report, field by field with these types and figure by figure from the
  session workspace (``report_scoring``).

Trajectory metrics compare the agent's successful calls with the gold trajectory: tool any-order
(multiset recall of tool names), tool in-order (longest common subsequence / gold length), exact
match (same tool sequence), parameter accuracy (over gold calls aligned by the LCS, the fraction of
gold arguments the agent's call matches; workspace paths match by *structural role*, i.e. which
earlier call produced them, since an agent's files may differ in content and so in name) and
efficiency (gold length / agent calls, at most 1). Mode ``AP`` (autonomous) shows the question
only; ``IF`` (instruction following) adds the gold tool order as a hint (the LLM agent's modes
``autonomous`` and ``instruction``); the scorer records the label.

Run summary (``DoraScorer.summarize``, in ``scores.json``'s ``report`` and on ``gauntlet eval``'s
console): per realism level (``clean``, ``hard``: a task's ``metadata['realism']``) and dimension, the
mean answer score, the share answered correctly and the mean of each trajectory metric; the **DORA
score** of a level is the macro average of its dimensions' mean answer scores (T1..T5, whichever the run
has), as DORA averages per task, then per dimension, then over the dimensions.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from statistics import fmean
from typing import Any

from pydantic import BaseModel

from gauntlet.tasks import NO_ANSWER, ScoreReport, Scorer, ToolTask

MODES = ("AP", "IF")
WORKSPACE_PREFIX = "ws/"
TRAJECTORY_METRICS = ("tool_any_order", "tool_in_order", "exact_match", "parameter_accuracy", "efficiency")


# Answers ------------------------------------------------------------------------------------------
def _text(value: Any) -> str:
    return " ".join(str(value).split()).casefold()


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value.replace(",", "")) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        return None


def kendall_tau(expected: Sequence[Any], answer: Sequence[Any]) -> float:
    """Kendall's tau-a between the expected order and the answer's. Items the answer names rank above
    those it leaves out, in the order given; a pair of two left-out items is discordant, so an answer
    that names none of the items (an empty list, other names) scores -1, not 1."""
    keys = [_text(x) for x in expected]
    given = [k for k in dict.fromkeys(_text(x) for x in answer) if k in keys]
    position = {k: i for i, k in enumerate(given)}
    n = len(keys)
    if n < 2:
        return 1.0 if given == keys else -1.0
    total = 0
    for i in range(n):
        for j in range(i + 1, n):
            a, b = position.get(keys[i]), position.get(keys[j])
            if a is None and b is None:
                total -= 1
            elif b is None or (a is not None and a < b):
                total += 1
            else:
                total -= 1
    return total / (n * (n - 1) / 2)


def polygon_iou(a: Any, b: Any) -> float:
    """IoU of two GeoJSON polygon geometries (0 when either is not a valid polygon)."""
    from shapely.geometry import shape

    try:
        pa, pb = shape(a).buffer(0), shape(b).buffer(0)
    except Exception:  # any malformed geometry simply scores 0
        return 0.0
    union = pa.union(pb).area
    return 0.0 if union == 0 else pa.intersection(pb).area / union


def grade_answer(spec: dict[str, Any], expected: Any, answer: Any) -> tuple[float, bool, str]:
    """(score in [0, 1], correct, reason) of ``answer`` against ``expected`` under a DORA spec."""
    kind = spec["type"]
    if answer is NO_ANSWER:
        return 0.0, False, "no answer"
    if kind == "numeric":
        y, a = _number(expected), _number(answer)
        if y is None:
            raise ValueError(f"a numeric task needs a numeric expected answer, got {expected!r}")
        if a is None:
            return 0.0, False, f"not a number: {answer!r}"
        ok = abs(a - y) <= 1 + 0.2 * abs(y)
        return float(ok), ok, f"|{a} - {y}| {'<=' if ok else '>'} 1 + 0.2|y|"
    if kind == "exact":
        ok = _text(answer) == _text(expected)
        return float(ok), ok, "equal" if ok else "not equal"
    if kind == "set":
        if not isinstance(answer, (list, tuple)):
            return 0.0, False, "expected a list"
        want, got = {_text(x) for x in expected}, {_text(x) for x in answer}
        if not want and not got:
            return 1.0, True, "both empty"
        hits = len(want & got)
        f1 = 0.0 if hits == 0 else 2 * hits / (len(want) + len(got))
        return f1, f1 == 1.0, f"F1 {f1:.3f}"
    if kind == "kendall":
        if not isinstance(answer, (list, tuple)):
            return 0.0, False, "expected a list"
        tau = kendall_tau(expected, answer)
        return (tau + 1) / 2, tau == 1.0, f"tau {tau:.3f}"
    if kind == "point":
        try:
            distance = math.dist([float(v) for v in answer], [float(v) for v in expected])
        except (TypeError, ValueError):
            return 0.0, False, "expected [x, y]"
        limit = spec["pixel_size_m"] * spec["max_pixels"]
        ok = distance <= limit
        return float(ok), ok, f"{distance:.1f} m from the expected point (limit {limit:g} m)"
    if kind == "polygon":
        iou = polygon_iou(answer, expected)
        ok = iou >= spec.get("min_iou", 0.5)
        return float(ok), ok, f"IoU {iou:.3f}"
    if kind == "report":  # a T5 report's fields alone (its figures need the session: report_scoring.grade_report)
        from gauntlet.mcp_servers.disaster.report_scoring import grade_fields

        return grade_fields(spec, expected, answer)
    raise ValueError(f"unknown DORA answer type {kind!r}")


# Trajectories -------------------------------------------------------------------------------------
def _calls(calls: Sequence[Any]) -> list[tuple[str, dict[str, Any], Any]]:
    """(name, args, result) of the successful calls, from ToolCalls, GoldCalls or dicts."""
    out = []
    for call in calls:
        if hasattr(call, "is_error") and hasattr(call, "arguments"):
            if not call.is_error:
                out.append((call.name, call.arguments, call.result))
        elif hasattr(call, "call"):
            out.append((call.call, call.args, call.obs))
        elif isinstance(call, dict) and not call.get("is_error"):
            out.append((call.get("name", call.get("call")), call.get("arguments", call.get("args")) or {},
                        call.get("result", call.get("obs"))))
    return out


def _roles(calls: list[tuple[str, dict[str, Any], Any]]) -> dict[str, tuple[str, int]]:
    """Workspace path -> (tool that produced it, which call of that tool)."""
    seen: Counter[str] = Counter()
    roles: dict[str, tuple[str, int]] = {}
    for name, _, result in calls:
        if isinstance(result, dict) and str(result.get("path", "")).startswith(WORKSPACE_PREFIX):
            roles.setdefault(result["path"], (name, seen[name]))
        seen[name] += 1
    return roles


def _same_value(gold: Any, mine: Any, gold_roles: dict, my_roles: dict) -> bool:
    if isinstance(gold, str) and gold.startswith(WORKSPACE_PREFIX):
        return isinstance(mine, str) and gold_roles.get(gold) is not None and gold_roles.get(gold) == my_roles.get(mine)
    if isinstance(gold, (int, float)) and not isinstance(gold, bool):
        number = _number(mine)
        return number is not None and math.isclose(number, float(gold), rel_tol=1e-6, abs_tol=1e-9)
    if isinstance(gold, list):
        return isinstance(mine, list) and len(gold) == len(mine) and all(
            _same_value(g, m, gold_roles, my_roles) for g, m in zip(gold, mine))
    if isinstance(gold, dict):
        return isinstance(mine, dict) and all(k in mine and _same_value(v, mine[k], gold_roles, my_roles)
                                              for k, v in gold.items())
    return gold == mine


def _lcs_pairs(gold: list[str], mine: list[str]) -> list[tuple[int, int]]:
    n, m = len(gold), len(mine)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            table[i][j] = table[i + 1][j + 1] + 1 if gold[i] == mine[j] else max(table[i + 1][j], table[i][j + 1])
    pairs, i, j = [], 0, 0
    while i < n and j < m:
        if gold[i] == mine[j]:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def trajectory_metrics(gold_calls: Sequence[Any], agent_calls: Sequence[Any]) -> dict[str, float]:
    """Tool any-order, tool in-order, exact match, parameter accuracy and efficiency (all in [0, 1])."""
    gold, mine = _calls(gold_calls), _calls(agent_calls)
    if not gold:
        return {"tool_any_order": 1.0, "tool_in_order": 1.0, "exact_match": 1.0, "parameter_accuracy": 1.0,
                "efficiency": 1.0}
    gold_names, my_names = [c[0] for c in gold], [c[0] for c in mine]
    any_order = sum((Counter(gold_names) & Counter(my_names)).values()) / len(gold)
    pairs = _lcs_pairs(gold_names, my_names)
    gold_roles, my_roles = _roles(gold), _roles(mine)
    matched = total = 0
    for i, _ in enumerate(gold):
        total += len(gold[i][1]) or 1
    for i, j in pairs:
        args = gold[i][1]
        matched += sum(_same_value(v, mine[j][1].get(k), gold_roles, my_roles) for k, v in args.items()) if args else 1
    return {"tool_any_order": any_order, "tool_in_order": len(pairs) / len(gold),
            "exact_match": float(gold_names == my_names), "parameter_accuracy": matched / total,
            "efficiency": min(1.0, len(gold) / len(mine)) if mine else 0.0}


class DoraReport(BaseModel):
    """A graded attempt at a DORA task."""

    task_id: str
    mode: str
    dimension: str
    level: str = "clean"
    answer_score: float
    answer_correct: bool
    answer_check: str
    trajectory: dict[str, float]


def score_task(task: ToolTask, answer: Any = NO_ANSWER, calls: Sequence[Any] = (), mode: str = "AP") -> DoraReport:
    """Grade one attempt (``answer`` and the agent's calls) at ``task`` in ``mode``."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; use AP or IF")
    spec = task.metadata["eval_spec"]
    if spec["type"] == "report":  # T5: fields, and figures read back from the session workspace
        from gauntlet.mcp_servers.disaster.report_scoring import grade_report

        score, correct, reason = grade_report(spec, task.answer, answer, calls)
    else:
        score, correct, reason = grade_answer(spec, task.answer, answer)
    return DoraReport(task_id=task.id, mode=mode, dimension=task.metadata["dimension"],
                      level=task.metadata.get("realism", "clean"), answer_score=score,
                      answer_correct=correct, answer_check=reason,
                      trajectory=trajectory_metrics(task.gold_trajectory, calls))


class DoraScorer(Scorer):
    """``gauntlet.tasks.Scorer`` with DORA's checks, for ``ToolTaskEnv(..., scorer=DoraScorer())``:
    score = 0.7 x answer score + 0.3 x tool in-order; the full DORA report is in ``details``."""

    def __init__(self, mode: str = "AP"):
        self.mode = mode

    def score(self, task: ToolTask, answer: Any = NO_ANSWER, calls: Sequence[Any] = ()) -> ScoreReport:
        report = score_task(task, answer, calls, self.mode)
        made = Scorer.grade_trajectory(self, task.gold_trajectory, calls)
        total = 0.7 * report.answer_score + 0.3 * report.trajectory["tool_in_order"]
        return ScoreReport(task_id=task.id, score=min(1.0, total), answer_score=report.answer_score,
                           answer_correct=report.answer_correct, submitted=answer is not NO_ANSWER,
                           trajectory_score=report.trajectory["tool_in_order"], gold_calls_made=made[0],
                           gold_calls_in_order=made[1], details={"dora": report.model_dump()})

    @staticmethod
    def summarize(reports: Sequence[ScoreReport | dict[str, Any]]) -> dict[str, Any]:
        """The DORA run summary of the attempts' score reports (see the module docstring)."""
        return dora_summary([(r.details if isinstance(r, ScoreReport) else r.get("details", {})).get("dora")
                             for r in reports])


def instruction_following_scorer() -> DoraScorer:
    """The scorer of ``--mode if`` (a suite's ``env_kwargs`` name it): DORA's, labelled ``IF``."""
    return DoraScorer("IF")


def dora_summary(reports: Sequence[dict[str, Any] | None]) -> dict[str, Any]:
    """Per level and dimension: tasks, mean answer score, answer accuracy and mean trajectory metrics;
    per level the DORA score (macro average of the dimensions' mean answer scores) and, for the console,
    one table row per level and dimension (``tables``)."""
    rows = [r for r in reports if r]
    levels: dict[str, Any] = {}
    table_rows: list[list[str]] = []
    for level in sorted({r["level"] for r in rows}):
        dims: dict[str, Any] = {}
        for dim in sorted({r["dimension"] for r in rows if r["level"] == level}):
            mine = [r for r in rows if r["level"] == level and r["dimension"] == dim]
            dims[dim] = {"tasks": len(mine), "answer_score": fmean(r["answer_score"] for r in mine),
                         "answer_accuracy": fmean(float(r["answer_correct"]) for r in mine),
                         **{m: fmean(r["trajectory"][m] for r in mine) for m in TRAJECTORY_METRICS}}
            table_rows.append([level, dim, str(len(mine)), *(f"{dims[dim][k]:.3f}" for k in (
                "answer_score", "answer_accuracy", *TRAJECTORY_METRICS))])
        score = fmean(d["answer_score"] for d in dims.values())
        levels[level] = {"dora_score": score, "dimensions": dims}
        table_rows.append([level, "DORA score", str(sum(d["tasks"] for d in dims.values())), f"{score:.3f}",
                           *[""] * (1 + len(TRAJECTORY_METRICS))])
    modes = sorted({r["mode"] for r in rows})
    summary: dict[str, Any] = {"mode": modes[0] if len(modes) == 1 else modes, "levels": levels}
    if table_rows:
        summary["tables"] = [{"title": f"DORA scores by level and dimension (mode {', '.join(modes)})",
                              "columns": ["level", "dimension", "tasks", "answer score", "answer accuracy",
                                          *(m.replace("_", " ") for m in TRAJECTORY_METRICS)],
                              "rows": table_rows}]
    return summary


def truth_vs_gold(tasks: Sequence[ToolTask], *, by_level: bool = False) -> dict[str, dict[str, float]]:
    """Per dimension (``by_level``: per ``<level>/<dimension>``): how many tasks have a truth answer, and the
    share whose gold answer passes the DORA check against the generator's truth (how far the gold
    pipeline is from the truth, i.e. how much of the gap is tool error)."""
    out: dict[str, dict[str, float]] = {}
    for task in tasks:
        truth = task.metadata.get("truth_answer")
        if truth is None:
            continue
        key = task.metadata["dimension"]
        if by_level:
            key = f"{task.metadata.get('realism', 'clean')}/{key}"
        row = out.setdefault(key, {"with_truth": 0, "gold_passes": 0})
        row["with_truth"] += 1
        row["gold_passes"] += grade_answer(task.metadata["eval_spec"], truth, task.answer)[1]
    for row in out.values():
        row["share"] = row["gold_passes"] / row["with_truth"]
    return dict(sorted(out.items()))
