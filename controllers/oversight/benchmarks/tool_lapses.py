"""The base agent's mistakes on a tool benchmark: plausible wrong calls and unsupported answers.

The base agent is a ``LapsingAgent`` over the gold-continuation expert (``tool_expert``). Its lapses
(``WrongCalls``) are plausible wrong calls built from the tool schemas and the task's entities: a wrong
tool with schema-valid arguments, the expected call with one argument taken from another entity of the
task (another component's id, another layer of the scene), or a malformed call (an argument missing or
of the wrong type, a misspelled tool, cut-off JSON). Its premature actions (``WrongAnswers``) are a
final answer the evidence does not support (the gold answer scaled, reordered or cut, another task's
answer, null), each checked wrong by the suite's scorer, or giving up (``{"stop": ...}``).

Lapses never name a file under the session workspace (``WORKSPACE_PREFIX``): disaster sessions of one
process share a workspace whose artefacts are content-addressed, so a call's result never depends on
what another branch wrote as long as no action names a workspace file its own episode has not made.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from gauntlet.bridges.tool_task_env import parse_action, stop_action, tool_call_action
from gauntlet.controllers.oversight.benchmarks.tool_expert import answer_action
from gauntlet.controllers.oversight.lapsing import EXPERT_ACTION
from gauntlet.info_keys import PRIVILEGED, TASK_ID
from gauntlet.tasks import GoldCall, Scorer, ToolTask

WORKSPACE_PREFIX = "ws/"
"""Files a session wrote (disaster): lapses never name one (see the module docstring)."""
LAPSE_KINDS = ("wrong_tool", "wrong_argument", "malformed")
LAPSE_SHARES = (0.35, 0.45, 0.20)
STOP_SHARE = 0.25
"""The share of premature actions that give up (stop) rather than answer wrongly."""
ANSWER_SCALES = (0.25, 0.5, 2.0, 4.0)
OTHER_ANSWERS = 4
"""How many other tasks' answers a task's wrong answers may borrow."""


# Entities: the values a lapse may put where another belongs ------------------------------------
def _names_workspace(value: Any) -> bool:
    if isinstance(value, str):
        return value.startswith(WORKSPACE_PREFIX)
    if isinstance(value, list):
        return any(_names_workspace(item) for item in value)
    if isinstance(value, dict):
        return any(_names_workspace(item) for item in value.values())
    return False


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=True)


def _unique(values: Iterator[Any]) -> list[Any]:
    """Distinct values in a fixed order (by their JSON), so a seeded choice among them is reproducible."""
    return [value for _, value in sorted({_key(value): value for value in values}.items())]


def _arguments_by_parameter(calls: Sequence[GoldCall]) -> dict[str, list[Any]]:
    """Every argument value of ``calls`` that names no workspace file, by parameter name."""
    by_parameter: dict[str, list[Any]] = {}
    for call in calls:
        for parameter, value in call.args.items():
            if not _names_workspace(value):
                by_parameter.setdefault(parameter, []).append(value)
    return {parameter: _unique(iter(values)) for parameter, values in sorted(by_parameter.items())}


def _string_leaves(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _string_leaves(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _string_leaves(item)


_JSON_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "number": (int, float),
                                             "boolean": (bool,), "array": (list,), "object": (dict,)}


def _types(schema: dict[str, Any]) -> list[str]:
    """The non-null JSON types a property schema admits."""
    declared = schema.get("type")
    names = ([declared] if isinstance(declared, str) else list(declared or [])) + [
        option.get("type") for option in schema.get("anyOf", []) if isinstance(option.get("type"), str)]
    return [name for name in names if name in _JSON_TYPES]


def _fits(value: Any, types: list[str]) -> bool:
    if isinstance(value, bool):  # a bool is an int to Python, never to a JSON schema
        return "boolean" in types
    return any(isinstance(value, _JSON_TYPES[name]) for name in types)


class _Entities:
    """One task's entities (its gold arguments by parameter, the identifiers among its inputs) and the
    suite's arguments by parameter."""

    def __init__(self, task: ToolTask, suite_arguments: dict[str, list[Any]]):
        self.by_parameter = _arguments_by_parameter(task.gold_trajectory)
        leaves = [*_string_leaves([call.args for call in task.gold_trajectory]), *_string_leaves(task.inputs)]
        # Identifiers only (ids, names, layer paths): free text in the inputs is no argument value.
        self.strings = _unique(s for s in leaves
                               if s and not s.startswith(WORKSPACE_PREFIX) and len(s.split()) <= 4)
        self.suite_arguments = suite_arguments

    def other_value(self, parameter: str, correct: Any, types: list[str], rng: np.random.Generator) -> Any:
        """A value of one of ``types`` for ``parameter`` other than ``correct``: another of the task's
        own values first, then the suite's, else ``correct`` perturbed."""
        pools = [self.by_parameter.get(parameter, []),
                 self.strings if "string" in types else [],
                 self.suite_arguments.get(parameter, [])]
        for pool in pools:
            options = [value for value in pool if _fits(value, types) and _key(value) != _key(correct)]
            if options:
                return options[int(rng.integers(len(options)))]
        return _perturbed(correct)


