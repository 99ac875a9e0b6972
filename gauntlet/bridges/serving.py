"""Run MCP servers until they are stopped: over stdio or streamable HTTP, an env server beside its
operator control server, and the whole of ``gauntlet serve`` as a library call (``run_target``).

HTTP binds 127.0.0.1 by default and serves MCP at ``/mcp``; once the port is bound the address is
announced on stderr as ``serving <name> at http://HOST:PORT/mcp`` (``port=0`` picks a free port).
Any other bind address needs a bearer token (``HTTPAccess``, ``gauntlet.bridges.http_security``).
SIGINT and SIGTERM stop every server of the process gracefully, so recordings get their outcome lines.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from mcp.server.fastmcp import FastMCP

from gauntlet.bridges.http_security import BearerTokenMiddleware, check_bind, read_token, security_settings
from gauntlet.bridges.mcp_compat import install_server_validation_cache
from gauntlet.bridges.ports import bind_port, http_url
from gauntlet.bridges.stdio import run_stdio
from gauntlet.bridges.targets import ENV_PREFIX, resolve_server
from gauntlet.errors import UserError

TRANSPORTS = ("stdio", "http")
GRACEFUL_SHUTDOWN_S = 3


@dataclass(frozen=True)
class HTTPAccess:
    """Who may use an HTTP server: ``token`` (a bearer token; None: no token, loopback only) and the
    Host and Origin header values accepted besides the loopback names and the bound address."""

    token: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()


def serve(server: FastMCP, transport: str = "stdio", host: str = "127.0.0.1", port: int = 8000,
          access: HTTPAccess = HTTPAccess()) -> None:
    """Run ``server`` until its client disconnects (stdio) or the process is interrupted (http)."""
    _check_transport(transport)
    install_server_validation_cache()
    if transport == "http":
        check_bind(host, access.token)
    sock = bind_port(host, port) if transport == "http" else None
    anyio.run(_serve_all, server, transport, sock, None, None, _Guard(host, access))


def serve_with_control(server: FastMCP, control: FastMCP, *, transport: str = "stdio",
                       host: str = "127.0.0.1", port: int = 8000, control_port: int = 8001,
                       access: HTTPAccess = HTTPAccess()) -> None:
    """Run an agent-facing ``server`` and the operator's ``control`` server (HTTP) in one process.

    Both ports are bound before either server starts; when one server stops, so does the other.
    ``access`` guards both HTTP servers.
    """
    _check_transport(transport)
    check_bind(host, access.token)
    sock = bind_port(host, port) if transport == "http" else None
    try:
        control_sock = bind_port(host, control_port, "--control-port")
    except OSError:
        if sock is not None:
            sock.close()
        raise
    anyio.run(_serve_all, server, transport, sock, control, control_sock, _Guard(host, access))


def run_target(target: str, *, transport: str = "stdio", host: str = "127.0.0.1", port: int = 8000,
               control_port: int | None = None, auth_token_file: str | os.PathLike[str] | None = None,
               allowed_hosts: Sequence[str] = (), allowed_origins: Sequence[str] = (), **options: Any) -> None:
    """Resolve ``target`` (``gauntlet.bridges.targets.resolve_server``, which ``options`` go to) and serve
    it until stopped: what ``gauntlet serve`` does.

    ``control_port`` also serves an env target's operator control server over HTTP. HTTP servers take
    the bearer token in ``auth_token_file`` (required unless ``host`` is loopback) and also accept the
    Host/Origin values in ``allowed_hosts``/``allowed_origins``. A stop (Ctrl-C or SIGTERM) ends every
    session's episode, so recordings get their outcome lines.
    """
    from gauntlet.bridges.env_server import EnvServer, build_control_server

    if transport != "http" and control_port is None and (auth_token_file is not None or allowed_hosts
                                                          or allowed_origins):
        raise UserError("--auth-token-file, --allowed-host and --allowed-origin apply to --transport http; "
                        "add --transport http or drop them")
    access = HTTPAccess(read_token(Path(auth_token_file)) if auth_token_file is not None else None,
                        tuple(allowed_hosts), tuple(allowed_origins))
    if transport == "http" or control_port is not None:
        check_bind(host, access.token)

    # Headless servers: MuJoCo renders through EGL unless the operator chose otherwise.
    if sys.platform.startswith("linux") and "DISPLAY" not in os.environ:
        os.environ.setdefault("MUJOCO_GL", "egl")
    server = resolve_server(target, **options)
    try:
        if control_port is None:
            serve(server, transport, host, port, access)
        elif isinstance(server, EnvServer):
            serve_with_control(server, build_control_server(server), transport=transport, host=host,
                               port=port, control_port=control_port, access=access)
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


@dataclass(frozen=True)
class _Guard:
    host: str
    access: HTTPAccess

    def app(self, server: FastMCP) -> Any:
        """``server``'s streamable HTTP app behind the Host/Origin checks and, with a token, the token check."""
        server.settings.transport_security = security_settings(self.host, self.access.allowed_hosts,
                                                               self.access.allowed_origins)
        app = server.streamable_http_app()
        return app if self.access.token is None else BearerTokenMiddleware(app, self.access.token)


async def _serve_all(server: FastMCP, transport: str, sock: socket.socket | None,
                     control: FastMCP | None, control_sock: socket.socket | None, guard: _Guard) -> None:
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
        config = uvicorn.Config(guard.app(app_server), log_level="warning", lifespan="on",
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
