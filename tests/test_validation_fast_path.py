"""The native fast path of schema validation gives jsonschema's verdict, and jsonschema's error, on every instance.

``gauntlet.bridges.validation.SchemaValidator`` lets jsonschema_rs accept an instance and leaves every
other decision to jsonschema. These tests hold it to jsonschema on the schemas that matter, every tool
schema (arguments and results) of the chem, disaster and env servers, with instances drawn from each
schema (valid ones) and mutated (wrong types, missing and extra properties, values at and past their
bounds, NaN, infinities, 65-bit integers, tuples, ``Decimal``, lone surrogates); on each keyword the
fast path trusts, under every draft it serves; and on the differences between the two libraries that
the fast path must step around. The verdict compared is the whole outcome: no error, or the same
``jsonschema.ValidationError`` (message, paths, text).
"""

from __future__ import annotations

import datetime
import enum
import functools
import math
import random
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.memory import create_connected_server_and_client_session as connect
from referencing import Registry

from gauntlet.bridges import validation
from gauntlet.bridges.mcp_compat import install_server_validation_cache, validate_once
from gauntlet.bridges.validation import SchemaValidator, compile_fast_path, plain_json
from tests.test_tool_schemas import SERVERS

DRAWS_PER_SCHEMA = 6
MUTANTS_PER_DRAW = 40


class StrKey(enum.StrEnum):
    A = "a"


class Level(enum.IntEnum):
    ONE = 1


class Text(str):
    pass


# Values put in place of a drawn value: every JSON type, the edges of numbers, and Python values that
# are not JSON at all but that a caller could hand to the validator.
REPLACEMENTS: list[Any] = [
    "x", "", "\ufeff", "\ud800", Text("x"), 0, 1, -1, 1.0, 1.5, -0.0, True, False, None, [], {}, [1], {"a": 1},
    math.nan, math.inf, -math.inf, 2 ** 53 + 1, 2 ** 63, 2 ** 64, 2 ** 64 + 1, -(2 ** 63) - 1, 10 ** 400, 1e308, 5e-324,
    Decimal("1"), Decimal("1.5"), (1,), ("x",), Level.ONE, StrKey.A, b"x", {1, 2},
]


def outcome(validate: Callable[[Any], None], instance: Any) -> tuple[str, ...] | None:
    """``None`` if ``validate`` accepts ``instance``; else its ``ValidationError``: message, paths and text."""
    try:
        validate(instance)
    except jsonschema.ValidationError as error:
        return (error.message, repr(list(error.absolute_path)), repr(list(error.absolute_schema_path)), str(error))
    return None


def python_validator(schema: dict[str, Any]) -> Any:
    """The validator the cache compiled before the fast path: jsonschema's own, with an empty registry."""
    return jsonschema.validators.validator_for(schema)(schema, registry=Registry())


def assert_same_outcomes(schema: dict[str, Any], instances: list[Any]) -> dict[str, int]:
    """Assert that the fast-path validator decides every instance as jsonschema does; counts of what happened."""
    ours, theirs = SchemaValidator(schema), python_validator(schema)
    counts = {"instances": 0, "valid": 0, "accepted_fast": 0}
    for instance in instances:
        expected = outcome(theirs.validate, instance)
        assert outcome(ours.validate, instance) == expected, f"{instance!r} against {schema!r}"
        counts["instances"] += 1
        counts["valid"] += expected is None
        counts["accepted_fast"] += _fast_accepts(ours, instance)
    return counts


def _fast_accepts(validator: SchemaValidator, instance: Any) -> bool:
    if validator.fast is None or not plain_json(instance):
        return False
    try:
        return bool(validator.fast.is_valid(instance))
    except Exception:
        return False


# Tool schemas ----------------------------------------------------------------------------------
@functools.cache
def tool_schemas() -> dict[str, dict[str, Any]]:
    """Every input and output schema of every tool of every server, by ``server/tool/input|output``."""
    async def listed(server):
        async with connect(server) as client:
            return (await client.list_tools()).tools

    schemas = {}
    for server_name, build in SERVERS.items():
        for tool in anyio.run(listed, build()):
            schemas[f"{server_name}/{tool.name}/input"] = tool.inputSchema
            if tool.outputSchema is not None:
                schemas[f"{server_name}/{tool.name}/output"] = tool.outputSchema
    return schemas


