"""HTTP servers: a bearer token from --auth-token-file, required off loopback; Host headers checked."""

from __future__ import annotations

import json
import subprocess

import anyio
import httpx
import pytest

from gauntlet.bridges.http_security import check_bind, is_loopback
from gauntlet.bridges.server_process import serve_command, spawn_http_server
from gauntlet.errors import UserError

TOKEN = "s3cret-token-for-tests"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "0"}}}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    token_file = tmp_path_factory.mktemp("auth") / "token"
    token_file.write_text(TOKEN + "\n")
    with spawn_http_server("env:CartPole-v1", "--auth-token-file", str(token_file)) as server:
        yield server


def post_initialize(url: str, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(url, json=INITIALIZE, headers={**MCP_HEADERS, **headers}, timeout=30)


def test_a_request_without_a_token_gets_401_with_a_bearer_challenge(served):
    response = post_initialize(served.url, {})
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_a_request_with_a_wrong_token_gets_401_invalid_token(served):
    response = post_initialize(served.url, {"authorization": "Bearer not-the-token"})
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


def test_a_request_with_another_scheme_gets_401(served):
    response = post_initialize(served.url, {"authorization": f"Basic {TOKEN}"})
    assert response.status_code == 401


def test_a_client_with_the_right_token_gets_a_working_session(served):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def run():
        async with httpx.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}, timeout=30) as http, \
                streamable_http_client(served.url, http_client=http) as (read, write, _), \
                ClientSession(read, write) as session:
            await session.initialize()
            return [tool.name for tool in (await session.list_tools()).tools]

    assert "step" in anyio.run(run)


def test_the_right_token_with_a_foreign_host_header_is_refused(served):
    response = post_initialize(served.url, {"authorization": f"Bearer {TOKEN}", "host": "evil.example:80"})
    assert response.status_code in (400, 421)


def test_serving_http_off_loopback_without_a_token_exits_2_with_one_line():
    result = subprocess.run(serve_command("env:CartPole-v1", "--transport", "http", "--host", "0.0.0.0",
                                          "--port", "0"),
                            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--auth-token-file" in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_an_empty_token_file_is_refused_with_one_line(tmp_path):
    empty = tmp_path / "token"
    empty.write_text("\n")
    result = subprocess.run(serve_command("env:CartPole-v1", "--transport", "http", "--port", "0",
                                          "--auth-token-file", str(empty)),
                            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "one token" in result.stderr


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("127.3.4.5", True), ("::1", True),
                                            ("localhost", True), ("0.0.0.0", False), ("::", False),
                                            ("192.168.1.5", False), ("example.org", False)])
def test_only_loopback_addresses_count_as_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_check_bind_needs_a_token_only_off_loopback():
    check_bind("127.0.0.1", None)
    check_bind("0.0.0.0", TOKEN)
    with pytest.raises(UserError, match="--auth-token-file"):
        check_bind("0.0.0.0", None)


def test_an_allowed_host_is_accepted_besides_loopback():
    from gauntlet.bridges.http_security import security_settings

    settings = security_settings("0.0.0.0", ["gpu-box:8000"], ["https://app.example"])
    assert "gpu-box:8000" in settings.allowed_hosts and "0.0.0.0:*" not in settings.allowed_hosts
    assert "127.0.0.1:*" in settings.allowed_hosts and "https://app.example" in settings.allowed_origins
    assert json.loads(settings.model_dump_json())["enable_dns_rebinding_protection"] is True
