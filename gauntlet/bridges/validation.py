"""Tool-schema validation compiled once per schema instead of once per call, with a native fast path.

The MCP 1.x SDK checks tool arguments (server side), tool results (server side) and tool results
again (client side) with one-shot ``jsonschema.validate``, which re-validates the *schema* against
the JSON Schema meta-schema on every call: about 0.2 ms per property, several times per call, more
than an env step costs. The caches here keep every check (arguments and results that do not match
their schema are still errors) but compile each schema's validator once. They know nothing of the
SDK; ``gauntlet.bridges.mcp_compat`` wires them in (``install_server_validation_cache``,
``validate_once``).

Even compiled, pure-Python ``jsonschema`` takes 50-70 us to check a 12-field result, most of what a
small tool call costs over a bare echo. So each schema is also compiled with ``jsonschema_rs`` (about
2 us a check, ``plain_json`` included), which is trusted only to *accept*: ``jsonschema`` still
decides every instance the fast path does not accept, and raises the error the SDK catches, message
and all. The fast path is used only where its verdict is known to be ``jsonschema``'s
(``fast_path_agrees``, ``plain_json``); ``tests/test_validation_fast_path.py`` compares the two
verdicts on every tool schema of the servers.
"""

from __future__ import annotations

import math
import threading
import types
from collections import OrderedDict
from typing import Any

import jsonschema
import jsonschema_rs
from referencing import Registry

# The drafts both libraries implement, by the class ``jsonschema`` picks for a schema (it reads
# ``$schema``, and takes 2020-12 without one); draft 3 has no fast path.
FAST_VALIDATOR_CLASSES: dict[type, Any] = {
    jsonschema.Draft4Validator: jsonschema_rs.Draft4Validator,
    jsonschema.Draft6Validator: jsonschema_rs.Draft6Validator,
    jsonschema.Draft7Validator: jsonschema_rs.Draft7Validator,
    jsonschema.Draft201909Validator: jsonschema_rs.Draft201909Validator,
    jsonschema.Draft202012Validator: jsonschema_rs.Draft202012Validator,
}

# The keywords on which jsonschema_rs gives jsonschema's verdict for plain JSON (``plain_json``): what
# pydantic writes for tool arguments and results. A schema using any other keyword is checked by
# jsonschema alone. Left out on purpose: ``pattern`` and ``patternProperties`` (ECMA-262 regular
# expressions against Python's ``re``: ``\s`` matches U+FEFF in one, not in the other); ``multipleOf``
# (jsonschema divides floats, so 0.3 is not a multiple of 0.1 there, and is one in jsonschema_rs);
# ``not``, ``oneOf`` and ``if``/``then``/``else``, under which a verdict the fast path gives more
# strictly would turn into one it gives more loosely; ``$id``, anchors and dynamic references, which
# move the base that references resolve against.
AGREED_KEYWORDS = frozenset({
    # annotations, asserted by neither (``format`` too: neither checks formats unless asked to);
    # ``$schema`` only at the root, where both read the draft from it
    "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly", "$comment",
    "$schema", "format",
    # assertions
    "type", "enum", "const", "required", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "uniqueItems",
    # applicators, each monotone: a stricter verdict on a part is never a looser one on the whole
    "properties", "additionalProperties", "items", "prefixItems", "anyOf", "allOf", "$ref", "$defs",
    "definitions",
})
_SUBSCHEMA_MAPS = frozenset({"properties", "$defs", "definitions"})
_SUBSCHEMAS = frozenset({"additionalProperties", "items", "prefixItems", "anyOf", "allOf"})

# Integers jsonschema_rs holds exactly in a machine word; past them its comparisons are its own.
_INT_LOW, _INT_HIGH = -(2 ** 63), 2 ** 64
# Past this many dicts and lists, ``plain_json`` leaves the instance to jsonschema: a JSON document
# that large gains little from the fast path, and a list that contains itself must not loop forever.
_MAX_CONTAINERS = 100_000


def plain_json(value: Any) -> bool:
    """Whether ``value`` is made of JSON's own Python types only, as a parsed JSON document is: dicts
    with ``str`` keys, lists, ``str``, ``bool``, ``None``, finite floats and integers within 64 bits.

    Anything else jsonschema_rs may read differently from jsonschema: it reads a tuple or a ``Decimal``
    as JSON, which jsonschema does not take for an array or an integer, and NaN as a value that fails
    ``{"type": "number"}``, so passes ``{"not": {"type": "number"}}``."""
    pending = [value]
    containers = 0
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is dict or kind is list:
            containers += 1
            if containers > _MAX_CONTAINERS:
                return False
        if kind is dict:
            for key in item:
                if type(key) is not str:
                    return False
            pending.extend(item.values())
        elif kind is list:
            pending.extend(item)
        elif kind is float:
            if not -math.inf < item < math.inf:  # NaN fails both comparisons
                return False
        elif kind is int:
            if not _INT_LOW <= item < _INT_HIGH:
                return False
        elif kind is not str and kind is not bool and item is not None:
            return False
    return True


