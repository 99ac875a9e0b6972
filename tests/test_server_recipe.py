"""The server recipe: a bug in a tool is logged with its traceback and reaches the agent as "internal
error <id>" and nothing more; arguments the agent got wrong come back naming the argument and a
valid example; declaring a tool leaves the function as it was."""

from __future__ import annotations

import logging
import os
import re
import sys
import textwrap
from typing import Annotated

import pytest
from mcp.server.fastmcp.exceptions import ToolError
from mcp.shared.memory import create_connected_server_and_client_session as connect
from mcp.types import ImageContent, ToolAnnotations
from pydantic import BaseModel, Field

from gauntlet.bridges import mcp_compat
from gauntlet.bridges.env_server import build_env_server
from gauntlet.bridges.mcp_client import BlockingMCPClient, ServerTarget
from gauntlet.bridges.tool_errors import ToolInputError
from gauntlet.bridges.tool_server import ResultWithContent, ToolServer, ToolSet

READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
INTERNAL = re.compile(r"^internal error ([0-9a-f]{8})\b")


class OutOfStock(LookupError):
    """A domain error the tool set declares the agent's to fix."""


class Price(BaseModel):
    price_usd: float = Field(description="price of one pack")


class Shop:
    """The state every tool of the test server receives."""

    def __init__(self) -> None:
        self.prices = {"THF": 12.5}
        self.calls = 0


TOOLS = ToolSet[Shop](fixable=[OutOfStock])


@TOOLS.tool(READ_ONLY)
def price_of(shop: Shop,
             name: Annotated[str, Field(description="chemical name", examples=["THF"])],
             packs: Annotated[int, Field(ge=1, le=10, description="packs to buy")] = 1) -> Price:
    """Price of some packs of a chemical."""
    shop.calls += 1
    if name == "bug":  # the bug: a lookup the code assumed could not fail
        return Price(price_usd=shop.prices["/srv/shop/secret-price-list.csv"])
    if name == "bad model":  # a bug too, although pydantic raises it
        return Price(price_usd="not a number")  # type: ignore[arg-type]
    if name == "sold out":
        raise OutOfStock(f"{name} is out of stock; try THF")
    if name not in shop.prices:
        raise ToolInputError(f"no chemical {name!r}; try THF")
    return Price(price_usd=shop.prices[name] * packs)


@TOOLS.tool(READ_ONLY)
def raises_sdk_tool_error(shop: Shop) -> Price:
    """Refuse with the SDK's own error type."""
    raise ToolError("this tool refuses; call price_of")


def shop_server(shop: Shop | None = None) -> ToolServer[Shop]:
    return ToolServer(TOOLS, shop or Shop(), name="shop", instructions="Price chemicals.")


@pytest.fixture
def anyio_backend():
    return "asyncio"


def text_of(result) -> str:
    return " ".join(block.text for block in result.content)


# A bug -------------------------------------------------------------------------------------------
@pytest.mark.anyio
@pytest.mark.parametrize("name, raised", [("bug", "KeyError"), ("bad model", "ValidationError")])
async def test_a_bug_in_a_tool_is_logged_with_its_traceback_and_the_agent_sees_only_an_incident_id(
        caplog, name, raised):
    caplog.set_level(logging.INFO, logger="gauntlet.server.shop")
    async with connect(shop_server()) as client:
        result = await client.call_tool("price_of", {"name": name})
        after = await client.call_tool("price_of", {"name": "THF"})
    shown = text_of(result)
    incident = INTERNAL.match(shown)
    assert result.isError and incident, shown
    assert raised not in shown and "secret" not in shown and "/" not in shown and "Traceback" not in shown
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert record.name == "gauntlet.server.shop" and incident.group(1) in record.getMessage()
    assert "price_of" in record.getMessage()
    assert record.exc_info is not None and type(record.exc_info[1]).__name__ == raised
    assert "Traceback" in caplog.text and "in price_of" in caplog.text
    assert not after.isError and after.structuredContent == {"price_usd": 12.5}


