"""Tool-schema validation compiled once per schema instead of once per call.

The MCP 1.x SDK checks tool arguments (server side), tool results (server side) and tool results
again (client side) with one-shot ``jsonschema.validate``, which re-validates the *schema* against
the JSON Schema meta-schema on every call: about 0.2 ms per property, several times per call, more
than an env step costs. The caches here keep every check (arguments and results that do not match
their schema are still errors) but compile each schema's validator once. They know nothing of the
SDK; ``gauntlet.bridges.mcp_compat`` wires them in (``install_server_validation_cache``,
``validate_once``).
"""

from __future__ import annotations

import threading
import types
from collections import OrderedDict
from typing import Any

import jsonschema
from referencing import Registry


class CompiledValidators:
    """Validators by schema object: the SDK keeps each tool's schema dicts for the server's life."""

    def __init__(self, capacity: int = 1024):
        self._capacity = capacity
        self._by_id: OrderedDict[int, tuple[Any, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, schema: dict[str, Any]) -> Any:
        """The compiled validator of ``schema``; ``SchemaError`` if the schema itself is invalid."""
        key = id(schema)
        with self._lock:
            cached = self._by_id.get(key)
            if cached is not None and cached[0] is schema:
                self._by_id.move_to_end(key)
                return cached[1]
        validator_class = jsonschema.validators.validator_for(schema)
        validator_class.check_schema(schema)  # raises SchemaError, as one-shot validate does
        # An empty registry: a tool schema's $refs point into its own $defs, never to the network.
        validator = validator_class(schema, registry=Registry())
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
