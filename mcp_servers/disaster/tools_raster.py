"""Perception (seg_*), raster (ras_*) and mask (mask_*) tools: thin wrappers over rasters.py and
perception.py. Paths are 'data/<event>/<layer>.tif' (scene layers) or 'ws/...' (tool outputs)."""

from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from gauntlet.mcp_servers.disaster import perception, rasters, vectors
from gauntlet.mcp_servers.disaster.models import (InfoOut, ItemsOut, MaskOut, PointOut, RasterOut,
                                                  ValueOut, ValuesOut, VectorOut)
from gauntlet.mcp_servers.disaster.rasters import Grid, RasterError, crs_name
from gauntlet.mcp_servers.disaster.toolkit import tool
from gauntlet.mcp_servers.disaster.workspace import Workspace

TIF = (".tif", ".tiff")
VECTOR_SUFFIXES = (".geojson", ".json", ".gpkg")
Image = Annotated[str, Field(description="raster path: 'data/<event>/<layer>.tif' or a 'ws/...' path a tool returned")]
Mask = Annotated[str, Field(description="0/1 mask raster path ('ws/...' from a seg_*/mask_* tool)")]
Band = Annotated[int | str, Field(description="band number (1-based) or name, e.g. 'nir', 'B8', 'VV'")]
Window = Annotated[list[int] | None, Field(None, description="optional pixel window [col_off, row_off, width, height]")]
Vector = Annotated[str, Field(description="vector layer path: 'data/<event>/<layer>.geojson' (or .gpkg) or a 'ws/...' "
                                          "path")]


def raster_out(ws: Workspace, grid: Grid, stem: str) -> RasterOut:
    path = ws.write_raster(stem, grid.data, grid.profile, grid.profile.get("descriptions"))
    return RasterOut(path=path, crs=crs_name(grid.profile["crs"]), width=grid.data.shape[2],
                     height=grid.data.shape[1], pixel_size_m=abs(grid.profile["transform"].a),
                     bands=[d or f"band{i + 1}" for i, d in enumerate(grid.profile.get("descriptions") or
                                                                    [None] * grid.data.shape[0])])


def mask_out(ws: Workspace, grid: Grid, stem: str) -> MaskOut:
    mask = Grid(grid.data[:1].astype(np.uint8), {**grid.profile, "descriptions": ["mask"], "nodata": None})
    path = ws.write_raster(stem, mask.data, mask.profile, ["mask"])
    stats = rasters.mask_stats(mask)
    return MaskOut(path=path, crs=crs_name(grid.profile["crs"]), pixel_size_m=abs(grid.profile["transform"].a),
                   pixel_count=int(stats["pixel_count"]), area_m2=stats["area_m2"])


def _window(window):
    if window is None:
        return None
    if len(window) != 4:
        raise RasterError("window must be [col_off, row_off, width, height]")
    return tuple(int(v) for v in window)


def _mask(ws: Workspace, path: str) -> Grid:
    return rasters.read(ws.resolve(path, suffixes=TIF), [1], dtype="uint8")


# Perception ---------------------------------------------------------------------------------------
@tool("seg", writes=True)
def seg_water_ndwi(ws: Workspace, image: Image, window: Window = None) -> MaskOut:
    """Map open water in an optical image (bands green and nir) with NDWI = (green - nir)/(green + nir) > 0.
    Use on 'post_optical.tif' for water after the event, 'pre_optical.tif' for normal water. Returns the mask."""
    return mask_out(ws, perception.water_ndwi(ws.resolve(image, suffixes=TIF), _window(window)), "water-ndwi")


@tool("seg", writes=True)
def seg_water_mndwi(ws: Workspace, image: Image, window: Window = None) -> MaskOut:
    """Map open water in a 12-band Sentinel-2 image ('pre_s2.tif'/'post_s2.tif') with MNDWI = (B3 - B11)/(B3 + B11) > 0.
    10 m pixels; robust over built-up areas. Returns the mask."""
    return mask_out(ws, perception.water_mndwi(ws.resolve(image, suffixes=TIF), _window(window)), "water-mndwi")


