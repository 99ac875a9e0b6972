"""Classical object detectors on the optical (RGB+NIR) images, and SAR building damage.

Every detector is a fixed rule with published roots, no learned weights:

* vehicles: bright compact blobs -- pixels whose mean RGB+NIR reflectance exceeds 0.36 (painted
  metal; asphalt is about 0.13, concrete roofs 0.27), grouped into 8-connected components of 1-4
  pixels (a car is 5 x 2.5 m); larger bright regions (tanks, roofs) are not cars;
* ships: dry holes in open water -- NDWI > 0 water, holes filled, components of the holes of
  40-1000 m2 elongated at least 2.5 : 1 (a roof islanded by flood water is squarer);
* storage tanks: the circular Hough transform on Canny edges of the brightness image (radii
  7.5-15 m), each peak kept when the disk it describes is bright (> 0.4, white tank roofs);
* pools: a spectral rule for clear blue water -- blue > 0.15, (blue - red) / (blue + red) > 0.3
  and NIR < 0.1 (natural and flood water are darker in blue), components of >= 2 pixels;
* bridges: road over water -- the NDWI water mask closed with a 7 x 7 square fills the gap a
  road leaves where it crosses a river; a segment is a bridge when a sample of its centreline falls
  in the closed water;
* SAR building damage: the log ratio of post / pre VV backscatter (mean linear power over the
  footprint's 10 m pixels) -- collapse removes the roof's double bounce, so backscatter drops.

Accuracy against the generator's truth: ``object_accuracy`` (tests and ``bench/disaster.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from gauntlet.mcp_servers.disaster.rasters import RasterError, band_index, read

VEHICLE_BRIGHTNESS = 0.36
VEHICLE_MAX_PIXELS = 4
SHIP_AREA_M2 = (40.0, 1000.0)
SHIP_ELONGATION = 2.5
TANK_RADII_M = (7.5, 15.0)
TANK_BRIGHTNESS = 0.40
TANK_HOUGH_PEAK = 0.45
POOL_BLUE, POOL_BLUE_RED, POOL_NIR = 0.15, 0.3, 0.1
BRIDGE_CLOSING_PX = 7
BRIDGE_MIN_WATER_PX = 400     # 2,500 m2 at 2.5 m
SAR_DESTROYED_DB, SAR_PARTIAL_DB = -3.5, -2.5  # chosen on five events (docs/results/disaster.md)
SCALE = 10000.0


def _bands(optical: Path, window=None) -> tuple[dict[str, np.ndarray], Any]:
    names = ("red", "green", "blue", "nir")
    try:
        indices = [band_index(optical, name) for name in names]
    except RasterError:
        raise RasterError(f"{Path(optical).name} is not an RGB+NIR optical image (bands red, green, blue, nir); "
                          "use 'pre_optical.tif' or 'post_optical.tif'") from None
    grid = read(optical, indices, window)
    return {name: grid.data[i] / SCALE for i, name in enumerate(names)}, grid.profile


def _point(profile, row: float, col: float) -> tuple[float, float]:
    x, y = profile["transform"] @ (col + 0.5, row + 0.5)
    return round(float(x), 3), round(float(y), 3)


def _components(mask: np.ndarray, profile, *, min_px: int = 1, max_px: int | None = None,
                min_elongation: float = 0.0) -> list[dict[str, Any]]:
    from skimage.measure import label, regionprops

    pixel = abs(profile["transform"].a)
    out = []
    for region in regionprops(label(mask, connectivity=2)):
        if region.area < min_px or (max_px is not None and region.area > max_px):
            continue
        rows, cols = region.coords[:, 0], region.coords[:, 1]
        length_px = max(np.ptp(rows), np.ptp(cols)) + 1
        width_px = max(region.area / length_px, 1.0)
        if length_px / width_px < min_elongation:
            continue
        row, col = region.centroid
        x, y = _point(profile, row, col)
        out.append({"x": x, "y": y, "area_m2": round(float(region.area * pixel * pixel), 3),
                    "length_m": round(float(length_px * pixel), 3), "width_m": round(float(width_px * pixel), 3)})
    return out


def vehicles(optical: Path, window=None) -> list[dict[str, Any]]:
    """Cars: small bright blobs (see module doc). Items: x, y (scene CRS), area_m2, length_m, width_m."""
    bands, profile = _bands(optical, window)
    brightness = (bands["red"] + bands["green"] + bands["blue"] + bands["nir"]) / 4
    return _components(brightness > VEHICLE_BRIGHTNESS, profile, max_px=VEHICLE_MAX_PIXELS)


def water_mask(bands: dict[str, np.ndarray]) -> np.ndarray:
    green, nir = bands["green"], bands["nir"]
    return (green - nir) / np.maximum(green + nir, 1e-6) > 0


def ships(optical: Path, window=None) -> list[dict[str, Any]]:
    """Ships: elongated dry holes in open water (see module doc)."""
    from scipy import ndimage

    bands, profile = _bands(optical, window)
    water = water_mask(bands)
    holes = ndimage.binary_fill_holes(water) & ~water
    area = abs(profile["transform"].a) ** 2
    return _components(holes, profile, min_px=int(np.ceil(SHIP_AREA_M2[0] / area)),
                       max_px=int(SHIP_AREA_M2[1] / area), min_elongation=SHIP_ELONGATION)


def storage_tanks(optical: Path, window=None) -> list[dict[str, Any]]:
    """Circular storage tanks by the Hough transform (see module doc). Items: x, y, radius_m."""
    from skimage.feature import canny
    from skimage.transform import hough_circle, hough_circle_peaks

    bands, profile = _bands(optical, window)
    brightness = (bands["red"] + bands["green"] + bands["blue"] + bands["nir"]) / 4
    pixel = abs(profile["transform"].a)
    radii = np.arange(max(2, int(round(TANK_RADII_M[0] / pixel))), int(round(TANK_RADII_M[1] / pixel)) + 1)
    edges = canny(brightness, sigma=1.0, low_threshold=0.05, high_threshold=0.1)
    if not edges.any():
        return []
    accumulator = hough_circle(edges, radii)
    _, cols, rows, found = hough_circle_peaks(accumulator, radii, min_xdistance=int(radii[0]) * 2,
                                              min_ydistance=int(radii[0]) * 2, threshold=TANK_HOUGH_PEAK,
                                              total_num_peaks=500)
    out = []
    grid_r, grid_c = np.ogrid[:brightness.shape[0], :brightness.shape[1]]
    for row, col, radius in zip(rows, cols, found):
        inside = (grid_r - row) ** 2 + (grid_c - col) ** 2 <= max(radius - 1, 1) ** 2
        if brightness[inside].mean() <= TANK_BRIGHTNESS:
            continue
        x, y = _point(profile, row, col)
        out.append({"x": x, "y": y, "radius_m": round(float(radius * pixel), 3)})
    return sorted(out, key=lambda t: (-t["y"], t["x"]))


def pools(optical: Path, window=None) -> list[dict[str, Any]]:
    """Swimming pools: clear blue water by a spectral rule (see module doc)."""
    bands, profile = _bands(optical, window)
    blue, red = bands["blue"], bands["red"]
    blue_over_red = (blue - red) / np.maximum(blue + red, 1e-6)
    rule = (blue > POOL_BLUE) & (blue_over_red > POOL_BLUE_RED) & (bands["nir"] < POOL_NIR)
    return _components(rule, profile, min_px=2)


def bridges(optical: Path, roads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per road segment: whether it crosses water (see module doc). Items: id, bridge, water_samples."""
    from scipy import ndimage
    from shapely.geometry import shape
    from skimage import morphology

    bands, profile = _bands(optical)
    water = water_mask(bands)
    pad = BRIDGE_CLOSING_PX
    # Edge padding: water leaving the image stays water, land stays land (no closing against the border).
    closed = ndimage.binary_closing(np.pad(water, pad, mode="edge"),
                                    structure=np.ones((BRIDGE_CLOSING_PX, BRIDGE_CLOSING_PX), bool))[pad:-pad, pad:-pad]
    # Rivers and sea only (after closing, which rejoins a river cut by its bridges): two pools on either
    # side of a street must not make it a bridge.
    closed = morphology.remove_small_objects(closed, max_size=BRIDGE_MIN_WATER_PX)
    inverse = ~profile["transform"]
    out = []
    for feature in roads:
        line = shape(feature["geometry"])
        samples = max(2, int(line.length / abs(profile["transform"].a)) + 1)
        points = [line.interpolate(t, normalized=True) for t in np.linspace(0, 1, samples)]
        xs, ys = np.array([p.x for p in points]), np.array([p.y for p in points])
        rows = np.floor(inverse.d * xs + inverse.e * ys + inverse.f).astype(int)
        cols = np.floor(inverse.a * xs + inverse.b * ys + inverse.c).astype(int)
        inside = (rows >= 0) & (rows < closed.shape[0]) & (cols >= 0) & (cols < closed.shape[1])
        hits = int(closed[rows[inside], cols[inside]].sum())
        out.append({"id": feature["properties"].get("id"), "bridge": hits > 0, "water_samples": hits})
    return out


