"""Every parameter of every tool of every server, as a client lists it, has a type and a description:
strict function-calling modes of hosted models reject a parameter without a type, and a model guesses
at one without a description."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp.shared.memory import create_connected_server_and_client_session as connect

from gauntlet.bridges.env_server import build_control_server, build_env_server
from gauntlet.bridges.tool_server import ToolServer


def disaster_server() -> ToolServer[Any]:
    from gauntlet.mcp_servers.disaster.server import load_tool_modules
    from gauntlet.mcp_servers.disaster.toolkit import TOOLS

    load_tool_modules()
    # Listing tools needs no state: the schemas come from the declarations alone.
    return ToolServer(TOOLS, None, name="disaster", instructions="listing only")


def chem_server() -> ToolServer[Any]:
    from gauntlet.mcp_servers.chem.server import TOOLS

    return ToolServer(TOOLS, None, name="chem", instructions="listing only")


SERVERS = {
    "disaster": disaster_server,
    "chem": chem_server,
    "env": lambda: build_env_server("CartPole-v1"),
    "env-continuous": lambda: build_env_server("MountainCarContinuous-v0", expose_reward=True),
    "env-control": lambda: build_control_server(build_env_server("CartPole-v1")),
}


def listed_schemas(server) -> dict[str, dict[str, Any]]:
    async def run():
        async with connect(server) as client:
            return {tool.name: tool.inputSchema for tool in (await client.list_tools()).tools}

    return anyio.run(run)


def typed(schema: dict[str, Any], definitions: dict[str, Any]) -> bool:
    """Whether a JSON schema states the type of its values (directly, by enum or const, through a
    reference, or in every branch of a union)."""
    if "type" in schema or "enum" in schema or "const" in schema:
        return True
    reference = schema.get("$ref")
    if isinstance(reference, str):
        return typed(definitions.get(reference.split("/")[-1], {}), definitions)
    branches = [branch for key in ("anyOf", "oneOf", "allOf") for branch in schema.get(key, [])]
    return bool(branches) and all(typed(branch, definitions) for branch in branches)


@pytest.mark.parametrize("name", sorted(SERVERS))
def test_every_parameter_of_every_tool_has_a_type_and_a_description(name):
    schemas = listed_schemas(SERVERS[name]())
    assert schemas
    undescribed, untyped = [], []
    for tool, schema in schemas.items():
        definitions = schema.get("$defs", {})
        for argument, property_schema in schema.get("properties", {}).items():
            if not str(property_schema.get("description", "")).strip():
                undescribed.append(f"{tool}.{argument}")
            if not typed(property_schema, definitions):
                untyped.append(f"{tool}.{argument}")
    assert not undescribed, f"parameters without a description: {undescribed}"
    assert not untyped, f"parameters without a type: {untyped}"


@pytest.mark.parametrize("name", sorted(SERVERS))
def test_every_tool_of_every_server_has_a_call_grammar(name):
    # The offline agent decodes its calls under the grammar of the offered tools: a tool without one
    # would stop an episode the moment tool scoping offered it (disaster's tool_loop did: list[Any]).
    from gauntlet.agents.llm.call_grammar import grammar_problem
    from gauntlet.agents.llm.calls import ToolSpec

    problems = [problem for tool, schema in listed_schemas(SERVERS[name]()).items()
                if (problem := grammar_problem([ToolSpec(tool, "", schema)])) is not None]
    assert problems == []