@tool("seg", writes=True)
def seg_water_sar(ws: Workspace, image: Image, window: Window = None) -> MaskOut:
    """Map open water in a SAR image ('pre_sar.tif'/'post_sar.tif', VV in dB): VV median-filtered 3x3, below
    Otsu's threshold. Works through cloud. Returns the mask."""
    grid, _ = perception.water_sar_otsu(ws.resolve(image, suffixes=TIF), _window(window))
    return mask_out(ws, grid, "water-sar")


@tool("seg", writes=True)
def seg_flood_extent(ws: Workspace, pre_water: Mask, post_water: Mask) -> MaskOut:
    """Flood extent = water after the event that was not water before (two water masks on the same grid,
    e.g. from seg_water_ndwi on pre and post images). Returns the mask of newly flooded pixels."""
    return mask_out(ws, perception.flood_extent(_mask(ws, pre_water), _mask(ws, post_water)), "flood-extent")


@tool("seg", writes=True)
def seg_change_sar(ws: Workspace, pre_image: Image, post_image: Image,
                   threshold_db: Annotated[float, Field(3.0, gt=0, description="minimum |change| in dB")] = 3.0,
                   ) -> MaskOut:
    """Change detection between two SAR images (VV, dB): the log ratio post - pre smoothed 5x5, changed where
    its magnitude exceeds threshold_db. Returns the change mask."""
    return mask_out(ws, perception.change_log_ratio(ws.resolve(pre_image, suffixes=TIF),
                                                    ws.resolve(post_image, suffixes=TIF), threshold_db), "change-sar")


@tool("seg", writes=True)
def seg_burn_severity(ws: Workspace, pre_image: Image, post_image: Image) -> MaskOut:
    """Burned area from pre/post Sentinel-2 ('pre_s2.tif', 'post_s2.tif'): dNBR = NBR_pre - NBR_post with
    NBR = (B8 - B12)/(B8 + B12); burned where dNBR > 0.27. Returns the burned mask."""
    _, burned = perception.burn_severity(ws.resolve(pre_image, suffixes=TIF), ws.resolve(post_image, suffixes=TIF))
    return mask_out(ws, burned, "burned")


@tool("seg", writes=True)
def seg_dnbr(ws: Workspace, pre_image: Image, post_image: Image) -> RasterOut:
    """The dNBR raster (burn severity index, unitless; > 0.27 burned, > 0.66 high severity) from pre/post Sentinel-2."""
    dnbr, _ = perception.burn_severity(ws.resolve(pre_image, suffixes=TIF), ws.resolve(post_image, suffixes=TIF))
    return raster_out(ws, Grid(dnbr.data, {**dnbr.profile, "descriptions": ["dnbr"]}), "dnbr")


@tool("seg", writes=True)
def seg_vegetation(ws: Workspace, image: Image) -> MaskOut:
    """Vegetation where NDVI = (nir - red)/(nir + red) > 0.4 (optical or Sentinel-2 image). Returns the mask."""
    return mask_out(ws, perception.vegetation(ws.resolve(image, suffixes=TIF)), "vegetation")


@tool("seg", writes=True)
def seg_landslide(ws: Workspace, pre_image: Image, post_image: Image, slope: Image,
                  min_slope_deg: Annotated[float, Field(
                      10.0, ge=0, le=90, description="least slope counted, degrees")] = 10.0) -> MaskOut:
    """Landslide scars: NDVI loss > 0.2 between pre/post Sentinel-2 on slopes >= min_slope_deg ('slope.tif').
    Returns the mask."""
    return mask_out(ws, perception.landslide(ws.resolve(pre_image, suffixes=TIF), ws.resolve(post_image, suffixes=TIF),
                                             ws.resolve(slope, suffixes=TIF), min_slope_deg), "landslide")


@tool("seg", writes=True)
def seg_thermal_anomaly(ws: Workspace, image: Image,
                        threshold_k: Annotated[float, Field(350.0, gt=0, description="kelvin")] = 350.0) -> MaskOut:
    """Lava or active fire: land-surface temperature ('lst.tif', kelvin) above threshold_k. Returns the mask."""
    return mask_out(ws, perception.thermal_anomaly(ws.resolve(image, suffixes=TIF), threshold_k), "thermal")


