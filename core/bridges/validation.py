"""Tool-schema validation compiled once per schema instead of once per call.

The MCP 1.x SDK checks tool arguments (server side), tool results (server side) and tool results
again (client side) with one-shot ``jsonschema.validate``, which re-validates the *schema* against
the JSON Schema meta-schema on every call: about 0.2 ms per property, several times per call, more
than an env step costs. Both fixes here keep every check — arguments and results that do not match
their schema are still errors — but compile each schema's validator once:

* ``validate_once(session)`` for a client session (every client Gauntlet opens uses it);
* ``install_server_validation_cache()`` for the SDK's low-level server, which every Gauntlet server
  calls when it is built.
"""

from __future__ import annotations

import threading
import types
from collections import OrderedDict
from typing import Any

import jsonschema
from mcp import ClientSession
from mcp import types as mcp_types
from referencing import Registry


async def _validate_tool_result(self: ClientSession, name: str, result: mcp_types.CallToolResult) -> None:
    if name not in self._tool_output_schemas:
        await self.list_tools()  # refreshes the session's schema cache, as the SDK does
    schema = self._tool_output_schemas.get(name)
    if schema is None:
        return
    if result.structuredContent is None:
        raise RuntimeError(f"Tool {name} has an output schema but did not return structured content")
    cache: dict[str, tuple[dict[str, Any], Any]] = self.__dict__.setdefault("_gauntlet_validators", {})
    cached = cache.get(name)
    if cached is None or cached[0] is not schema:  # a re-listed tool brings a new schema object
        validator_class = jsonschema.validators.validator_for(schema)
        try:
            validator_class.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise RuntimeError(f"Invalid schema for tool {name}: {exc}") from None
        cached = cache[name] = (schema, validator_class(schema, registry=Registry()))
    try:
        cached[1].validate(result.structuredContent)
    except jsonschema.ValidationError as exc:
        raise RuntimeError(f"Invalid structured content returned by tool {name}: {exc}") from None


def validate_once(session: ClientSession) -> ClientSession:
    """Make ``session`` compile each tool's output-schema validator once (see the module docstring)."""
    if hasattr(session, "_tool_output_schemas") and hasattr(session, "_validate_tool_result"):
        session._validate_tool_result = types.MethodType(_validate_tool_result, session)
    return session


class _CompiledValidators:
    """Validators by schema object: the SDK keeps each tool's schema dicts for the server's life."""

    def __init__(self, capacity: int = 1024):
        self._capacity = capacity
        self._by_id: OrderedDict[int, tuple[Any, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, schema: dict[str, Any]) -> Any:
        key = id(schema)
        with self._lock:
            cached = self._by_id.get(key)
            if cached is not None and cached[0] is schema:
                self._by_id.move_to_end(key)
                return cached[1]
        validator_class = jsonschema.validators.validator_for(schema)
        validator_class.check_schema(schema)  # raises SchemaError, as one-shot validate does
        validator = validator_class(schema)
        with self._lock:
            self._by_id[key] = (schema, validator)  # holding the schema keeps its id from being reused
            if len(self._by_id) > self._capacity:
                self._by_id.popitem(last=False)
        return validator


class _JsonschemaWithCompiledValidate(types.ModuleType):
    """The ``jsonschema`` module as the SDK's server sees it, with ``validate`` compiled once per schema."""

    def __init__(self) -> None:
        super().__init__("jsonschema")
        self._validators = _CompiledValidators()

    def validate(self, instance: Any, schema: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        if args or kwargs:  # a call shape this cache was not written for: do exactly what the SDK asked
            jsonschema.validate(instance, schema, *args, **kwargs)
            return
        self._validators.get(schema).validate(instance)

    def __getattr__(self, name: str) -> Any:
        return getattr(jsonschema, name)


def install_server_validation_cache() -> None:
    """Make the SDK's low-level server compile each tool schema's validator once (idempotent)."""
    from mcp.server.lowlevel import server as lowlevel

    if not isinstance(lowlevel.jsonschema, _JsonschemaWithCompiledValidate):
        lowlevel.jsonschema = _JsonschemaWithCompiledValidate()
