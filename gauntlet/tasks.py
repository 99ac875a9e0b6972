"""Task suites for tool servers, and the scorer that grades answers and trajectories.

A suite is a JSON Lines file, one ``ToolTask`` per line::

    {"id": "kv-total", "server": "kv", "question": "Store apples=3 and pears=4, then report the total.",
     "inputs": {}, "gold_trajectory": [{"call": "put", "args": {"key": "apples", "value": 3}, "obs": {...}}, ...],
     "answer": 7, "eval_spec": {"kind": "numeric", "abs_tol": 1e-9}}

``server`` names the tool server (a registered server, or ``env:<ENV_ID>``); ``inputs`` is the
task's manifest of named inputs (values, or paths under the server's data root); the gold
trajectory is the calls that solve the task with the result each gives (``obs``, or null when the
result is not fixed); ``answer`` is the final answer and ``eval_spec`` says how answers are graded.

``Scorer.score(task, answer, calls)`` returns a ``ScoreReport``: a score in [0, 1], the answer and
trajectory grades, and which gold calls were made and in what order. Replaying the gold trajectory
and submitting the gold answer scores 1.0, whatever the eval spec.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gauntlet.episode import ToolCall
from gauntlet.fileio import write_atomically


class SuiteFormatError(ValueError):
    """A suite file that is not valid task JSONL; the message names the file and line."""


class GoldCall(BaseModel):
    """One call of a gold trajectory: the tool, its arguments, and the result it gives."""

    model_config = ConfigDict(extra="forbid")
    call: str = Field(description="tool name")
    args: dict[str, Any] = Field(default_factory=dict, description="tool arguments")
    obs: Any = Field(default=None, description="the result the call gives (structured content), or null if not fixed")


class EvalSpec(BaseModel):
    """How a task is graded.

    ``kind`` selects the answer check: ``exact`` (equal after trimming strings, and case-folding
    them unless ``case_sensitive``), ``numeric`` (a number or list of numbers, each within ``rel_tol``
    of the expected value, ``|answer - expected| <= rel_tol * |expected|``, or within ``abs_tol``),
    ``set`` (same elements, any order), ``list`` (same elements, same order) or ``contains`` (the
    answer text contains the expected string, or each of the expected strings).
    ``partial_credit`` grades set/list/contains/numeric-list answers by the fraction right instead of
    all-or-nothing. ``trajectory`` says how gold calls are checked (``calls``: made at all;
    ``ordered``: made in the gold order) and ``trajectory_weight`` how much that counts in the score.
    """

    model_config = ConfigDict(extra="forbid")
    kind: Literal["exact", "numeric", "set", "list", "contains"] = "exact"
    rel_tol: float = Field(default=0.0, ge=0.0)
    abs_tol: float = Field(default=0.0, ge=0.0)
    case_sensitive: bool = False
    partial_credit: bool = False
    trajectory: Literal["calls", "ordered"] = "calls"
    trajectory_weight: float = Field(default=0.0, ge=0.0, le=1.0)


class ToolTask(BaseModel):
    """One task for a tool server (see the module docstring for the fields)."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1)
    question: str
    server: str | None = None
    inputs: dict[str, Any] = Field(default_factory=dict)
    gold_trajectory: list[GoldCall] = Field(default_factory=list)
    answer: Any
    eval_spec: EvalSpec = Field(default_factory=EvalSpec)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _answer_fits_the_eval_kind(self) -> ToolTask:
        kind, answer = self.eval_spec.kind, self.answer
        if kind == "numeric" and as_numbers(answer) is None:
            raise ValueError(f"task {self.id!r}: a numeric eval needs a number or list of numbers as answer")
        if kind in ("set", "list") and not isinstance(answer, list):
            raise ValueError(f"task {self.id!r}: a {kind} eval needs a list as answer")
        if kind == "contains" and not (isinstance(answer, str) or
                                       (isinstance(answer, list) and all(isinstance(a, str) for a in answer))):
            raise ValueError(f"task {self.id!r}: a contains eval needs a string or list of strings as answer")
        return self


def load_suite(path: str | os.PathLike[str]) -> list[ToolTask]:
    """Read a task suite (JSONL, blank lines allowed); ``SuiteFormatError`` names any bad line."""
    path = Path(path)
    return parse_suite(path.read_bytes(), source=str(path))


def parse_suite(content: bytes, *, source: str) -> list[ToolTask]:
    """The tasks of a suite file's ``content``; ``SuiteFormatError`` names ``source`` and any bad line."""
    tasks: list[ToolTask] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(content.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            task = ToolTask.model_validate(orjson.loads(line))
        except orjson.JSONDecodeError as exc:
            raise SuiteFormatError(f"{source}:{number}: not JSON ({exc})") from None
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'task'}: {e['msg']}" for e in exc.errors())
            raise SuiteFormatError(f"{source}:{number}: not a task ({problems})") from None
        if task.id in seen:
            raise SuiteFormatError(f"{source}:{number}: task id {task.id!r} already used on line {seen[task.id]}")
        seen[task.id] = number
        tasks.append(task)
    return tasks


