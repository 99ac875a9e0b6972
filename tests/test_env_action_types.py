"""The env bridge takes an action only in the JSON kind its space encodes to: the string "0" or true is
not the integer 0 or 1, and a list of strings is not a Box element."""

from __future__ import annotations

import pytest
from mcp.shared.memory import create_connected_server_and_client_session as connect

from gauntlet.bridges.env_server import build_env_server


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.parametrize("action", ["0", "1", True, 0.0, {"a": 0}])
async def test_a_discrete_action_must_be_a_json_integer(action):
    async with connect(build_env_server("CartPole-v1")) as client:
        await client.call_tool("reset", {"seed": 0})
        result = await client.call_tool("step", {"action": action})
        assert result.isError
        text = result.content[0].text
        assert "JSON integer" in text and "Discrete(2)" in text
        assert not (await client.call_tool("step", {"action": 0})).isError


@pytest.mark.anyio
@pytest.mark.parametrize("action", [["0.5"], "0.5", [True]])
async def test_a_box_action_must_be_json_numbers(action):
    async with connect(build_env_server("MountainCarContinuous-v0")) as client:
        await client.call_tool("reset", {"seed": 0})
        result = await client.call_tool("step", {"action": action})
        assert result.isError and "JSON numbers" in result.content[0].text
        assert not (await client.call_tool("step", {"action": [0.5]})).isError
