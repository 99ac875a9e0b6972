"""Tool calls written as text: the parser for models that emit their calls as JSON in the reply.

Small open models (SmolLM2, Qwen2.5-Coder) and some OpenAI-compatible servers return a tool call as
text — a bare JSON object, a fenced ```json block, or Qwen's ``<tool_call>...</tool_call>`` tags —
instead of structured ``tool_calls``; stock parsers miss the first two. ``parse_tool_calls`` finds
every call in a reply, in order, and says what was wrong with anything that looked like a call but
was not one, so the agent can send that back to the model as an error observation.

A call is a JSON object ``{"name": TOOL, "arguments": {...}}`` (``"parameters"`` is accepted for
``"arguments"``, and OpenAI's ``{"type": "function", "function": {"name", "arguments"}}`` with the
arguments as an object or a JSON string), or a JSON list of such objects.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_FENCED = re.compile(r"```(?:json|tool_call)?\s*\n?(.*?)```", re.DOTALL)
_decoder = json.JSONDecoder()


@dataclass(frozen=True)
class ParsedCall:
    """One well-formed call to a known tool."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ParsedReply:
    """A model reply split into its text, its well-formed calls and the problems with the rest."""

    content: str
    calls: list[ParsedCall] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _as_call(value: Any, tools: Collection[str]) -> ParsedCall | str | None:
    """The call ``value`` states, a problem with it, or None when it does not try to be a call."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("function"), dict):
        value = value["function"]
    if "name" not in value:
        return None
    name = value["name"]
    if not isinstance(name, str) or name not in tools:
        return f"unknown tool {name!r}; the tools are {', '.join(sorted(tools))}"
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return f"the arguments of {name} are not valid JSON ({exc.msg} at character {exc.pos})"
    if not isinstance(arguments, dict):
        return f"the arguments of {name} must be a JSON object, got {type(arguments).__name__}"
    return ParsedCall(name, arguments)


def _calls_in(value: Any, tools: Collection[str]) -> tuple[list[ParsedCall], list[str], bool]:
    """(calls, problems, whether ``value`` tried to be one or more calls)."""
    items = value if isinstance(value, list) else [value]
    calls, problems, tried = [], [], False
    for item in items:
        found = _as_call(item, tools)
        if found is None:
            continue
        tried = True
        if isinstance(found, ParsedCall):
            calls.append(found)
        else:
            problems.append(found)
    return calls, problems, tried


def _json_values(text: str) -> list[tuple[int, int, Any]]:
    """(start, end, value) of each top-level JSON object or list in free text, left to right."""
    found: list[tuple[int, int, Any]] = []
    position = 0
    while True:
        starts = [index for index in (text.find("{", position), text.find("[", position)) if index >= 0]
        if not starts:
            return found
        start = min(starts)
        try:
            value, end = _decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            position = start + 1
            continue
        found.append((start, end, value))
        position = end


def parse_tool_calls(text: str, tools: Collection[str]) -> ParsedReply:
    """Every tool call in ``text`` (to one of ``tools``), the text around them, and what was malformed.

    Tagged and fenced blocks are read first: one that is not valid JSON is a problem ("not valid
    JSON"). Bare JSON in the rest of the text counts only when it tries to be a call (has a
    ``name``), so a JSON answer is not mistaken for a call.
    """
    calls: list[ParsedCall] = []
    problems: list[str] = []
    spans: list[tuple[int, int]] = []
    for pattern in (_TAGGED, _FENCED):
        for match in pattern.finditer(text):
            if any(start <= match.start() < end for start, end in spans):
                continue
            body = match.group(1).strip()
            try:
                value = json.loads(body)
            except json.JSONDecodeError as exc:
                if pattern is _TAGGED or '"name"' in body:
                    problems.append(f"a tool call block is not valid JSON ({exc.msg} at character {exc.pos})")
                    spans.append(match.span())
                continue
            found, wrong, tried = _calls_in(value, tools)
            if tried:
                calls.extend(found)
                problems.extend(wrong)
                spans.append(match.span())
    rest = _without(text, spans)
    bare_spans = []
    for start, end, value in _json_values(rest):
        found, wrong, tried = _calls_in(value, tools)
        if tried:
            calls.extend(found)
            problems.extend(wrong)
            bare_spans.append((start, end))
    content = _without(rest, bare_spans).strip()
    return ParsedReply(content=content, calls=calls, problems=problems)


def _without(text: str, spans: list[tuple[int, int]]) -> str:
    kept, position = [], 0
    for start, end in sorted(spans):
        kept.append(text[position:start])
        position = end
    kept.append(text[position:])
    return "".join(kept)
