"""Servers for the MCP bridge benchmark: the env bridge, and the baseline a bridge is compared with.

    python bench/_servers.py echo --transport stdio|http [--port N]
    python bench/_servers.py env:CartPole-v1 --transport stdio|http [--port N]

``echo`` is a bare FastMCP tool that returns its argument: the cost of the transport and the MCP
machinery alone, which every tool call pays.
"""

from __future__ import annotations

import argparse

from mcp.server.fastmcp import FastMCP
from pydantic import BaseModel

from gauntlet.bridges.serving import resolve_server, serve


class Echo(BaseModel):
    value: int


def echo_server() -> FastMCP:
    # The env bridge logs at WARNING; the baseline must pay the same logging cost.
    server = FastMCP("echo", log_level="WARNING")

    @server.tool()
    def echo(value: int) -> Echo:
        """Return the value unchanged."""
        return Echo(value=value)

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("target")
    parser.add_argument("--transport", default="stdio", choices=["stdio", "http"])
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    server = echo_server() if args.target == "echo" else resolve_server(args.target)
    serve(server, transport=args.transport, port=args.port)


if __name__ == "__main__":
    main()
