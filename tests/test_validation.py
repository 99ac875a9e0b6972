"""Tool arguments and results are still checked against their schemas when each validator is compiled once."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from mcp import types
from mcp.server.fastmcp import FastMCP
from mcp.server.lowlevel import Server
from mcp.shared.memory import create_connected_server_and_client_session as connect

from gauntlet.bridges.mcp_compat import install_server_validation_cache, sdk_is_tested, validate_once

COUNT_INPUT = {"type": "object", "properties": {"n": {"type": "integer"}}}
COUNT_OUTPUT = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def compiled_schemas(monkeypatch) -> list[Any]:
    """The schemas a jsonschema validator is built for, in order (one entry per compilation)."""
    built: list[Any] = []
    original = jsonschema.validators.validator_for

    def counting(schema: Any, *args: Any, **kwargs: Any) -> Any:
        built.append(schema)
        return original(schema, *args, **kwargs)

    monkeypatch.setattr(jsonschema.validators, "validator_for", counting)
    return built


def _fastmcp_server() -> FastMCP:
    server = FastMCP("schema-test", log_level="WARNING")

    @server.tool()
    def count(n: int) -> dict[str, int]:
        """Return n."""
        return {"n": n}

    return server


def _low_level_server(structured: dict[str, Any]) -> Server:
    """A server whose one tool, ``count``, declares ``COUNT_OUTPUT`` and returns ``structured`` as is
    (the low-level API lets a server send a result that breaks its own schema)."""
    server: Server = Server("raw")

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return [types.Tool(name="count", inputSchema=COUNT_INPUT, outputSchema=COUNT_OUTPUT)]

    @server.call_tool(validate_input=False)
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text="x")], structuredContent=structured)

    return server


def test_the_sdk_in_use_is_one_the_caches_are_tested_with():
    assert sdk_is_tested()


@pytest.mark.anyio
async def test_a_client_compiles_an_output_schema_once_however_many_calls_it_checks(compiled_schemas):
    async with connect(_low_level_server({"n": 1})) as session:
        validate_once(session)
        first = [await session.call_tool("count", {"n": 1}) for _ in range(3)]
        after_three = compiled_schemas.count(COUNT_OUTPUT)
        more = [await session.call_tool("count", {"n": 1}) for _ in range(20)]
    assert all(result.structuredContent == {"n": 1} for result in first + more)
    assert after_three >= 1 and compiled_schemas.count(COUNT_OUTPUT) == after_three


@pytest.mark.anyio
async def test_a_result_that_breaks_its_output_schema_is_still_an_error_for_the_client():
    async with connect(_low_level_server({"n": "not a number"})) as session:
        validate_once(session)
        with pytest.raises(RuntimeError, match="Invalid structured content returned by tool count"):
            await session.call_tool("count", {"n": 1})


@pytest.mark.anyio
async def test_a_result_without_structured_content_is_still_an_error_for_the_client():
    server = _low_level_server({})

    @server.call_tool(validate_input=False)
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text="x")])

    async with connect(server) as session:
        validate_once(session)
        with pytest.raises(RuntimeError, match="did not return structured content"):
            await session.call_tool("count", {"n": 1})


@pytest.mark.anyio
async def test_the_server_compiles_each_schema_once_and_still_rejects_what_breaks_it(compiled_schemas):
    install_server_validation_cache()
    server = _low_level_server({"n": 1})

    @server.call_tool()  # the low-level server checks arguments against the input schema itself
    async def call_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"n": arguments["n"]} if arguments["n"] >= 0 else {"n": "negative"}

    def compilations() -> tuple[int, int]:
        return compiled_schemas.count(COUNT_INPUT), compiled_schemas.count(COUNT_OUTPUT)

    async with connect(server) as session:
        validate_once(session)  # the client's own check of results, compiled once too
        fine = [await session.call_tool("count", {"n": n}) for n in range(3)]
        after_three = compilations()
        fine += [await session.call_tool("count", {"n": n}) for n in range(20)]
        after_more = compilations()
        bad_arguments = await session.call_tool("count", {"n": "two"})
        bad_result = await session.call_tool("count", {"n": -1})
    assert all(not result.isError for result in fine)
    assert bad_arguments.isError and "Input validation error" in bad_arguments.content[0].text
    assert bad_result.isError and "Output validation error" in bad_result.content[0].text
    assert min(after_three) >= 1 and after_more == after_three