def _value_at(instance: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        instance = instance[part]
    return instance


def draw_valid(schema: Any, root: dict[str, Any], rng: random.Random, depth: int = 0) -> Any:
    """An instance of ``schema`` drawn at random (valid, except where a ``pattern`` constrains a string)."""
    if schema is True or schema == {}:
        return rng.choice([1, 2.5, "any", None, True, [1, "a"], {"k": 1}])
    if "$ref" in schema:
        return draw_valid(_value_at(root, tuple(schema["$ref"].removeprefix("#/").split("/"))), root, rng, depth)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if "anyOf" in schema:
        return draw_valid(rng.choice(schema["anyOf"]), root, rng, depth)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = rng.choice(kind)
    if kind == "null":
        return None
    if kind == "boolean":
        return rng.random() < 0.5
    if kind in ("integer", "number"):
        return _draw_number(schema, kind, rng)
    if kind == "string":
        return _draw_string(schema, rng)
    if kind == "array":
        low = schema.get("minItems", 0)
        high = min(schema.get("maxItems", low + 4), low + 4) if depth < 3 else low
        prefix = [draw_valid(item, root, rng, depth + 1) for item in schema.get("prefixItems", [])]
        rest = [draw_valid(schema.get("items", True), root, rng, depth + 1)
                for _ in range(max(0, rng.randint(low, max(low, high)) - len(prefix)))]
        return prefix + rest
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        required = set(schema.get("required", []))
        drawn = {name: draw_valid(sub, root, rng, depth + 1) for name, sub in properties.items()
                 if name in required or (depth < 3 and rng.random() < 0.6)}
        extra = schema.get("additionalProperties", True)
        if extra is not False:
            wanted = schema.get("minProperties", 0) + (rng.randint(0, 2) if depth < 3 else 0)
            for index in range(wanted - len(drawn)):
                drawn[f"extra_{index}"] = draw_valid(extra, root, rng, depth + 1)
        return drawn
    return rng.choice([1, "any", None])


def _draw_number(schema: dict[str, Any], kind: str, rng: random.Random) -> int | float:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    if low is None:
        low = (0 if high is None else min(0, high)) - 1000
    if high is None:
        high = max(0, low) + 1000
    edges = [value for value in (schema.get("minimum"), schema.get("maximum")) if value is not None]
    if edges and rng.random() < 0.2:
        return rng.choice(edges)
    if kind == "integer":
        lowest = math.floor(low) + 1 if "exclusiveMinimum" in schema else math.ceil(low)
        highest = math.ceil(high) - 1 if "exclusiveMaximum" in schema else math.floor(high)
        return rng.randint(lowest, highest)
    value = rng.uniform(low, high)
    if value <= low and "exclusiveMinimum" in schema:
        value = math.nextafter(low, math.inf)
    whole = float(round(value))
    return whole if rng.random() < 0.2 and low < whole < high else value


def _draw_string(schema: dict[str, Any], rng: random.Random) -> str:
    if schema.get("format") == "date":
        return (datetime.date(2000, 1, 1) + datetime.timedelta(days=rng.randint(0, 10_000))).isoformat()
    low, high = schema.get("minLength", 0), schema.get("maxLength", 12)
    alphabet = "abcXYZ019 _-./é🧪\ufeff\u202e\n"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(low, max(low, min(high, low + 12)))))


