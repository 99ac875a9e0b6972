"""Input valid by type but not by meaning is refused with a message naming the argument, and no error
text an agent reads ever carries the server's own folders or a traceback."""

from __future__ import annotations

import anyio
import pytest
from mcp.shared.memory import create_connected_server_and_client_session

from gauntlet.mcp_servers.disaster.server import build_server

EVENT = "data/ahr-2021-flood"


@pytest.fixture
def server(scenes_root, tmp_path):
    return build_server(scenes_root / "scenes", workspace_dir=tmp_path / "ws")


def call_all(server, calls):
    async def run():
        async with create_connected_server_and_client_session(server) as session:
            return [await session.call_tool(name, args) for name, args in calls]

    return anyio.run(run)


def error_text(result) -> str:
    assert result.isError, result
    return " ".join(block.text for block in result.content)


def schema_of(server, tool: str):
    async def run():
        async with create_connected_server_and_client_session(server) as session:
            return {t.name: t.inputSchema for t in (await session.list_tools()).tools}[tool]

    return anyio.run(run)


@pytest.mark.parametrize("tool, args, argument", [
    ("logi_allocate", {"demands": [100.0], "capacities": [-1.0], "distances_m": [[10.0]]}, "capacities"),
    ("logi_allocate", {"demands": [-623997.0], "capacities": [50.0], "distances_m": [[10.0]]}, "demands"),
    ("logi_allocate", {"demands": [100.0], "capacities": [50.0], "distances_m": [[-10.0]]}, "distances_m"),
    ("logi_shelter_capacity_gap", {"people": 100.0, "capacities": [-1.0]}, "capacities"),
    ("logi_shelter_capacity_gap", {"people": 100.0, "capacities": []}, "capacities"),
])
def test_negative_or_missing_quantities_are_refused_naming_the_argument(server, tool, args, argument):
    [result] = call_all(server, [(tool, args)])
    text = error_text(result)
    assert f"'{argument}" in text and "a valid example" in text


def test_quantity_constraints_are_declared_in_the_schema(server):
    schema = schema_of(server, "logi_allocate")
    assert schema["properties"]["capacities"]["items"]["minimum"] == 0
    assert schema["properties"]["capacities"]["minItems"] == 1


def test_allocation_with_valid_amounts_reports_non_negative_unmet(server):
    [result] = call_all(server, [("logi_allocate", {"demands": [100.0, 30.0], "capacities": [80.0],
                                                    "distances_m": [[5.0], [9.0]]})])
    assert not result.isError
    assert result.structuredContent["items"][-1] == {"unmet": 50.0}


@pytest.mark.parametrize("tool, args, argument", [
    ("vec_voronoi_allocation", {"facilities": f"{EVENT}/pois.geojson", "demand": f"{EVENT}/buildings.geojson",
                                "weight_field": "no_such_field"}, "weight_field"),
    ("poi_sum_by", {"layer": f"{EVENT}/buildings.geojson", "key": "material", "value_field": "ocupants"},
     "value_field"),
    ("poi_top_k", {"layer": f"{EVENT}/pois.geojson", "key": "capacty"}, "key"),
    ("vec_filter_attribute", {"layer": f"{EVENT}/pois.geojson", "key": "kind", "op": "==", "value": "school"},
     "key"),
])
def test_an_attribute_no_feature_has_is_refused_listing_the_valid_names(server, tool, args, argument):
    [result] = call_all(server, [(tool, args)])
    text = error_text(result)
    assert f"argument '{argument}'" in text
    assert "occupants" in text or "capacity" in text  # the layer's real attributes are listed


def test_an_existing_weight_field_still_weights_the_allocation(server):
    [result] = call_all(server, [("vec_voronoi_allocation", {
        "facilities": f"{EVENT}/pois.geojson", "demand": f"{EVENT}/buildings.geojson",
        "weight_field": "occupants"})])
    assert not result.isError
    assert sum(item["weight"] for item in result.structuredContent["items"]) > 0


BAD_NAMES = ["data/" + "a" * 300 + ".tif", "ws/" + "b" * 5000 + ".geojson", "data/" + "a/" * 3000 + "x.tif",
             "data/x\x00y.tif", "ws/\x00", "data/../../../etc/passwd", "ws/../../secret.geojson", "/etc/passwd",
             "data/ahr-2021-flood", "data/ahr-2021-flood/", "data/ahr-2021-flood/manifest.json/../..",
             "~/x.tif", "C:\\x.tif", "data/%2e%2e/x.tif", "", " ", "ws/" + "é" * 200]


def test_no_file_name_makes_an_error_that_shows_internal_paths_or_a_traceback(server, scenes_root, tmp_path):
    path_arguments = [("ras_info", "image"), ("ras_area_m2", "mask"), ("vec_info", "layer"), ("vec_count", "layer"),
                      ("poi_count_by", "layer"), ("vec_get_features", "layer")]
    calls = [(tool, {argument: name, **({"key": "type"} if tool == "poi_count_by" else {})})
             for tool, argument in path_arguments for name in BAD_NAMES]
    results = call_all(server, calls)
    private = [str(scenes_root), str(scenes_root.resolve()), str(tmp_path), str(tmp_path.resolve())]
    for (tool, _), result in zip(calls, results, strict=True):
        text = error_text(result)
        assert not any(folder in text for folder in private), (tool, text)
        assert "Traceback" not in text
        # The agent can act on it: a refusal naming the problem, not a server bug.
        assert not text.startswith("internal error"), (tool, text)


