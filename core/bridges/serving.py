"""Serve MCP servers over stdio or streamable HTTP, and find a server by name.

``resolve_server("env:CartPole-v1", expose_reward=True)`` builds the env bridge server for any
Gymnasium env id; any other target is a server registered with the Gauntlet registry (kind
``server``, whose entry loads a zero-argument factory returning a FastMCP). ``serve`` runs one
server; ``serve_with_control`` also runs an env server's operator control server on a second HTTP
port in the same process. HTTP binds 127.0.0.1 by default and serves MCP at ``/mcp``.

From a shell::

    python -m gauntlet.bridges.serving env:CartPole-v1                       # stdio
    python -m gauntlet.bridges.serving env:CartPole-v1 --transport http --port 8000 --control-port 8001

The HTTP address (``http://HOST:PORT/mcp``) is printed to stderr once the port is bound; ``--port 0``
picks a free port.
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import contextlib
import errno
import inspect
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import uvicorn
from mcp.server.fastmcp import FastMCP

from gauntlet.bridges.validation import install_server_validation_cache

TRANSPORTS = ("stdio", "http")
GRACEFUL_SHUTDOWN_S = 3.0
ENV_PREFIX = "env:"


class PortInUseError(OSError):
    """The HTTP port asked for is taken by another process."""

    def __init__(self, host: str, port: int, option: str = "--port"):
        super().__init__(f"port {port} on {host} is in use; pick another with {option}")
        self.errno = errno.EADDRINUSE
        self.host, self.port = host, port


def resolve_server(target: str, **options: Any) -> FastMCP:
    """The FastMCP server that ``target`` names: ``env:<ENV_ID>`` or a registered server name.

    For ``env:`` targets ``options`` are ``build_env_server``'s keyword arguments (``env_kwargs``,
    ``expose_reward``, ``expose_privileged``, ``record``). A registered server's factory takes no
    arguments unless it declares them; options left unset (None, False, empty) are ignored, and any
    other option it does not declare is an error.
    """
    if target.startswith(ENV_PREFIX):
        from gauntlet.bridges.env_server import build_env_server

        env_id = target[len(ENV_PREFIX):]
        if not env_id:
            raise ValueError("empty env id: write env:<ENV_ID>, e.g. env:CartPole-v1")
        return build_env_server(env_id, **options)
    from gauntlet.registry import UnknownEntryError, registry

    try:
        entry = registry.get("server", target)
    except UnknownEntryError as exc:
        raise UnknownEntryError(f"{exc}; to serve a Gymnasium env write env:<ENV_ID>") from None
    factory = entry.load()
    requested = {key: value for key, value in options.items() if value}
    accepted = inspect.signature(factory).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())
    unsupported = sorted(key for key in requested if key not in accepted and not takes_any)
    if unsupported:
        raise ValueError(f"server {target!r} does not take {', '.join(unsupported)} "
                         f"(those options are for {ENV_PREFIX}<ENV_ID> targets)")
    server = factory(**requested)
    if not isinstance(server, FastMCP):
        raise TypeError(f"server {target!r}: its factory {entry.target} returned "
                        f"{type(server).__name__}, not a FastMCP server")
    return server


def bind_port(host: str, port: int, option: str = "--port") -> socket.socket:
    """A socket bound to ``host:port``, ready for the HTTP server; ``PortInUseError`` if taken.

    Binding here, before serving, is the check: there is no window in which another process can
    take the port between a check and the bind.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    # The same option uvicorn uses, so a port in TIME_WAIT after a restart counts as free.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        # Listening now means a client that connects as soon as the URL is announced waits in the
        # backlog instead of being refused while the HTTP server is still starting.
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUseError(host, port, option) from None
        raise
    return sock


