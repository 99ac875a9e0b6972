"""Modes: how a task is put to the model and what type its answer has.

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
``textgame``
    A text game as a tool task (``gauntlet.envs.textworld.tools``): the game's opening text and one
    ``play`` tool taking a command. No answer tool is offered: the game ends when it is won or
    lost, or when the agent's budget is spent.

The model ends a task with a typed call of the answer tool (``answer_spec``): an answer is never
read out of prose (in ``textgame`` the task ends by itself, and no answer tool is offered).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gauntlet.agents.llm.calls import ToolSpec


_FINISH = ("Reply with exactly one tool call at a time and read its result before the next. When you have the "
           "answer, call submit_answer with it; that call ends the task.")


@dataclass(frozen=True)
class Mode:
    """How a task is put to the model (system prompt, plan shown or not) and how its answer is read."""

    name: str
    description: str
    system_prompt: str
    shows_plan: bool = False
    answer: Literal["json", "number", "none"] = "json"


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
TEXTGAME = Mode(
    name="textgame",
    description="a text game (TextWorld as a tool task): one command per call, no answer tool",
    system_prompt=("You play a text adventure game. Read the game's text, then type one command at a time with the "
                   "play tool and read the game's reply before the next. Each reply lists the commands that make "
                   "sense now; choose among them to reach the objective the game gives you. Reply with exactly one "
                   "tool call. The game ends when you reach its objective."),
    answer="none")

MODES: dict[str, Mode] = {mode.name: mode for mode in (AUTONOMOUS, INSTRUCTION, CHEMCOST, TEXTGAME)}


# The answer's type for a task graded by kind (``gauntlet.tasks.EvalSpec.kind``), where the kind alone fixes
# it: a numeric task takes a number (or numbers, e.g. a point's [x, y]), a set or list task a list of names or
# numbers. An exact or contains task may want a string, a date or an object, so it stays any JSON value. Typed,
# a small model cannot wrap a right number in an object copied from a tool result ({"value": 2070, "unit":
# "people"}), which the grader reads as no number: the 1.5B did that on a DORA task whose plan it followed.
_ITEM = {"anyOf": [{"type": "string"}, {"type": "number"}]}
ANSWER_TYPES: dict[str, dict[str, Any]] = {
    "numeric": {"anyOf": [{"type": "number"}, {"type": "array", "items": {"type": "number"}, "minItems": 1}],
                "description": "your final answer: a number, or a list of numbers when the question asks for "
                               "several (e.g. [x, y]); the bare value, in the unit the question asks for"},
    "set": {"type": "array", "items": _ITEM,
            "description": "your final answer: the list of items the question asks for, in any order"},
    "list": {"type": "array", "items": _ITEM,
             "description": "your final answer: the list of items the question asks for, in its order"},
}


def answer_spec(mode: Mode, answer_tool: str, kind: str | None = None) -> ToolSpec:
    """The answer tool as the model is shown it in ``mode``: one typed ``answer`` argument (a number,
    US dollars per gram, in a number mode; in the others the type the task's grading ``kind`` fixes,
    ``ANSWER_TYPES``, else any JSON value in the format the question asks for). Calling it ends the
    task; its arguments are checked like any call's."""
    if mode.answer == "none":
        raise ValueError(f"mode {mode.name!r} has no answer: its tasks end by themselves, and the agent offers no "
                         "answer tool")
    if mode.answer == "number":
        answer: dict[str, Any] = {"type": "number", "description": "the price in US dollars per gram of product"}
        what = "Submit the final price; this ends the task."
    else:
        answer = dict(ANSWER_TYPES.get(kind or "", {
            "description": "your final answer as JSON (a number, a string, a list or an object), in the "
                           "format the question asks for"}))
        what = "Submit your final answer; this ends the task."
    return ToolSpec(answer_tool, what, {"type": "object", "properties": {"answer": answer}, "required": ["answer"]})


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
