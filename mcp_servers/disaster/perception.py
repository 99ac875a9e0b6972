"""Classical, deterministic perception on the scene rasters (no learned weights).

Each detector is a published index or statistic with a fixed threshold; its accuracy against the
generator's truth is measured in the tests and reported in docs/results/disaster.md, not assumed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from gauntlet.mcp_servers.disaster.rasters import (Grid, RasterError, normalized_difference, otsu_threshold, read,
                                                   same_grid)

NDWI_THRESHOLD = 0.0          # McFeeters NDWI = (green - nir) / (green + nir)
MNDWI_THRESHOLD = 0.0         # Xu MNDWI = (green - swir1) / (green + swir1)
DNBR_BURNED = 0.27            # USGS/Key & Benson: moderate-low severity and above
NDVI_VEGETATION = 0.4
LAVA_LST_K = 350.0
LOG_RATIO_DB = 3.0
WHOLE_IMAGE_PIXELS = 16_000_000
CHANGE_REFLECTANCE = 0.1     # RGB+NIR distance above sensor noise (about 0.05 between two looks)


def water_ndwi(optical: Path, window=None) -> Grid:
    """Open water where NDWI > 0 (optical green/NIR)."""
    return _mask(normalized_difference(optical, "green", "nir", window).data[0] > NDWI_THRESHOLD,
                 normalized_difference(optical, "green", "nir", window))


def water_mndwi(s2: Path, window=None) -> Grid:
    """Open water where MNDWI > 0 (Sentinel-2 B3/B11)."""
    index = normalized_difference(s2, "B3", "B11", window)
    return _mask(index.data[0] > MNDWI_THRESHOLD, index)


def water_sar_otsu(sar: Path, window=None) -> tuple[Grid, float]:
    """Water where VV backscatter (dB, 3x3 median-filtered against speckle) is below Otsu's threshold."""
    from scipy import ndimage

    grid = read(sar, [1], window)
    vv = ndimage.median_filter(grid.data[0], 3)
    t = otsu_threshold(vv)
    return _mask(vv < t, grid), t


def flood_extent(pre_water: Grid, post_water: Grid) -> Grid:
    """New water: water after the event that was not water before."""
    same_grid(pre_water, post_water, "water masks")
    return _mask((post_water.data[0] > 0) & (pre_water.data[0] == 0), post_water)


def change_log_ratio(pre_sar: Path, post_sar: Path, threshold_db: float = LOG_RATIO_DB, window=None) -> Grid:
    """Change where |post - pre| VV (dB, i.e. the log ratio) exceeds ``threshold_db`` after 5x5 smoothing."""
    from scipy import ndimage

    pre, post = read(pre_sar, [1], window), read(post_sar, [1], window)
    same_grid(pre, post, "SAR images")
    ratio = ndimage.uniform_filter(post.data[0] - pre.data[0], 5)
    return _mask(np.abs(ratio) > threshold_db, post)


def burn_severity(pre_s2: Path, post_s2: Path, window=None) -> tuple[Grid, Grid]:
    """dNBR = NBR_pre - NBR_post (NBR from B8/B12) and the burned mask (dNBR > 0.27)."""
    pre, post = normalized_difference(pre_s2, "B8", "B12", window), normalized_difference(post_s2, "B8", "B12", window)
    same_grid(pre, post, "Sentinel-2 images")
    dnbr = Grid((pre.data - post.data).astype(np.float32), pre.profile)
    return dnbr, _mask(dnbr.data[0] > DNBR_BURNED, pre)


def vegetation(s2_or_optical: Path, window=None) -> Grid:
    """Vegetation where NDVI > 0.4 (NIR/red)."""
    bands = ("B8", "B4") if _is_s2(s2_or_optical) else ("nir", "red")
    index = normalized_difference(s2_or_optical, *bands, window)
    return _mask(index.data[0] > NDVI_VEGETATION, index)


def landslide(pre_s2: Path, post_s2: Path, slope: Path, min_slope_deg: float = 10.0, window=None) -> Grid:
    """Landslide scars: NDVI loss > 0.2 on slopes steeper than ``min_slope_deg``."""
    pre, post = normalized_difference(pre_s2, "B8", "B4", window), normalized_difference(post_s2, "B8", "B4", window)
    slope_grid = read(slope, [1], window)
    same_grid(pre, slope_grid, "Sentinel-2 image and slope")
    loss = pre.data[0] - post.data[0]
    return _mask((loss > 0.2) & (slope_grid.data[0] >= min_slope_deg), pre)


def thermal_anomaly(lst: Path, threshold_k: float = LAVA_LST_K, window=None) -> Grid:
    """Lava / active fire where land-surface temperature exceeds ``threshold_k``."""
    grid = read(lst, [1], window)
    return _mask(grid.data[0] > threshold_k, grid)


