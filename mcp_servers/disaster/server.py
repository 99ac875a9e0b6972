"""The disaster-response MCP server.

    build_server()                                  # all families, default scenes, fresh workspace
    build_server(families=["seg", "ras", "calc"])   # a subset
    gauntlet serve disaster --server-kwargs '{"families": ["seg", "ras"]}' --transport http --port 8765
    gauntlet serve disaster --list-tools             # the tools as a Markdown table (name, read-only, what)

The data root is the ``scenes/`` folder of the built scene data (``gauntlet data build disaster``);
every server gets its own workspace folder for the artefacts its tools write. The server is built by
the server recipe (``gauntlet.bridges.tool_server``) from the tools declared in ``tools_*.py``;
``server.state`` is its ``Workspace``.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import weakref
from collections.abc import Sequence
from pathlib import Path

from gauntlet.bridges.tool_server import DeclaredTool, ToolServer
from gauntlet.errors import UserError
from gauntlet.mcp_servers.disaster.toolkit import FAMILIES, TOOLS, family_of
from gauntlet.mcp_servers.disaster.workspace import DATA_PREFIX, WORKSPACE_PREFIX, Workspace

INSTRUCTIONS = (
    "Disaster-response geospatial tools over synthetic multi-sensor scenes at real event locations. "
    "Scene layers are 'data/<event>/<layer>' (read 'data/<event>/manifest.json' for the list, CRS and bands); "
    "tools write results under 'ws/' and return those paths, which other tools accept. Coordinates are in the "
    "scene's UTM CRS (metres) unless a tool says otherwise.")


def load_tool_modules() -> None:
    """Import the tool modules (declaring every tool)."""
    from gauntlet.mcp_servers.disaster import (tools_mask, tools_objects, tools_ops, tools_poi,  # noqa: F401
                                               tools_raster, tools_vector)


def tool_specs(families: Sequence[str] | None = None) -> list[DeclaredTool]:
    """The declared tools of ``families`` (default all), family by family in declaration order."""
    load_tool_modules()
    chosen = list(families) if families else list(FAMILIES)
    unknown = sorted(set(chosen) - set(FAMILIES))
    if unknown:
        raise UserError(f"unknown tool families {', '.join(unknown)}; choose from {', '.join(FAMILIES)}")
    selected = [declared for declared in TOOLS if family_of(declared) in chosen]
    return sorted(selected, key=lambda declared: FAMILIES.index(family_of(declared)))


def default_data_root() -> Path:
    from gauntlet.mcp_servers.disaster.data import build_default

    return build_default() / "scenes"


def build_server(data_root: str | os.PathLike[str] | None = None, families: Sequence[str] | None = None,
                 workspace_dir: str | os.PathLike[str] | None = None) -> ToolServer[Workspace]:
    """A server with the tools of ``families`` over ``data_root`` (default: the built scenes), writing
    into ``workspace_dir`` (default: a fresh folder in the data cache, removed with the server)."""
    from gauntlet.datacache import cache_root

    names = [declared.name for declared in tool_specs(families)]
    root = Path(data_root) if data_root is not None else default_data_root()
    if not root.is_dir():
        raise UserError(f"data root {root} is not a folder; build the scenes first (gauntlet data build disaster)")
    own_workspace = workspace_dir is None
    if workspace_dir is None:
        parent = cache_root() / "disaster-workspaces"
        parent.mkdir(parents=True, exist_ok=True)
        workspace_dir = tempfile.mkdtemp(prefix="session-", dir=parent)
    ws = Workspace(root, workspace_dir)
    server = ToolServer(TOOLS, ws, name="disaster", instructions=INSTRUCTIONS, only=names,
                        public_paths={ws.data_root: DATA_PREFIX.rstrip("/"),
                                      ws.workspace_dir: WORKSPACE_PREFIX.rstrip("/")})
    # tool_loop calls the other tools of this server, through the recipe (arguments checked, state passed).
    ws.tools = {name: functools.partial(server.run_tool, name) for name in names}
    if own_workspace:  # a workspace this server made lives as long as the server (or the process)
        weakref.finalize(server, shutil.rmtree, str(ws.workspace_dir), True)
    return server