@pytest.mark.parametrize("tool, args, argument", [
    ("vec_multi_ring_buffer", {"layer": f"{EVENT}/pois.geojson", "distances_m": [100.0, -50.0]}, "distances_m"),
    ("vec_nearest", {"layer": f"{EVENT}/pois.geojson", "point": [350000.0]}, "point"),
    ("calc_distance_m", {"a": [0.0, 0.0, 1.0], "b": [3.0, 4.0]}, "a"),
    ("calc_convert_area", {"value": -2.0, "from_unit": "ha", "to_unit": "m2"}, "value"),
])
def test_distances_points_and_amounts_that_cannot_exist_are_refused_by_the_schema(server, tool, args, argument):
    [result] = call_all(server, [(tool, args)])
    assert f"argument '{argument}" in error_text(result)


def test_every_string_argument_of_every_tool_given_a_bad_file_name_answers_without_internal_paths(
        server, scenes_root, tmp_path):
    from gauntlet.bridges.tool_errors import example_value

    async def run():
        async with create_connected_server_and_client_session(server) as session:
            tools = (await session.list_tools()).tools
            answers = []
            for tool in tools:
                schema = tool.inputSchema
                properties, definitions = schema.get("properties", {}), schema.get("$defs", {})
                base = {name: example_value(properties[name], definitions) for name in schema.get("required", [])}
                base = {name: value if isinstance(value, (str, int, float, list, dict)) else f"{EVENT}/dem.tif"
                        for name, value in base.items()}
                strings = [name for name, prop in properties.items() if prop.get("type") == "string"
                           or any(branch.get("type") == "string" for branch in prop.get("anyOf", []))]
                for argument in strings:
                    for name in BAD_NAMES[:5]:
                        result = await session.call_tool(tool.name, {**base, argument: name})
                        answers.append((tool.name, argument, result))
            assert await session.call_tool("calc_add", {"a": 1, "b": 2})  # still answering
            return answers

    answers = anyio.run(run)
    assert len(answers) > 200
    private = [str(scenes_root), str(scenes_root.resolve()), str(tmp_path), str(tmp_path.resolve())]
    for tool, argument, result in answers:
        text = " ".join(getattr(block, "text", "") for block in result.content)
        assert not any(folder in text for folder in private), (tool, argument, text)
        assert "Traceback" not in text, (tool, argument)
        assert not text.startswith("internal error"), (tool, argument, text)


PLACES = [{"id": "A", "people": 120, "distance_m": 800}, {"id": "B", "people": 40, "distance_m": 200},
          {"id": "C", "people": 120, "distance_m": 200}]


def ranking(result) -> list[str]:
    assert not result.isError, result
    return [item["id"] for item in result.structuredContent["items"]]


def test_a_negative_priority_weight_counts_its_field_against_the_priority(server):
    # A weight is a preference: -1 on distance means "nearer first", which is what a planner asks for.
    by_people, nearest_first, both = call_all(server, [
        ("logi_priority_scores", {"items": PLACES, "weights": {"people": 1.0}}),
        ("logi_priority_scores", {"items": PLACES, "weights": {"distance_m": -1.0}}),
        ("logi_priority_scores", {"items": PLACES, "weights": {"people": 1.0, "distance_m": -0.5}})])
    assert ranking(by_people)[2] == "B"
    assert ranking(nearest_first)[2] == "A"
    assert ranking(both) == ["C", "A", "B"]  # C: 1 - 0.125; A: 1 - 0.5; B: 1/3 - 0.125


@pytest.mark.parametrize("items, weights, argument", [
    (PLACES, {"people": 0.0, "distance_m": 0.0}, "weights"),
    (PLACES, {"people": float("nan")}, "weights"),
    (PLACES, {"people": float("inf")}, "weights"),
    (PLACES, {}, "weights"),
    ([], {"people": 1.0}, "items"),
    ([{"id": "A", "people": -120}, {"id": "B", "people": 40}], {"people": 1.0}, "items"),
    ([{"id": "A", "people": float("nan")}, {"id": "B", "people": 40}], {"people": 1.0}, "items"),
    ([{"id": "A", "people": 10 ** 400}, {"id": "B", "people": 40}], {"people": 1.0}, "items"),
    ([{"id": "A", "people": "many"}, {"id": "B", "people": 40}], {"people": 1.0}, "items"),
    (PLACES, {"ppl": 1.0}, "items"),
])
def test_priority_scores_refuse_weights_that_rank_nothing_and_values_they_cannot_normalise(
        server, items, weights, argument):
    [result] = call_all(server, [("logi_priority_scores", {"items": items, "weights": weights})])
    text = error_text(result)
    assert f"argument '{argument}" in text and "a valid example" in text, text
    assert not text.startswith("internal error")


def test_priority_constraints_and_the_meaning_of_a_negative_weight_are_in_the_schema(server):
    schema = schema_of(server, "logi_priority_scores")
    assert schema["properties"]["items"]["minItems"] == 1
    assert schema["properties"]["weights"]["minProperties"] == 1
    assert "negative" in schema["properties"]["weights"]["description"]