def http_url(sock: socket.socket, path: str = "/mcp") -> str:
    host, port = sock.getsockname()[:2]
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}{path}"


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

    async def run_stdio() -> None:
        with stdio_scope:
            await _run_stdio(server)

    def http_runner(app_server: FastMCP, app_sock: socket.socket, note: str) -> Callable[[], Awaitable[None]]:
        # Clients hold SSE streams open indefinitely; on a stop, requests in flight get a moment
        # to finish, then the remaining connections are closed.
        config = uvicorn.Config(app_server.streamable_http_app(), log_level="warning", lifespan="on",
                                timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S)
        http = _HTTPServer(config)
        http_servers.append(http)
        print(f"serving {app_server.name}{note} at {http_url(app_sock)}", file=sys.stderr, flush=True)
        return lambda: http.serve(sockets=[app_sock])

    runs = [run_stdio if transport == "stdio" else http_runner(server, sock, "")]
    if control is not None:
        runs.append(http_runner(control, control_sock, " (operator only)"))
    async with anyio.create_task_group() as watchers:
        # SIGINT/SIGTERM stop every server gracefully, so recordings get their outcome lines.
        if threading.current_thread() is threading.main_thread():
            watchers.start_soon(_stop_on_signal, stop_all)
        async with anyio.create_task_group() as group:
            for run in runs:
                group.start_soon(run_then_stop_all, run)
        watchers.cancel_scope.cancel()


async def _run_stdio(server: FastMCP) -> None:
    """``server.run_stdio_async()``, reading stdin in a daemon thread so that a stop signal ends
    the server even while its client keeps stdin open (the SDK's reader thread would hold the
    process until stdin closes)."""
    from mcp.server.stdio import stdio_server

    stdin = _StdinLines(sys.stdin.fileno())
    async with stdio_server(stdin=stdin) as (read_stream, write_stream):
        # The SDK's own in-memory transport runs the low-level server the same way.
        low_level = server._mcp_server
        await low_level.run(read_stream, write_stream, low_level.create_initialization_options())