@pytest.mark.anyio
async def test_two_bugs_get_two_incident_ids(caplog):
    async with connect(shop_server()) as client:
        first, second = [text_of(await client.call_tool("price_of", {"name": "bug"})) for _ in range(2)]
    assert INTERNAL.match(first).group(1) != INTERNAL.match(second).group(1)


# What the agent can fix --------------------------------------------------------------------------
@pytest.mark.anyio
@pytest.mark.parametrize("arguments, expected", [
    ({"name": "THF", "packs": 50}, ["argument 'packs' (packs to buy)", "less than or equal to 10", "got 50",
                                    'a valid example: {"packs": 1}']),
    ({"packs": 2}, ["argument 'name' (chemical name) is missing", 'a valid example: {"name": "THF"}']),
    ({"name": "THF", "packs": "two"}, ["argument 'packs'", "valid integer", 'a valid example: {"packs": 1}']),
    ({"chemical": "THF"}, ["argument 'name' (chemical name) is missing", "this tool takes no 'chemical'",
                           "its arguments: name, packs"]),
])
async def test_arguments_that_break_the_schema_come_back_naming_the_argument_and_a_valid_example(
        arguments, expected):
    shop = Shop()
    async with connect(shop_server(shop)) as client:
        result = await client.call_tool("price_of", arguments)
    shown = text_of(result)
    assert result.isError and shown.startswith("invalid arguments for price_of: ")
    assert all(part in shown for part in expected), shown
    assert "Error executing tool" not in shown and "pydantic" not in shown
    assert shop.calls == 0  # refused before the tool ran


@pytest.mark.anyio
@pytest.mark.parametrize("tool, arguments, message", [
    ("price_of", {"name": "xyzzy"}, "no chemical 'xyzzy'; try THF"),
    ("price_of", {"name": "sold out"}, "sold out is out of stock; try THF"),
    ("raises_sdk_tool_error", {}, "this tool refuses; call price_of"),
    ("no_such_tool", {}, "unknown tool 'no_such_tool'; this server has price_of, raises_sdk_tool_error"),
])
async def test_errors_the_agent_can_fix_come_back_with_their_own_message(caplog, tool, arguments, message):
    caplog.set_level(logging.INFO, logger="gauntlet.server.shop")
    async with connect(shop_server()) as client:
        result = await client.call_tool(tool, arguments)
    assert result.isError and text_of(result) == message
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any(message in r.getMessage() for r in caplog.records if r.levelno == logging.INFO)


@pytest.mark.anyio
async def test_fixable_messages_name_folders_by_their_public_names(tmp_path):
    secret = tmp_path / "srv" / "scenes"
    tools = ToolSet[str](fixable=[FileNotFoundError])

    @tools.tool(READ_ONLY)
    def read_layer(root: str, path: Annotated[str, Field(description="a 'data/...' path")]) -> Price:
        """Read a layer."""
        raise FileNotFoundError(f"{root}/{path} does not exist")

    server = ToolServer(tools, str(secret), name="layers", instructions="x", public_paths={secret: "data"})
    async with connect(server) as client:
        result = await client.call_tool("read_layer", {"path": "flood.tif"})
    assert text_of(result) == "data/flood.tif does not exist"


# Declaring ---------------------------------------------------------------------------------------
def test_declaring_a_tool_leaves_the_function_callable_with_its_state():
    assert price_of(Shop(), "THF", packs=2) == Price(price_usd=25.0)
    assert TOOLS["price_of"].fn is price_of and TOOLS["price_of"].state_parameter == "shop"


def test_a_tool_must_state_every_hint_and_have_a_description():
    tools = ToolSet[Shop]()
    with pytest.raises(ValueError, match="destructiveHint, idempotentHint, openWorldHint"):
        tools.add(price_of, ToolAnnotations(readOnlyHint=True))

    def undocumented(shop: Shop) -> Price:
        return Price(price_usd=0.0)

    with pytest.raises(ValueError, match="docstring"):
        tools.add(undocumented, READ_ONLY)