def fast_path_agrees(schema: Any, root: bool = True) -> bool:
    """Whether every keyword in ``schema`` and its subschemas is in ``AGREED_KEYWORDS``, ``$schema``
    is at the root only, and every ``$ref`` points inside the schema itself."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict):
        return False
    for keyword, value in schema.items():
        if keyword not in AGREED_KEYWORDS or (keyword == "$schema" and not root):
            return False
        if keyword == "$ref" and not (isinstance(value, str) and value.startswith("#")):
            return False
        if keyword in _SUBSCHEMA_MAPS:
            if not (isinstance(value, dict) and all(fast_path_agrees(sub, root=False) for sub in value.values())):
                return False
        elif keyword in _SUBSCHEMAS:
            subschemas = value if isinstance(value, list) else [value]
            if not all(fast_path_agrees(sub, root=False) for sub in subschemas):
                return False
    return True


def _refuse_retrieval(uri: str) -> Any:
    raise LookupError(f"{uri}: a tool schema's references stay inside it")


def compile_fast_path(schema: dict[str, Any], validator_class: type) -> Any | None:
    """``schema`` compiled by jsonschema_rs for the draft ``validator_class`` checks, or ``None`` where
    its verdicts might differ from jsonschema's (or it cannot compile the schema)."""
    fast_class = FAST_VALIDATOR_CLASSES.get(validator_class)
    if fast_class is None or not plain_json(schema) or not fast_path_agrees(schema):
        return None
    try:
        return fast_class(schema, validate_formats=False, retriever=_refuse_retrieval)
    except Exception:  # any schema it will not compile is simply checked by jsonschema alone
        return None


class SchemaValidator:
    """One schema's compiled checks: jsonschema_rs accepts what it can, jsonschema decides the rest."""

    def __init__(self, schema: dict[str, Any]):
        validator_class = jsonschema.validators.validator_for(schema)
        validator_class.check_schema(schema)  # raises SchemaError, as one-shot validate does
        # An empty registry: a tool schema's $refs point into its own $defs, never to the network.
        self.python = validator_class(schema, registry=Registry())
        self.fast = compile_fast_path(schema, validator_class)

    def validate(self, instance: Any) -> None:
        """Return if ``instance`` is valid; else raise jsonschema's ``ValidationError`` for it."""
        if self.fast is not None and plain_json(instance):
            try:
                if self.fast.is_valid(instance):
                    return
            except Exception:  # a value it cannot take (a lone surrogate): jsonschema decides
                pass
        self.python.validate(instance)


class CompiledValidators:
    """Validators by schema object: the SDK keeps each tool's schema dicts for the server's life."""

    def __init__(self, capacity: int = 1024):
        self._capacity = capacity
        self._by_id: OrderedDict[int, tuple[Any, SchemaValidator]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, schema: dict[str, Any]) -> SchemaValidator:
        """The compiled validator of ``schema``; ``SchemaError`` if the schema itself is invalid."""
        key = id(schema)
        with self._lock:
            cached = self._by_id.get(key)
            if cached is not None and cached[0] is schema:
                self._by_id.move_to_end(key)
                return cached[1]
        validator = SchemaValidator(schema)
        with self._lock:
            self._by_id[key] = (schema, validator)  # holding the schema keeps its id from being reused
            if len(self._by_id) > self._capacity:
                self._by_id.popitem(last=False)
        return validator
class JsonschemaWithCompiledValidate(types.ModuleType):
    """The ``jsonschema`` module as a caller sees it, with ``validate`` compiled once per schema."""

    def __init__(self) -> None:
        super().__init__("jsonschema")
        self.validators_by_schema = CompiledValidators()

    def validate(self, instance: Any, schema: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        if args or kwargs:  # a call shape this cache was not written for: do exactly what was asked
            jsonschema.validate(instance, schema, *args, **kwargs)
            return
        self.validators_by_schema.get(schema).validate(instance)

    def __getattr__(self, name: str) -> Any:
        return getattr(jsonschema, name)


def check_structured_content(tool: str, schema: dict[str, Any] | None, structured: Any,
                             validators: CompiledValidators) -> None:
    """Raise ``RuntimeError`` (the SDK client's error for this) if a tool result breaks its output schema."""
    if schema is None:
        return
    if structured is None:
        raise RuntimeError(f"Tool {tool} has an output schema but did not return structured content")
    try:
        validator = validators.get(schema)
    except jsonschema.SchemaError as exc:
        raise RuntimeError(f"Invalid schema for tool {tool}: {exc}") from None
    try:
        validator.validate(structured)
    except jsonschema.ValidationError as exc:
        raise RuntimeError(f"Invalid structured content returned by tool {tool}: {exc}") from None
