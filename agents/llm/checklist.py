"""The ChemCost checklist: which of the reaction's components the episode has priced, told after each result.

A small model prices a reaction's first component and submits that (the 1.5B did on every one of 40
ChemCost tasks: component recall 0.34). ``checklist_note(messages)`` reads the episode's own
conversation, and nothing else, and writes one line for the result of the call that just ran:

* after ``get_reaction``: the components to price (every one with an ``equiv``; solvents have none),
  each with its equivalents;
* after ``select_pack``: what is priced so far (the pack's ``total_usd``) and what is still to price,
  or, once every component is, the costs to add and what to divide them by.

A component counts as priced when a ``select_pack`` bought a chemical that a ``search_chemical`` for
the component's name returned (the ids come from the calls' arguments and the search's candidates), or
a chemical of the component's own name. The numbers in a note are numbers the results showed, so the
note adds no fact the episode did not hold; it is bookkeeping the model leaves undone.

Only the task's own turns are read: a worked example before it (``DEMO_CLOSING`` ends one) is not.

DORA's instruction mode has its own checklist, ``plan_note(messages)``: the plan's progress. The 1.5B,
shown a task's plan as numbered steps, ran steps again on their own outputs, skipped a step's result in
a later step's arguments, and after the last step called tools of no step until its calls ran out. After
each result the note says which steps are done (each with the ``path`` its result gave, when it gave
one) and the next step as the plan wrote it, or, once every step is done, to submit the answer. A step
counts as done when a call of its tool succeeded after the step before it was done; the plan is read
from the task's own question (``Plan:`` and its numbered lines, as ``modes.plan_steps`` writes them), so
this note, too, holds nothing the episode did not. It never fills a step's ``<step k result>`` in.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from gauntlet.agents.llm.demonstrations import DEMO_CLOSING

READ, SEARCH, BUY = "get_reaction", "search_chemical", "select_pack"
# What joins a note to the result it follows; the result before it is read back as JSON.
SEPARATOR = "\n\nChecklist: "
# A plan as the instruction mode shows it: "Plan:" and then one "<number>. <tool>(<arguments>)" line a step.
PLAN_HEADER = "\n\nPlan:\n"
_STEP = re.compile(r"^(\d+)\. ([A-Za-z0-9_.-]+)\(")


@dataclass(frozen=True)
class Component:
    name: str
    equiv: float


@dataclass(frozen=True)
class Purchase:
    chemical_id: Any
    name: str
    total_usd: float


def checklist_note(messages: Sequence[BaseMessage]) -> str | None:
    """The checklist line for the last message of ``messages`` (a tool result), or None when that call
    is not one the checklist follows or the task's reaction was not read yet. ``with_note`` joins it to
    the result."""
    if not messages or not isinstance(messages[-1], ToolMessage):
        return None
    task = _task_turns(messages)
    calls = {call["id"]: (call["name"], call.get("args") or {})
             for message in task if isinstance(message, AIMessage) for call in message.tool_calls}
    components: list[Component] | None = None
    found: list[tuple[str, set[Any]]] = []  # (search query, chemical ids it returned)
    bought: list[Purchase] = []
    for message in task:
        if not isinstance(message, ToolMessage) or message.status == "error":
            continue
        name, args = calls.get(message.tool_call_id, (message.name, {}))
        result = _json(message.content)
        if not isinstance(result, dict):
            continue
        if name == READ and isinstance(result.get("components"), list):
            components, found, bought = _components(result["components"]), [], []
        elif name == SEARCH:
            ids = {candidate.get("chemical_id") for candidate in result.get("candidates") or []
                   if isinstance(candidate, dict)}
            found.append((str(args.get("query", "")), ids - {None}))
        elif name == BUY and isinstance(result.get("total_usd"), (int, float)):
            bought.append(Purchase(args.get("chemical_id", result.get("chemical_id")), str(result.get("name", "")),
                                   float(result["total_usd"])))
    last_name = calls.get(messages[-1].tool_call_id, (messages[-1].name, {}))[0]
    if components is None or last_name not in (READ, BUY) or messages[-1].status == "error":
        return None
    if last_name == READ:
        listed = ", ".join(f"{component.name} ({_number(component.equiv)} equiv)" for component in components)
        return (f"{len(components)} components to price, each with one search_chemical and one "
                f"select_pack: {listed}. Solvents are not priced.")
    priced = {component: _purchase(component, found, bought) for component in components}
    done = [f"{component.name} ${_number(purchase.total_usd)}" for component, purchase in priced.items()
            if purchase is not None]
    left = [f"{component.name} ({_number(component.equiv)} equiv)" for component, purchase in priced.items()
            if purchase is None]
    if left:
        return f"Priced {', '.join(done) or 'nothing yet'}. Still to price: {', '.join(left)}."
    return (f"Every component is priced ({', '.join(done)}). Next: calculate their sum divided by "
            "the grams of product at the stated yield (yield_pct / 100 x product molar mass / 1000), then "
            "submit that number.")


def plan_note(messages: Sequence[BaseMessage]) -> str | None:
    """The plan's progress after the last message of ``messages`` (a tool result): the steps done and
    the next step, or that every step is done; None when it is not a result or the task shows no plan."""
    if not messages or not isinstance(messages[-1], ToolMessage):
        return None
    task = _task_turns(messages)
    steps = _plan(task)
    if not steps:
        return None
    calls = {call["id"]: call["name"] for message in task if isinstance(message, AIMessage)
             for call in message.tool_calls}
    done: list[str] = []
    for message in task:
        if not isinstance(message, ToolMessage) or message.status == "error" or len(done) == len(steps):
            continue
        if calls.get(message.tool_call_id, message.name) == steps[len(done)][0]:
            result = _json(message.content)
            path = result.get("path") if isinstance(result, dict) else None
            done.append(f"step {len(done) + 1}" + (f" -> {path}" if isinstance(path, str) else ""))
    if len(done) == len(steps):
        return (f"Every step of the plan is done ({'; '.join(done)}). Step {len(steps)}'s result answers the "
                "question: call submit_answer with the answer now, in the format the question asks for.")
    head = f"Plan steps done: {'; '.join(done)}." if done else "No step of the plan is done yet."
    return f"{head} Next: step {steps[len(done)][1]}"


def _plan(task: Sequence[BaseMessage]) -> list[tuple[str, str]]:
    """The task's plan steps as (tool, the step's line as the plan wrote it), from its first human turn."""
    question = next((message.content for message in task if isinstance(message, HumanMessage)), None)
    if not isinstance(question, str) or PLAN_HEADER not in question:
        return []
    steps: list[tuple[str, str]] = []
    for line in question.split(PLAN_HEADER, 1)[1].splitlines():
        match = _STEP.match(line)
        if match is None or int(match.group(1)) != len(steps) + 1:
            break
        steps.append((match.group(2), line))
    return steps


def _task_turns(messages: Sequence[BaseMessage]) -> Sequence[BaseMessage]:
    """The messages after a worked example (all of them when there is none)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, HumanMessage) and message.content == DEMO_CLOSING:
            return messages[index + 1:]
    return messages


