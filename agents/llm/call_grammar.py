"""The grammar of one tool call: a reply that can only be a well-formed call of a tool it was shown.

A small model writes its calls as JSON text, and a call that does not parse, names no tool or breaks
the tool's input schema costs a whole model call to be told so. Decoded under this grammar, a reply
is exactly ``<tool_call>\\n{"name": "<tool>", "arguments": {...}}\\n</tool_call>`` (the form Qwen2.5's
chat template shows earlier calls in, so the conversation reads back as it was written), with the
arguments valid under that tool's JSON schema: malformed calls go to zero by construction.

The schemas become GBNF through llama-cpp-python's JSON-schema converter (the port of llama.cpp's
``json_schema_to_grammar``). Two things are decided here, not there:

* every object that does not say otherwise gets ``additionalProperties: false``: the converter
  would otherwise let a model add keys no tool reads, which is where small models wander;
* each tool's ``$defs`` are renamed under the tool's name first, because the converter names a
  rule after the last segment of its ``$ref`` and would give two tools' same-named models one rule;
* an array's ``items: {}`` (any item, as pydantic writes ``list[Any]``) is dropped: the converter
  takes an empty items schema for a missing tuple and fails, and an array without ``items`` means
  the same to both;
* a string ``pattern`` the converter cannot read (it takes only whole-string ``^...$`` patterns, and
  a subset of regular expressions) is left out of the grammar, which then admits more strings than
  the schema: the decoded call is still checked against the full schema (``calls.check_calls``),
  so a call that breaks the pattern is answered as malformed, as without the grammar; so are
  length and item-count bounds above ``MAX_GRAMMAR_REPEAT`` (llama.cpp expands a bounded repetition
  into nested rules and refuses large ones).

``grammar_problem`` tells which tool's schema the converter cannot read, for a one-line error.

With ``thought=True`` the call is preceded by one line of the model's own words, ``Thought: ...``,
ended by a newline, at most ``THOUGHT_CHARS`` long and holding no ``<`` or braces (it cannot open a
tag or hold the call's JSON, which a small model otherwise writes there): the ReAct pattern of
reasoning before acting, kept to one line so the reply stays sized to a call. Qwen2.5's chat template shows an
assistant turn's text before its calls, so later turns read the thought back as it was written.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from gauntlet.agents.llm.calls import ToolSpec

OPEN, CLOSE = "<tool_call>\n", "\n</tool_call>"
THOUGHT = "Thought: "
# The longest thought line, in characters: a sentence or two (~40 tokens), so a reply stays sized to a call.
THOUGHT_CHARS = 200
_RULE_CHARS = re.compile(r"[^a-zA-Z0-9-]+")


class CallGrammarError(ValueError):
    """A tool's input schema cannot be turned into a grammar; the message names the tool."""


def call_grammar(tools: Sequence[ToolSpec], *, thought: bool = False) -> str:
    """The GBNF grammar (start rule ``root``) of one call of one of ``tools``, in tags; with
    ``thought``, after one ``Thought: ...`` line (see the module docstring)."""
    return _grammar(json.dumps([[tool.name, tool.input_schema] for tool in tools], sort_keys=True), thought)


@functools.lru_cache(maxsize=64)
def _grammar(tools_json: str, thought: bool = False) -> str:
    from llama_cpp.llama_grammar import SchemaConverter

    converter = SchemaConverter(prop_order={"name": 0, "arguments": 1}, allow_fetch=False, dotall=False,
                                raw_pattern=False)
    alternatives = []
    for name, schema in json.loads(tools_json):
        prefix = _RULE_CHARS.sub("-", name)
        problem = None
        for relax in (_unanchored_patterns, _all_patterns):
            try:
                # A tool's refs point into its own schema: resolved against it, before it is wrapped in the call.
                arguments = converter.resolve_refs(_closed(relax(_prefixed_defs(schema, prefix))), f"tool-{prefix}")
                call = {"type": "object", "required": ["name", "arguments"], "additionalProperties": False,
                        "properties": {"name": {"const": name}, "arguments": arguments}}
                alternatives.append(converter.visit(call, f"call-{prefix}"))
                break
            except (AssertionError, KeyError, ValueError, TypeError, RecursionError) as exc:
                problem = exc
        else:
            raise CallGrammarError(f"the input schema of tool {name!r} cannot be made into a call grammar ({problem})")
    if not alternatives:
        raise CallGrammarError("a call grammar needs at least one tool")
    converter._add_rule("call", " | ".join(alternatives))
    root = f"{converter._format_literal(OPEN)} call {converter._format_literal(CLOSE)}"
    if thought:
        # Words, not a call: no newline, no tag's opening, no JSON braces; at most THOUGHT_CHARS of them.
        converter._add_rule("thought", f'{converter._format_literal(THOUGHT)} [^ \\n<{{}}] '
                                       f'[^\\n<{{}}]{{0,{THOUGHT_CHARS - 1}}} "\\n"')
        root = f"thought {root}"
    converter._add_rule("root", root)
    return str(converter.format_grammar())


