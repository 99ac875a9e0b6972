"""Raster algebra on GeoTIFFs (rasterio + numpy); knows nothing of MCP.

Functions read only the window they need (``window`` is ``(col_off, row_off, width, height)`` in
pixels) and refuse reads larger than ``MAX_READ_PIXELS`` so a huge request fails cleanly instead
of exhausting memory. Results keep the input's CRS and transform.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
from affine import Affine
from rasterio.windows import Window

MAX_READ_PIXELS = 64_000_000


class RasterError(ValueError):
    """A raster request that cannot be served (bad band, window, CRS mismatch, empty mask...)."""


@dataclass
class Grid:
    """An array with its georeferencing: ``data`` is (bands, rows, cols)."""

    data: np.ndarray
    profile: dict[str, Any]

    @property
    def pixel_area_m2(self) -> float:
        transform = self.profile["transform"]
        return abs(transform.a * transform.e - transform.b * transform.d)


def read(path: Path, bands: list[int] | None = None, window: tuple[int, int, int, int] | None = None,
         dtype: str = "float32") -> Grid:
    """Bands (1-based; default all) of ``path`` over ``window`` (default the whole raster)."""
    with rasterio.open(path) as src:
        bands = bands or list(range(1, src.count + 1))
        for band in bands:
            if not 1 <= band <= src.count:
                raise RasterError(f"band {band} does not exist in {path.name}, which has bands 1..{src.count} "
                                  f"({', '.join(d or '?' for d in src.descriptions)})")
        win = Window(0, 0, src.width, src.height) if window is None else Window(*window)
        if win.width <= 0 or win.height <= 0:
            raise RasterError(f"window {window} is empty; give (col_off, row_off, width, height) with positive size")
        full = Window(0, 0, src.width, src.height)
        try:
            win = win.intersection(full)
        except Exception:
            raise RasterError(f"window {window} lies outside the raster ({src.width} x {src.height} pixels)") from None
        if win.width * win.height * len(bands) > MAX_READ_PIXELS:
            raise RasterError(f"window of {int(win.width)} x {int(win.height)} pixels x {len(bands)} bands exceeds "
                              f"the {MAX_READ_PIXELS:,} pixel read limit; read a smaller window")
        data = src.read(bands, window=win).astype(dtype)
        profile = {"crs": src.crs, "transform": src.window_transform(win), "nodata": src.nodata,
                   "descriptions": [src.descriptions[b - 1] for b in bands]}
    return Grid(data, profile)


def read_for_display(path: Path, bands: list[int], max_side_px: int, *, mask: bool = False) -> Grid:
    """``bands`` of the whole raster shrunk by a whole factor until no side exceeds ``max_side_px`` (never
    enlarged), as float32 with nodata as NaN: what a figure draws. An image is averaged over each block; a
    ``mask`` (band 1, 1 = selected) keeps a block selected if any of its pixels is, so a small region never
    vanishes from a map (rasters over the read limit are sampled instead)."""
    from rasterio.enums import Resampling

    with rasterio.open(path) as src:
        factor = max(1, math.ceil(max(src.width, src.height) / max_side_px))
        rows, cols = math.ceil(src.height / factor), math.ceil(src.width / factor)
        if mask and src.width * src.height <= MAX_READ_PIXELS:
            # Whole blocks of factor x factor pixels, the last ones padded: they reach a little past the raster.
            full = np.zeros((rows * factor, cols * factor), bool)
            full[:src.height, :src.width] = src.read(bands[0]) != 0
            blocks = np.any(full.reshape(rows, factor, cols, factor), axis=(1, 3))
            data = blocks[None].astype(np.float32)
            transform = src.transform * Affine.scale(factor)
        else:
            data = src.read(bands, out_shape=(len(bands), rows, cols), out_dtype="float32",
                            resampling=Resampling.nearest if mask else Resampling.average)
            if src.nodata is not None and not mask:
                data[data == src.nodata] = np.nan
            transform = src.transform * Affine.scale(src.width / cols, src.height / rows)
        profile = {"crs": src.crs, "transform": transform, "nodata": None,
                   "descriptions": [src.descriptions[b - 1] for b in bands]}
    return Grid(data, profile)


def bounds_of(grid: Grid) -> tuple[float, float, float, float]:
    """(left, bottom, right, top) of a north-up grid in its CRS."""
    transform = grid.profile["transform"]
    rows, cols = grid.data.shape[1:]
    left, top = transform.c, transform.f
    right, bottom = transform * (cols, rows)
    return float(left), float(min(bottom, top)), float(right), float(max(bottom, top))


def crs_name(crs) -> str:
    """``EPSG:<code>`` when the CRS has one, else its WKT."""
    epsg = crs.to_epsg() if crs is not None else None
    return f"EPSG:{epsg}" if epsg else str(crs)


def metadata(path: Path) -> dict[str, Any]:
    """Size, CRS, pixel size (m), bounds, band names, data type, overviews and nodata of ``path``.

    Kept per file identity (path, modification time, size): opening a GeoTIFF and formatting its CRS
    costs about a millisecond, which dominated a metadata query; a file rewritten in place gets a
    new modification time and is read again."""
    stat = path.stat()
    cached = _metadata(str(path), stat.st_mtime_ns, stat.st_size)
    return {key: list(value) if isinstance(value, list) else value for key, value in cached.items()}


@functools.lru_cache(maxsize=512)
def _metadata(path: str, mtime_ns: int, size: int) -> dict[str, Any]:
    with rasterio.open(path) as src:
        return {"width": src.width, "height": src.height, "crs": crs_name(src.crs),
                "pixel_size_m": abs(src.transform.a), "bounds": list(src.bounds),
                "bands": [d or f"band{i + 1}" for i, d in enumerate(src.descriptions)],
                "dtype": src.dtypes[0], "overviews": src.overviews(1), "nodata": src.nodata}


def band_index(path: Path, band: int | str) -> int:
    """The 1-based index of ``band`` given as a number or its description (e.g. 'nir', 'B8', 'VV')."""
    with rasterio.open(path) as src:
        names = [d or "" for d in src.descriptions]
        count = src.count
    if isinstance(band, int) or (isinstance(band, str) and band.isdigit()):
        index = int(band)
        if not 1 <= index <= count:
            raise RasterError(f"band {index} does not exist; {path.name} has bands 1..{count} ({', '.join(names)})")
        return index
    lowered = [n.lower() for n in names]
    if band.lower() not in lowered:
        raise RasterError(f"no band named {band!r} in {path.name}; its bands are {', '.join(names)}")
    return lowered.index(band.lower()) + 1


def same_grid(a: Grid, b: Grid, what: str = "rasters") -> None:
    """Refuse to combine rasters on different CRS or grids."""
    if a.profile["crs"] != b.profile["crs"]:
        raise RasterError(f"the {what} have different CRS ({a.profile['crs']} vs {b.profile['crs']}); "
                          "reproject one first (ras_reproject)")
    if a.data.shape[1:] != b.data.shape[1:] or not a.profile["transform"].almost_equals(b.profile["transform"]):
        raise RasterError(f"the {what} are on different grids ({a.data.shape[1:]} vs {b.data.shape[1:]}); "
                          "resample one onto the other first (ras_resample)")


def same_extent(a: dict[str, Any], b: dict[str, Any], what: str) -> None:
    """Refuse rasters (their ``metadata``) on different CRS or extents; their pixel sizes may differ. Edges
    count as equal within the larger pixel."""
    if a["crs"] != b["crs"]:
        raise RasterError(f"the {what} have different CRS ({a['crs']} vs {b['crs']}); reproject one first "
                          "(ras_reproject)")
    tolerance = max(a["pixel_size_m"], b["pixel_size_m"])
    if any(abs(p - q) > tolerance for p, q in zip(a["bounds"], b["bounds"])):
        raise RasterError(f"the {what} cover different extents ({_rounded(a['bounds'])} vs {_rounded(b['bounds'])}); "
                          "clip them to the same bounds first (ras_clip)")


def _rounded(bounds: list[float]) -> list[float]:
    return [round(value, 1) for value in bounds]


def is_metric(crs) -> bool:
    """Whether a CRS is projected in metres (areas in m2 and scale bars need one)."""
    return bool(crs is not None and crs.is_projected and crs.linear_units in ("metre", "meter", "m"))


def normalized_difference(path: Path, band_a: int | str, band_b: int | str,
                          window: tuple[int, int, int, int] | None = None) -> Grid:
    """``(a - b) / (a + b)`` per pixel (NDWI, NDVI, NBR, MNDWI are all this)."""
    a, b = band_index(path, band_a), band_index(path, band_b)
    grid = read(path, [a, b], window)
    x, y = grid.data
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(x + y != 0, (x - y) / (x + y), 0.0).astype(np.float32)
    return Grid(ratio[None], {**grid.profile, "nodata": None})


def threshold(grid: Grid, op: str, value: float) -> Grid:
    """A 0/1 uint8 mask where ``band 1 <op> value``."""
    ops = {">": np.greater, ">=": np.greater_equal, "<": np.less, "<=": np.less_equal, "==": np.equal,
           "!=": np.not_equal}
    if op not in ops:
        raise RasterError(f"unknown comparison {op!r}; use one of {', '.join(ops)}")
    return Grid(ops[op](grid.data[:1], value).astype(np.uint8), {**grid.profile, "nodata": None})


def otsu_threshold(values: np.ndarray) -> float:
    """Otsu's threshold: maximises the between-class variance of a 256-bin histogram."""
    finite = values[np.isfinite(values)]
    if finite.size == 0 or finite.min() == finite.max():
        raise RasterError("Otsu needs a raster with at least two distinct finite values")
    hist, edges = np.histogram(finite, bins=256)
    centres = (edges[:-1] + edges[1:]) / 2
    weight0 = np.cumsum(hist)
    weight1 = weight0[-1] - weight0
    mean0 = np.cumsum(hist * centres) / np.maximum(weight0, 1)
    mean1 = (np.sum(hist * centres) - np.cumsum(hist * centres)) / np.maximum(weight1, 1)
    between = weight0 * weight1 * (mean0 - mean1) ** 2
    return float(centres[int(np.argmax(between[:-1]))])