def building_damage_sar(pre_sar: Path, post_sar: Path, footprints: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-building damage from the VV log ratio inside each footprint (see module doc)."""
    from rasterio.features import rasterize

    pre, post = read(pre_sar, [band_index(pre_sar, "VV")]), read(post_sar, [band_index(post_sar, "VV")])
    if pre.profile["crs"] != post.profile["crs"] or pre.profile["transform"] != post.profile["transform"] \
            or pre.data.shape != post.data.shape:
        raise RasterError("the pre and post SAR images are not on the same grid; resample one first")
    shape_ = pre.data.shape[1:]
    pre_lin, post_lin = 10 ** (pre.data[0] / 10), 10 ** (post.data[0] / 10)
    results = []
    for touched in (False, True):  # pixel centres first; small footprints fall back to touched pixels
        ids = rasterize(((f["geometry"], i + 1) for i, f in enumerate(footprints)), out_shape=shape_,
                        transform=pre.profile["transform"], dtype="int32", all_touched=touched) \
            if footprints else np.zeros(shape_, np.int32)
        results.append((np.bincount(ids.ravel(), minlength=len(footprints) + 1),
                        np.bincount(ids.ravel(), weights=pre_lin.ravel(), minlength=len(footprints) + 1),
                        np.bincount(ids.ravel(), weights=post_lin.ravel(), minlength=len(footprints) + 1)))
    out = []
    for i, feature in enumerate(footprints, start=1):
        count, pre_sum, post_sum = next(((c[i], a[i], b[i]) for c, a, b in results if c[i]), (0, 0.0, 0.0))
        if not count:
            continue
        ratio_db = float(10 * np.log10(max(post_sum, 1e-9) / max(pre_sum, 1e-9)))
        state = "destroyed" if ratio_db <= SAR_DESTROYED_DB else "partial" if ratio_db <= SAR_PARTIAL_DB else "intact"
        out.append({"id": feature["properties"].get("id"), "vv_change_db": round(ratio_db, 3), "damage": state,
                    "pixels": int(count)})
    return out


# Accuracy -----------------------------------------------------------------------------------------
def match_points(predicted: list[tuple[float, float]], truth: list[tuple[float, float]],
                 max_distance_m: float) -> tuple[int, int, int]:
    """Greedy one-to-one matching, closest pairs first: (true positives, false positives, false negatives)."""
    if not predicted or not truth:
        return 0, len(predicted), len(truth)
    p, t = np.asarray(predicted, float), np.asarray(truth, float)
    distance = np.hypot(p[:, None, 0] - t[None, :, 0], p[:, None, 1] - t[None, :, 1])
    pairs = sorted(zip(*np.nonzero(distance <= max_distance_m)), key=lambda ij: distance[ij])
    used_p, used_t = set(), set()
    for i, j in pairs:
        if i not in used_p and j not in used_t:
            used_p.add(i)
            used_t.add(j)
    tp = len(used_p)
    return tp, len(predicted) - tp, len(truth) - tp


def prf(tp: int, fp: int, fn: int) -> dict[str, float]:
    """Precision, recall and F1 (1.0 where nothing was there to find and nothing was found)."""
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4)}
