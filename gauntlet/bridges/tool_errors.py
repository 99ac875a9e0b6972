"""What an agent is told when a tool call fails, and the one exception a tool raises to refuse a request.

Two kinds of failure, told apart by ``ToolServer`` (``gauntlet.bridges.tool_server``):

* the agent can fix it: arguments that break the tool's schema (``argument_error`` names each
  argument, what is wrong with it and a valid example), a ``ToolInputError`` a tool raises, or a
  domain error its tool set declares fixable. The agent reads the message;
* anything else is a bug in the server: the agent reads only ``internal_error_text(incident)``, and
  the traceback goes to the server's log under the same incident id.
"""

from __future__ import annotations

import json
import math
import secrets
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

MAX_SHOWN_CHARS = 60


class ToolInputError(Exception):
    """A request the agent can fix; the message says what to change. Raise it (or a subclass) from a
    tool when input that fits the schema still cannot be served."""


class ArgumentError(ToolInputError):
    """Arguments that do not fit the tool's input schema."""


def argument_error(tool: str, exc: ValidationError, input_schema: Mapping[str, Any],
                   given: Mapping[str, Any]) -> ArgumentError:
    """One message for every argument pydantic refused: which, why, and a value that would do."""
    properties: Mapping[str, Any] = input_schema.get("properties", {})
    definitions: Mapping[str, Any] = input_schema.get("$defs", {})
    problems = []
    for error in exc.errors(include_url=False):
        location = error["loc"]
        argument = str(location[0]) if location else ""
        where = argument + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in location[1:])
        schema = properties.get(argument, {})
        named = f"argument '{where}'"
        if schema.get("description"):
            named += f" ({_clip(schema['description'])})"
        if error["type"] == "missing":
            problem = f"{named} is missing"
        else:
            problem = f"{named}: {error['msg']} (got {_shown(error['input'])})"
        example = example_value(schema, definitions)
        if example is not _NO_EXAMPLE:
            problem += f"; a valid example: {json.dumps({argument: example})}"
        problems.append(problem)
    unknown = sorted(set(given) - set(properties))
    if unknown:
        problems.append(f"this tool takes no {', '.join(repr(name) for name in unknown)} "
                        f"(its arguments: {', '.join(properties) or 'none'})")
    return ArgumentError(f"invalid arguments for {tool}: " + "; ".join(problems))


_NO_EXAMPLE = object()


def example_value(schema: Mapping[str, Any], definitions: Mapping[str, Any]) -> Any:
    """A value that satisfies the JSON schema of one argument: its declared example, its default, or
    one built from its type and bounds. Returns a private marker when nothing sensible can be built
    (free text without a declared example: its description says what it holds)."""
    reference = schema.get("$ref")
    if isinstance(reference, str) and reference.startswith("#/$defs/"):
        return example_value(definitions.get(reference.split("/")[-1], {}), definitions)
    examples = schema.get("examples")
    if isinstance(examples, list) and examples:
        return examples[0]
    if schema.get("default") is not None:
        return schema["default"]
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        for branch in schema.get(key, []):
            if branch.get("type") != "null":
                value = example_value(branch, definitions)
                if value is not _NO_EXAMPLE:
                    return value
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "integer":
        return _integer_within(schema)
    if kind == "number":
        return _number_within(schema)
    if kind == "boolean":
        return True
    if kind == "array":
        return _array_example(schema, definitions)
    if kind == "object":
        required = schema.get("required", [])
        fields = schema.get("properties", {})
        built = {name: example_value(fields.get(name, {}), definitions) for name in required}
        return _NO_EXAMPLE if any(value is _NO_EXAMPLE for value in built.values()) else built
    return _NO_EXAMPLE


def _integer_within(schema: Mapping[str, Any]) -> int:
    value = 1
    if "minimum" in schema:
        value = max(value, math.ceil(schema["minimum"]))
    if "exclusiveMinimum" in schema:
        value = max(value, math.floor(schema["exclusiveMinimum"]) + 1)
    if "maximum" in schema:
        value = min(value, math.floor(schema["maximum"]))
    if "exclusiveMaximum" in schema:
        value = min(value, math.ceil(schema["exclusiveMaximum"]) - 1)
    return value


def _number_within(schema: Mapping[str, Any]) -> float:
    value = 1.0
    if "minimum" in schema and value < schema["minimum"]:
        value = float(schema["minimum"])
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        value = schema["exclusiveMinimum"] + 1.0
    if "maximum" in schema and value > schema["maximum"]:
        value = float(schema["maximum"])
    if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
        upper = schema["exclusiveMaximum"]
        value = (schema.get("minimum", schema.get("exclusiveMinimum", upper - 2.0)) + upper) / 2
    return value


def _array_example(schema: Mapping[str, Any], definitions: Mapping[str, Any]) -> Any:
    if "prefixItems" in schema:  # a fixed-length tuple
        items = [example_value(item, definitions) for item in schema["prefixItems"]]
        return _NO_EXAMPLE if any(item is _NO_EXAMPLE for item in items) else items
    item = example_value(schema.get("items", {}), definitions)
    if item is _NO_EXAMPLE:
        return [] if not schema.get("minItems") else _NO_EXAMPLE
    return [item] * max(1, schema.get("minItems", 1))


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return _clip(text)


def _clip(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS - 3] + "..."


def new_incident_id() -> str:
    """A short random id that ties the agent's "internal error" to the server's log record."""
    return secrets.token_hex(4)


def internal_error_text(incident: str) -> str:
    """All the agent learns of a bug: the incident id, and that its request was not the cause."""
    return f"internal error {incident}: the server failed on this call (not a problem with the arguments)"