def mask_stats(grid: Grid) -> dict[str, float]:
    """Count and area (m2) of non-zero pixels in band 1."""
    count = int(np.count_nonzero(grid.data[0]))
    return {"pixel_count": count, "area_m2": count * grid.pixel_area_m2, "total_pixels": int(grid.data[0].size)}


def band_statistics(grid: Grid) -> list[dict[str, float]]:
    """Min, max, mean, std and percentiles of each band (finite values only)."""
    stats = []
    for band in grid.data:
        values = band[np.isfinite(band)]
        if grid.profile.get("nodata") is not None:
            values = values[values != grid.profile["nodata"]]
        if values.size == 0:
            raise RasterError("the band has no valid pixels in this window")
        p10, p50, p90 = np.percentile(values, [10, 50, 90])
        stats.append({"min": float(values.min()), "max": float(values.max()), "mean": float(values.mean()),
                      "std": float(values.std()), "p10": float(p10), "median": float(p50), "p90": float(p90)})
    return stats


def world_to_pixel(profile: dict[str, Any], x: float, y: float) -> tuple[int, int]:
    """(row, col) of the pixel holding world point (x, y)."""
    col, row = ~profile["transform"] @ (x, y)
    return int(np.floor(row)), int(np.floor(col))


def pixel_to_world(profile: dict[str, Any], row: float, col: float) -> tuple[float, float]:
    """World coordinates of the centre of pixel (row, col)."""
    x, y = profile["transform"] @ (col + 0.5, row + 0.5)
    return float(x), float(y)


