"""Block-wise processing for rasters too large to read whole: flood extent, vectorising and routing
with memory bounded by the block size, not the raster size.

    flood_extent_blocks(pre, post, out_path)    # NDWI water before/after, new water -> out mask
    polygon_stats_blocks(mask_path)             # polygons per block: count and area
    route_on_mask(mask_path, spacing_px, start, end)  # a street lattice; segments under water removed

Used by ``bench/disaster.py`` on a 10,000 x 10,000 scene.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import rasterio
from rasterio.windows import Window

BLOCK = 1024
# GDAL's block cache defaults to 5% of the machine's memory; bounded here so that peak memory
# follows the block size, not the machine.
GDAL_CACHE_MB = 128


def blocks(width: int, height: int, size: int = BLOCK):
    for row in range(0, height, size):
        for col in range(0, width, size):
            yield Window(col, row, min(size, width - col), min(size, height - row))


def write_synthetic_pair(pre_path: Path, post_path: Path, size_px: int, seed: int = 0) -> None:
    """A large green/NIR image pair (uint16 reflectance x 10000) with a river that floods, written block
    by block: a river band of water before; after, water spreads to cells below a sloping surface."""
    profile = {"driver": "GTiff", "width": size_px, "height": size_px, "count": 2, "dtype": "uint16",
               "crs": "EPSG:32632", "transform": rasterio.transform.from_origin(360000, 5600000 + size_px, 1.0, 1.0),
               "tiled": True, "blockxsize": 512, "blockysize": 512, "compress": "deflate"}
    land, water = np.array([900, 3000], np.uint16), np.array([1200, 500], np.uint16)
    with rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_MB), rasterio.open(pre_path, "w", **profile) as pre, \
            rasterio.open(post_path, "w", **profile) as post:
        for window in blocks(size_px, size_px):
            rows = np.arange(window.row_off, window.row_off + window.height)[:, None].astype(float)
            cols = np.arange(window.col_off, window.col_off + window.width)[None, :].astype(float)
            centre = size_px * (0.5 + 0.1 * np.sin(2 * np.pi * cols / size_px * 3))
            distance = np.abs(rows - centre) / size_px
            # A deterministic texture from the coordinates (no global random state across blocks).
            texture = (np.sin(rows * 0.37 + seed) * np.cos(cols * 0.23) * 60).astype(np.int32)
            for dst, extent in ((pre, 0.01), (post, 0.06 + 0.02 * np.sin(cols / size_px * 7))):
                wet = distance < extent
                data = np.where(wet[None], water[:, None, None], land[:, None, None]).astype(np.int32) + texture
                dst.write(np.clip(data, 0, 65535).astype(np.uint16), window=window)


def flood_extent_blocks(pre_path: Path, post_path: Path, out_path: Path) -> dict[str, Any]:
    """New water (NDWI > 0 after, not before), block by block; returns pixel count and area."""
    with rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_MB), rasterio.open(pre_path) as pre, rasterio.open(post_path) as post:
        profile = {"driver": "GTiff", "width": pre.width, "height": pre.height, "count": 1, "dtype": "uint8",
                   "crs": pre.crs, "transform": pre.transform, "tiled": True, "blockxsize": 512,
                   "blockysize": 512, "compress": "deflate"}
        count = 0
        with rasterio.open(out_path, "w", **profile) as out:
            for window in blocks(pre.width, pre.height):
                before = _ndwi(pre.read(window=window)) > 0
                after = _ndwi(post.read(window=window)) > 0
                flooded = (after & ~before).astype(np.uint8)
                count += int(flooded.sum())
                out.write(flooded[None], window=window)
        pixel_area = abs(pre.transform.a * pre.transform.e)
    return {"pixel_count": count, "area_m2": count * pixel_area}


def _ndwi(bands: np.ndarray) -> np.ndarray:
    green, nir = bands.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(green + nir > 0, (green - nir) / (green + nir), 0.0)


def polygon_stats_blocks(mask_path: Path) -> dict[str, Any]:
    """Vectorise a mask block by block (regions crossing block edges are split there)."""
    from rasterio.features import shapes
    from shapely.geometry import shape

    polygons, area = 0, 0.0
    with rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_MB), rasterio.open(mask_path) as src:
        for window in blocks(src.width, src.height):
            band = src.read(1, window=window)
            if not band.any():
                continue
            for geometry, _ in shapes(band, mask=band > 0, transform=src.window_transform(window)):
                polygons += 1
                area += shape(geometry).area
    return {"polygons": polygons, "area_m2": area}


def route_on_mask(mask_path: Path, spacing_px: int, start: tuple[int, int], end: tuple[int, int]) -> dict[str, Any]:
    """Shortest route on a street lattice (every ``spacing_px`` pixels) avoiding segments whose midpoint
    is flooded; the mask is sampled at the midpoints only, never read whole."""
    import networkx as nx

    with rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_MB), rasterio.open(mask_path) as src:
        lattice = range(0, src.height, spacing_px)
        graph: nx.Graph[tuple[int, int]] = nx.Graph()
        midpoints = []
        for r in lattice:
            for c in range(0, src.width, spacing_px):
                for dr, dc in ((spacing_px, 0), (0, spacing_px)):
                    if r + dr < src.height and c + dc < src.width:
                        midpoints.append(((r, c), (r + dr, c + dc)))
        xy = [src.xy(a[0] + (b[0] - a[0]) / 2, a[1] + (b[1] - a[1]) / 2) for a, b in midpoints]
        flooded = [value[0] > 0 for value in src.sample(xy, indexes=1)]
        pixel = abs(src.transform.a)
    for (a, b), wet in zip(midpoints, flooded):
        if not wet:
            graph.add_edge(a, b, length_m=spacing_px * pixel)
    try:
        length = nx.shortest_path_length(graph, start, end, weight="length_m")
    except (nx.NetworkXNoPath, nx.NodeNotFound):
        length = None
    return {"segments": len(midpoints), "flooded_segments": int(sum(flooded)), "route_m": length}
