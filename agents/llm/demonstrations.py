"""In-context demonstrations: one solved task of a suite, shown to the model before its own task.

A small model (0.5B-1.5B parameters) learns the call format and the flow of a task better from one
worked example than from a system prompt. The example must come from a task the evaluation never
scores: shown a scored task's gold calls and answer, the model would be graded on a copy. So a suite's
tasks are split by id into a ``train`` part, the only source of demonstrations, and an ``eval`` part,
the tasks an evaluation with demonstrations runs on (``eval_tasks``).

Split: a task is ``train`` when the first 8 bytes of the SHA-256 of its id, read as a fraction of 2^64,
fall below ``TRAIN_SHARE``. The part depends on the id alone, not on the suite's order or size, the
process (Python's ``hash`` of a string is salted per process) or the machine: a task keeps its part when
the suite grows, and every run agrees on it.

Choice (``demonstration_task``): a training task of the same suite and kind (``metadata['dimension']``
where tasks have one, DORA's T1..T5; chem tasks carry none, and within one suite they share one flow),
never the task itself; of those that render within ``DEMO_MAX_CHARS``, one of the same family first
where the suite names one (a chem reaction's ``reaction_class``, the label a reaction's first read shows:
a demonstration of a reaction with as many components to buy as the task's shows a flow of the task's
length), then the one whose question shares most words with the task's (Jaccard similarity of the word
sets), ties to the lowest id hash. Word
overlap costs nothing to compute and finds a task of the same template (the same calls at another event)
where there is one, which is what a small model can copy. Where every question of a suite is one
template (a chem suite), the tasks of one reaction class get the same demonstration, so a model that keeps
the key-value cache of a shared prompt prefix reads each class's demonstration once.

Rendering (``demonstration_messages``): the example task as the model would meet it (``user_prompt`` of
``ToolTaskEnv``'s task text, its inputs cut to ``INPUTS_MAX_CHARS``) after a note that a worked example
follows, in one user message; each gold call as an assistant message with one structured tool call (id
``demo_call_<n>``) answered by a tool message with its recorded result shown by the fields whose values
a later call or the answer uses (each with its object's ``name``: the reaction's components and
equivalents, a search's chemical id, a pack's cost; the whole result where none is used), cut to
``OBS_MAX_CHARS`` (less, evenly, when the calls are many: down to ``MIN_OBS_CHARS``). Cutting results to
their first characters instead left the prices out of the example, so its final ``calculate`` held
numbers the example never showed, and a small model learned to write numbers it never read; then the call
of the answer tool with the gold answer, and its result; last a user message saying the model's own task
follows. Qwen2.5's chat template renders this as a ``user`` turn, ``assistant`` turns with ``<tool_call>``
blocks and ``user`` turns with ``<tool_response>`` blocks, then a ``user`` turn: the turns the model's
own task will take. Only user, assistant and tool messages are used, so an API backend that allows a
system message only first takes the demonstration as well.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from gauntlet.agents.llm.calls import ToolResult
from gauntlet.agents.llm.modes import AUTONOMOUS, Mode, user_prompt
from gauntlet.agents.llm.number_check import EXACT, REL_TOL, matches, numbers_in
from gauntlet.bridges.tool_task_env import DEFAULT_ANSWER_TOOL, fit_text, task_text
from gauntlet.tasks import ToolTask

Split = Literal["train", "eval"]

# The share of a suite's tasks kept for demonstrations: about one in five, so every disaster dimension
# and chem suite has dozens to choose from and four fifths are left to evaluate.
TRAIN_SHARE = 0.2
# The most characters a demonstration may take (``demonstration_chars``): in Qwen2.5's tokenizer and chat
# template, at most 1,581 tokens over the chem, chem-routes and disaster suites (JSON, paths and digits run
# under two characters a token). No situation report (disaster T5: 8-37 calls, answers of ~360 characters)
# fits, so T5 tasks have no demonstration.
DEMO_MAX_CHARS = 2800
# The example's inputs (the JSON after its question) are cut to this many characters: a time-series task's
# list every layer of five dated acquisitions (5,500 characters); a few show where the calls' paths come from.
INPUTS_MAX_CHARS = 800
# A recorded result is cut to this many characters (with a marker saying how much was cut), or fewer when
# the calls are many, but never below MIN_OBS_CHARS: the example teaches the flow of calls, and a result's
# first fields (the id a later call uses, a price) are what a later call reads.
OBS_MAX_CHARS = 300
MIN_OBS_CHARS = 80
DEMO_OPENING = ("Here is a worked example of another task, solved with the tools (each result shows only the "
                "fields the later calls use):")
DEMO_CLOSING = ("That was the example; it is finished. Your own task follows: solve it the same way, reading each "
                "result before the next call.")
CALL_ID = "demo_call_{number}"
_WORD = re.compile(r"[a-z0-9]+")


def _hash_fraction(task_id: str) -> float:
    """The task id's SHA-256 as a number in [0, 1): the same on every machine and in every process."""
    return int.from_bytes(hashlib.sha256(task_id.encode("utf-8")).digest()[:8], "big") / 2.0**64