def sample(path: Path, points: list[tuple[float, float]], band: int = 1) -> list[float | None]:
    """Values of ``band`` at world points (None outside the raster)."""
    with rasterio.open(path) as src:
        if not 1 <= band <= src.count:
            raise RasterError(f"band {band} does not exist; the raster has bands 1..{src.count}")
        inside = [src.bounds.left <= x < src.bounds.right and src.bounds.bottom < y <= src.bounds.top
                  for x, y in points]
        values = [float(v[0]) for v in src.sample([p for p, ok in zip(points, inside) if ok], indexes=band)]
    it = iter(values)
    return [next(it) if ok else None for ok in inside]


def zonal_statistics(grid: Grid, geometries: list[Any]) -> list[dict[str, float | None]]:
    """Sum, mean, min, max and pixel count of band 1 inside each polygon (pixel centres inside; mean,
    min and max are None for a polygon that covers no pixel centre)."""
    from rasterio.features import geometry_mask

    out: list[dict[str, float | None]] = []
    shape = grid.data.shape[1:]
    for geometry in geometries:
        inside = ~geometry_mask([geometry], out_shape=shape, transform=grid.profile["transform"])
        values = grid.data[0][inside]
        if values.size == 0:
            out.append({"count": 0, "sum": 0.0, "mean": None, "min": None, "max": None})
        else:
            out.append({"count": int(values.size), "sum": float(values.sum()), "mean": float(values.mean()),
                        "min": float(values.min()), "max": float(values.max())})
    return out


