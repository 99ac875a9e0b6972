"""Who may talk to an HTTP server: a bearer token, and the Host and Origin headers it accepts.

A server bound to a loopback address is reachable only from this machine; one bound to any other
address must have a token (``--auth-token-file``), or ``check_bind`` refuses to start it. Requests
without the token, or with another one, get ``401`` with ``WWW-Authenticate: Bearer`` (RFC 6750, as
the MCP authorization spec asks of a resource server). Host and Origin are checked by the MCP SDK's
own DNS-rebinding protection (``TransportSecuritySettings``), with the loopback names always allowed.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
from collections.abc import Sequence
from pathlib import Path

from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from gauntlet.errors import UserError

LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")
LOOPBACK_ORIGINS = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to serve on a non-loopback address without a token."""
    if token is None and not is_loopback(host):
        raise UserError(f"--host {host} makes the server reachable from other machines; give it a bearer token "
                        "with --auth-token-file FILE, or bind 127.0.0.1")


def read_token(path: str | os.PathLike[str]) -> str:
    """The bearer token in the file ``path`` (surrounding whitespace ignored)."""
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read --auth-token-file {os.fspath(path)}: "
                        f"{getattr(exc, 'strerror', None) or exc}; give a readable UTF-8 text file") from None
    if not token or any(ch.isspace() for ch in token):
        raise UserError(f"--auth-token-file {os.fspath(path)} must hold one token without spaces, "
                        "e.g. the output of: python -c 'import secrets; print(secrets.token_urlsafe(32))'")
    return token


def security_settings(bind_host: str, allowed_hosts: Sequence[str] = (),
                      allowed_origins: Sequence[str] = ()) -> TransportSecuritySettings:
    """Host/Origin checks: the loopback names, the address bound (unless a wildcard), and those given."""
    hosts = list(LOOPBACK_HOSTS)
    origins = list(LOOPBACK_ORIGINS)
    if not is_loopback(bind_host) and not _is_wildcard(bind_host):
        shown = f"[{bind_host}]" if ":" in bind_host else bind_host
        hosts.append(f"{shown}:*")
        origins.append(f"http://{shown}:*")
    return TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                     allowed_hosts=[*hosts, *allowed_hosts],
                                     allowed_origins=[*origins, *allowed_origins])


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


class BearerTokenMiddleware:
    """ASGI middleware: HTTP requests must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str):
        self.app = app
        self._token = token.encode("utf-8")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan events carry no credentials
            await self.app(scope, receive, send)
            return
        scheme, _, credentials = Headers(scope=scope).get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not credentials.strip():
            await _unauthorized(send, 'Bearer realm="gauntlet"', "a bearer token is required")
            return
        # Constant-time, so the response time does not tell how much of a guess was right.
        if not hmac.compare_digest(credentials.strip().encode("utf-8"), self._token):
            await _unauthorized(send, 'Bearer realm="gauntlet", error="invalid_token"', "the bearer token is wrong")
            return
        await self.app(scope, receive, send)


async def _unauthorized(send: Send, challenge: str, description: str) -> None:
    body = json.dumps({"error": "invalid_token" if "invalid_token" in challenge else "unauthorized",
                       "error_description": description}).encode("utf-8")
    await send({"type": "http.response.start", "status": 401,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"www-authenticate", challenge.encode("ascii"))]})
    await send({"type": "http.response.body", "body": body})
