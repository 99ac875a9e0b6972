"""One disaster server, many client sessions: each writes into its own workspace; the scenes are shared."""

from __future__ import annotations

import json

import anyio
from mcp.shared.memory import create_connected_server_and_client_session

from gauntlet.bridges.server_process import spawn_http_server
from gauntlet.mcp_servers.disaster.server import build_server

IMAGE = "data/ahr-2021-flood/post_optical.tif"


def error_text(result) -> str:
    assert result.isError
    return " ".join(block.text for block in result.content)


async def two_sessions_over_http(url: str) -> dict:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    seen: dict = {}
    async with streamable_http_client(url) as (read_a, write_a, _), ClientSession(read_a, write_a) as a, \
            streamable_http_client(url) as (read_b, write_b, _), ClientSession(read_b, write_b) as b:
        await a.initialize()
        await b.initialize()
        written = await a.call_tool("seg_water_ndwi", {"image": IMAGE})
        assert not written.isError, written.content
        mask = written.structuredContent["path"]
        seen["mask"] = mask
        seen["a_reads_its_mask"] = await a.call_tool("mask_fraction", {"mask": mask})
        seen["b_reads_a_mask"] = await b.call_tool("mask_fraction", {"mask": mask})
        seen["a_reads_scene"] = await a.call_tool("ras_info", {"image": IMAGE})
        seen["b_reads_scene"] = await b.call_tool("ras_info", {"image": IMAGE})
        seen["b_writes_its_own"] = await b.call_tool("seg_water_ndwi", {"image": IMAGE})
        mask_b = seen["b_writes_its_own"].structuredContent["path"]
        seen["b_reads_its_mask"] = await b.call_tool("mask_fraction", {"mask": mask_b})
    return seen


def test_a_session_cannot_read_another_sessions_artefact_over_http_but_both_read_the_scenes(scenes_root):
    options = json.dumps({"families": ["seg", "mask", "ras"], "data_root": str(scenes_root / "scenes")})
    with spawn_http_server("disaster", "--server-kwargs", options) as served:
        seen = anyio.run(two_sessions_over_http, served.url)

    assert seen["mask"].startswith("ws/")
    assert not seen["a_reads_its_mask"].isError
    refused = error_text(seen["b_reads_a_mask"])
    assert "does not exist" in refused
    assert str(scenes_root) not in refused and "disaster-workspaces" not in refused
    assert not seen["a_reads_scene"].isError and not seen["b_reads_scene"].isError
    assert seen["a_reads_scene"].structuredContent == seen["b_reads_scene"].structuredContent
    # B's own artefacts work for B: the refusal is isolation, not a broken workspace.
    assert not seen["b_reads_its_mask"].isError


def test_in_process_sessions_share_the_servers_workspace(scenes_root, tmp_path):
    # One program's steps (task building, tests) pass artefacts from one in-process session to the next.
    server = build_server(scenes_root / "scenes", families=["seg", "mask"], workspace_dir=tmp_path / "ws")

    async def write() -> str:
        async with create_connected_server_and_client_session(server) as session:
            return (await session.call_tool("seg_water_ndwi", {"image": IMAGE})).structuredContent["path"]

    async def read(mask: str):
        async with create_connected_server_and_client_session(server) as session:
            return await session.call_tool("mask_fraction", {"mask": mask})

    mask = anyio.run(write)
    assert not anyio.run(read, mask).isError
    assert [p.name for p in server.state.workspace_dir.iterdir()] == [mask.removeprefix("ws/")]