@tool("seg", writes=True)
def seg_building_damage(ws: Workspace, pre_image: Image, post_image: Image, buildings: Vector) -> VectorOut:
    """Per-building damage from pre/post optical images ('pre_optical.tif', 'post_optical.tif') inside each footprint
    of 'buildings.geojson': destroyed if > 75% of the roof changed, partial if > 25%. Returns the footprints with
    'damage' and 'change_fraction' attributes (count them with poi_count_by)."""
    features, crs = vectors.read_features(ws.resolve(buildings, suffixes=VECTOR_SUFFIXES))
    results = perception.building_damage(ws.resolve(pre_image, suffixes=TIF), ws.resolve(post_image, suffixes=TIF),
                                         features)
    out = annotate_footprints(features, results, ("damage", "change_fraction"))
    path = ws.write_json("building-damage", vectors.collection(out, crs))
    return VectorOut(path=path, crs=crs, count=len(out))


def annotate_footprints(features: list[dict], results: list[dict], keys: tuple[str, ...]) -> list[dict]:
    """The footprints that a per-building detector assessed, with its ``keys`` added to their properties."""
    by_id = {r["id"]: r for r in results}
    out = []
    for f in features:
        r = by_id.get(f["properties"].get("id"))
        if r:
            out.append({**f, "properties": {**f["properties"], **{key: r[key] for key in keys}}})
    return out


@tool("seg", writes=True)
def seg_road_damage(ws: Workspace, roads: Vector, water_mask: Annotated[str | None, Field(
        None, description="flood/water mask: segments > 30% under water are 'flooded'")] = None,
        blocking_mask: Annotated[str | None, Field(None, description="debris/lava/landslide/damage mask: segments "
                                                   "touching it are 'blocked'")] = None) -> VectorOut:
    """Per-segment road state (intact / flooded / blocked) from a water mask and/or a blocking mask.
    Returns the road segments with a 'state' attribute (use with vec_shortest_path avoid_states)."""
    features, crs = vectors.read_features(ws.resolve(roads, suffixes=VECTOR_SUFFIXES))
    if water_mask is None and blocking_mask is None:
        raise RasterError("give water_mask, blocking_mask or both")
    states = perception.road_state(features, _mask(ws, water_mask) if water_mask else None,
                                   _mask(ws, blocking_mask) if blocking_mask else None)
    out = [{**f, "properties": {**f["properties"], "state": s["state"]}} for f, s in zip(features, states)]
    return VectorOut(path=ws.write_json("road-state", vectors.collection(out, crs)), crs=crs, count=len(out))


# Raster ---------------------------------------------------------------------------------------------
@tool("ras")
def ras_info(ws: Workspace, image: Image) -> InfoOut:
    """Metadata of a raster: size, CRS, pixel size (m), bounds, band names, data type, overviews."""
    return InfoOut(info=rasters.metadata(ws.resolve(image, suffixes=TIF)))


@tool("ras")
def ras_band_stats(ws: Workspace, image: Image, band: Band = 1, window: Window = None) -> InfoOut:
    """Statistics of one band: min, max, mean, std, p10, median, p90 (over a window if given)."""
    path = ws.resolve(image, suffixes=TIF)
    grid = rasters.read(path, [rasters.band_index(path, band)], _window(window))
    return InfoOut(info=rasters.band_statistics(grid)[0])


@tool("ras")
def ras_count_pixels(ws: Workspace, mask: Mask) -> MaskOut:
    """Count the selected (non-zero) pixels of a mask and their area in m2 (no new file)."""
    grid = _mask(ws, mask)
    stats = rasters.mask_stats(grid)
    return MaskOut(path=mask, crs=crs_name(grid.profile["crs"]), pixel_size_m=abs(grid.profile["transform"].a),
                   pixel_count=int(stats["pixel_count"]), area_m2=stats["area_m2"])


@tool("ras")
def ras_area_m2(ws: Workspace, mask: Mask) -> ValueOut:
    """Area of the selected pixels of a mask, in square metres."""
    return ValueOut(value=rasters.mask_stats(_mask(ws, mask))["area_m2"], unit="m2")


