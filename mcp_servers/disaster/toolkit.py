"""How the disaster tools are declared, bound to a session workspace, and turned into MCP tools.

A tool module declares plain functions whose first parameter is the ``Workspace``::

    @tool("ras")
    def ras_band_stats(ws: Workspace, image: str = Field(description=...)) -> BandStatsOut: ...

``bind(spec, ws)`` hides that first parameter, so the MCP schema shows only the agent's arguments.
Domain errors (bad paths, bands, windows, CRS mismatches, malformed GeoJSON) become ``ToolError``
with the domain's message, which tells the agent what to change. (Tool modules do not use
postponed annotations: FastMCP reads the real annotation objects from the bound signature.)
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

FAMILIES = ("seg", "ras", "mask", "vec", "poi", "calc", "logi", "tool")


@dataclass(frozen=True)
class ToolSpec:
    """A declared tool: its family, function and what its annotations must say."""

    name: str
    family: str
    fn: Callable[..., Any]
    writes: bool  # writes an artefact into the workspace (never outside it)

    @property
    def description(self) -> str:
        return inspect.cleandoc(self.fn.__doc__ or "")


TOOLS: dict[str, ToolSpec] = {}


def tool(family: str, *, writes: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare a tool of ``family``; its name is the function's name and must start with the family."""
    if family not in FAMILIES:
        raise ValueError(f"unknown tool family {family!r}")

    def declare(fn: Callable[..., Any]) -> Callable[..., Any]:
        name = fn.__name__
        if not (name.startswith(family + "_") or name == f"tool_{name.split('_', 1)[1]}"):
            raise ValueError(f"tool {name!r} must be named {family}_*")
        if name in TOOLS:
            raise ValueError(f"tool {name!r} declared twice")
        TOOLS[name] = ToolSpec(name=name, family=family, fn=fn, writes=writes)
        return fn

    return declare


def domain_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean "the agent's request cannot be served as asked"."""
    from rasterio.errors import RasterioError

    from gauntlet.mcp_servers.disaster.rasters import RasterError
    from gauntlet.mcp_servers.disaster.vectors import VectorError
    from gauntlet.mcp_servers.disaster.workspace import PathNotAllowed

    return (RasterError, VectorError, PathNotAllowed, RasterioError)


def bind(spec: ToolSpec, ws: Any, errors: tuple[type[BaseException], ...]) -> Callable[..., Any]:
    """``spec.fn`` with the workspace bound and domain errors turned into ``ToolError``."""
    from mcp.server.fastmcp.exceptions import ToolError

    signature = inspect.signature(spec.fn)
    if inspect.iscoroutinefunction(spec.fn):
        @functools.wraps(spec.fn)
        async def bound(*args: Any, **kwargs: Any) -> Any:
            try:
                return await spec.fn(ws, *args, **kwargs)
            except errors as exc:
                raise ToolError(str(exc)) from exc
    else:
        @functools.wraps(spec.fn)
        def bound(*args: Any, **kwargs: Any) -> Any:
            try:
                return spec.fn(ws, *args, **kwargs)
            except errors as exc:
                raise ToolError(str(exc)) from exc
    del bound.__wrapped__  # FastMCP must read the signature below, not the unbound one
    bound.__signature__ = signature.replace(parameters=list(signature.parameters.values())[1:])
    return bound