def split_of(task_id: str) -> Split:
    """The part of its suite the task ``task_id`` belongs to: ``train`` (a source of demonstrations)
    or ``eval`` (see the module docstring)."""
    return "train" if _hash_fraction(task_id) < TRAIN_SHARE else "eval"


def train_tasks(tasks: Iterable[ToolTask]) -> list[ToolTask]:
    """The tasks of the ``train`` part, in the order given."""
    return [task for task in tasks if split_of(task.id) == "train"]


def eval_tasks(tasks: Iterable[ToolTask]) -> list[ToolTask]:
    """The tasks of the ``eval`` part, in the order given: the ones to evaluate with demonstrations."""
    return [task for task in tasks if split_of(task.id) == "eval"]


def task_kind(task: ToolTask) -> str | None:
    """What a demonstration must share with the task: its DORA dimension, or None for tasks without one."""
    dimension = task.metadata.get("dimension")
    return None if dimension is None else str(dimension)


def task_family(task: ToolTask) -> str | None:
    """What a demonstration had better share with the task, where the suite says: a chem reaction's class
    (``metadata['reaction_class']``: an amide coupling has five components to buy, a Grignard addition
    two), or None."""
    family = task.metadata.get("reaction_class")
    return None if family is None else str(family)


def _words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.lower()))


def _similarity(words: frozenset[str], other: frozenset[str]) -> float:
    """Jaccard similarity of two word sets."""
    union = len(words | other)
    return len(words & other) / union if union else 0.0


def demonstration_task(task: ToolTask, suite_tasks: Sequence[ToolTask], answer_tool: str = DEFAULT_ANSWER_TOOL,
                       *, mode: Mode = AUTONOMOUS) -> ToolTask:
    """The training task of ``suite_tasks`` whose worked solution is shown before ``task`` (see the module
    docstring); ``ValueError`` when no training task of its kind, other than ``task``, renders within
    ``DEMO_MAX_CHARS``."""
    kind = task_kind(task)
    candidates = [candidate for candidate in train_tasks(suite_tasks)
                  if candidate.id != task.id and task_kind(candidate) == kind]
    words, family = _words(task.question), task_family(task)
    candidates.sort(key=lambda candidate: (family is None or task_family(candidate) != family,
                                           -_similarity(words, _words(candidate.question)),
                                           _hash_fraction(candidate.id)))
    for candidate in candidates:
        if _fitting_results(candidate, answer_tool, mode) is not None:
            return candidate
    what = f"of dimension {kind}" if kind is not None else "of its suite"
    raise ValueError(f"task {task.id!r}: none of the {len(candidates)} other training tasks {what} renders within "
                     f"{DEMO_MAX_CHARS} characters, so there is no demonstration for it")


def demonstration(task: ToolTask, suite_tasks: Sequence[ToolTask], answer_tool: str = DEFAULT_ANSWER_TOOL,
                  *, mode: Mode = AUTONOMOUS) -> list[BaseMessage]:
    """The messages of a worked example for ``task``, to go after the system prompt and before the task's
    own user message: a training task of the same suite and kind, solved by its gold trajectory.

    ``answer_tool`` is the tool that submits an answer (the env's); ``mode`` puts the example's question
    as that mode puts the model's own (its answer format; its tool plan, in a mode that shows one)."""
    return demonstration_messages(demonstration_task(task, suite_tasks, answer_tool, mode=mode), answer_tool,
                                  mode=mode)


def demonstration_messages(demo: ToolTask, answer_tool: str = DEFAULT_ANSWER_TOOL, *,
                           mode: Mode = AUTONOMOUS) -> list[BaseMessage]:
    """``demo`` solved by its gold trajectory, as the conversation ``demonstration`` returns (see the module
    docstring); ``ValueError`` when it cannot be rendered within ``DEMO_MAX_CHARS``."""
    results = _fitting_results(demo, answer_tool, mode)
    if results is None:
        raise ValueError(f"task {demo.id!r}: its {len(demo.gold_trajectory)} gold calls do not fit a demonstration "
                         f"of {DEMO_MAX_CHARS} characters, even with results cut to {MIN_OBS_CHARS} characters")
    return _conversation(demo, answer_tool, mode, results)