@tool("ras")
def ras_sample_points(ws: Workspace, image: Image, points: Annotated[list[list[float]], Field(
        description="world points [[x, y], ...] in the raster's CRS")], band: Band = 1) -> ValuesOut:
    """Values of one band at world points (null outside the raster)."""
    path = ws.resolve(image, suffixes=TIF)
    if not points or any(len(p) != 2 for p in points):
        raise RasterError("points must be a non-empty list of [x, y] pairs")
    return ValuesOut(values=rasters.sample(path, [(p[0], p[1]) for p in points], rasters.band_index(path, band)))


@tool("ras")
def ras_zonal_stats(ws: Workspace, image: Image, zones: Vector, band: Band = 1,
                    id_field: Annotated[str, Field("id", description="zone attribute to label results")] = "id",
                    ) -> ItemsOut:
    """Sum, mean, min, max and pixel count of a band inside each polygon of 'zones' (pixel centres inside).
    E.g. population.tif summed over admin.geojson gives people per district."""
    path = ws.resolve(image, suffixes=TIF)
    features, _ = vectors.read_features(ws.resolve(zones, suffixes=VECTOR_SUFFIXES))
    grid = rasters.read(path, [rasters.band_index(path, band)])
    stats = rasters.zonal_statistics(grid, [f["geometry"] for f in features])
    items = [{"zone": f["properties"].get(id_field), **s} for f, s in zip(features, stats)]
    return ItemsOut(items=items, count=len(items))


@tool("ras", writes=True)
def ras_threshold(ws: Workspace, image: Image, op: Annotated[Literal[">", ">=", "<", "<=", "==", "!="], Field(
        description="comparison")], value: Annotated[float, Field(description="value each cell is compared with")],
        band: Band = 1) -> MaskOut:
    """A mask where the band compares true against value (e.g. band 'VV' < -15, dem < 12)."""
    path = ws.resolve(image, suffixes=TIF)
    return mask_out(ws, rasters.threshold(rasters.read(path, [rasters.band_index(path, band)]), op, value), "threshold")


@tool("ras", writes=True)
def ras_normalized_difference(ws: Workspace, image: Image, band_a: Band, band_b: Band) -> RasterOut:
    """(a - b)/(a + b) per pixel: NDVI (nir, red), NDWI (green, nir), NBR (B8, B12), MNDWI (B3, B11)."""
    grid = rasters.normalized_difference(ws.resolve(image, suffixes=TIF), band_a, band_b)
    return raster_out(ws, Grid(grid.data, {**grid.profile, "descriptions": ["index"]}), "normdiff")


@tool("ras", writes=True)
def ras_difference(ws: Workspace, image_a: Image, image_b: Image, band: Band = 1) -> RasterOut:
    """a - b of one band of two rasters on the same grid (same CRS and pixel grid required)."""
    pa, pb = ws.resolve(image_a, suffixes=TIF), ws.resolve(image_b, suffixes=TIF)
    a, b = rasters.read(pa, [rasters.band_index(pa, band)]), rasters.read(pb, [rasters.band_index(pb, band)])
    rasters.same_grid(a, b)
    return raster_out(ws, Grid(a.data - b.data, {**a.profile, "descriptions": ["difference"]}), "difference")


@tool("ras", writes=True)
def ras_compose_classes(ws: Workspace, masks: Annotated[list[str], Field(
        description="mask paths in priority order; class k+1 where mask k is set (later masks win)")]) -> RasterOut:
    """Combine masks into one class raster: 0 = none, k = the k-th mask (later masks overwrite earlier)."""
    if not masks:
        raise RasterError("give at least one mask")
    grids = [_mask(ws, m) for m in masks]
    classes = np.zeros(grids[0].data.shape[1:], np.uint8)
    for k, grid in enumerate(grids, start=1):
        rasters.same_grid(grids[0], grid, "masks")
        classes[grid.data[0] > 0] = k
    return raster_out(ws, Grid(classes[None], {**grids[0].profile, "descriptions": ["class"]}), "classes")


