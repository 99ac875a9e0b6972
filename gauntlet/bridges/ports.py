"""The HTTP port a server listens on: bound before serving, so "in use" is an error at once, not a race."""

from __future__ import annotations

import errno
import socket


class PortInUseError(OSError):
    """The HTTP port asked for is taken by another process."""

    def __init__(self, host: str, port: int, option: str = "--port"):
        super().__init__(f"port {port} on {host} is in use; pick another with {option}")
        self.errno = errno.EADDRINUSE
        self.host, self.port = host, port


def bind_port(host: str, port: int, option: str = "--port") -> socket.socket:
    """A socket bound to ``host:port``, ready for the HTTP server; ``PortInUseError`` if taken.

    Binding here, before serving, is the check: there is no window in which another process can
    take the port between a check and the bind. ``option`` names the command-line option the
    message tells the user to change.
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
    """The URL a client reaches a server on ``sock`` at."""
    host, port = sock.getsockname()[:2]
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}{path}"
