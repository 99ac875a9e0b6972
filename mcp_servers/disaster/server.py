"""The disaster-response FastMCP server.

    build_server()                                  # all families, default scenes, fresh workspace
    build_server(families=["seg", "ras", "calc"])   # a subset
    python -m gauntlet.mcp_servers.disaster.server --families seg,ras --transport http --port 8765

The data root is the ``scenes/`` folder of the built scene data (``gauntlet data build disaster``);
every server gets its own workspace folder for the artefacts its tools write.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import weakref
from collections.abc import Sequence
from pathlib import Path

from gauntlet.mcp_servers.disaster.toolkit import FAMILIES, TOOLS, bind, domain_errors

INSTRUCTIONS = (
    "Disaster-response geospatial tools over synthetic multi-sensor scenes at real event locations. "
    "Scene layers are 'data/<event>/<layer>' (read 'data/<event>/manifest.json' for the list, CRS and bands); "
    "tools write results under 'ws/' and return those paths, which other tools accept. Coordinates are in the "
    "scene's UTM CRS (metres) unless a tool says otherwise.")


def load_tool_modules() -> None:
    """Import the tool modules (declaring every tool)."""
    from gauntlet.mcp_servers.disaster import (tools_mask, tools_objects, tools_ops, tools_poi,  # noqa: F401
                                               tools_raster, tools_vector)


def tool_specs(families: Sequence[str] | None = None):
    """The declared tools of ``families`` (default all), in declaration order."""
    load_tool_modules()
    chosen = list(families) if families else list(FAMILIES)
    unknown = sorted(set(chosen) - set(FAMILIES))
    if unknown:
        raise ValueError(f"unknown tool families {', '.join(unknown)}; choose from {', '.join(FAMILIES)}")
    selected = [spec for spec in TOOLS.values() if spec.family in chosen]
    return sorted(selected, key=lambda spec: FAMILIES.index(spec.family))  # stable: declaration order within


def default_data_root() -> Path:
    from gauntlet.mcp_servers.disaster.data import build_default

    return build_default() / "scenes"


def build_server(data_root: str | os.PathLike[str] | None = None, families: Sequence[str] | None = None,
                 workspace_dir: str | os.PathLike[str] | None = None):
    """A FastMCP server with the tools of ``families`` over ``data_root`` (default: the built scenes)."""
    from mcp.server.fastmcp import FastMCP
    from mcp.types import ToolAnnotations

    from gauntlet.bridges.validation import install_server_validation_cache
    from gauntlet.datacache import cache_root
    from gauntlet.mcp_servers.disaster.workspace import Workspace

    install_server_validation_cache()
    root = Path(data_root) if data_root is not None else default_data_root()
    if not root.is_dir():
        raise ValueError(f"data root {root} is not a folder; build the scenes first (gauntlet data build disaster)")
    own_workspace = workspace_dir is None
    if own_workspace:
        parent = cache_root() / "disaster-workspaces"
        parent.mkdir(parents=True, exist_ok=True)
        workspace_dir = tempfile.mkdtemp(prefix="session-", dir=parent)
    ws = Workspace(root, workspace_dir)
    server = FastMCP("disaster", instructions=INSTRUCTIONS, log_level="WARNING")
    errors = domain_errors()
    for spec in tool_specs(families):
        annotations = ToolAnnotations(title=spec.name.replace("_", " "), readOnlyHint=not spec.writes,
                                      destructiveHint=False, idempotentHint=True, openWorldHint=False)
        server.add_tool(bind(spec, ws, errors), name=spec.name, description=spec.description,
                        annotations=annotations, structured_output=True)
    ws.tools = {tool.name: tool for tool in server._tool_manager.list_tools()}
    server.workspace = ws
    if own_workspace:  # a workspace this server made lives as long as the server (or the process)
        weakref.finalize(server, shutil.rmtree, str(ws.workspace_dir), True)
    return server


def tools_table(families: Sequence[str] | None = None) -> str:
    """The tools as a Markdown table (family, name, writes a file, first sentence of the description)."""
    lines = ["| family | tool | writes | what it does |", "|---|---|---|---|"]
    for spec in tool_specs(families):
        first = spec.description.split("\n\n")[0].replace("\n", " ").replace("|", "\\|")
        lines.append(f"| {spec.family} | `{spec.name}` | {'yes' if spec.writes else ''} | {first} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Serve over stdio (default) or streamable HTTP; errors are one line and exit status 1."""
    parser = argparse.ArgumentParser(prog="python -m gauntlet.mcp_servers.disaster.server",
                                     description="Serve the disaster-response MCP tools.")
    parser.add_argument("--families", default=None, help=f"comma-separated subset of {','.join(FAMILIES)}")
    parser.add_argument("--data-root", default=None, help="scenes folder (default: the built scene data)")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--tools-table", action="store_true", help="print the tools as a Markdown table and exit")
    args = parser.parse_args(argv)
    if args.tools_table:
        print(tools_table())
        return
    from gauntlet.bridges.serving import serve

    try:
        families = [f.strip() for f in args.families.split(",") if f.strip()] if args.families else None
        server = build_server(args.data_root, families)
        serve(server, args.transport, args.host, args.port)
    except KeyboardInterrupt:
        pass
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
