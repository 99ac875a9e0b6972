"""The disaster-response MCP server.

    build_server()                                  # all families, default scenes, fresh workspace
    build_server(families=["seg", "ras", "calc"])   # a subset
    gauntlet serve disaster --server-kwargs '{"families": ["seg", "ras"]}' --transport http --port 8765
    gauntlet serve disaster --list-tools             # the tools as a Markdown table (name, read-only, what)

The data root is the ``scenes/`` folder of the built scene data (``gauntlet data build disaster``),
shared read-only by every client session. Artefacts the tools write go to the server's workspace,
``server.state``, for a stdio client (the only one) and for in-process sessions (one program's
steps); each HTTP session gets a fresh folder of its own instead, removed when the session ends, so
no HTTP client can read another's artefacts. The server is built by the server recipe
(``gauntlet.bridges.tool_server``) from the tools declared in ``tools_*.py``.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gauntlet.bridges.tool_server import DeclaredTool, ResultRewrite, ToolServer
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
                                               tools_raster, tools_report, tools_vector, tools_viz)


def tool_specs(families: Sequence[str] | None = None) -> list[DeclaredTool]:
    """The declared tools of ``families`` (default all), family by family in declaration order."""
    load_tool_modules()
    chosen = list(families) if families else list(FAMILIES)
    unknown = sorted(set(chosen) - set(FAMILIES))
    if unknown:
        raise UserError(f"unknown tool families {', '.join(unknown)}; choose from {', '.join(FAMILIES)}")
    selected = [declared for declared in TOOLS if family_of(declared) in chosen]
    return sorted(selected, key=lambda declared: FAMILIES.index(family_of(declared)))


def default_data_root(realism: str = "clean") -> Path:
    from gauntlet.mcp_servers.disaster.data import build_default

    return build_default(realism) / "scenes"


def build_hard_server(data_root: str | os.PathLike[str] | None = None, families: Sequence[str] | None = None,
                      workspace_dir: str | os.PathLike[str] | None = None) -> ToolServer[Workspace]:
    """The server of the hard view (the ``disaster-hard`` server): ``build_server``'s tools over the
    ``hard`` realism level's scenes (default: all events, built on first use)."""
    return disaster_server(data_root if data_root is not None else default_data_root("hard"), families,
                           workspace_dir)


def build_server(data_root: str | os.PathLike[str] | None = None, families: Sequence[str] | None = None,
                 workspace_dir: str | os.PathLike[str] | None = None) -> ToolServer[Workspace]:
    """A server with the tools of ``families`` over ``data_root`` (default: the built scenes), writing
    into ``workspace_dir`` (default: a fresh folder in the data cache, removed with the server)."""
    return disaster_server(data_root, families, workspace_dir)


def disaster_server(data_root: str | os.PathLike[str] | None, families: Sequence[str] | None,
                    workspace_dir: str | os.PathLike[str] | None,
                    rewrite_result: ResultRewrite | None = None) -> ToolServer[Workspace]:
    """``build_server``'s server, whose successful results pass through ``rewrite_result`` (the attack
    view's injections, ``attack.build_attack_server``)."""
    from gauntlet.datacache import cache_root

    names = [declared.name for declared in tool_specs(families)]
    root = Path(data_root) if data_root is not None else default_data_root()
    if not root.is_dir():
        raise UserError(f"data root {root} is not a folder; build the scenes first (gauntlet data build disaster)")
    own_workspace = workspace_dir is None
    parent = cache_root() / "disaster-workspaces"
    parent.mkdir(parents=True, exist_ok=True)
    if workspace_dir is None:
        workspace_dir = tempfile.mkdtemp(prefix="session-", dir=parent)
    ws = SessionWorkspace(root, workspace_dir)
    sessions = SessionWorkspaces(ws, parent, lambda: server.get_context().request_context.request is not None)
    # An HTTP session's folder lies under parent: its real paths are shown as 'ws/...' too.
    public_paths: dict[str | os.PathLike[str], str] = {
        ws.data_root: DATA_PREFIX.rstrip("/"), ws.workspace_dir: WORKSPACE_PREFIX.rstrip("/"),
        parent: WORKSPACE_PREFIX.rstrip("/")}
    server: ToolServer[Workspace] = ToolServer(TOOLS, ws, name="disaster", instructions=INSTRUCTIONS, only=names,
                                               session_state=sessions, public_paths=public_paths,
                                               rewrite_result=rewrite_result)
    # tool_loop calls the other tools of this server, through the recipe (arguments checked, state passed).
    ws.tools = {name: functools.partial(server.run_tool, name) for name in names}
    ws.client_session = server.request_session
    if own_workspace:  # a workspace this server made lives as long as the server (or the process)
        weakref.finalize(server, shutil.rmtree, str(ws.workspace_dir), True)
    return server


class SessionWorkspace(Workspace):
    """A client session's workspace; ``close`` (the session ended) removes the folder if it was made
    for the session alone."""

    def __init__(self, data_root: str | os.PathLike[str], workspace_dir: str | os.PathLike[str], *,
                 remove_on_close: bool = False):
        super().__init__(data_root, workspace_dir)
        self.remove_on_close = remove_on_close

    def close(self) -> None:
        if self.remove_on_close:
            shutil.rmtree(self.workspace_dir, ignore_errors=True)


class SessionWorkspaces:
    """Opens each client session's workspace (the recipe's ``session_state``): a fresh folder under
    ``parent`` for a session over HTTP (``over_http()``, asked during the session's first call), the
    server's own otherwise."""

    def __init__(self, shared: SessionWorkspace, parent: Path, over_http: Callable[[], bool]):
        self.shared = shared
        self.parent = parent
        self.over_http = over_http

    def __call__(self, session: Any) -> SessionWorkspace:
        if not self.over_http():
            return self.shared
        own = SessionWorkspace(self.shared.data_root, tempfile.mkdtemp(prefix="session-", dir=self.parent),
                               remove_on_close=True)
        own.tools = self.shared.tools  # they run through the server, which passes each session its own state
        own.client_session = self.shared.client_session
        return own
