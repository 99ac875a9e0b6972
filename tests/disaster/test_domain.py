"""Domain modules (no MCP) against independently computed truth."""

from __future__ import annotations

import math

import numpy as np
import pytest
import rasterio
from affine import Affine
from rasterio.crs import CRS

from gauntlet.mcp_servers.disaster import rasters, vectors
from gauntlet.mcp_servers.disaster.rasters import Grid, RasterError
from gauntlet.mcp_servers.disaster.scenes import write_geotiff
from gauntlet.mcp_servers.disaster.vectors import VectorError

CRS32632 = CRS.from_epsg(32632)


def _write(path, array, pixel=10.0, crs=CRS32632, names=None):
    transform = Affine(pixel, 0, 360000, 0, -pixel, 5600000)
    write_geotiff(path, array if array.ndim == 3 else array[None], transform, crs, band_names=names)
    return path


def test_planar_dem_has_the_slope_and_aspect_of_its_plane(tmp_path):
    rows, cols = np.indices((64, 64))
    dem = (cols * 10.0 * 0.1).astype(np.float32)  # rises 0.1 m per metre eastwards
    grid = rasters.read(_write(tmp_path / "dem.tif", dem))
    slope, aspect = rasters.slope_aspect(grid)
    assert np.allclose(slope[5:-5, 5:-5], math.degrees(math.atan(0.1)), atol=1e-3)
    assert np.allclose(aspect[5:-5, 5:-5], 270.0, atol=1e-3)  # downslope faces west


def test_mask_area_is_pixel_count_times_pixel_area(tmp_path):
    mask = np.zeros((32, 32), np.uint8)
    mask[4:10, 2:7] = 1
    stats = rasters.mask_stats(rasters.read(_write(tmp_path / "m.tif", mask, pixel=2.5), dtype="uint8"))
    assert stats == {"pixel_count": 30, "area_m2": 30 * 6.25, "total_pixels": 1024}


def test_sampling_reads_the_pixel_under_each_point_and_none_outside(tmp_path):
    values = np.arange(16 * 16, dtype=np.float32).reshape(16, 16)
    path = _write(tmp_path / "v.tif", values)
    x, y = 360000 + 3 * 10 + 5, 5600000 - 7 * 10 - 5
    assert rasters.sample(path, [(x, y), (0.0, 0.0)]) == [values[7, 3], None]


def test_zonal_sum_matches_numpy_over_the_same_pixels(tmp_path):
    values = np.random.default_rng(0).random((40, 40)).astype(np.float32)
    grid = rasters.read(_write(tmp_path / "z.tif", values))
    square = {"type": "Polygon", "coordinates": [[[360050, 5599900], [360150, 5599900], [360150, 5599800],
                                                  [360050, 5599800], [360050, 5599900]]]}
    (stats,) = rasters.zonal_statistics(grid, [square])
    assert stats["count"] == 100
    assert stats["sum"] == pytest.approx(float(values[10:20, 5:15].sum()), rel=1e-6)


def test_metadata_is_that_of_the_file_on_disk_even_after_a_rewrite(tmp_path):
    path = _write(tmp_path / "r.tif", np.zeros((16, 16), np.float32), names=["elevation"])
    first = rasters.metadata(path)
    shape = (first["width"], first["crs"], first["bands"], first["pixel_size_m"])
    assert shape == (16, "EPSG:32632", ["elevation"], 10.0)
    first["bands"].append("edited by a caller")  # a caller's copy: the next answer is unaffected
    assert rasters.metadata(path)["bands"] == ["elevation"]
    _write(path, np.zeros((2, 24, 24), np.uint16), pixel=2.5, names=["red", "nir"])
    assert {k: rasters.metadata(path)[k] for k in ("width", "bands", "dtype", "pixel_size_m")} == {
        "width": 24, "bands": ["red", "nir"], "dtype": "uint16", "pixel_size_m": 2.5}


def test_otsu_separates_a_bimodal_histogram():
    rng = np.random.default_rng(1)
    values = np.concatenate([rng.normal(-20, 1, 5000), rng.normal(-8, 1, 5000)])
    assert -17 < rasters.otsu_threshold(values) < -11


