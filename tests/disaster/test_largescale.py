"""Block-wise processing gives the same answers as whole-raster processing."""

from __future__ import annotations

import numpy as np
import rasterio

from gauntlet.mcp_servers.disaster import largescale


def test_block_wise_flood_extent_equals_the_whole_raster_computation(tmp_path, monkeypatch):
    monkeypatch.setattr(largescale, "BLOCK", 256)  # several blocks on a small image
    largescale.write_synthetic_pair(tmp_path / "pre.tif", tmp_path / "post.tif", 700)
    stats = largescale.flood_extent_blocks(tmp_path / "pre.tif", tmp_path / "post.tif", tmp_path / "mask.tif")
    with rasterio.open(tmp_path / "pre.tif") as pre, rasterio.open(tmp_path / "post.tif") as post:
        def water(src):
            green, nir = src.read().astype(np.float64)
            return (green - nir) / (green + nir) > 0

        expected = water(post) & ~water(pre)
    with rasterio.open(tmp_path / "mask.tif") as src:
        assert np.array_equal(src.read(1).astype(bool), expected)
    assert stats["pixel_count"] == int(expected.sum()) > 0
    polygons = largescale.polygon_stats_blocks(tmp_path / "mask.tif")
    assert polygons["area_m2"] == stats["area_m2"]


def test_routing_on_a_mask_drops_flooded_segments(tmp_path):
    largescale.write_synthetic_pair(tmp_path / "pre.tif", tmp_path / "post.tif", 600)
    largescale.flood_extent_blocks(tmp_path / "pre.tif", tmp_path / "post.tif", tmp_path / "mask.tif")
    route = largescale.route_on_mask(tmp_path / "mask.tif", 100, (0, 0), (500, 500))
    with rasterio.open(tmp_path / "mask.tif") as src:
        mask = src.read(1)
    midpoints = [(r + dr // 2, c + dc // 2) for r in range(0, 600, 100) for c in range(0, 600, 100)
                 for dr, dc in ((100, 0), (0, 100)) if r + dr < 600 and c + dc < 600]
    assert route["segments"] == len(midpoints)
    assert route["flooded_segments"] == sum(bool(mask[r, c]) for r, c in midpoints) > 0
    assert route["route_m"] is None or route["route_m"] >= 1000.0  # never shorter than the Manhattan distance