def _fitting_results(demo: ToolTask, answer_tool: str, mode: Mode) -> list[str] | None:
    """The gold results as ``demo``'s demonstration shows them: each cut to ``OBS_MAX_CHARS``, or to an
    even share of the room the rest of the conversation leaves; None when that share is below
    ``MIN_OBS_CHARS``."""
    results = [_shown_result(demo, index) for index in range(len(demo.gold_trajectory))]
    shown = [fit_text(result, OBS_MAX_CHARS) for result in results]
    size = demonstration_chars(_conversation(demo, answer_tool, mode, shown))
    if size <= DEMO_MAX_CHARS:
        return shown
    room = DEMO_MAX_CHARS - (size - sum(map(len, shown)))
    limit = room // len(results) if results else 0
    return [fit_text(result, limit) for result in results] if limit >= MIN_OBS_CHARS else None


_DROP = object()


def _shown_result(demo: ToolTask, index: int) -> str:
    """The ``index``-th gold result as the demonstration shows it: the fields of a JSON result whose values
    a later gold call or the answer uses (the reaction's components by name and equivalents, a search's
    chemical id, a pack's cost), each with its object's ``name``; the whole result when none is used."""
    obs = demo.gold_trajectory[index].obs
    later = [gold.args for gold in demo.gold_trajectory[index + 1:]] + [demo.answer]
    strings = {leaf for value in later for leaf in _strings_in(value)}
    used = _used(obs, strings, sorted({abs(number) for number in numbers_in(later)}))
    return json.dumps(used, ensure_ascii=False) if isinstance(obs, dict) and isinstance(used, dict) \
        else ToolResult(obs).text()


def _strings_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _strings_in(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _strings_in(item)]
    return []


def _used(value: Any, strings: set[str], numbers: list[float]) -> Any:
    """``value`` cut to the leaves a later call uses (``_DROP`` when none)."""
    if isinstance(value, dict):
        kept = {key: used for key, item in value.items() if (used := _used(item, strings, numbers)) is not _DROP}
        if kept and "name" in value and "name" not in kept:
            kept = {"name": value["name"], **kept}
        return kept or _DROP
    if isinstance(value, list):
        items = [used for item in value if (used := _used(item, strings, numbers)) is not _DROP]
        return items or _DROP
    if isinstance(value, bool) or value is None:
        return _DROP
    if isinstance(value, str):
        return value if value in strings else _DROP
    if isinstance(value, (int, float)):
        return value if matches(abs(value), numbers, EXACT if float(value).is_integer() else REL_TOL) else _DROP
    return _DROP


def _conversation(demo: ToolTask, answer_tool: str, mode: Mode, results: Sequence[str]) -> list[BaseMessage]:
    """``demo``'s demonstration with ``results`` as the gold calls' tool messages."""
    question = user_prompt(mode, fit_text(task_text(demo), len(demo.question) + INPUTS_MAX_CHARS), demo.metadata)
    messages: list[BaseMessage] = [HumanMessage(f"{DEMO_OPENING}\n\n{question}")]
    for number, (gold, result) in enumerate(zip(demo.gold_trajectory, results), start=1):
        call_id = CALL_ID.format(number=number)
        messages.append(AIMessage(content="", tool_calls=[{"name": gold.call, "args": gold.args, "id": call_id}]))
        messages.append(ToolMessage(content=result, tool_call_id=call_id, name=gold.call))
    call_id = CALL_ID.format(number=len(demo.gold_trajectory) + 1)
    messages.append(AIMessage(content="", tool_calls=[{"name": answer_tool, "args": {"answer": demo.answer},
                                                       "id": call_id}]))
    messages.append(ToolMessage(content=json.dumps({"submitted": True}), tool_call_id=call_id, name=answer_tool))
    messages.append(HumanMessage(DEMO_CLOSING))
    return messages


def demonstration_chars(messages: Sequence[BaseMessage]) -> int:
    """The characters a model reads of ``messages``: each message's text and each tool call's name and
    JSON arguments (a chat template adds a few tokens a message around them)."""
    return sum(len(message.text) + sum(len(call["name"]) + len(json.dumps(call["args"], ensure_ascii=False))
                                       for call in getattr(message, "tool_calls", []))
               for message in messages)


__all__ = ["CALL_ID", "DEMO_MAX_CHARS", "INPUTS_MAX_CHARS", "MIN_OBS_CHARS", "OBS_MAX_CHARS", "TRAIN_SHARE", "Split",
           "demonstration", "demonstration_chars", "demonstration_messages", "demonstration_task", "eval_tasks",
           "split_of", "task_family", "task_kind", "train_tasks"]