def _perturbed(value: Any) -> Any:
    """A different value of the same JSON type (numbers doubled, strings marked, lists reversed or emptied)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value * 2 if value else 1
    if isinstance(value, float):
        return value * 2.0 if value else 1.0
    if isinstance(value, str):
        return value + "-2"
    if isinstance(value, list):
        return value[::-1] if len(value) > 1 and value[::-1] != value else []
    return {}


def _mistyped(value: Any) -> Any:
    """A value of another JSON type that no schema coerces into ``value``'s (a number to a non-numeric
    string, a string to a number, ...)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, (bool, int, float)):
        return f"about {value}"
    return json.dumps(value)


class WrongCalls:
    """Lapse actions: a plausible wrong call at the task's current point (see the module docstring).

    Called as ``(observation, info, rng)``: ``info`` names the task and, under ``privileged``, the
    expected next action, which the wrong call departs from.
    """

    def __init__(self, tasks: Sequence[ToolTask], tools: Sequence[dict[str, Any]]):
        self.tasks = {task.id: task for task in tasks}
        self.schemas = {tool["name"]: tool.get("input_schema") or {} for tool in tools}
        self.tool_names = sorted(self.schemas)
        self.suite_arguments = _arguments_by_parameter([call for task in tasks for call in task.gold_trajectory])
        self._entities: dict[str, _Entities] = {}

    def entities(self, task: ToolTask) -> _Entities:
        if task.id not in self._entities:
            self._entities[task.id] = _Entities(task, self.suite_arguments)
        return self._entities[task.id]

    def __call__(self, observation: Any, info: dict[str, Any], rng: np.random.Generator) -> str:
        task = self.tasks[info[TASK_ID]]
        expected = _expected_call(info)
        # Past the last gold call the expected action is the answer: a lapse then re-does a gold call
        # wrongly (all of them are done, so its workspace inputs exist).
        template = expected or (task.gold_trajectory[int(rng.integers(len(task.gold_trajectory)))]
                                if task.gold_trajectory else None)
        kind = LAPSE_KINDS[int(rng.choice(len(LAPSE_KINDS), p=LAPSE_SHARES))] if template else "wrong_tool"
        if kind == "wrong_argument" and template is not None and template.args:
            return self.wrong_argument(task, template, rng)
        if kind == "malformed" and template is not None:
            return self.malformed(template, rng)
        return self.wrong_tool(task, template.call if template else None, rng)

    def wrong_tool(self, task: ToolTask, expected_tool: str | None, rng: np.random.Generator) -> str:
        """Another tool (half the time one the task's gold uses, else any), with schema-valid arguments."""
        in_gold = sorted({call.call for call in task.gold_trajectory} - {expected_tool or ""})
        in_gold = [name for name in in_gold if name in self.schemas]
        pool = in_gold if in_gold and rng.random() < 0.5 else [n for n in self.tool_names if n != expected_tool]
        name = pool[int(rng.integers(len(pool)))]
        schema = self.schemas[name]
        entities = self.entities(task)
        arguments = {}
        for parameter in schema.get("required", []):
            prop = schema.get("properties", {}).get(parameter, {})
            arguments[parameter] = self._value_for(prop, parameter, entities, rng)
        return tool_call_action(name, arguments)

    def _value_for(self, prop: dict[str, Any], parameter: str, entities: _Entities, rng: np.random.Generator) -> Any:
        if prop.get("enum"):
            return prop["enum"][int(rng.integers(len(prop["enum"])))]
        types = _types(prop) or ["string"]
        for pool in (entities.by_parameter.get(parameter, []), entities.suite_arguments.get(parameter, []),
                     prop.get("examples") or []):
            options = [value for value in pool if _fits(value, types)]
            if options:
                return options[int(rng.integers(len(options)))]
        first = types[0]
        if first == "string":
            return entities.strings[int(rng.integers(len(entities.strings)))] if entities.strings else parameter
        return {"integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}[first]

    def wrong_argument(self, task: ToolTask, template: GoldCall, rng: np.random.Generator) -> str:
        """The expected call with one argument set to another of the task's entities."""
        parameters = sorted(template.args)
        parameter = parameters[int(rng.integers(len(parameters)))]
        prop = self.schemas.get(template.call, {}).get("properties", {}).get(parameter, {})
        correct = template.args[parameter]
        others = [option for option in prop.get("enum", []) if option != correct]
        if others:  # a choice among named options: another of them
            return tool_call_action(template.call, {**template.args, parameter: others[int(rng.integers(len(others)))]})
        types = _types(prop) or [name for name in _JSON_TYPES if _fits(correct, [name])]
        value = self.entities(task).other_value(parameter, correct, types, rng)
        return tool_call_action(template.call, {**template.args, parameter: value})

    def malformed(self, template: GoldCall, rng: np.random.Generator) -> str:
        """The expected call broken: an argument missing or mistyped, the tool misspelled, or the JSON cut."""
        kinds = ["misspelled_tool", "cut_json"] + (["missing_argument", "mistyped_argument"] if template.args else [])
        kind = kinds[int(rng.integers(len(kinds)))]
        arguments = dict(template.args)
        if kind in ("missing_argument", "mistyped_argument"):
            parameter = sorted(arguments)[int(rng.integers(len(arguments)))]
            if kind == "missing_argument":
                del arguments[parameter]
            else:
                arguments[parameter] = _mistyped(arguments[parameter])
            return tool_call_action(template.call, arguments)
        if kind == "misspelled_tool":
            spellings = [template.call.replace("_", "-"), template.call + "_tool", "get_" + template.call]
            return tool_call_action(next(s for s in spellings if s not in self.schemas), arguments)
        text = tool_call_action(template.call, arguments)
        return text[:max(1, len(text) // 2)]


def _expected_call(info: dict[str, Any]) -> GoldCall | None:
    """The expected next call named in ``info`` (None when the expected action is the answer)."""
    try:
        name, arguments = parse_action(info[PRIVILEGED][EXPERT_ACTION], answer_tool="")
    except (KeyError, TypeError):
        raise ValueError("the lapse actions of a tool benchmark need the env's gold continuation in "
                         f"info[{PRIVILEGED!r}][{EXPERT_ACTION!r}] (make the env with the benchmark's make_env)"
                         ) from None
    return None if name == "" else GoldCall(call=name, args=arguments)


class WrongAnswers:
    """Premature actions: give up (``STOP_SHARE`` of them) or submit an answer the evidence does not
    support, drawn from candidates the suite's scorer grades wrong (see the module docstring)."""

    def __init__(self, tasks: Sequence[ToolTask], scorer: Scorer):
        self.tasks = list(tasks)
        self.by_id = {task.id: task for task in tasks}
        self.scorer = scorer
        self._candidates: dict[str, list[Any]] = {}

    def candidates(self, task: ToolTask) -> list[Any]:
        """The wrong answers of ``task``: the gold answer scaled, reversed or halved, other tasks' answers
        of the same eval kind and type, and null; only those the scorer grades wrong."""
        if task.id not in self._candidates:
            answer = task.answer
            options: list[Any] = [_scaled(answer, factor) for factor in ANSWER_SCALES]
            if isinstance(answer, list) and len(answer) > 1:
                options += [answer[::-1], answer[:len(answer) // 2]]
            kind = (task.eval_spec.kind, type(answer))
            options += [other.answer for other in self.tasks
                        if other.id != task.id and (other.eval_spec.kind, type(other.answer)) == kind][:OTHER_ANSWERS]
            options.append(None)
            self._candidates[task.id] = [option for option in _unique(iter(options))
                                         if not self.scorer.score(task, option, []).answer_correct]
        return self._candidates[task.id]

    def __call__(self, observation: Any, info: dict[str, Any], rng: np.random.Generator) -> str:
        wrong = self.candidates(self.by_id[info[TASK_ID]])
        if not wrong or rng.random() < STOP_SHARE:
            return stop_action("gave up before finishing the task")
        return answer_action(wrong[int(rng.integers(len(wrong)))])


def _scaled(value: Any, factor: float) -> Any:
    """``value`` with every number in it multiplied by ``factor`` (integers stay integers)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(round(value * factor))
    if isinstance(value, float):
        return value * factor
    if isinstance(value, list):
        return [_scaled(item, factor) for item in value]
    if isinstance(value, dict):
        return {key: _scaled(item, factor) for key, item in value.items()}
    return value

