"""The MCP server through real client sessions: schemas, families, JSON-string arguments, bad input."""

from __future__ import annotations

import json

import anyio
import pytest
from mcp.shared.memory import create_connected_server_and_client_session

from gauntlet.bridges.server_process import serve_command, spawn_http_server
from gauntlet.errors import UserError
from tests.disaster.helpers import call_all, error_text
from gauntlet.mcp_servers.disaster.server import build_server, tool_specs
from gauntlet.mcp_servers.disaster.toolkit import FAMILIES

EVENT = "data/ahr-2021-flood"




def list_tools(server):
    async def run():
        async with create_connected_server_and_client_session(server) as session:
            return (await session.list_tools()).tools

    return anyio.run(run)




@pytest.fixture
def server(scenes_root, tmp_path):
    return build_server(scenes_root / "scenes", workspace_dir=tmp_path / "ws")


def test_server_offers_over_100_tools_with_output_schemas_and_truthful_annotations(server):
    tools = list_tools(server)
    assert len(tools) >= 100
    specs = {spec.name: spec for spec in tool_specs()}
    for tool in tools:
        assert tool.name.split("_")[0] in FAMILIES
        assert tool.outputSchema is not None, tool.name
        assert tool.description and len(tool.description) > 20, tool.name
        assert tool.annotations == specs[tool.name].annotations, tool.name
        assert tool.annotations.openWorldHint is False
    # A tool that writes a file says so; one that only reads says that.
    assert specs["seg_water_ndwi"].annotations.readOnlyHint is False and specs["ras_info"].annotations.readOnlyHint


def test_the_served_tools_are_the_recipe_declarations_family_by_family(server):
    listed = list_tools(server)
    assert [tool.name for tool in listed] == [spec.name for spec in tool_specs()]
    assert all("ws" not in tool.inputSchema.get("properties", {}) for tool in listed)


def test_families_select_a_subset(scenes_root, tmp_path):
    tools = list_tools(build_server(scenes_root / "scenes", families=["calc", "logi"], workspace_dir=tmp_path))
    assert tools and {t.name.split("_")[0] for t in tools} == {"calc", "logi"}
    with pytest.raises(UserError, match="unknown tool families"):
        build_server(scenes_root / "scenes", families=["nope"], workspace_dir=tmp_path)


def test_flood_pipeline_round_trip_matches_the_domain_functions(server, scenes_root):
    import numpy as np

    from gauntlet.mcp_servers.disaster import perception

    pre, post = call_all(server, [("seg_water_ndwi", {"image": f"{EVENT}/pre_optical.tif"}),
                                  ("seg_water_ndwi", {"image": f"{EVENT}/post_optical.tif"})])
    (extent,) = call_all(server, [
        ("seg_flood_extent", {"pre_water": pre.structuredContent["path"],
                              "post_water": post.structuredContent["path"]})])
    assert not extent.isError
    folder = scenes_root / "scenes" / "ahr-2021-flood"
    expected = perception.flood_extent(perception.water_ndwi(folder / "pre_optical.tif"),
                                       perception.water_ndwi(folder / "post_optical.tif"))
    assert extent.structuredContent["pixel_count"] == int(np.count_nonzero(expected.data))
    assert extent.structuredContent["area_m2"] == pytest.approx(np.count_nonzero(expected.data) * 6.25)
    assert extent.structuredContent["crs"] == "EPSG:32632"


def test_list_arguments_may_arrive_as_json_strings(server):
    as_list, as_text = call_all(server, [("calc_sum", {"values": [1, 2, 3.5]}),
                                         ("calc_sum", {"values": "[1, 2, 3.5]"})])
    assert as_list.structuredContent == as_text.structuredContent == {"value": 6.5, "unit": ""}
    (stats,) = call_all(server, [("ras_zonal_stats", {"image": f"{EVENT}/population.tif",
                                                      "zones": f"{EVENT}/admin.geojson", "id_field": "name"})])
    assert stats.structuredContent["count"] == 4


def test_tool_loop_maps_a_tool_over_earlier_outputs_and_tool_reduce_combines(server):
    results = call_all(server, [
        ("seg_water_mndwi", {"image": f"{EVENT}/pre_s2.tif"}), ("seg_water_mndwi", {"image": f"{EVENT}/post_s2.tif"})])
    paths = [r.structuredContent["path"] for r in results]
    (loop,) = call_all(server, [("tool_loop", {"tool_name": "ras_area_m2", "items": paths, "item_arg": "mask"})])
    areas = [item["value"] for item in loop.structuredContent["items"]]
    assert areas == [r.structuredContent["area_m2"] for r in results]
    (total,) = call_all(server, [("tool_reduce", {"values": loop.structuredContent["items"], "op": "sum",
                                                  "field": "value"})])
    assert total.structuredContent["value"] == pytest.approx(sum(areas))