@tool("ras", writes=True)
def ras_vectorize(ws: Workspace, mask: Mask, min_area_m2: Annotated[float, Field(
        0.0, ge=0, description="smallest polygon kept, m2")] = 0.0) -> VectorOut:
    """Polygons of the selected regions of a mask (attributes: id, area_m2), dropping those under min_area_m2."""
    grid = _mask(ws, mask)
    polygons = rasters.vectorize(grid, min_area_m2)
    from shapely.geometry import shape

    features = [{"type": "Feature", "geometry": g, "properties": {"id": f"poly{i:04d}",
                                                                   "area_m2": round(shape(g).area, 3)}}
                for i, g in enumerate(polygons)]
    crs = crs_name(grid.profile["crs"])
    layer = vectors.collection(features, crs)
    return VectorOut(path=ws.write_json("polygons", layer), crs=crs, count=len(features))


@tool("ras", writes=True)
def ras_clip(ws: Workspace, image: Image, bounds: Annotated[list[float], Field(
        description="[min_x, min_y, max_x, max_y] in the raster's CRS (metres)")]) -> RasterOut:
    """The part of a raster inside world bounds (all bands)."""
    if len(bounds) != 4:
        raise RasterError("bounds must be [min_x, min_y, max_x, max_y]")
    box = (bounds[0], bounds[1], bounds[2], bounds[3])
    return raster_out(ws, rasters.clip_to_bounds(ws.resolve(image, suffixes=TIF), box), "clip")


@tool("ras", writes=True)
def ras_stack(ws: Workspace, images: Annotated[list[str], Field(description="rasters on the same grid")]) -> RasterOut:
    """Concatenate the bands of several rasters on the same grid into one multi-band raster (float32)."""
    if len(images) < 2:
        raise RasterError("give at least two rasters to stack")
    grids = [rasters.read(ws.resolve(p, suffixes=TIF)) for p in images]
    for grid in grids[1:]:
        rasters.same_grid(grids[0], grid)
    names = [d or "band" for g in grids for d in g.profile["descriptions"]]
    return raster_out(ws, Grid(np.concatenate([g.data for g in grids]), {**grids[0].profile, "descriptions": names}),
                      "stack")


@tool("ras", writes=True)
def ras_slope(ws: Workspace, dem: Image) -> RasterOut:
    """Slope in degrees from an elevation raster ('dem.tif')."""
    grid = rasters.read(ws.resolve(dem, suffixes=TIF), [1])
    slope, _ = rasters.slope_aspect(grid)
    return raster_out(ws, Grid(slope[None], {**grid.profile, "descriptions": ["slope_deg"]}), "slope")


@tool("ras", writes=True)
def ras_aspect(ws: Workspace, dem: Image) -> RasterOut:
    """Aspect (downslope direction, degrees clockwise from north) from an elevation raster."""
    grid = rasters.read(ws.resolve(dem, suffixes=TIF), [1])
    _, aspect = rasters.slope_aspect(grid)
    return raster_out(ws, Grid(aspect[None], {**grid.profile, "descriptions": ["aspect_deg"]}), "aspect")


@tool("ras", writes=True)
def ras_hillshade(ws: Workspace, dem: Image, azimuth_deg: Annotated[float, Field(
        315.0, ge=0, lt=360, description="sun direction, degrees clockwise from north")] = 315.0,
                  altitude_deg: Annotated[float, Field(
                      45.0, gt=0, le=90, description="sun elevation above the horizon, degrees")] = 45.0) -> RasterOut:
    """Hillshade (0-255) of an elevation raster for a sun at azimuth/altitude (degrees)."""
    grid = rasters.read(ws.resolve(dem, suffixes=TIF), [1])
    shade = rasters.hillshade(grid, azimuth_deg, altitude_deg)
    return raster_out(ws, Grid(shade[None], {**grid.profile, "descriptions": ["hillshade"]}), "hillshade")


