"""A blocking MCP client: one ClientSession on its own event loop thread.

Gymnasium's API is synchronous and the MCP client is async, so ``BlockingMCPClient`` runs an asyncio
loop in a background thread and hands coroutines to it (``asyncio.run_coroutine_threadsafe``). The
session is opened and closed inside one long-lived task on that loop, because the SDK's transports
are anyio context managers that must be entered and exited by the same task.

``ServerTarget`` names what to connect to: a FastMCP factory (in memory; each ``open`` starts a
fresh server), a command to spawn (stdio), or a streamable-HTTP URL.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from mcp import ClientSession, types
from mcp.server.fastmcp import FastMCP
from mcp.client.session import SamplingFnT

from gauntlet.bridges.mcp_compat import validate_once


class SessionEnded(ConnectionError):
    """The session's transport ended (the server process died or its connection closed) while a call
    waited, or before it was sent.

    The SDK answers a pending request with ``CONNECTION_CLOSED`` only when the server's output ends
    first; when writing the request to a dead process fails first, the transport's task group is
    cancelled and the request would wait for its timeout. Watching the session's holder task closes
    that race.
    """


@dataclass(frozen=True)
class ServerTarget:
    """Where a tool server lives: exactly one of ``factory``, ``command`` or ``url``."""

    factory: Callable[[], FastMCP] | None = None
    command: tuple[str, ...] | None = None
    url: str | None = None
    env: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        given = [name for name in ("factory", "command", "url") if getattr(self, name)]
        if len(given) != 1:
            raise ValueError(f"a ServerTarget needs exactly one of factory, command or url (got {given or 'none'})")

    @classmethod
    def coerce(cls, spec: ServerSpec) -> ServerTarget:
        """Read a server spec: a ServerTarget; a FastMCP factory (or a FastMCP, reused by every
        session: state it keeps per session starts afresh, state it keeps globally does not); an
        ``http(s)://`` URL; a command list (stdio); or a name that
        ``gauntlet.bridges.targets.resolve_server`` knows (``env:<ENV_ID>`` or a registered server),
        served in memory."""
        if isinstance(spec, ServerTarget):
            return spec
        if isinstance(spec, str):
            if spec.startswith(("http://", "https://")):
                return cls(url=spec)
            return cls(factory=_NamedFactory(spec))
        if isinstance(spec, FastMCP):
            return cls(factory=_SameServer(spec))
        if callable(spec):
            return cls(factory=spec)
        command = tuple(str(part) for part in spec)
        if not command:
            raise ValueError("an empty command cannot start a stdio server")
        return cls(command=command)

    def describe(self) -> str:
        if self.url:
            return self.url
        if self.command:
            return " ".join(self.command)
        if isinstance(self.factory, _NamedFactory):
            return self.factory.name
        if isinstance(self.factory, _SameServer):
            return self.factory.server.name
        return getattr(self.factory, "__qualname__", repr(self.factory))


ServerSpec = ServerTarget | FastMCP | Callable[[], FastMCP] | str | Sequence[str]
"""Anything ``ServerTarget.coerce`` reads."""


@dataclass(frozen=True)
class _NamedFactory:
    """A picklable factory for a server known by name (``env:<ENV_ID>`` or a registered server)."""

    name: str

    def __call__(self) -> FastMCP:
        from gauntlet.bridges.targets import resolve_server

        return resolve_server(self.name)


@dataclass(frozen=True)
class _SameServer:
    """A factory that hands out one existing server."""

    server: FastMCP

    def __call__(self) -> FastMCP:
        return self.server


def server_environment(extra: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
    """The environment of a stdio server process: the SDK's safe default (PATH, HOME, ...; it leaves out the
    rest of the client's environment, keys included), the client's ``GAUNTLET_*`` settings (so a server
    started by Gauntlet reads and writes the same data cache and workspaces as the client that scores its
    results), then ``extra``."""
    from mcp.client.stdio import get_default_environment

    own = {name: value for name, value in os.environ.items() if name.startswith("GAUNTLET_")}
    return {**get_default_environment(), **own, **dict(extra)}


@asynccontextmanager
async def open_session(target: ServerTarget, *, sampling_callback: SamplingFnT | None = None
                       ) -> AsyncIterator[tuple[ClientSession, str]]:
    """An initialised ClientSession connected to ``target``, and the server's name. With
    ``sampling_callback`` the session declares the ``sampling`` capability and answers the server's
    requests for a model with it (``gauntlet.bridges.client_model``)."""
    if target.factory is not None:
        from mcp.shared.memory import create_connected_server_and_client_session

        server = target.factory()
        async with create_connected_server_and_client_session(server, sampling_callback=sampling_callback) as session:
            yield validate_once(session), server.name
        return
    if target.command is not None:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        parameters = StdioServerParameters(command=target.command[0], args=list(target.command[1:]),
                                           env=server_environment(target.env))
        async with stdio_client(parameters) as (read, write), \
                ClientSession(read, write, sampling_callback=sampling_callback) as session:
            result = await session.initialize()
            yield validate_once(session), result.serverInfo.name
        return
    from mcp.client.streamable_http import streamable_http_client

    if target.url is None:
        raise ValueError("a ServerTarget needs exactly one of factory, command or url (got none)")
    async with streamable_http_client(target.url) as (read, write, _), \
            ClientSession(read, write, sampling_callback=sampling_callback) as session:
        result = await session.initialize()
        yield validate_once(session), result.serverInfo.name


class BlockingMCPClient:
    """Blocking ``open``/``list_tools``/``call_tool``/``close`` over one MCP session at a time.

    ``open`` closes any session already open and connects afresh (a new server process for stdio,
    a new server instance for a factory). Every call waits at most ``timeout_s`` seconds.
    """

    def __init__(self, target: ServerTarget, *, timeout_s: float = 60.0,
                 sampling_callback: SamplingFnT | None = None):
        self.target = target
        self.timeout_s = timeout_s
        self.sampling_callback = sampling_callback  # answers the server's requests for a model (see open_session)
        self.server_name: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._session: ClientSession | None = None
        self._holder: concurrent.futures.Future[None] | None = None
        self._stop: asyncio.Event | None = None

    @property
    def is_open(self) -> bool:
        return self._session is not None

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, name="gauntlet-mcp-client", daemon=True)
            self._thread.start()
        return self._loop

    def _run(self, coroutine: Any) -> Any:
        holder = self._holder
        if holder is not None and holder.done():
            coroutine.close()
            raise SessionEnded(f"the session with the MCP server {self.target.describe()} has ended")
        future = asyncio.run_coroutine_threadsafe(coroutine, self._ensure_loop())
        watched = [future] if holder is None else [future, holder]
        concurrent.futures.wait(watched, self.timeout_s, return_when=concurrent.futures.FIRST_COMPLETED)
        if future.done():
            return future.result()
        future.cancel()
        if holder is not None and holder.done():
            raise SessionEnded(f"the session with the MCP server {self.target.describe()} ended "
                               "while a call waited")
        raise TimeoutError(f"the MCP server {self.target.describe()} did not answer within "
                           f"{self.timeout_s:g} s")

    def open(self) -> None:
        """Connect a fresh session (closing the current one first)."""
        self.close_session()
        ready: concurrent.futures.Future[tuple[ClientSession, str]] = concurrent.futures.Future()
        loop = self._ensure_loop()
        self._holder = asyncio.run_coroutine_threadsafe(self._hold_session(ready), loop)
        try:
            self._session, self.server_name = ready.result(self.timeout_s)
        except concurrent.futures.TimeoutError:
            self._holder.cancel()
            raise TimeoutError(f"could not connect to the MCP server {self.target.describe()} "
                               f"within {self.timeout_s:g} s") from None

    async def _hold_session(self, ready: concurrent.futures.Future) -> None:
        # Enter and exit the transport in this one task (anyio cancel scopes demand it).
        self._stop = asyncio.Event()
        try:
            async with open_session(self.target, sampling_callback=self.sampling_callback) as opened:
                ready.set_result(opened)
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
                return
            raise

    def list_tools(self) -> list[types.Tool]:
        """Every tool the server offers (all pages)."""
        session = self._require_session()

        async def collect() -> list[types.Tool]:
            tools, cursor = [], None
            while True:
                page = await session.list_tools(cursor=cursor) if cursor else await session.list_tools()
                tools.extend(page.tools)
                cursor = page.nextCursor
                if not cursor:
                    return tools

        return self._run(collect())

    def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Call one tool; tool failures come back as a result with ``isError`` set."""
        return self._run(self._require_session().call_tool(name, arguments))

    def _require_session(self) -> ClientSession:
        if self._session is None:
            raise RuntimeError("no MCP session is open; call open() first")
        return self._session

    def close_session(self) -> None:
        """Close the open session, if any (the server process of a stdio target exits)."""
        if self._holder is None:
            return
        holder, stop = self._holder, self._stop
        self._holder = self._session = self._stop = None
        if stop is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(stop.set)
        try:
            holder.result(self.timeout_s)
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
            holder.cancel()
        except Exception:  # the session already failed; closing it must not fail too
            pass

    def close(self) -> None:
        """Close the session and stop the loop thread (safe to call twice)."""
        self.close_session()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(self.timeout_s)
            self._loop.close()
            self._loop = self._thread = None


def result_value(result: types.CallToolResult) -> Any:
    """A tool result as plain JSON: its structured content if any, else its content blocks
    (text as text, JSON text decoded; images and other binaries summarised by type and size)."""
    if result.structuredContent is not None:
        return result.structuredContent
    values = [_content_value(block) for block in result.content]
    return values[0] if len(values) == 1 else values


def _content_value(block: types.ContentBlock) -> Any:
    if isinstance(block, types.TextContent):
        try:
            return json.loads(block.text)
        except ValueError:
            return block.text
    if isinstance(block, (types.ImageContent, types.AudioContent)):
        return {"type": block.type, "mimeType": block.mimeType, "base64_chars": len(block.data)}
    return block.model_dump(mode="json", exclude_none=True)