@pytest.mark.parametrize("name, args, message", [
    ("ras_info", {"image": "../../../etc/passwd"}, "neither under"),
    ("ras_info", {"image": "/etc/passwd"}, "outside"),
    ("ras_info", {"image": "data/../truth/ahr-2021-flood/hazard_mask.tif"}, "outside"),
    ("ras_band_stats", {"image": f"{EVENT}/post_s2.tif", "band": "B99"}, "no band named"),
    ("ras_band_stats", {"image": f"{EVENT}/dem.tif", "window": [0, 0, 0, 5]}, "empty"),
    ("ras_vectorize", {"mask": "EMPTY"}, "empty"),
    ("vec_from_geojson", {"geojson": {"type": "FeatureCollection",
                                      "features": [{"geometry": {"type": "Polygon", "coordinates": [[0, 1]]}}]}},
     "invalid geometry"),
    ("vec_buffer", {"layer": f"{EVENT}/manifest.json", "distance_m": 10}, "not a GeoJSON"),
    ("calc_divide", {"a": 1, "b": 0}, "zero"),
    ("tool_loop", {"tool_name": "tool_loop", "items": [1], "item_arg": "x"}, "cannot call"),
])
def test_bad_input_is_a_tool_error_and_the_server_stays_up(server, name, args, message):
    if args.get("mask") == "EMPTY":
        (empty,) = call_all(server, [("ras_threshold", {"image": f"{EVENT}/dem.tif", "op": "<", "value": -1e9})])
        args = {"mask": empty.structuredContent["path"]}
    bad, after = call_all(server, [(name, args), ("calc_add", {"a": 1, "b": 2})])
    assert message in error_text(bad)
    assert after.structuredContent["value"] == 3


def test_rasters_on_different_crs_are_refused_through_mcp(server, scenes_root):
    (projected,) = call_all(server, [("ras_reproject", {"image": f"{EVENT}/dem.tif", "epsg": 4326})])
    (bad,) = call_all(server, [("ras_difference", {"image_a": f"{EVENT}/dem.tif",
                                                   "image_b": projected.structuredContent["path"]})])
    assert "different CRS" in error_text(bad)


def test_nothing_is_written_outside_the_workspace(server, scenes_root, tmp_path):
    before = sorted(p for p in scenes_root.rglob("*"))
    call_all(server, [("seg_water_ndwi", {"image": f"{EVENT}/post_optical.tif"}),
                      ("ras_slope", {"image": "x"}), ("ras_slope", {"dem": f"{EVENT}/dem.tif"})])
    assert sorted(p for p in scenes_root.rglob("*")) == before
    written = list((tmp_path / "ws").iterdir())
    assert len(written) == 2 and all(p.name.split("-")[0] in ("water", "slope") for p in written)


def test_stdio_transport_serves_the_selected_families(scenes_root):
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    command = serve_command("disaster", "--server-kwargs",
                            json.dumps({"families": ["calc"], "data_root": str(scenes_root / "scenes")}))
    params = StdioServerParameters(command=command[0], args=command[1:])

    async def run():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            result = await session.call_tool("calc_percentage", {"part": 1, "whole": 4})
            return tools, result

    tools, result = anyio.run(run)
    assert {t.name.split("_")[0] for t in tools} == {"calc"}
    assert json.loads(result.content[0].text)["value"] == 25.0


def test_a_workspace_the_server_made_is_removed_with_the_server(scenes_root):
    import gc

    server = build_server(scenes_root / "scenes", families=["seg"])
    folder = server.state.workspace_dir
    call_all(server, [("seg_water_ndwi", {"image": f"{EVENT}/post_optical.tif"})])
    assert any(folder.iterdir())
    del server
    gc.collect()
    assert not folder.exists()


def test_http_transport_serves_tools(scenes_root):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    options = json.dumps({"families": ["calc"], "data_root": str(scenes_root / "scenes")})
    with spawn_http_server("disaster", "--server-kwargs", options) as served:
        async def run():
            async with streamable_http_client(served.url) as (read, write, _), ClientSession(read, write) as session:
                await session.initialize()
                return await session.call_tool("calc_multiply", {"a": 6, "b": 7})

        assert anyio.run(run).structuredContent["value"] == 42
