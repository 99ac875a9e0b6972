"""The viz_* tools through a real MCP session on a tiny hand-made scene: every figure is a PNG of its stated
size, not blank, sent back byte for byte as image content, with its provenance beside it; bad input is an
error the agent can act on."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pytest
import rasterio
from affine import Affine
from PIL import Image
from rasterio.crs import CRS

from tests.disaster.helpers import call_all, error_text
from gauntlet.mcp_servers.disaster.server import build_server

SCENE = "data/tiny"
IMAGE, MASK = f"{SCENE}/image.tif", f"{SCENE}/mask.tif"
BUILDINGS, ROUTE, POINTS = f"{SCENE}/buildings.geojson", f"{SCENE}/route.geojson", f"{SCENE}/points.geojson"
# 40 x 40 pixels of 10 m, north-up, UTM 32N: x 360000..360400, y 5600000..5600400.
TRANSFORM = Affine(10, 0, 360000, 0, -10, 5600400)


def write_raster(path, data, names, epsg=32632, transform=TRANSFORM):
    with rasterio.open(path, "w", driver="GTiff", width=data.shape[2], height=data.shape[1], count=data.shape[0],
                       dtype=data.dtype.name, crs=CRS.from_epsg(epsg), transform=transform) as dst:
        dst.write(data)
        for index, name in enumerate(names, start=1):
            dst.set_band_description(index, name)


def collection(features):
    return {"type": "FeatureCollection", "crs": {"type": "name", "properties": {"name": "EPSG:32632"}},
            "features": features}


def square(x, y, side, **properties):
    ring = [[x, y], [x + side, y], [x + side, y + side], [x, y + side], [x, y]]
    return {"type": "Feature", "properties": properties, "geometry": {"type": "Polygon", "coordinates": [ring]}}


def line(*points):
    return {"type": "Feature", "properties": {}, "geometry": {"type": "LineString", "coordinates": [list(p) for p in
                                                                                                   points]}}


def point(x, y):
    return {"type": "Feature", "properties": {}, "geometry": {"type": "Point", "coordinates": [x, y]}}


@pytest.fixture(scope="module")
def scene_root(tmp_path_factory):
    """A data root with one scene, 'tiny': an RGB image, a mask, rasters that do not match them, footprints
    with damage classes, a route and a cluster of points."""
    root = tmp_path_factory.mktemp("viz-scenes")
    folder = root / "tiny"
    folder.mkdir()
    rows, cols = np.indices((40, 40))
    image = np.stack([rows * 50 + 100, cols * 50 + 100, (rows + cols) * 25 + 300]).astype(np.uint16)
    write_raster(folder / "image.tif", image, ["red", "green", "blue"])
    mask = np.zeros((1, 40, 40), np.uint8)
    mask[0, 5:15, 10:30] = 1
    write_raster(folder / "mask.tif", mask, ["mask"])
    later = np.zeros((1, 40, 40), np.uint8)
    later[0, 5:25, 10:35] = 1
    write_raster(folder / "mask_later.tif", later, ["mask"])
    write_raster(folder / "utm33.tif", mask, ["mask"], epsg=32633)
    write_raster(folder / "shifted.tif", image, ["red", "green", "blue"],
                 transform=Affine(10, 0, 361000, 0, -10, 5600400))
    write_raster(folder / "degrees.tif", image, ["red", "green", "blue"], epsg=4326,
                 transform=Affine(0.001, 0, 7.0, 0, -0.001, 50.5))
    classes = ["intact", "partial", "destroyed"]
    footprints = [square(360020 + 60 * i, 5600300 - 40 * (i % 3), 25, id=f"b{i}", damage=classes[i % 3])
                  for i in range(6)]
    (folder / "buildings.geojson").write_text(json.dumps(collection(footprints)))
    # Three segments in travel order, the middle one drawn backwards: 100 + 150 + 250 = 500 m.
    route = [line((360050, 5600350), (360150, 5600350)), line((360150, 5600200), (360150, 5600350)),
             line((360150, 5600200), (360300, 5600200), (360300, 5600100))]
    (folder / "route.geojson").write_text(json.dumps(collection(route)))
    # 20 points within 40 m of (360100, 5600100), and one far off in the opposite corner.
    cluster = [point(360080 + (i % 5) * 10, 5600085 + (i // 5) * 10) for i in range(20)]
    (folder / "points.geojson").write_text(json.dumps(collection([*cluster, point(360390, 5600390)])))
    return root


@pytest.fixture(scope="module")
def workspace_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("viz-ws")


@pytest.fixture(scope="module")
def server(scene_root, workspace_dir):
    return build_server(scene_root, workspace_dir=workspace_dir)






def image_bytes(result) -> bytes:
    (image,) = [block for block in result.content if block.type == "image"]
    assert image.mimeType == "image/png"
    return base64.b64decode(image.data)


# Hand-counted sizes: maps 800 x 800; a panel is 400 wide a layer (four to a row) and 60 (title) + 400 (image)
# + 40 (label) high a row; charts 800 x 560; the page 1000 x 1414.
FIGURES = {
    "viz_overlay_mask": ({"image": IMAGE, "mask": MASK, "colour": "blue", "label": "flooded", "title": "Flood"},
                         (800, 800), [IMAGE, MASK]),
    "viz_add_map_elements": ({"layer": IMAGE, "title": "Scene", "legend": [{"label": "water", "colour": "#0000ff"}]},
                             (800, 800), [IMAGE]),
    "viz_damage_map": ({"image": IMAGE, "layer": BUILDINGS}, (800, 800), [IMAGE, BUILDINGS]),
    "viz_route_map": ({"image": IMAGE, "route": ROUTE}, (800, 800), [IMAGE, ROUTE]),
    "viz_heatmap": ({"image": IMAGE, "points": POINTS}, (800, 800), [IMAGE, POINTS]),
    "viz_before_after_panel": ({"before": IMAGE, "after": IMAGE, "bands": [1]}, (800, 500), [IMAGE, IMAGE]),
    "viz_temporal_panel": ({"layers": [MASK, IMAGE, f"{SCENE}/mask_later.tif"],
                            "dates": ["2021-07-15", "2021-07-12", "2021-07-20"]},
                           (1200, 500), [MASK, IMAGE, f"{SCENE}/mask_later.tif"]),
    "viz_pie_chart": ({"labels": ["intact", "partial", "destroyed"], "values": [120, 30, 12]}, (800, 560), []),
    "viz_bar_chart": ({"labels": ["A", "B", "C"], "values": [5200, -1830, 940.5], "value_label": "people"},
                      (800, 560), []),
    "viz_line_chart": ({"x_labels": ["d1", "d2", "d3"], "series": [{"name": "area", "values": [1, 3, 2]}]},
                       (800, 560), []),
}


@pytest.fixture(scope="module")
def drawn(server):
    """Every figure tool called once, in one session: {tool: result}."""
    return dict(zip(FIGURES, call_all(server, [(name, args) for name, (args, _, _) in FIGURES.items()])))


@pytest.mark.parametrize("tool", sorted(FIGURES))
def test_every_figure_is_a_png_of_its_size_not_blank_and_sent_byte_for_byte_as_image_content(
        tool, drawn, workspace_dir):
    result = drawn[tool]
    assert not result.isError, error_text(result)
    out = result.structuredContent
    _, size, layers = FIGURES[tool]
    written = (workspace_dir / out["path"].removeprefix("ws/")).read_bytes()
    assert image_bytes(result) == written
    assert [block.type for block in result.content] == ["text", "image"]  # the structured content's text first
    with Image.open(io.BytesIO(written)) as picture:
        assert picture.format == "PNG" and picture.size == size
        pixels = np.asarray(picture.convert("RGB"), dtype=float)
    assert pixels.std() > 10  # not blank
    assert (out["width_px"], out["height_px"]) == size
    assert out["kind"] == ("map_elements" if tool == "viz_add_map_elements" else tool.removeprefix("viz_"))
    assert out["path"].startswith(f"ws/figure-{out['kind'].replace('_', '-')}-") and out["path"].endswith(".png")
    assert out["layers"] == layers and out["source_layers"] == sorted(set(layers))


@pytest.mark.parametrize("tool", sorted(FIGURES))
def test_the_provenance_sidecar_beside_each_png_lists_its_input_layers(tool, drawn, workspace_dir):
    out = drawn[tool].structuredContent
    assert out["provenance_path"] == out["path"].removesuffix(".png") + ".json"
    sidecar = json.loads((workspace_dir / out["provenance_path"].removeprefix("ws/")).read_text())
    assert sidecar["path"] == out["path"] and sidecar["kind"] == out["kind"]
    assert sidecar["layers"] == FIGURES[tool][2] and sidecar["source_layers"] == out["source_layers"]
    assert (sidecar["width_px"], sidecar["height_px"]) == FIGURES[tool][1]
    with Image.open(workspace_dir / out["path"].removeprefix("ws/")) as picture:  # and inside the PNG itself
        assert json.loads(picture.text["Description"])["layers"] == FIGURES[tool][2]


def test_figures_report_what_they_drew(drawn):
    assert drawn["viz_damage_map"].structuredContent["details"]["counts"] == {"destroyed": 2, "intact": 2,
                                                                             "partial": 2}
    route = drawn["viz_route_map"].structuredContent["details"]
    assert route["length_m"] == 500.0 and route["segments"] == 3
    assert route["start"] == [360050.0, 5600350.0] and route["end"] == [360300.0, 5600100.0]
    heat = drawn["viz_heatmap"].structuredContent["details"]
    assert heat["points"] == 21 and heat["outside"] == 0
    # The densest cell is inside the cluster (x 360080..360120, y 5600085..5600115), not at the lone point.
    assert 360070 <= heat["peak_x"] <= 360130 and 5600075 <= heat["peak_y"] <= 5600125
    panel = drawn["viz_temporal_panel"].structuredContent["details"]
    assert panel["dates"] == ["2021-07-12", "2021-07-15", "2021-07-20"]
    assert panel["in_date_order"] == [IMAGE, MASK, f"{SCENE}/mask_later.tif"] and panel["masks"] == [False, True, True]
    assert drawn["viz_add_map_elements"].structuredContent["details"]["scale_bar_m"] == 100  # a quarter of 400 m


def test_map_elements_on_a_saved_map_keep_its_size_and_the_layers_behind_it(server, drawn, workspace_dir):
    overlay = drawn["viz_overlay_mask"].structuredContent
    (added,) = call_all(server, [("viz_add_map_elements", {"layer": overlay["path"], "title": "Flood, 14 July"})])
    out = added.structuredContent
    assert not added.isError and (out["width_px"], out["height_px"]) == (800, 800)
    assert out["layers"] == [overlay["path"]] and out["source_layers"] == [IMAGE, MASK]
    before = np.asarray(Image.open(workspace_dir / overlay["path"].removeprefix("ws/")).convert("RGB"), dtype=int)
    after = np.asarray(Image.open(io.BytesIO(image_bytes(added))).convert("RGB"), dtype=int)
    changed = np.any(before != after, axis=-1)
    assert changed[:60].any() and changed[60:].any()  # a new title, and a north arrow and scale bar on the map


def test_a_report_page_composes_figures_and_lists_the_layers_behind_them(server, drawn):
    figures = [drawn[name].structuredContent["path"] for name in ("viz_overlay_mask", "viz_damage_map",
                                                                  "viz_pie_chart")]
    (page,) = call_all(server, [("viz_report_page", {
        "title": "Ahr flood: situation report", "figures": figures, "captions": ["Flood", "Damage", "Shares"],
        "sections": [{"heading": "Situation", "text": "The river left its bed on 14 July. " * 8}]})])
    out = page.structuredContent
    assert not page.isError and (out["width_px"], out["height_px"]) == (1000, 1414)
    assert out["layers"] == figures and out["source_layers"] == [BUILDINGS, IMAGE, MASK]
    with Image.open(io.BytesIO(image_bytes(page))) as picture:
        assert np.asarray(picture.convert("L"), dtype=float).std() > 10


def test_the_same_call_gives_the_same_figure_under_the_same_name(server, drawn):
    args = FIGURES["viz_bar_chart"][0]
    (again,) = call_all(server, [("viz_bar_chart", args)])
    assert again.structuredContent == drawn["viz_bar_chart"].structuredContent
    assert image_bytes(again) == image_bytes(drawn["viz_bar_chart"])


@pytest.mark.parametrize("name, args, message", [
    ("viz_overlay_mask", {"image": f"{SCENE}/missing.tif", "mask": MASK}, "does not exist"),
    ("viz_overlay_mask", {"image": "/etc/passwd", "mask": MASK}, "outside"),
    ("viz_overlay_mask", {"image": IMAGE, "mask": f"{SCENE}/utm33.tif"}, "different CRS"),
    ("viz_overlay_mask", {"image": IMAGE, "mask": MASK, "colour": "not-a-colour"}, "is not a colour"),
    ("viz_overlay_mask", {"image": IMAGE, "mask": MASK, "bands": [1, 2]}, "give 1 band"),
    ("viz_before_after_panel", {"before": IMAGE, "after": f"{SCENE}/shifted.tif"}, "different extents"),
    ("viz_temporal_panel", {"layers": [MASK, IMAGE], "dates": ["2021-07-12"]}, "at least 2"),
    ("viz_temporal_panel", {"layers": [MASK, IMAGE, MASK], "dates": ["2021-07-12", "2021-07-13"]}, "differ in length"),
    ("viz_temporal_panel", {"layers": [MASK] * 9, "dates": [f"2021-07-1{d}" for d in range(9)]}, "at most 8"),
    ("viz_temporal_panel", {"layers": [MASK, IMAGE], "dates": ["2021-07-12", "2021-02-30"]}, "date"),
    ("viz_pie_chart", {"labels": [], "values": []}, "at least 1"),
    ("viz_pie_chart", {"labels": ["a", "b"], "values": [0, 0]}, "positive total"),
    ("viz_bar_chart", {"labels": ["a", "b"], "values": [1.0]}, "differ in length"),
    ("viz_bar_chart", {"labels": ["a"], "values": ["NaN"]}, "finite"),
    ("viz_bar_chart", {"labels": ["a"], "values": ["inf"]}, "finite"),
    ("viz_line_chart", {"x_labels": ["a", "b"], "series": [{"name": "s", "values": [1, 2, 3]}]}, "one value per x"),
    ("viz_damage_map", {"image": IMAGE, "layer": BUILDINGS, "damage_field": "severity"}, "damage_field"),
    ("viz_damage_map", {"image": f"{SCENE}/shifted.tif", "layer": BUILDINGS}, "inside the image's extent"),
    ("viz_route_map", {"image": IMAGE, "route": BUILDINGS}, "line features"),
    ("viz_heatmap", {"image": IMAGE, "points": POINTS, "bandwidth_m": 5000}, "wider than the scene"),
    ("viz_add_map_elements", {"layer": f"{SCENE}/degrees.tif"}, "not a CRS in metres"),
    ("viz_add_map_elements", {"layer": IMAGE, "north_arrow": False, "scale_bar": False}, "nothing to add"),
    ("viz_report_page", {"title": "Empty"}, "the page is empty"),
    ("viz_report_page", {"title": "T", "figures": [IMAGE]}, "not a .png"),
    ("viz_report_page", {"title": "T", "figures": [f"{SCENE}/x.png"] * 5}, "at most 4"),
    ("viz_report_page", {"title": "T", "sections": [{"text": "word " * 299}] * 6}, "shorten it"),
])
def test_bad_input_is_an_error_the_agent_can_act_on_without_internal_paths(server, scene_root, workspace_dir, name,
                                                                          args, message):
    bad, after = call_all(server, [(name, args), ("calc_add", {"a": 1, "b": 2})])
    text = error_text(bad)
    assert message in text, text
    assert str(scene_root) not in text and str(workspace_dir) not in text
    assert not text.startswith("internal error") and "Traceback" not in text
    assert after.structuredContent["value"] == 3


def test_map_elements_refuse_a_north_arrow_on_a_chart_but_add_its_title(server, drawn):
    chart = drawn["viz_pie_chart"].structuredContent["path"]
    refused, titled = call_all(server, [
        ("viz_add_map_elements", {"layer": chart}),
        ("viz_add_map_elements", {"layer": chart, "title": "Damage", "north_arrow": False, "scale_bar": False})])
    assert "not a figure with one map" in error_text(refused)
    assert not titled.isError and titled.structuredContent["source_layers"] == []