def suite_content(tasks: Iterable[ToolTask]) -> bytes:
    """Tasks as suite JSONL, one task a line; task ids must be unique."""
    tasks = list(tasks)
    ids = [task.id for task in tasks]
    duplicates = sorted({task_id for task_id in ids if ids.count(task_id) > 1})
    if duplicates:
        raise ValueError(f"task ids must be unique in a suite; repeated: {', '.join(duplicates)}")
    return b"".join(orjson.dumps(task.model_dump(mode="json")) + b"\n" for task in tasks)


def save_suite(tasks: Iterable[ToolTask], path: str | os.PathLike[str]) -> Path:
    """Write tasks as JSONL atomically (a reader never sees half a suite); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, suite_content(tasks))
    return path


class _NoAnswer:
    def __repr__(self) -> str:
        return "NO_ANSWER"


NO_ANSWER: Any = _NoAnswer()
"""Stands for "the agent submitted nothing" (distinct from submitting null)."""


class ScoreReport(BaseModel):
    """A graded attempt at a task."""

    task_id: str
    score: float = Field(ge=0.0, le=1.0, description="weighted answer and trajectory grades")
    answer_score: float = Field(ge=0.0, le=1.0)
    answer_correct: bool
    submitted: bool
    trajectory_score: float = Field(ge=0.0, le=1.0)
    gold_calls_made: list[bool] = Field(description="for each gold call, whether an agent call matched it")
    gold_calls_in_order: int = Field(description="the most gold calls matched in gold order")
    details: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, float] = Field(default_factory=dict, description=(
        "the attempt's figures beside the score (an attack view's utility and attack success), reported as "
        "the episode's metrics"))


class Scorer:
    """Grades an answer by the task's eval spec and a trajectory against its gold calls.

    A gold call is matched by an agent call with the same tool name whose arguments include every
    gold argument with an equal value (extra arguments are allowed). Calls that returned errors do
    not count.
    """

    def score(self, task: ToolTask, answer: Any = NO_ANSWER, calls: Sequence[Any] = ()) -> ScoreReport:
        """Grade ``answer`` (``NO_ANSWER`` if none was submitted) and ``calls`` (ToolCalls, GoldCalls
        or dicts with name/arguments) for ``task``."""
        spec = task.eval_spec
        submitted = answer is not NO_ANSWER
        answer_score, reason = self.grade_answer(spec, task.answer, answer) if submitted else (0.0, "no answer")
        made, in_order = self.grade_trajectory(task.gold_trajectory, calls)
        if not task.gold_trajectory:
            trajectory_score = 1.0
        elif spec.trajectory == "ordered":
            trajectory_score = in_order / len(task.gold_trajectory)
        else:
            trajectory_score = sum(made) / len(task.gold_trajectory)
        weight = spec.trajectory_weight
        score = (1.0 - weight) * answer_score + weight * trajectory_score
        return ScoreReport(task_id=task.id, score=min(1.0, max(0.0, score)), answer_score=answer_score,
                           answer_correct=answer_score == 1.0, submitted=submitted,
                           trajectory_score=trajectory_score, gold_calls_made=made, gold_calls_in_order=in_order,
                           details={"answer_check": reason, "expected_answer": task.answer,
                                    "submitted_answer": None if not submitted else answer})

    # Answers -----------------------------------------------------------------------------------
    def grade_answer(self, spec: EvalSpec, expected: Any, answer: Any) -> tuple[float, str]:
        """The answer's grade in [0, 1] and a short reason."""
        if spec.kind == "numeric":
            return self._numeric(spec, expected, answer)
        if spec.kind == "contains":
            return self._contains(spec, expected, answer)
        norm_expected, norm_answer = _normal(expected, spec.case_sensitive), _normal(answer, spec.case_sensitive)
        if spec.kind == "exact":
            return (1.0, "equal") if norm_answer == norm_expected else (0.0, "not equal")
        if not isinstance(norm_answer, list):
            return 0.0, f"expected a list answer for a {spec.kind} eval"
        if spec.kind == "set":
            want, got = {_key(x) for x in norm_expected}, {_key(x) for x in norm_answer}
            if want == got:
                return 1.0, "same elements"
            overlap = len(want & got) / len(want | got)
            return (overlap if spec.partial_credit else 0.0), f"{len(want & got)} of {len(want)} elements right"
        right = sum(a == b for a, b in zip(norm_expected, norm_answer))
        if right == len(norm_expected) == len(norm_answer):
            return 1.0, "same elements in order"
        fraction = right / max(len(norm_expected), len(norm_answer), 1)
        return (fraction if spec.partial_credit else 0.0), f"{right} of {len(norm_expected)} positions right"

    @staticmethod
    def _numeric(spec: EvalSpec, expected: Any, answer: Any) -> tuple[float, str]:
        want, got = as_numbers(expected), as_numbers(answer)
        if got is None:
            return 0.0, f"not a number: {answer!r}"
        assert want is not None  # ToolTask's validator admits only numeric answers to a numeric eval
        if len(want) != len(got):
            return 0.0, f"expected {len(want)} numbers, got {len(got)}"
        # Within rel_tol of the expected value (|got - want| <= rel_tol x |want|), or abs_tol: math.isclose would
        # divide by the larger of the two and pass a chem price 30 % above gold under a 25 % tolerance.
        close = [abs(g - w) <= max(spec.rel_tol * abs(w), spec.abs_tol) for g, w in zip(got, want)]
        if all(close):
            return 1.0, "within tolerance"
        fraction = sum(close) / len(close)
        return (fraction if spec.partial_credit else 0.0), f"{sum(close)} of {len(close)} within tolerance"

    @staticmethod
    def _contains(spec: EvalSpec, expected: Any, answer: Any) -> tuple[float, str]:
        text = answer if isinstance(answer, str) else orjson.dumps(answer).decode()
        text = _normal(text, spec.case_sensitive)
        needles = [_normal(n, spec.case_sensitive) for n in ([expected] if isinstance(expected, str) else expected)]
        found = sum(needle in text for needle in needles)
        if found == len(needles):
            return 1.0, "contains every expected string"
        fraction = found / len(needles)
        return (fraction if spec.partial_credit else 0.0), f"contains {found} of {len(needles)} expected strings"

    # Trajectories ------------------------------------------------------------------------------
    def grade_trajectory(self, gold: Sequence[GoldCall], calls: Sequence[Any]) -> tuple[list[bool], int]:
        """Which gold calls some agent call matched, and the most matched in gold order (an LCS)."""
        made_calls = [c for c in (_as_call(call) for call in calls) if c is not None]
        matches = [[call_matches(g, name, args) for name, args in made_calls] for g in gold]
        made = [any(row) for row in matches]
        # Longest common subsequence of gold calls and agent calls under the match relation.
        lengths = [[0] * (len(made_calls) + 1) for _ in range(len(gold) + 1)]
        for i in range(1, len(gold) + 1):
            for j in range(1, len(made_calls) + 1):
                lengths[i][j] = (lengths[i - 1][j - 1] + 1 if matches[i - 1][j - 1]
                                 else max(lengths[i - 1][j], lengths[i][j - 1]))
        return made, lengths[len(gold)][len(made_calls)]