def _prefixed_defs(schema: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """``schema`` with its ``$defs`` (and ``definitions``) renamed ``<prefix>-<name>``, refs too."""
    renamed: dict[str, Any] = copy.deepcopy(dict(schema))
    renames: dict[str, str] = {}
    for key in ("$defs", "definitions"):
        if isinstance(renamed.get(key), dict):
            renamed[key] = {f"{prefix}-{name}": value for name, value in renamed[key].items()}
            renames.update({f"#/{key}/{name[len(prefix) + 1:]}": f"#/{key}/{name}" for name in renamed[key]})

    def visit(node: Any) -> Any:
        if isinstance(node, dict):
            return {key: renames.get(value, value) if key == "$ref" and isinstance(value, str) else visit(value)
                    for key, value in node.items()}
        if isinstance(node, list):
            return [visit(value) for value in node]
        return node

    return dict(visit(renamed))


def _without_patterns(schema: Any, keep: Any) -> Any:
    if isinstance(schema, dict):
        return {key: _without_patterns(value, keep) for key, value in schema.items()
                if not (key == "pattern" and isinstance(value, str) and not keep(value))}
    if isinstance(schema, list):
        return [_without_patterns(value, keep) for value in schema]
    return schema


def _unanchored_patterns(schema: Any) -> Any:
    """``schema`` without the string patterns the converter cannot take: it reads only a whole-string
    pattern (``^...$``), while JSON Schema's ``"\\S"`` means "contains a non-space"."""
    return _without_patterns(schema, lambda pattern: pattern.startswith("^") and pattern.endswith("$"))


def _all_patterns(schema: Any) -> Any:
    """``schema`` without any string pattern (one the converter's regex reader cannot parse)."""
    return _without_patterns(schema, lambda pattern: False)


_NOTES = frozenset({"description", "title", "default", "examples", "deprecated", "readOnly", "writeOnly"})


# llama.cpp's grammar parser expands a bounded repetition into nested rules and refuses large ones
# (a 2,000-character string limit is one); bounds above this are left to the schema check.
MAX_GRAMMAR_REPEAT = 16
_BOUNDS = frozenset({"minLength", "maxLength", "minItems", "maxItems"})


_MAPS = frozenset({"properties", "$defs", "definitions"})  # keyed by names, not by schema keywords


def _loose_bound(key: str, value: Any) -> bool:
    return key in _BOUNDS and isinstance(value, int) and value > MAX_GRAMMAR_REPEAT


def _closed_map(schemas: dict[str, Any]) -> dict[str, Any]:
    return {name: _closed(value) for name, value in schemas.items()}


# The converter llama-cpp-python ships ignores an integer's minimum and maximum: a bounded integer with at
# most this many values is written as the enum of them instead, so the grammar keeps a call inside its range.
MAX_ENUMERATED_INTEGERS = 256


def _enumerated(schema: dict[str, Any]) -> dict[str, Any] | None:
    """A bounded integer schema as the enum of its values (None when it is not one, or has too many)."""
    low, high = schema.get("minimum"), schema.get("maximum")
    if schema.get("type") != "integer" or "enum" in schema or not all(
            isinstance(bound, int) and not isinstance(bound, bool) for bound in (low, high)):
        return None
    assert isinstance(low, int) and isinstance(high, int)
    if not 0 < high - low + 1 <= MAX_ENUMERATED_INTEGERS:
        return None
    return {"enum": list(range(low, high + 1))}


def _closed(schema: Any) -> Any:
    """Every object schema with properties and no ``additionalProperties`` gets it set to false; words
    for readers (``description``, ``title``...) go, as the converter reads a schema of only those as
    one it does not know, where JSON Schema reads it as "any value"; a small bounded integer becomes the
    enum of its values."""
    if isinstance(schema, dict) and (enumerated := _enumerated(schema)) is not None:
        return enumerated
    if isinstance(schema, dict):
        closed = {key: _closed_map(value) if key in _MAPS and isinstance(value, dict) else _closed(value)
                  for key, value in schema.items() if key not in _NOTES and not _loose_bound(key, value)}
        if "properties" in closed and "additionalProperties" not in closed:
            closed["additionalProperties"] = False
        if closed.get("items") in ({}, True):
            # "items of any kind": the converter reads an empty items schema as a missing tuple
            # (``prefixItems``) and fails, while an array without ``items`` is any array to both.
            del closed["items"]
        return closed
    if isinstance(schema, list):
        return [_closed(value) for value in schema]
    return schema


def grammar_problem(tools: Sequence[ToolSpec]) -> str | None:
    """Why ``tools`` have no call grammar (naming the tool), or None when they have one."""
    try:
        call_grammar(tools)
    except CallGrammarError as exc:
        return str(exc)
    return None