def building_damage(pre_optical: Path, post_optical: Path, footprints: list[dict[str, Any]]
                    ) -> list[dict[str, Any]]:
    """Per-building damage from pre/post change inside each footprint.

    The change score is the fraction of footprint pixels whose RGB+NIR spectrum moved by more than
    ``CHANGE_REFLECTANCE`` (Euclidean); above 0.75 the building is ``destroyed``, above 0.25
    ``partial``. Images up to ``WHOLE_IMAGE_PIXELS`` are read once; larger ones per footprint window.
    """
    import rasterio

    with rasterio.open(pre_optical) as pre_src, rasterio.open(post_optical) as post_src:
        if pre_src.crs != post_src.crs or pre_src.transform != post_src.transform:
            raise RasterError("the pre and post images are not on the same grid; resample one first")
        if pre_src.width * pre_src.height <= WHOLE_IMAGE_PIXELS:
            fractions = _change_fractions_whole(pre_src, post_src, footprints)
        else:
            fractions = _change_fractions_windowed(pre_src, post_src, footprints)
    results = []
    for feature, score in zip(footprints, fractions):
        if score is None:
            continue
        state = "destroyed" if score > 0.75 else "partial" if score > 0.25 else "intact"
        results.append({"id": feature["properties"].get("id"), "change_fraction": round(score, 4), "damage": state})
    return results


def _moved(pre: np.ndarray, post: np.ndarray) -> np.ndarray:
    difference = (post.astype(np.float32) - pre.astype(np.float32)) / 10000
    return np.sqrt((difference ** 2).sum(axis=0)) > CHANGE_REFLECTANCE


def _change_fractions_whole(pre_src, post_src, footprints) -> list[float | None]:
    from rasterio.features import rasterize

    ids = rasterize(((f["geometry"], i + 1) for i, f in enumerate(footprints)),
                    out_shape=(pre_src.height, pre_src.width), transform=pre_src.transform,
                    dtype="int32") if footprints else None
    if ids is None:
        return []
    moved = _moved(pre_src.read(), post_src.read())
    pixels = np.bincount(ids.ravel(), minlength=len(footprints) + 1)
    changed = np.bincount(ids.ravel(), weights=moved.ravel(), minlength=len(footprints) + 1)
    return [float(changed[i] / pixels[i]) if pixels[i] else None for i in range(1, len(footprints) + 1)]


def _change_fractions_windowed(pre_src, post_src, footprints) -> list[float | None]:
    from rasterio.features import geometry_mask
    from rasterio.windows import from_bounds
    from shapely.geometry import shape

    out: list[float | None] = []
    for feature in footprints:
        window = from_bounds(*shape(feature["geometry"]).bounds, transform=pre_src.transform)
        window = window.round_offsets().round_lengths()
        if window.width < 1 or window.height < 1:
            out.append(None)
            continue
        pre = pre_src.read(window=window, boundless=True)
        post = post_src.read(window=window, boundless=True)
        inside = ~geometry_mask([feature["geometry"]], out_shape=pre.shape[1:],
                                transform=pre_src.window_transform(window))
        out.append(float(_moved(pre, post)[inside].mean()) if inside.any() else None)
    return out


def road_state(roads: list[dict[str, Any]], water: Grid | None, blocked: Grid | None,
               water_fraction: float = 0.3) -> list[dict[str, Any]]:
    """Per-segment state: ``blocked`` if it touches the blocking mask, ``flooded`` if more than
    ``water_fraction`` of its samples are water, else ``intact``."""
    from shapely.geometry import shape

    out = []
    for feature in roads:
        line = shape(feature["geometry"])
        samples = [line.interpolate(t, normalized=True) for t in np.linspace(0, 1, 21)]
        state = "intact"
        if blocked is not None and _fraction(blocked, samples) > 0:
            state = "blocked"
        elif water is not None and _fraction(water, samples) > water_fraction:
            state = "flooded"
        out.append({"id": feature["properties"].get("id"), "state": state})
    return out


def _fraction(mask: Grid, points) -> float:
    inverse = ~mask.profile["transform"]
    band = mask.data[0]
    hits = []
    for p in points:
        col, row = inverse @ (p.x, p.y)
        r, c = int(np.floor(row)), int(np.floor(col))
        hits.append(0 <= r < band.shape[0] and 0 <= c < band.shape[1] and band[r, c] != 0)
    return float(np.mean(hits))


def _is_s2(path: Path) -> bool:
    import rasterio

    with rasterio.open(path) as src:
        return "B8" in src.descriptions


def _mask(values: np.ndarray, like: Grid) -> Grid:
    return Grid(values.astype(np.uint8)[None], {**like.profile, "nodata": None, "descriptions": ["mask"]})


def iou(predicted: np.ndarray, truth: np.ndarray) -> float:
    """Intersection over union of two boolean masks (1.0 when both are empty)."""
    predicted, truth = predicted.astype(bool), truth.astype(bool)
    union = np.count_nonzero(predicted | truth)
    return 1.0 if union == 0 else np.count_nonzero(predicted & truth) / union


def f1(predicted: np.ndarray, truth: np.ndarray) -> float:
    """F1 (Dice) of two boolean masks."""
    predicted, truth = predicted.astype(bool), truth.astype(bool)
    total = np.count_nonzero(predicted) + np.count_nonzero(truth)
    return 1.0 if total == 0 else 2 * np.count_nonzero(predicted & truth) / total
