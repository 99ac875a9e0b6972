"""Calls through a real in-memory MCP session, shared by the disaster server's tests."""

from __future__ import annotations

import anyio
from mcp.shared.memory import create_connected_server_and_client_session

from gauntlet.bridges.mcp_compat import validate_once


def call_all(server, calls):
    """Run (tool, args) calls in one in-memory client session; returns the CallToolResults."""
    async def run():
        async with create_connected_server_and_client_session(server) as session:
            validate_once(session)
            return [await session.call_tool(name, args) for name, args in calls]

    return anyio.run(run)


def error_text(result) -> str:
    """The text of an ``isError`` result (failing when the result is not an error)."""
    assert result.isError, result
    return " ".join(block.text for block in result.content)