def slope_aspect(dem: Grid) -> tuple[np.ndarray, np.ndarray]:
    """Slope (degrees) and aspect (degrees clockwise from north, downslope direction)."""
    transform = dem.profile["transform"]
    gy, gx = np.gradient(dem.data[0].astype(float), abs(transform.e), abs(transform.a))
    slope = np.degrees(np.arctan(np.hypot(gx, gy)))
    # Rows grow southwards: the downslope direction's north component is +gy.
    aspect = (np.degrees(np.arctan2(-gx, gy)) + 360.0) % 360.0
    return slope.astype(np.float32), aspect.astype(np.float32)


def hillshade(dem: Grid, azimuth_deg: float = 315.0, altitude_deg: float = 45.0) -> np.ndarray:
    """Lambertian hillshade in 0..255 for a sun at ``azimuth_deg``/``altitude_deg``."""
    slope, aspect = slope_aspect(dem)
    zenith, azimuth = np.radians(90 - altitude_deg), np.radians(azimuth_deg)
    s, a = np.radians(slope), np.radians(aspect)
    # Aspect here points downslope; illumination is strongest facing the sun.
    shade = np.cos(zenith) * np.cos(s) + np.sin(zenith) * np.sin(s) * np.cos(azimuth - a)
    return (255 * np.clip(shade, 0, 1)).astype(np.uint8)


def focal(grid: Grid, size: int, statistic: str) -> np.ndarray:
    """Moving-window ``statistic`` (mean, max, min, median, std) over ``size x size`` pixels."""
    from scipy import ndimage

    if size < 1 or size % 2 == 0 or size > 101:
        raise RasterError(f"size must be an odd number between 1 and 101, got {size}")
    band = grid.data[0].astype(float)
    if statistic == "mean":
        return ndimage.uniform_filter(band, size).astype(np.float32)
    if statistic == "max":
        return ndimage.maximum_filter(band, size).astype(np.float32)
    if statistic == "min":
        return ndimage.minimum_filter(band, size).astype(np.float32)
    if statistic == "median":
        return ndimage.median_filter(band, size).astype(np.float32)
    if statistic == "std":
        mean = ndimage.uniform_filter(band, size)
        return np.sqrt(np.maximum(ndimage.uniform_filter(band ** 2, size) - mean ** 2, 0)).astype(np.float32)
    raise RasterError(f"unknown statistic {statistic!r}; use mean, max, min, median or std")