@pytest.mark.anyio
async def test_the_state_parameter_is_not_in_the_input_schema_and_outputs_keep_their_schema():
    async with connect(shop_server()) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    schema = tools["price_of"].inputSchema
    assert set(schema["properties"]) == {"name", "packs"} and schema["required"] == ["name"]
    assert schema["properties"]["name"]["examples"] == ["THF"]
    assert tools["price_of"].outputSchema["properties"]["price_usd"]["type"] == "number"
    assert tools["price_of"].annotations == READ_ONLY


class Sketch(ResultWithContent):
    caption: str = Field(description="what the sketch shows")


PNG_HEADER = "iVBORw0KGgo="  # base64 of the PNG signature: a stand-in for a picture


@pytest.mark.anyio
async def test_a_result_with_content_sends_its_blocks_after_the_text_and_keeps_them_out_of_the_structured_content():
    tools = ToolSet[str]()

    @tools.tool(READ_ONLY)
    def sketch(notes: str) -> Sketch:
        """Draw a sketch of the notes."""
        return Sketch(caption=notes).attach(ImageContent(type="image", data=PNG_HEADER, mimeType="image/png"))

    assert sketch("a dot").model_dump() == {"caption": "a dot"} and len(sketch("a dot").attached) == 1
    plain = ToolServer(tools, "a dot", name="sketches", instructions="Sketch.")
    # The attack views rewrite the structured content; the attached blocks still follow its text.
    rewritten = ToolServer(tools, "a dot", name="sketches", instructions="Sketch.",
                           rewrite_result=lambda name, arguments, structured: {**structured, "caption": "changed"})
    for server, caption in ((plain, "a dot"), (rewritten, "changed")):
        async with connect(server) as client:
            (listed,) = (await client.list_tools()).tools
            result = await client.call_tool("sketch", {})
        assert not result.isError and [block.type for block in result.content] == ["text", "image"]
        assert result.content[1].data == PNG_HEADER and result.content[1].mimeType == "image/png"
        assert result.structuredContent == {"caption": caption} and caption in result.content[0].text
        assert set(listed.outputSchema["properties"]) == {"caption"}


def test_outside_the_tested_sdk_range_servers_are_refused_and_the_speed_ups_skipped(monkeypatch):
    monkeypatch.setattr(mcp_compat, "sdk_version", lambda: (2, 0))
    monkeypatch.setattr(mcp_compat, "_warned", set())
    with pytest.warns(RuntimeWarning, match="outside the tested range"):
        with pytest.raises(mcp_compat.UnsupportedSDKError, match=r"need mcp>=1.27,<2, found mcp"):
            shop_server()
        session = object()
        assert mcp_compat.validate_once(session) is session  # left as the SDK made it


# Through `gauntlet serve` over stdio -------------------------------------------------------------
BUGGY_ENV = '''
import gymnasium as gym
import numpy as np
from gymnasium import spaces


class BuggyEnv(gym.Env):
    """Steps fail with a bug whose message holds a server path."""

    def __init__(self, render_mode=None):
        self.action_space = spaces.Discrete(2)
        self.observation_space = spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        calibration = {}
        return np.zeros(1, np.float32), calibration["/srv/secret/calibration.json"], False, False, {}


gym.register(id="GauntletTest/Buggy-v0", entry_point=BuggyEnv)
'''
# `gauntlet serve`, in a process where the env above is registered first.
SERVE_WITH_BUGGY_ENV = "import sys, buggy_env; from gauntlet.cli import main; main(sys.argv[1:])"


