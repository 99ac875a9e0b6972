"""How the disaster tools are declared: one ``ToolSet`` (the server recipe, ``gauntlet.bridges.tool_server``)
whose state is the session's ``Workspace``.

A tool module declares plain functions whose first parameter is the workspace::

    @tool("ras")
    def ras_band_stats(ws: Workspace, image: Image, band: Band = 1) -> BandStatsOut: ...

The name starts with the tool's family (``ras_``, ``seg_``, ...; ``tool_`` for the meta tools).
``writes=True`` marks a tool that writes an artefact into the workspace (never outside it); its
annotations say so. The domain errors in ``TOOLS.fixable`` (bad paths, bands, windows, CRS
mismatches, malformed GeoJSON, unreadable rasters) are the agent's to fix: their messages say what
to change. Tools that check their own input raise ``ToolInputError`` (the calculators'
``CalculationError`` is one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from mcp.types import ToolAnnotations
from rasterio.errors import RasterioError

from gauntlet.bridges.tool_server import DeclaredTool, ToolSet
from gauntlet.mcp_servers.disaster.rasters import RasterError
from gauntlet.mcp_servers.disaster.vectors import VectorError
from gauntlet.mcp_servers.disaster.workspace import PathNotAllowed, Workspace

FAMILIES = ("seg", "ras", "mask", "vec", "poi", "calc", "logi", "viz", "report", "tool")
FunctionT = TypeVar("FunctionT", bound=Callable[..., Any])

TOOLS = ToolSet[Workspace](fixable=[RasterError, VectorError, PathNotAllowed, RasterioError])


def tool(family: str, *, writes: bool = False) -> Callable[[FunctionT], FunctionT]:
    """Declare a tool of ``family``; its name is the function's name and must start with the family."""
    if family not in FAMILIES:
        raise ValueError(f"unknown tool family {family!r}")

    def declare(fn: FunctionT) -> FunctionT:
        name = fn.__name__
        if not name.startswith(family + "_"):
            raise ValueError(f"tool {name!r} must be named {family}_*")
        # Every tool reads only the scenes and its own workspace; one that writes adds a new,
        # content-named file, so calling it again with the same arguments changes nothing.
        TOOLS.add(fn, ToolAnnotations(title=name.replace("_", " "), readOnlyHint=not writes, destructiveHint=False,
                                      idempotentHint=True, openWorldHint=False))
        return fn

    return declare


def family_of(declared: DeclaredTool) -> str:
    return declared.name.split("_", 1)[0]

