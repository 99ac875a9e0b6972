"""Servers for the MCP benchmarks: the baseline every bridge and tool server is compared with.

    python bench/_servers.py echo [--transport stdio|http] [--port N]
    python bench/_servers.py env:CartPole-v1 [--transport stdio|http] [--port N]   # = gauntlet serve

``echo`` is a bare FastMCP tool that returns its argument: the cost of the transport and the MCP
machinery alone, which every tool call pays. It is deliberately *not* built by Gauntlet's server
recipe, so that a recipe server's figure against it includes what the recipe adds. Any other target
is served exactly as ``gauntlet serve`` serves it (``gauntlet.bridges.serving.run_target``).
"""

from __future__ import annotations

import argparse

from mcp.server.fastmcp import FastMCP
from pydantic import BaseModel

from gauntlet.bridges.serving import run_target, serve


class Echo(BaseModel):
    value: int


def echo_server() -> FastMCP:
    # The recipe's servers log at WARNING; the baseline must pay the same logging cost.
    server = FastMCP("echo", log_level="WARNING")

    @server.tool()
    def echo(value: int) -> Echo:
        """Return the value unchanged."""
        return Echo(value=value)

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve the echo baseline, or any target as gauntlet serve does.")
    parser.add_argument("target", help="echo, env:<ENV_ID> or a registered server name")
    parser.add_argument("--transport", default="stdio", choices=["stdio", "http"])
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    if args.target == "echo":
        serve(echo_server(), transport=args.transport, port=args.port)
    else:
        run_target(args.target, transport=args.transport, port=args.port)


if __name__ == "__main__":
    main()
