"""Modes: how a task is put to the model and how its final reply is read as an answer.

A mode is data: a system prompt, whether the task's gold tool plan is shown, and the form of the
answer. The modes come from the benchmarks our servers re-implement:

``autonomous``
    DORA's autonomous-planning mode: the question and every tool; the model plans its own calls.
    Also the mode for any tool task.
``instruction``
    DORA's instruction-following mode: the question, every tool, and the task's gold tool plan
    (``metadata['tool_plan']`` of a disaster task) as numbered steps, results of earlier steps
    named where a step uses them.
``chemcost``
    ChemCost: the reaction to price (the chem task's question and inputs), the tools, and one
    number as the answer, US dollars per gram of product.

The model ends a task by replying without a tool call; ``final_answer`` reads that reply: JSON
when it is JSON (whole, or in a fenced block, or after an ``Answer:`` label; an object whose one
key is ``answer``, ``result`` or ``value`` stands for that value), else the text; a ``number``
mode takes the last number in it (no number: no answer).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

_FENCED = re.compile(r"```(?:json)?\s*\n?(.*?)```", re.DOTALL)
_LABEL = re.compile(r"(?i)\banswer\s*[:=]\s*")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?|-?\.\d+")

_FINISH = ("When you have the answer, reply with the answer alone and no tool call; that reply ends the task. "
           "Call one tool at a time unless the calls do not depend on each other.")


@dataclass(frozen=True)
class Mode:
    """How a task is put to the model (system prompt, plan shown or not) and how its answer is read."""

    name: str
    description: str
    system_prompt: str
    shows_plan: bool = False
    answer: Literal["json", "number"] = "json"


AUTONOMOUS = Mode(
    name="autonomous",
    description="DORA autonomous planning: the question and every tool",
    system_prompt=("You answer questions by calling tools. Read each tool's description and input schema, plan "
                   "the calls the question needs, call them, and read each result before the next call. A result "
                   "that starts with 'Error:' says what to fix. " + _FINISH +
                   " Write the answer as JSON (a number, a string, a list or an object) in the format the question "
                   "asks for."))
INSTRUCTION = Mode(
    name="instruction",
    description="DORA instruction following: the question, every tool and the task's tool plan as numbered steps",
    system_prompt=("You answer questions by calling tools, following the numbered plan you are given: make each "
                   "step's call in order, putting in the results of earlier steps where a step names them. A result "
                   "that starts with 'Error:' says what to fix. " + _FINISH +
                   " Write the answer as JSON (a number, a string, a list or an object) in the format the question "
                   "asks for."),
    shows_plan=True)
CHEMCOST = Mode(
    name="chemcost",
    description="ChemCost: price a reaction with the tools; the answer is one number, US dollars per gram",
    system_prompt=("You are a procurement chemist. Price the reaction you are given with the tools: read the "
                   "reaction, ground each component to a catalogue chemical, buy what each needs with the pack rule "
                   "the question states, and add the costs with the calculator. A result that starts with 'Error:' "
                   "says what to fix. " + _FINISH + " The answer is one number: US dollars per gram of product."),
    answer="number")

MODES: dict[str, Mode] = {mode.name: mode for mode in (AUTONOMOUS, INSTRUCTION, CHEMCOST)}


def get_mode(name: str) -> Mode:
    """The mode called ``name`` (``ValueError`` lists the modes)."""
    if name not in MODES:
        raise ValueError(f"unknown mode {name!r}; the modes are {', '.join(MODES)}")
    return MODES[name]


def user_prompt(mode: Mode, task_text: str, metadata: Mapping[str, Any] | None = None) -> str:
    """The first user message: the task, its answer format when the task states one, and in a mode
    that shows the plan, the task's tool plan as numbered steps."""
    metadata = metadata or {}
    parts = [task_text]
    if metadata.get("answer_format"):
        parts.append(f"Answer format: {metadata['answer_format']}.")
    if mode.shows_plan:
        plan = metadata.get("tool_plan")
        if not plan:
            raise ValueError(f"mode {mode.name!r} shows the task's tool plan, and this task has none "
                             "(metadata 'tool_plan'); use mode 'autonomous'")
        parts.append("Plan:\n" + plan_steps(plan))
    return "\n\n".join(parts)


def plan_steps(tool_plan: Sequence[Mapping[str, Any]]) -> str:
    """A tool plan (``[{"call", "args"}]``, arguments that use earlier results as ``{"$ref": [step,
    key, ...]}``) as numbered steps: ``2. seg_flood_extent(pre_water=<step 1 result: path>, ...)``."""
    lines = []
    for number, step in enumerate(tool_plan, start=1):
        arguments = ", ".join(f"{name}={_argument(value)}" for name, value in step.get("args", {}).items())
        lines.append(f"{number}. {step['call']}({arguments})")
    return "\n".join(lines)


def _argument(value: Any) -> str:
    if isinstance(value, dict) and set(value) == {"$ref"}:
        step, *keys = value["$ref"]
        return f"<step {step + 1} result" + (": " + ".".join(str(key) for key in keys) if keys else "") + ">"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_argument(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_argument(item) for item in value) + "]"
    return json.dumps(value)


def final_answer(mode: Mode, text: str) -> Any:
    """The answer a final reply gives (see the module docstring)."""
    if mode.answer == "number":
        value = _json(text.strip())
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
        numbers = _NUMBER.findall(text)
        return float(numbers[-1].replace(",", "")) if numbers else None
    for candidate in (text.strip(), *reversed(_FENCED.findall(text)), *_after_label(text)):
        value = _json(candidate.strip())
        if value is not _NOT_JSON:
            return _unwrapped(value)
    labelled = _after_label(text)
    return labelled[0].strip() if labelled else text.strip()


_NOT_JSON = object()
# Tool results of plain values come wrapped ({"result": 5.0}), and small models echo them as the answer.
_WRAPPERS = ("answer", "result", "value")


def _unwrapped(value: Any) -> Any:
    while isinstance(value, dict) and len(value) == 1 and next(iter(value)) in _WRAPPERS:
        value = next(iter(value.values()))
    return value


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return _NOT_JSON


def _after_label(text: str) -> list[str]:
    """The text after the last ``Answer:`` label, if there is one."""
    matches = list(_LABEL.finditer(text))
    return [text[matches[-1].end():]] if matches else []