class _StdinLines:
    """The lines of a file descriptor as an async iterator, read by a daemon thread.

    The thread reads the raw descriptor (``os.read``), not ``sys.stdin``: a daemon thread blocked
    inside a buffered reader would abort the interpreter at exit.
    """

    def __init__(self, fd: int):
        self._fd = fd
        self._queue: asyncio.Queue[str | None] | None = None

    def __aiter__(self) -> _StdinLines:
        return self

    async def __anext__(self) -> str:
        if self._queue is None:
            self._queue = asyncio.Queue()
            threading.Thread(target=self._pump, args=(asyncio.get_running_loop(), self._queue),
                             name="gauntlet-stdin", daemon=True).start()
        line = await self._queue.get()
        if line is None:
            raise StopAsyncIteration
        return line

    def _pump(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pending = ""
        try:
            while chunk := os.read(self._fd, 1 << 16):
                *lines, pending = (pending + decoder.decode(chunk)).split("\n")
                for line in lines:
                    loop.call_soon_threadsafe(queue.put_nowait, line + "\n")
            pending += decoder.decode(b"", final=True)
            if pending:
                loop.call_soon_threadsafe(queue.put_nowait, pending)
            loop.call_soon_threadsafe(queue.put_nowait, None)
        except (OSError, RuntimeError):  # stdin or the loop has closed: nobody wants the input
            return


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


@dataclass
class ServerProcess:
    """A server running in a child process (see ``spawn_http_server``)."""

    process: subprocess.Popen[str]
    url: str
    control_url: str | None = None


@contextlib.contextmanager
def spawn_http_server(target: str, *options: str, startup_timeout_s: float = 60.0) -> Iterator[ServerProcess]:
    """Serve ``target`` over HTTP from a child process on free ports; yields its URLs, stops it after.

    Runs ``python -m gauntlet.bridges.serving TARGET --transport http --port 0 OPTIONS`` (add
    ``--control-port 0`` to ``options`` for a control URL) and reads the URLs it prints.
    """
    command = [sys.executable, "-m", "gauntlet.bridges.serving", target, "--transport", "http", "--port", "0",
               *options]
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    urls: dict[str, str] = {}
    lines: list[str] = []
    wants_control = "--control-port" in options
    found = threading.Event()

    def read_stderr() -> None:
        # Keep draining stderr for the child's whole life, so a chatty child never blocks on a full pipe.
        for line in process.stderr:
            lines.append(line.rstrip())
            match = _SERVING_LINE.match(line)
            if match:
                urls["control" if match.group("operator") else "main"] = match.group("url")
                if "main" in urls and ("control" in urls or not wants_control):
                    found.set()
        found.set()

    threading.Thread(target=read_stderr, name="gauntlet-server-stderr", daemon=True).start()
    try:
        if not found.wait(startup_timeout_s) or "main" not in urls:
            raise RuntimeError(f"{' '.join(command)} did not start: " + (" | ".join(lines[-5:]) or "no output"))
        yield ServerProcess(process=process, url=urls["main"], control_url=urls.get("control"))
    finally:
        process.terminate()
        try:
            process.wait(startup_timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


_SERVING_LINE = re.compile(r"serving \S+(?P<operator> \(operator only\))? at (?P<url>http://\S+)")


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m gauntlet.bridges.serving",
        description="Serve a Gauntlet MCP server: env:<ENV_ID> (any Gymnasium env) or a registered server name.")
    parser.add_argument("target", help="env:<ENV_ID>, e.g. env:CartPole-v1, or a registered server name")
    parser.add_argument("--transport", choices=TRANSPORTS, default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="HTTP port (0 picks a free one)")
    parser.add_argument("--control-port", type=int, default=None,
                        help="env targets: also serve the operator control server over HTTP on this port")
    parser.add_argument("--expose-reward", action="store_true", help="env targets: show rewards to the agent")
    parser.add_argument("--expose-privileged", action="store_true",
                        help="env targets: show info['privileged'] to the agent")
    parser.add_argument("--record", default=None, help="env targets: folder for the operator's Episode JSONL")
    return parser.parse_args(argv)


def run_target(target: str, *, transport: str = "stdio", host: str = "127.0.0.1", port: int = 8000,
               control_port: int | None = None, **options: Any) -> None:
    """Resolve ``target`` (see ``resolve_server``) and serve it until stopped; the one way both
    ``gauntlet serve`` and ``python -m gauntlet.bridges.serving`` run a server.

    ``control_port`` also serves an env target's operator control server over HTTP. A stop (Ctrl-C
    or SIGTERM) ends every session's episode, so recordings get their outcome lines.
    """
    # Headless servers: MuJoCo renders through EGL unless the operator chose otherwise.
    if sys.platform.startswith("linux") and "DISPLAY" not in os.environ:
        os.environ.setdefault("MUJOCO_GL", "egl")
    from gauntlet.bridges.env_server import EnvServer, build_control_server

    server = resolve_server(target, **options)
    try:
        if control_port is None:
            serve(server, transport, host, port)
        elif isinstance(server, EnvServer):
            serve_with_control(server, build_control_server(server), transport=transport, host=host,
                               port=port, control_port=control_port)
        else:
            raise ValueError(f"--control-port applies to {ENV_PREFIX}<ENV_ID> targets, not {target!r}")
    except KeyboardInterrupt:
        pass
    finally:
        control = getattr(server, "control", None)
        if control is not None:
            control.close()


def main(argv: list[str] | None = None) -> None:
    """Command-line entry: parse, then ``run_target``; errors are one line on stderr and exit status 1."""
    args = _parse_args(argv)
    import gymnasium as gym

    from gauntlet.registry import UnknownEntryError

    try:
        run_target(args.target, transport=args.transport, host=args.host, port=args.port,
                   control_port=args.control_port, expose_reward=args.expose_reward,
                   expose_privileged=args.expose_privileged, record=args.record)
    except (OSError, ValueError, TypeError, UnknownEntryError, gym.error.Error) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
