"""Every place Gauntlet reaches past the MCP SDK's public API, in one module, checked against its version.

Everything else in Gauntlet uses the SDK's public surface (``FastMCP``, ``Tool.from_function``,
``ClientSession``, the transports). What is here depends on how the SDK works inside; each entry
says which internal it touches and why:

1. ``install_server_validation_cache()`` replaces the ``jsonschema`` module that the low-level
   server (``mcp.server.lowlevel.server``) validates tool arguments and results with, by one that
   compiles each schema once (``gauntlet.bridges.validation``): one-shot validation re-checks the
   schema against the meta-schema on every call, which costs more than an env step.
2. ``validate_once(session)`` gives a ``ClientSession`` the same cache for its check of tool
   results: it replaces the session's private ``_validate_tool_result`` and reads its private
   ``_tool_output_schemas`` (the schemas it caches from ``tools/list``).
3. ``sdk_tool`` builds the SDK's ``Tool`` with ``context_kwarg`` naming the tool's *state*
   parameter: the SDK leaves that parameter out of the input schema (as it does for its own
   ``Context``), and ``call_declared`` fills it with the server's state instead of a ``Context``.
   Per-server argument descriptions are written into the tool's ``parameters`` schema. The SDK
   derives a tool's argument model and schemas with pydantic (about 7 ms a tool, most of a server's
   start-up for a 132-tool server), so ``sdk_tool`` derives them once per declared function and
   gives every server its own shallow copy (the SDK never mutates a ``Tool`` after building it).
4. ``call_declared`` runs the two halves of ``Tool.run`` separately, through the tool's
   ``fn_metadata`` (``pre_parse_json``, ``arg_model``, ``model_dump_one_level``,
   ``convert_result``): ``Tool.run`` wraps *every* exception in one ``ToolError``, and the recipe
   must tell arguments that break the schema (the agent's to fix) from a failing tool (a bug).
   ``gauntlet.bridges.tool_server.ToolServer`` overrides ``FastMCP.call_tool``, which FastMCP
   registers as the low-level call handler, to run tools this way.
5. ``run_on_streams(server, read, write)`` runs a FastMCP server's private low-level server
   (``FastMCP._mcp_server``) on streams Gauntlet opened, as the SDK's own in-memory transport does:
   Gauntlet's stdio transport reads stdin in its own thread so that a stop signal ends the server.

Tested with mcp 1.27 to 1.30 (the dependency pin is ``mcp>=1.27,<2``). With another version the two
speed-ups are skipped with a warning (the SDK's own, slower checks run), stdio falls back to the
SDK's own runner, and building a recipe server raises ``UnsupportedSDKError`` naming the versions
that work.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import re
import warnings
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from mcp import ClientSession
from mcp import types as mcp_types
from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.tools import Tool
from mcp.types import ToolAnnotations

from gauntlet.bridges.validation import CompiledValidators, JsonschemaWithCompiledValidate, check_structured_content

TESTED_SINCE = (1, 27)
TESTED_BEFORE = (2, 0)
SUPPORTED = "mcp>=1.27,<2"


class UnsupportedSDKError(RuntimeError):
    """The installed MCP SDK is outside the range Gauntlet's servers are tested with."""


@functools.cache
def sdk_version() -> tuple[int, int]:
    """The installed ``mcp`` version's major and minor numbers, e.g. ``(1, 30)``."""
    found = re.match(r"(\d+)\.(\d+)", importlib.metadata.version("mcp"))
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


def sdk_is_tested() -> bool:
    return TESTED_SINCE <= sdk_version() < TESTED_BEFORE


def require_tested_sdk() -> None:
    """Raise ``UnsupportedSDKError`` unless the installed SDK is in the tested range."""
    if not sdk_is_tested():
        found = importlib.metadata.version("mcp")
        raise UnsupportedSDKError(f"Gauntlet's MCP servers need {SUPPORTED}, found mcp {found}; "
                                  f"install a supported version (pip install '{SUPPORTED}')")


_warned: set[str] = set()


def _untested(what: str) -> bool:
    """True (after one warning per feature) if the SDK is outside the tested range."""
    if sdk_is_tested():
        return False
    if what not in _warned:
        _warned.add(what)
        warnings.warn(f"mcp {importlib.metadata.version('mcp')} is outside the tested range ({SUPPORTED}): "
                      f"{what} is off, the SDK's own behaviour applies", RuntimeWarning, stacklevel=3)
    return True