def _as_call(call: Any) -> tuple[str, dict[str, Any]] | None:
    """(name, arguments) of a successful call; None for calls that returned errors."""
    if isinstance(call, ToolCall):
        return None if call.is_error else (call.name, call.arguments)
    if isinstance(call, GoldCall):
        return call.call, call.args
    if isinstance(call, Mapping):
        if call.get("is_error"):
            return None
        name = call.get("name", call.get("call"))
        return str(name), dict(call.get("arguments", call.get("args")) or {})
    raise TypeError(f"cannot read a tool call from {type(call).__name__}; pass ToolCall, GoldCall or dict")


def call_matches(gold: GoldCall, name: str, arguments: Mapping[str, Any]) -> bool:
    """Whether a call of tool ``name`` with ``arguments`` matches ``gold``: the same tool, and every gold
    argument given with an equal value (extra arguments are allowed)."""
    return name == gold.call and all(key in arguments and arguments[key] == value for key, value in gold.args.items())


def _normal(value: Any, case_sensitive: bool) -> Any:
    if isinstance(value, str):
        text = " ".join(value.split())
        return text if case_sensitive else text.casefold()
    if isinstance(value, (list, tuple)):
        return [_normal(item, case_sensitive) for item in value]
    if isinstance(value, Mapping):
        return {key: _normal(item, case_sensitive) for key, item in value.items()}
    return value


def _key(value: Any) -> Any:
    # Set elements may be lists or objects; their sorted JSON is a hashable stand-in.
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS) if isinstance(value, (list, dict)) else value


def as_numbers(value: Any) -> list[float] | None:
    """A number, numeric string or list of them as floats; None if it is not one."""
    items = value if isinstance(value, (list, tuple)) else [value]
    numbers = []
    for item in items:
        if isinstance(item, bool):
            return None
        try:
            numbers.append(float(item.replace(",", "").strip()) if isinstance(item, str) else float(item))
        except (TypeError, ValueError):
            return None
    return numbers
