"""Tool results are still checked against their output schema when the validator is compiled once."""

from __future__ import annotations

import pytest
from mcp.server.fastmcp import FastMCP
from mcp.shared.memory import create_connected_server_and_client_session as connect
from mcp.types import CallToolResult, TextContent

from gauntlet.bridges.validation import validate_once


def _server() -> FastMCP:
    server = FastMCP("schema-test", log_level="WARNING")

    @server.tool()
    def count(n: int) -> dict[str, int]:
        """Return n."""
        return {"n": n}

    return server


@pytest.mark.anyio
async def test_valid_results_pass_and_the_validator_is_compiled_once():
    async with connect(_server()) as session:
        validate_once(session)
        for n in range(3):
            result = await session.call_tool("count", {"n": n})
            assert result.structuredContent == {"n": n}
        assert list(session._gauntlet_validators) == ["count"]


@pytest.mark.anyio
async def test_a_result_that_breaks_its_schema_is_still_an_error():
    async with connect(_server()) as session:
        validate_once(session)
        await session.list_tools()
        bad = CallToolResult(content=[TextContent(type="text", text="x")], structuredContent={"n": "not a number"})
        with pytest.raises(RuntimeError, match="Invalid structured content"):
            await session._validate_tool_result("count", bad)
        with pytest.raises(RuntimeError, match="did not return structured content"):
            await session._validate_tool_result("count", CallToolResult(content=[]))


@pytest.mark.anyio
async def test_server_side_checks_still_reject_arguments_that_break_the_input_schema():
    from gauntlet.bridges.validation import install_server_validation_cache

    install_server_validation_cache()
    async with connect(_server()) as session:
        ok = await session.call_tool("count", {"n": 2})
        bad = await session.call_tool("count", {"n": "two"})
    assert not ok.isError and ok.structuredContent == {"n": 2}
    assert bad.isError and "validation error" in bad.content[0].text.lower()