# 1. The server's schema checks -------------------------------------------------------------------
def install_server_validation_cache() -> None:
    """Make the SDK's low-level server compile each tool schema's validator once (idempotent)."""
    if _untested("the server's compiled schema validation"):
        return
    from mcp.server.lowlevel import server as lowlevel

    if not isinstance(lowlevel.jsonschema, JsonschemaWithCompiledValidate):
        lowlevel.jsonschema = JsonschemaWithCompiledValidate()  # type: ignore[assignment]  # a stand-in module


# 2. The client's result checks -------------------------------------------------------------------
def validate_once(session: ClientSession) -> ClientSession:
    """Make ``session`` compile each tool's output-schema validator once (every client Gauntlet opens
    uses it); returns ``session``."""
    if _untested("the client's compiled result validation"):
        return session
    validators = CompiledValidators(capacity=256)

    async def validate_tool_result(name: str, result: mcp_types.CallToolResult) -> None:
        if name not in session._tool_output_schemas:
            await session.list_tools()  # refreshes the session's schema cache, as the SDK does
        schema = session._tool_output_schemas.get(name)
        check_structured_content(name, schema, result.structuredContent, validators)

    # Assigned on the instance: other sessions keep the SDK's method.
    session._validate_tool_result = validate_tool_result  # type: ignore[method-assign]
    return session


# 3 and 4. Declared tools -------------------------------------------------------------------------
# Built tools by declared function, then by everything else that shapes them (see entry 3).
_BUILT: weakref.WeakKeyDictionary[Callable[..., Any], dict[tuple[str, ...], Tool]] = weakref.WeakKeyDictionary()


def sdk_tool(fn: Callable[..., Any], *, name: str, description: str, annotations: ToolAnnotations,
             state_parameter: str, argument_descriptions: Mapping[str, str]) -> Tool:
    """The SDK's ``Tool`` for ``fn``, whose ``state_parameter`` is filled by ``call_declared``, not by
    the client (it is left out of the input schema). Built once per function and shape; each call
    returns a copy of its own."""
    require_tested_sdk()
    key = (name, description, annotations.model_dump_json(), state_parameter,
           json.dumps(dict(argument_descriptions), sort_keys=True))
    built = _BUILT.setdefault(fn, {})
    if key not in built:
        tool = Tool.from_function(fn, name=name, description=description, annotations=annotations,
                                  context_kwarg=state_parameter)
        properties = tool.parameters.get("properties", {})
        for argument, text in argument_descriptions.items():
            if argument not in properties:
                raise ValueError(f"tool {name!r} has no argument {argument!r} to describe")
            properties[argument]["description"] = text
        built[key] = tool
    return built[key].model_copy()


def parse_arguments(tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
    """The tool's arguments validated against its argument model (JSON strings for lists and
    objects decoded first, as the SDK does); raises ``pydantic.ValidationError``."""
    metadata = tool.fn_metadata
    parsed = metadata.arg_model.model_validate(metadata.pre_parse_json(arguments))
    return parsed.model_dump_one_level()


async def call_declared(tool: Tool, arguments: dict[str, Any], state: Any) -> Any:
    """Run ``tool`` on already parsed ``arguments`` with ``state`` in its state parameter; the raw result."""
    kwargs = dict(arguments)
    if tool.context_kwarg is not None:
        kwargs[tool.context_kwarg] = state
    if tool.is_async:
        return await tool.fn(**kwargs)
    return tool.fn(**kwargs)


def convert_result(tool: Tool, result: Any) -> Any:
    """A raw tool result in the form the low-level server sends (content blocks, structured content)."""
    return tool.fn_metadata.convert_result(result)


# 5. stdio on Gauntlet's own streams --------------------------------------------------------------
async def run_on_streams(server: FastMCP, read_stream: Any, write_stream: Any) -> None:
    """Serve one client on a pair of message streams until it disconnects."""
    low_level = server._mcp_server
    await low_level.run(read_stream, write_stream, low_level.create_initialization_options())


def can_run_on_streams() -> bool:
    """Whether ``run_on_streams`` may be used (otherwise serve stdio with ``server.run_stdio_async()``)."""
    return not _untested("serving stdio from Gauntlet's stdin reader")