def test_rasters_on_different_crs_are_refused(tmp_path):
    a = rasters.read(_write(tmp_path / "a.tif", np.ones((8, 8), np.float32)))
    b = rasters.read(_write(tmp_path / "b.tif", np.ones((8, 8), np.float32), crs=CRS.from_epsg(32633)))
    with pytest.raises(RasterError, match="different CRS"):
        rasters.same_grid(a, b)


def test_reads_beyond_the_pixel_budget_are_refused(tmp_path, monkeypatch):
    path = _write(tmp_path / "big.tif", np.ones((64, 64), np.float32))
    monkeypatch.setattr(rasters, "MAX_READ_PIXELS", 1000)
    with pytest.raises(RasterError, match="read limit"):
        rasters.read(path)
    assert rasters.read(path, window=(0, 0, 10, 10)).data.shape == (1, 10, 10)


def test_vectorising_an_empty_mask_is_an_error():
    grid = Grid(np.zeros((1, 8, 8), np.uint8), {"transform": Affine(10, 0, 0, 0, -10, 80), "crs": CRS32632})
    with pytest.raises(RasterError, match="empty"):
        rasters.vectorize(grid)


def test_vectorised_square_has_the_area_of_its_pixels():
    data = np.zeros((1, 20, 20), np.uint8)
    data[0, 5:9, 5:12] = 1
    grid = Grid(data, {"transform": Affine(10, 0, 0, 0, -10, 200), "crs": CRS32632})
    (polygon,) = rasters.vectorize(grid)
    from shapely.geometry import shape

    assert shape(polygon).area == pytest.approx(28 * 100)


def test_reproject_to_wgs84_keeps_the_footprint(tmp_path):
    path = _write(tmp_path / "r.tif", np.ones((32, 32), np.float32))
    grid = rasters.reproject(path, 4326)
    assert grid.profile["crs"].to_epsg() == 4326
    with rasterio.open(path) as src:
        lon, lat = vectors.to_wgs84(src.bounds.left, src.bounds.top, 32632)
    assert grid.profile["transform"].c == pytest.approx(lon, abs=1e-3)


def _road(rid, a, b, state="intact"):
    return {"type": "Feature", "properties": {"id": rid, "state": state},
            "geometry": {"type": "LineString", "coordinates": [list(a), list(b)]}}


# A square ring 0-1-2-3 of 100 m sides plus a long detour 0-4-2 (2 x 300 m).
ROADS = [_road("s01", (0, 0), (100, 0)), _road("s12", (100, 0), (100, 100), "flooded"),
         _road("s23", (100, 100), (0, 100)), _road("s30", (0, 100), (0, 0), "blocked"),
         _road("s04", (0, 0), (-300, 50)), _road("s42", (-300, 50), (100, 100))]


def test_shortest_path_avoids_damaged_segments():
    graph = vectors.road_graph(ROADS, exclude_ids={"s12", "s30"})
    length, _, ids = vectors.shortest_path(graph, (0, 0), (100, 100))
    assert ids == ["s04", "s42"]
    assert length == pytest.approx(math.hypot(300, 50) + math.hypot(400, 50))


def test_minimum_repairs_picks_the_fewest_damaged_segments_then_the_shortest():
    repairs, length, ids = vectors.minimum_repairs(ROADS[:4], {"s12", "s30"}, (0, 0), (100, 100))
    assert len(repairs) == 1 and length == pytest.approx(200.0)


def test_no_route_is_a_clear_error():
    graph = vectors.road_graph(ROADS[:4], exclude_ids={"s12", "s30"})
    with pytest.raises(VectorError, match="no route"):
        vectors.shortest_path(graph, (0, 0), (100, 100))


def test_allocation_fills_nearest_shelters_first_within_capacity():
    assigned, unmet = vectors.allocate_capacity([50, 30], [40, 100], [[1.0, 5.0], [2.0, 1.0]])
    assert assigned == [[40, 10], [0, 30]] and unmet == 0
    _, unmet = vectors.allocate_capacity([500], [40, 100], [[1.0, 2.0]])
    assert unmet == 360


@pytest.mark.parametrize("bad", [{"type": "FeatureCollection", "features": [{"geometry": None}]},
                                 {"type": "FeatureCollection", "features": [{"geometry": {"type": "Polygon",
                                                                                         "coordinates": [[1, 2]]}}]},
                                 {"type": "Nonsense"}, "text"])
def test_malformed_geojson_is_a_clear_error(bad):
    with pytest.raises(VectorError):
        vectors.parse_collection(bad)