@tool("ras", writes=True)
def ras_reproject(ws: Workspace, image: Image, epsg: Annotated[int, Field(description="target EPSG code, e.g. 4326")],
                  resolution: Annotated[float | None, Field(None, gt=0, description="target pixel size in target "
                                                           "CRS units")] = None) -> RasterOut:
    """Warp a raster to another CRS (bilinear for continuous data, nearest for integer data)."""
    return raster_out(ws, rasters.reproject(ws.resolve(image, suffixes=TIF), epsg, resolution), "reproject")


@tool("ras", writes=True)
def ras_resample(ws: Workspace, image: Image, like: Image,
                 method: Annotated[Literal["nearest", "bilinear", "average", "max", "mode"], Field(
                     description="resampling method (nearest or mode for masks and classes)")] = "nearest",
                 ) -> RasterOut:
    """Resample a raster onto the grid of another raster in the same CRS (e.g. a 2.5 m mask onto the 10 m grid
    with 'mode' or 'max')."""
    return raster_out(ws, rasters.resample_to(ws.resolve(image, suffixes=TIF), ws.resolve(like, suffixes=TIF), method),
                      "resample")


@tool("ras", writes=True)
def ras_focal(ws: Workspace, image: Image, size: Annotated[int, Field(3, description="odd window size in pixels")] = 3,
              statistic: Annotated[Literal["mean", "max", "min", "median", "std"], Field(
                  description="statistic over the window")] = "mean",
              band: Band = 1) -> RasterOut:
    """Moving-window statistic over size x size pixels (e.g. median 3 to suppress SAR speckle)."""
    path = ws.resolve(image, suffixes=TIF)
    grid = rasters.read(path, [rasters.band_index(path, band)])
    filtered = rasters.focal(grid, size, statistic)[None]
    return raster_out(ws, Grid(filtered, {**grid.profile, "descriptions": [statistic]}), "focal")


@tool("ras")
def ras_otsu_threshold(ws: Workspace, image: Image, band: Band = 1) -> ValueOut:
    """Otsu's threshold of a band (the value best separating two classes, e.g. water vs land in SAR VV dB)."""
    path = ws.resolve(image, suffixes=TIF)
    return ValueOut(value=rasters.otsu_threshold(rasters.read(path, [rasters.band_index(path, band)]).data[0]))


@tool("ras")
def ras_pixel_to_world(ws: Workspace, image: Image, row: Annotated[int, Field(description="0-based row")],
                       col: Annotated[int, Field(description="0-based column")]) -> PointOut:
    """World coordinates (x, y in the raster's CRS) of the centre of pixel (row, col)."""
    import rasterio

    with rasterio.open(ws.resolve(image, suffixes=TIF)) as src:
        x, y = rasters.pixel_to_world({"transform": src.transform}, row, col)
        return PointOut(x=x, y=y, row=row, col=col, crs=crs_name(src.crs))


@tool("ras")
def ras_world_to_pixel(ws: Workspace, image: Image, x: Annotated[float, Field(description="easting, m (scene CRS)")],
                       y: Annotated[float, Field(description="northing, m (scene CRS)")]) -> PointOut:
    """The (row, col) of the pixel holding world point (x, y) (raster CRS); errors if outside the raster."""
    import rasterio

    with rasterio.open(ws.resolve(image, suffixes=TIF)) as src:
        row, col = rasters.world_to_pixel({"transform": src.transform}, x, y)
        if not (0 <= row < src.height and 0 <= col < src.width):
            raise RasterError(f"point ({x}, {y}) lies outside the raster (bounds {tuple(src.bounds)})")
        return PointOut(x=x, y=y, row=row, col=col, crs=crs_name(src.crs))


@tool("ras", writes=True)
def ras_mask_apply(ws: Workspace, image: Image, mask: Mask, band: Band = 1) -> RasterOut:
    """Keep one band's values where the mask is selected and set 0 elsewhere (same grid), e.g. population
    inside the flood, then sum it per district with ras_zonal_stats."""
    path = ws.resolve(image, suffixes=TIF)
    grid = rasters.read(path, [rasters.band_index(path, band)])
    selected = _mask(ws, mask)
    rasters.same_grid(grid, selected, "raster and mask")
    return raster_out(ws, Grid(np.where(selected.data > 0, grid.data, 0).astype(np.float32), grid.profile), "masked")