def _paths(instance: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(instance, dict):
        for key, value in instance.items():
            yield from _paths(value, (*path, key))
    elif isinstance(instance, list):
        for index, value in enumerate(instance):
            yield from _paths(value, (*path, index))


def _replaced(instance: Any, path: tuple[Any, ...], value: Any) -> Any:
    """A copy of ``instance`` with ``value`` at ``path``."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(instance, dict):
        return {**instance, head: _replaced(instance[head], rest, value)}
    return [*instance[:head], _replaced(instance[head], rest, value), *instance[head + 1:]]


def _bounds_of(schema: Any) -> tuple[list[float], list[int]]:
    """Every numeric bound and every length bound written anywhere in ``schema``."""
    numbers, lengths = [], []
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
                    numbers.append(value)
                elif key in ("minLength", "maxLength", "minItems", "maxItems", "minProperties"):
                    lengths.append(value)
                elif key not in ("default", "examples", "enum", "const"):
                    stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)
    return numbers, lengths


def mutants(instance: Any, schema: dict[str, Any], rng: random.Random) -> list[Any]:
    """Variants of ``instance`` that mostly break ``schema``: a value replaced (wrong type, at or past a
    bound, not JSON), a property removed or added (with a non-string key too), an array made a tuple."""
    numbers, lengths = _bounds_of(schema)
    near_bounds = [edge + offset for edge in numbers for offset in (-1, -1e-9, 0, 1e-9, 1)]
    near_bounds += [float(edge) for edge in numbers]
    strings_at_lengths = ["x" * max(0, length + offset) for length in lengths for offset in (-1, 0, 1)]
    candidates = []
    for path in _paths(instance):
        old = _value_at(instance, path)
        replacements = REPLACEMENTS + near_bounds + strings_at_lengths
        if type(old) is int:
            replacements.append(float(old))
        elif isinstance(old, str):
            replacements.append(old + "\ud800")
        elif isinstance(old, list):
            replacements.append(tuple(old))
        elif isinstance(old, dict):
            replacements += [{other: value for other, value in old.items() if other != key} for key in old]
            replacements += [{**old, extra: 1} for extra in ("unexpected", 1, StrKey.A, Text("a"))]
        candidates += [_replaced(instance, path, value) for value in replacements]
    return rng.sample(candidates, min(MUTANTS_PER_DRAW, len(candidates)))


def test_every_tool_output_schema_is_checked_on_the_fast_path():
    schemas = tool_schemas()
    outputs = {name: schema for name, schema in schemas.items() if name.endswith("/output")}
    assert len(outputs) > 150
    slow = [name for name, schema in outputs.items() if SchemaValidator(schema).fast is None]
    assert not slow, f"output schemas jsonschema alone checks: {slow}"


@pytest.mark.parametrize("server", sorted(SERVERS))
def test_the_fast_path_decides_every_drawn_and_mutated_instance_of_every_tool_schema_as_jsonschema_does(server):
    schemas = {name: schema for name, schema in tool_schemas().items() if name.startswith(f"{server}/")}
    totals = {"instances": 0, "valid": 0, "accepted_fast": 0}
    for name, schema in sorted(schemas.items()):
        rng = random.Random(name)
        draws = [draw_valid(schema, schema, rng) for _ in range(DRAWS_PER_SCHEMA)]
        if "pattern" not in str(schema):  # a string drawn for a pattern may not match it
            invalid = [draw for draw in draws if not python_validator(schema).is_valid(draw)]
            assert not invalid, f"{name}: drawn instances jsonschema rejects: {invalid[:2]}"
        instances = draws + [mutant for draw in draws for mutant in mutants(draw, schema, rng)]
        for key, count in assert_same_outcomes(schema, instances).items():
            totals[key] += count
    # Both verdicts were exercised: many valid instances went through the fast path, many invalid ones did not.
    assert totals["accepted_fast"] >= 0.9 * len(schemas) * DRAWS_PER_SCHEMA
    assert totals["instances"] - totals["valid"] >= len(schemas) * MUTANTS_PER_DRAW


# Keywords and drafts ---------------------------------------------------------------------------
DRAFTS = [
    "http://json-schema.org/draft-04/schema#",
    "http://json-schema.org/draft-06/schema#",
    "http://json-schema.org/draft-07/schema#",
    "https://json-schema.org/draft/2019-09/schema",
    "https://json-schema.org/draft/2020-12/schema",
]

# One small schema per keyword the fast path trusts (and the shapes pydantic writes), each with the
# instances where the two libraries could part: numbers at the edges of 64 bits and of floats, integers
# written as floats, booleans among numbers, equal numbers of different types, astral characters.
NUMBERS = [0, 1, -1, 1.0, 1.5, -0.0, True, 2 ** 53, 2 ** 53 + 1, float(2 ** 53), 2 ** 63 - 1, 2 ** 63, float(2 ** 63),
           2 ** 64 - 1, float(2 ** 64), -(2 ** 63), 1e300, 5e-324, 0.1, 0.3]
KEYWORD_CASES: list[tuple[dict[str, Any], list[Any]]] = [
    ({"type": "integer"}, NUMBERS + ["1", None]),
    ({"type": "number"}, NUMBERS + ["1", None, [1]]),
    ({"type": ["integer", "null"]}, NUMBERS + [None, "x"]),
    ({"type": "boolean"}, [True, False, 0, 1, None]),
    ({"type": "null"}, [None, 0, False, "", []]),
    ({"type": "array"}, [[], [1], {}, "x"]),
    ({"type": "object"}, [{}, {"a": 1}, [], None]),
    ({"enum": [1, "a", None, [1], {"a": 1}]}, NUMBERS + ["a", None, [1.0], [True], {"a": 1.0}, {"a": True}, "b"]),
    ({"enum": [2 ** 53 + 1, 2 ** 63, 2 ** 64 - 1]}, NUMBERS),
    ({"const": 0}, [0, 0.0, -0.0, False, None, "0"]),
    ({"const": float(2 ** 53)}, NUMBERS),
    ({"const": {"a": [1, 2]}},
     [{"a": [1, 2]}, {"a": [1.0, 2.0]}, {"a": [2, 1]}, {"a": [True, 2]}, {"a": [1, 2], "b": 1}]),
    ({"minimum": 1}, NUMBERS),
    ({"maximum": 2 ** 53}, NUMBERS),
    ({"maximum": 2 ** 63 - 1}, NUMBERS),
    ({"minimum": float(2 ** 63)}, NUMBERS),
    ({"exclusiveMinimum": 0}, NUMBERS),
    ({"exclusiveMaximum": float(2 ** 64)}, NUMBERS),
    ({"exclusiveMaximum": 0.3}, NUMBERS),
    ({"minLength": 2, "maxLength": 3}, ["a", "ab", "abcd", "🧪🧪", "é", "e\u0301", "\ufeff\ufeff", 5]),
    ({"minItems": 1, "maxItems": 2}, [[], [1], [1, 2], [1, 2, 3], "ab"]),
    ({"minProperties": 1, "maxProperties": 1}, [{}, {"a": 1}, {"a": 1, "b": 2}, []]),
    ({"uniqueItems": True}, [[1, 1.0], [1, True], [0, False], [2 ** 53, float(2 ** 53)], [2 ** 53 + 1, float(2 ** 53)],
                             [[1], [1.0]], [{"a": 1}, {"a": 1.0}], [{"a": 1, "b": 2}, {"b": 2, "a": 1}], [0.0, -0.0],
                             [2 ** 64 - 1, float(2 ** 64)], ["é", "e\u0301"]]),
    ({"required": ["a"], "properties": {"a": {"type": "string"}}}, [{"a": "x"}, {"a": 1}, {}, {"b": "x"}, "a"]),
    ({"properties": {"a": {"type": "integer"}}, "additionalProperties": False},
     [{}, {"a": 1}, {"a": 1.0}, {"a": 1, "b": 2}, {"a ": 1}, {"A": 1}]),
    ({"additionalProperties": {"type": "number", "maximum": 10}}, [{}, {"x": 1}, {"x": 11}, {"x": "1"}]),
    ({"items": {"type": "integer", "minimum": 0}}, [[], [0, 1], [1, -1], [1.0], [True]]),
    ({"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False, "minItems": 2},
     [["a", 1], ["a", 1, 2], [1, "a"], ["a"], ["a", 1.0]]),
    ({"anyOf": [{"type": "integer", "maximum": 3}, {"type": "string", "maxLength": 1}, {"type": "null"}]},
     NUMBERS + ["a", "ab", None]),
    ({"allOf": [{"minimum": 1}, {"maximum": 2 ** 53}]}, NUMBERS),
    ({"$defs": {"level": {"type": "integer", "minimum": 1}},
      "properties": {"level": {"$ref": "#/$defs/level"}, "levels": {"items": {"$ref": "#/$defs/level"}}}},
     [{"level": 1}, {"level": 0}, {"level": 1.0}, {"levels": [1, 2]}, {"levels": [1, "2"]}]),
    ({"definitions": {"name": {"type": "string", "minLength": 1}}, "items": {"$ref": "#/definitions/name"}},
     [["a"], [""], [1], []]),
    # Before 2019-09 a $ref's siblings are ignored; from it on they apply.
    ({"$defs": {"small": {"maximum": 1}}, "$ref": "#/$defs/small", "minimum": 5}, [0, 3, 6, "x"]),
    ({"type": "string", "format": "date"}, ["2024-01-01", "2024-13-45", "not a date", ""]),
    ({"type": "string", "format": "email", "title": "t", "description": "d", "default": "x", "examples": ["x"]},
     ["a@b.c", "not an email"]),
]


def _keyword_case(draft: str, case: int) -> dict:
    schema = {"$schema": draft, **KEYWORD_CASES[case][0]}
    if draft != DRAFTS[-1] and "prefixItems" in schema:
        schema.pop("items")  # ``items: false`` is a 2019-09 and later schema; prefixItems is unknown before 2020-12
    return schema


def _is_schema(schema: dict) -> bool:
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError:
        return False
    return True


# Every case under every draft where it is a schema (a few keyword forms are not schemas in draft 4).
DRAFT_CASES = [(draft, case) for draft in DRAFTS for case in range(len(KEYWORD_CASES))
               if _is_schema(_keyword_case(draft, case))]


@pytest.mark.parametrize(("draft", "case"), DRAFT_CASES)
def test_each_trusted_keyword_under_each_draft_gives_jsonschemas_verdict(draft, case):
    schema, instances = _keyword_case(draft, case), KEYWORD_CASES[case][1]
    assert SchemaValidator(schema).fast is not None
    assert_same_outcomes(schema, instances)


# Where the two libraries differ ----------------------------------------------------------------
@pytest.mark.parametrize(("schema", "instance"), [
    # ECMA-262 \s matches U+FEFF; Python's does not.
    ({"type": "string", "pattern": "^\\s$"}, "\ufeff"),
    ({"patternProperties": {"^\\s$": {"type": "integer"}}}, {"\ufeff": "x"}),
    # jsonschema divides floats: 0.3 / 0.1 is 2.9999999999999996, not a whole number.
    ({"multipleOf": 0.1}, 0.3),
    # jsonschema_rs reads NaN as failing "number", so passing its negation.
    ({"not": {"type": "number"}}, math.nan),
    ({"oneOf": [{"type": "number"}, {"minimum": 0}]}, math.nan),
    ({"$id": "https://example.com/root", "type": "integer"}, 1.5),
    # A $schema below the root: a dialect change one library may honour and the other not.
    ({"properties": {"a": {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"}}}, {"a": 1.0}),
    ({"$ref": "https://example.com/elsewhere.json"}, 1),
])
def test_a_schema_the_fast_path_might_misjudge_is_checked_by_jsonschema_alone(schema, instance):
    assert compile_fast_path(schema, jsonschema.validators.validator_for(schema)) is None

    def anything_raised(validate: Callable[[Any], None]) -> Any:
        try:
            return outcome(validate, instance)
        except Exception as error:  # an unresolvable reference: not a ValidationError, on both alike
            return type(error), str(error)

    assert anything_raised(SchemaValidator(schema).validate) == anything_raised(python_validator(schema).validate)


@pytest.mark.parametrize(("schema", "instance"), [
    ({"type": "array"}, (1, 2)),  # jsonschema_rs takes a tuple for an array, jsonschema does not
    ({"type": "integer"}, Decimal("1")),  # ... a Decimal with no fraction for an integer
    ({"type": "number", "maximum": 0}, math.nan),
    ({"type": ["number", "null"]}, math.nan),
    ({"type": "number"}, math.inf),
    ({"type": "integer", "minimum": 0}, 2 ** 64),
    ({"type": "integer", "maximum": 0}, -(2 ** 63) - 1),
    ({"required": ["a"]}, {StrKey.A: 1}),  # a str-enum key: jsonschema_rs reads its value, jsonschema its hash
    ({"required": ["a"]}, {Text("a"): 1}),
    ({"type": "object", "additionalProperties": False}, {1: 2}),
    ({"type": "string"}, "\ud800"),
    ({"type": "string"}, Text("x")),
    ({"type": "integer"}, Level.ONE),
    ({"type": "number"}, 1 + 0j),
])
def test_an_instance_that_is_not_plain_json_gets_jsonschemas_verdict(schema, instance):
    assert SchemaValidator(schema).fast is not None
    assert outcome(SchemaValidator(schema).validate, instance) == outcome(python_validator(schema).validate, instance)


def test_plain_json_is_what_a_json_parser_returns():
    assert plain_json({"a": [1, 2.5, "x", None, True, {"b": -(2 ** 63)}], "c": 2 ** 64 - 1})
    for value in [(1,), {1: "a"}, math.nan, -math.inf, 2 ** 64, Decimal("1"), Text("x"), {"a": {StrKey.A: 1}}, b"x"]:
        assert not plain_json(value), value


def test_a_list_that_contains_itself_is_left_to_jsonschema():
    endless: list[Any] = [1]
    endless.append(endless)
    assert not plain_json(endless)
    assert outcome(SchemaValidator({"type": "array"}).validate, endless) is None


# Through a real MCP session ------------------------------------------------------------------
def _count_server(structured: dict[str, Any], checked_by_server: bool) -> Server:
    """A server whose tool ``count`` declares an integer ``n`` and returns ``structured`` (a fresh schema
    per server, so no validator compiled for another test is reused). Checked by the server, the result
    is validated there; otherwise it is sent as is, for the client to check."""
    output_schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    server: Server = Server("raw")

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return [types.Tool(name="count", inputSchema={"type": "object"}, outputSchema=output_schema)]

    if checked_by_server:
        @server.call_tool()
        async def call_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            return structured
    else:
        @server.call_tool(validate_input=False)
        async def call_raw(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
            return types.CallToolResult(content=[types.TextContent(type="text", text="x")],
                                        structuredContent=structured)

    return server


async def _session_outcomes(structured: dict[str, Any]) -> tuple[tuple[bool, str], str]:
    """What a client sees of a result checked by the server (isError, text) and of one it checks itself."""
    async with connect(_count_server(structured, checked_by_server=True)) as session:
        validate_once(session)
        result = await session.call_tool("count", {})
        text = "".join(block.text for block in result.content if isinstance(block, types.TextContent))
        server_side = (bool(result.isError), text if result.isError else repr(result.structuredContent))
    async with connect(_count_server(structured, checked_by_server=False)) as session:
        validate_once(session)
        try:
            client_side = repr((await session.call_tool("count", {})).structuredContent)
        except RuntimeError as error:
            client_side = str(error)
    return server_side, client_side


@pytest.mark.parametrize("structured", [{"n": "not a number"}, {"n": 1.5}, {}, {"n": True}, {"n": 3}, {"n": 3.0}])
def test_a_client_sees_the_same_answer_to_a_result_with_or_without_the_fast_path(structured, monkeypatch):
    install_server_validation_cache()
    with_fast_path = anyio.run(_session_outcomes, structured)
    monkeypatch.setattr(validation, "compile_fast_path", lambda schema, validator_class: None)
    without = anyio.run(_session_outcomes, structured)
    assert with_fast_path == without
    (is_error, text), client_side = with_fast_path
    if structured in ({"n": 3}, {"n": 3.0}):
        assert not is_error and "Invalid" not in client_side
    else:
        assert is_error and text.startswith("Output validation error: ")
        assert client_side.startswith("Invalid structured content returned by tool count: ")