def _components(listed: list[Any]) -> list[Component]:
    """The reaction's components that are bought by equivalents (a solvent is given by volume and has none)."""
    return [Component(str(item["name"]), float(item["equiv"])) for item in listed
            if isinstance(item, dict) and item.get("name") and isinstance(item.get("equiv"), (int, float))
            and item.get("role") != "solvent"]


def _purchase(component: Component, found: list[tuple[str, set[Any]]], bought: list[Purchase]) -> Purchase | None:
    """The last purchase of ``component``: a chemical a search for its name returned, or one of its name."""
    wanted = component.name.casefold().strip()
    ids = set().union(*(ids for query, ids in found if query.casefold().strip() == wanted))
    matches = [purchase for purchase in bought
               if purchase.chemical_id in ids or purchase.name.casefold().strip() == wanted]
    return matches[-1] if matches else None


def with_note(content: str, note: str) -> str:
    """A tool result's text with its checklist note after it."""
    return f"{content}{SEPARATOR}{note}"


def _json(content: Any) -> Any:
    """A result's JSON value, its note (if any) left out."""
    if not isinstance(content, str):
        return None
    try:
        return json.loads(content.split(SEPARATOR, 1)[0])
    except ValueError:
        return None


def _number(value: float) -> str:
    return f"{value:.10g}"  # as the result showed it (12.09, 1.5), so a number the model copies is one it saw


# Each mode with a checklist and its note. ChemCost's answer is a sum over components, which a small model
# stops short of; an instruction-mode plan is a sequence of steps, which it loses its place in.
CHECKLISTS: dict[str, Callable[[Sequence[BaseMessage]], str | None]] = {"chemcost": checklist_note,
                                                                         "instruction": plan_note}
CHECKLIST_MODES = tuple(CHECKLISTS)

__all__ = ["CHECKLISTS", "CHECKLIST_MODES", "checklist_note", "plan_note", "with_note"]