def reproject(path: Path, epsg: int, resolution_m: float | None = None) -> Grid:
    """The raster warped to ``EPSG:epsg`` (bilinear for continuous data, nearest for integer masks)."""
    from rasterio.crs import CRS
    from rasterio.warp import Resampling, calculate_default_transform, reproject as warp

    try:
        dst_crs = CRS.from_epsg(epsg)
    except Exception:
        raise RasterError(f"EPSG:{epsg} is not a known coordinate reference system") from None
    with rasterio.open(path) as src:
        if src.width * src.height * src.count > MAX_READ_PIXELS:
            raise RasterError("the raster is too large to reproject whole; clip it first (ras_clip)")
        kwargs = {"resolution": resolution_m} if resolution_m else {}
        transform, width, height = calculate_default_transform(src.crs, dst_crs, src.width, src.height,
                                                               *src.bounds, **kwargs)
        out = np.zeros((src.count, height, width), dtype=src.dtypes[0])
        method = Resampling.nearest if np.issubdtype(np.dtype(src.dtypes[0]), np.integer) else Resampling.bilinear
        warp(src.read(), out, src_transform=src.transform, src_crs=src.crs, dst_transform=transform,
             dst_crs=dst_crs, resampling=method)
        descriptions = list(src.descriptions)
    return Grid(out, {"crs": dst_crs, "transform": transform, "nodata": None, "descriptions": descriptions})


def resample_to(path: Path, like: Path, method: str = "nearest") -> Grid:
    """``path`` resampled onto the grid of ``like`` (same CRS required)."""
    from rasterio.warp import Resampling, reproject as warp

    methods = {"nearest": Resampling.nearest, "bilinear": Resampling.bilinear, "average": Resampling.average,
               "max": Resampling.max, "mode": Resampling.mode}
    if method not in methods:
        raise RasterError(f"unknown resampling {method!r}; use one of {', '.join(methods)}")
    with rasterio.open(path) as src, rasterio.open(like) as ref:
        if src.crs != ref.crs:
            raise RasterError(f"the rasters have different CRS ({src.crs} vs {ref.crs}); reproject first")
        if ref.width * ref.height * src.count > MAX_READ_PIXELS:
            raise RasterError("the target grid is too large")
        out = np.zeros((src.count, ref.height, ref.width), dtype=src.dtypes[0])
        warp(src.read(), out, src_transform=src.transform, src_crs=src.crs, dst_transform=ref.transform,
             dst_crs=ref.crs, resampling=methods[method])
        return Grid(out, {"crs": ref.crs, "transform": ref.transform, "nodata": None,
                          "descriptions": list(src.descriptions)})


def clip_to_bounds(path: Path, bounds: tuple[float, float, float, float]) -> Grid:
    """The part of ``path`` inside world ``bounds`` (min_x, min_y, max_x, max_y)."""
    from rasterio.windows import from_bounds

    with rasterio.open(path) as src:
        left, bottom, right, top = src.bounds
        if bounds[0] >= right or bounds[2] <= left or bounds[1] >= top or bounds[3] <= bottom:
            raise RasterError(f"bounds {bounds} do not overlap the raster ({left}, {bottom}, {right}, {top})")
        if bounds[0] >= bounds[2] or bounds[1] >= bounds[3]:
            raise RasterError("bounds must be (min_x, min_y, max_x, max_y) with min < max")
        win = from_bounds(*bounds, transform=src.transform).round_offsets().round_lengths()
        win = win.intersection(Window(0, 0, src.width, src.height))
    return read(path, window=(int(win.col_off), int(win.row_off), int(win.width), int(win.height)),
                dtype=_dtype_of(path))


def _dtype_of(path: Path) -> str:
    with rasterio.open(path) as src:
        return src.dtypes[0]


def vectorize(grid: Grid, min_area_m2: float = 0.0) -> list[dict[str, Any]]:
    """Polygons of the non-zero regions of band 1 (GeoJSON geometries, world coordinates)."""
    from rasterio.features import shapes
    from shapely.geometry import mapping, shape

    band = (grid.data[0] != 0).astype(np.uint8)
    if not band.any():
        raise RasterError("the mask is empty: there is nothing to vectorise")
    polygons = []
    for geometry, _ in shapes(band, mask=band.astype(bool), transform=grid.profile["transform"]):
        geom = shape(geometry)
        if geom.area >= min_area_m2:
            polygons.append(mapping(geom))
    return polygons


def connected_components(grid: Grid, connectivity: int = 8) -> tuple[np.ndarray, int]:
    """Label the non-zero regions of band 1; returns labels and their number."""
    from scipy import ndimage

    structure = np.ones((3, 3)) if connectivity == 8 else None
    labels, count = ndimage.label(grid.data[0] != 0, structure=structure)
    return labels.astype(np.int32), int(count)