def test_over_stdio_a_bug_is_in_the_log_file_and_an_input_error_names_its_fix(tmp_path):
    (tmp_path / "buggy_env.py").write_text(textwrap.dedent(BUGGY_ENV))
    log_file = tmp_path / "server.log"
    command = [sys.executable, "-c", SERVE_WITH_BUGGY_ENV, "serve", "env:GauntletTest/Buggy-v0",
               "--log-level", "info", "--log-file", str(log_file)]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    client = BlockingMCPClient(ServerTarget(command=tuple(command), env=tuple(environment.items())), timeout_s=120)
    try:
        client.open()
        reset = client.call_tool("reset", {"seed": "seven"})
        client.call_tool("reset", {"seed": 7})
        bug = client.call_tool("step", {"action": 1})
        refused = client.call_tool("step", {"action": 5})
    finally:
        client.close()
    shown = text_of(bug)
    incident = INTERNAL.match(shown)
    assert bug.isError and incident, shown
    assert "KeyError" not in shown and "secret" not in shown and "/" not in shown
    assert reset.isError and "argument 'seed'" in text_of(reset) and '{"seed": 1}' in text_of(reset)
    assert refused.isError and "Discrete(2)" in text_of(refused)
    log = log_file.read_text()
    record = next(line for line in log.splitlines() if incident.group(1) in line)
    assert "ERROR gauntlet.server.gauntlet-env-GauntletTest/Buggy-v0" in record and "tool step" in record
    assert "Traceback (most recent call last)" in log
    assert "KeyError: '/srv/secret/calibration.json'" in log
    assert "INFO" in log and "invalid arguments for reset" in log


def test_the_env_bridge_chem_and_disaster_declare_their_tools_with_the_recipe():
    from gauntlet.bridges.env_server import CONTROL_TOOLS, build_control_server
    from gauntlet.mcp_servers.chem.server import TOOLS as CHEM_TOOLS
    from gauntlet.mcp_servers.disaster.server import load_tool_modules
    from gauntlet.mcp_servers.disaster.toolkit import TOOLS as DISASTER_TOOLS

    load_tool_modules()
    env = build_env_server("CartPole-v1")
    control = build_control_server(env)
    assert isinstance(env, ToolServer) and isinstance(control, ToolServer)
    assert env.tool_names == env.tool_set.names() == ["reset", "step", "render", "snapshot", "restore"]
    assert control.tool_names == CONTROL_TOOLS.names() == ["list_sessions", "session_summary"]
    assert {"search_chemical", "select_pack", "get_route"} <= set(CHEM_TOOLS.names())
    assert all(declared.state_parameter == "chem" for declared in CHEM_TOOLS if declared.name == "select_pack")
    assert len(DISASTER_TOOLS) >= 100 and all(declared.state_parameter == "ws" for declared in DISASTER_TOOLS)


# Building a server ---------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_servers_of_one_tool_set_share_the_derived_schemas_but_not_their_tools():
    """The argument model is derived once per declared function; each server gets a Tool of its own,
    and a server with other argument descriptions gets its own schema."""
    def tool_of(server: ToolServer[Shop]):
        return server._tool_manager.get_tool("price_of")

    first, second = shop_server(), shop_server(Shop())
    assert tool_of(first) is not tool_of(second)
    assert tool_of(first).parameters == tool_of(second).parameters
    assert tool_of(first).fn_metadata is tool_of(second).fn_metadata  # derived once
    declared = TOOLS["price_of"]
    described = mcp_compat.sdk_tool(declared.fn, name="price_of", description=declared.description,
                                    annotations=declared.annotations, state_parameter=declared.state_parameter,
                                    argument_descriptions={"name": "what to price"})
    assert described.parameters["properties"]["name"]["description"] == "what to price"
    assert tool_of(first).parameters["properties"]["name"]["description"] == "chemical name"
    with pytest.raises(ValueError, match="no argument 'colour'"):
        mcp_compat.sdk_tool(declared.fn, name="price_of", description=declared.description,
                            annotations=declared.annotations, state_parameter=declared.state_parameter,
                            argument_descriptions={"colour": "red"})
    async with connect(second) as client:  # a copy serves as the original did
        result = await client.call_tool("price_of", {"name": "THF", "packs": 2})
    assert not result.isError and result.structuredContent == {"price_usd": 25.0}
