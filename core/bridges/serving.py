"""Run MCP servers until they are stopped: over stdio or streamable HTTP, an env server beside its
operator control server, and the whole of ``gauntlet serve`` as a library call (``run_target``).

HTTP binds 127.0.0.1 by default and serves MCP at ``/mcp``; once the port is bound the address is
announced on stderr as ``serving <name> at http://HOST:PORT/mcp`` (``port=0`` picks a free port).
SIGINT and SIGTERM stop every server of the process gracefully, so recordings get their outcome lines.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import uvicorn
from mcp.server.fastmcp import FastMCP

from gauntlet.bridges.mcp_compat import install_server_validation_cache
from gauntlet.bridges.ports import bind_port, http_url
from gauntlet.bridges.stdio import run_stdio
from gauntlet.bridges.targets import ENV_PREFIX, resolve_server
from gauntlet.errors import UserError

TRANSPORTS = ("stdio", "http")
GRACEFUL_SHUTDOWN_S = 3


def serve(server: FastMCP, transport: str = "stdio", host: str = "127.0.0.1", port: int = 8000) -> None:
    """Run ``server`` until its client disconnects (stdio) or the process is interrupted (http)."""
    _check_transport(transport)
    install_server_validation_cache()
    sock = bind_port(host, port) if transport == "http" else None
    anyio.run(_serve_all, server, transport, sock, None, None)


def serve_with_control(server: FastMCP, control: FastMCP, *, transport: str = "stdio",
                       host: str = "127.0.0.1", port: int = 8000, control_port: int = 8001) -> None:
    """Run an agent-facing ``server`` and the operator's ``control`` server (HTTP) in one process.

    Both ports are bound before either server starts; when one server stops, so does the other.
    """
    _check_transport(transport)
    sock = bind_port(host, port) if transport == "http" else None
    try:
        control_sock = bind_port(host, control_port, "--control-port")
    except OSError:
        if sock is not None:
            sock.close()
        raise
    anyio.run(_serve_all, server, transport, sock, control, control_sock)


def run_target(target: str, *, transport: str = "stdio", host: str = "127.0.0.1", port: int = 8000,
               control_port: int | None = None, **options: Any) -> None:
    """Resolve ``target`` (``gauntlet.bridges.targets.resolve_server``, which ``options`` go to) and serve
    it until stopped: what ``gauntlet serve`` does.

    ``control_port`` also serves an env target's operator control server over HTTP. A stop (Ctrl-C
    or SIGTERM) ends every session's episode, so recordings get their outcome lines.
    """
    from gauntlet.bridges.env_server import EnvServer, build_control_server

    # Headless servers: MuJoCo renders through EGL unless the operator chose otherwise.
    if sys.platform.startswith("linux") and "DISPLAY" not in os.environ:
        os.environ.setdefault("MUJOCO_GL", "egl")
    server = resolve_server(target, **options)
    try:
        if control_port is None:
            serve(server, transport, host, port)
        elif isinstance(server, EnvServer):
            serve_with_control(server, build_control_server(server), transport=transport, host=host,
                               port=port, control_port=control_port)
        else:
            raise UserError(f"--control-port applies to {ENV_PREFIX}<ENV_ID> targets, not {target!r}; "
                            "drop --control-port")
    except KeyboardInterrupt:
        pass
    finally:
        if isinstance(server, EnvServer):
            server.control.close()


def _check_transport(transport: str) -> None:
    if transport not in TRANSPORTS:
        raise ValueError(f"unknown transport {transport!r}; expected one of {', '.join(TRANSPORTS)}")


async def _serve_all(server: FastMCP, transport: str, sock: socket.socket | None,
                     control: FastMCP | None, control_sock: socket.socket | None) -> None:
    http_servers: list[_HTTPServer] = []
    stdio_scope = anyio.CancelScope()

    def stop_all() -> None:
        for http in http_servers:
            http.should_exit = True
        # A stdio server otherwise stops only when its client hangs up.
        stdio_scope.cancel()

    async def run_then_stop_all(run: Callable[[], Awaitable[None]]) -> None:
        await run()
        stop_all()

    async def run_stdio_until_stopped() -> None:
        with stdio_scope:
            await run_stdio(server)

    def http_runner(app_server: FastMCP, app_sock: socket.socket, note: str) -> Callable[[], Awaitable[None]]:
        # Clients hold SSE streams open indefinitely; on a stop, requests in flight get a moment
        # to finish, then the remaining connections are closed.
        config = uvicorn.Config(app_server.streamable_http_app(), log_level="warning", lifespan="on",
                                timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S)
        http = _HTTPServer(config)
        http_servers.append(http)
        print(f"serving {app_server.name}{note} at {http_url(app_sock)}", file=sys.stderr, flush=True)
        return lambda: http.serve(sockets=[app_sock])

    runs = [run_stdio_until_stopped if sock is None else http_runner(server, sock, "")]
    if control is not None and control_sock is not None:
        runs.append(http_runner(control, control_sock, " (operator only)"))
    async with anyio.create_task_group() as watchers:
        if threading.current_thread() is threading.main_thread():
            watchers.start_soon(_stop_on_signal, stop_all)
        async with anyio.create_task_group() as group:
            for run in runs:
                group.start_soon(run_then_stop_all, run)
        watchers.cancel_scope.cancel()


async def _stop_on_signal(stop_all: Callable[[], None]) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            stop_all()
            return


class _HTTPServer(uvicorn.Server):
    """uvicorn, minus its own signal handling: ``_serve_all`` stops every server on one signal."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
