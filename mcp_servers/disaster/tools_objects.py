"""Object detectors (seg_*: vehicles, ships, storage tanks, pools, bridges, SAR building damage) and
layer-format / service-area tools (vec_*): thin wrappers over detectors.py and vectors.py."""

from typing import Annotated

from pydantic import Field

from gauntlet.mcp_servers.disaster import detectors, vectors
from gauntlet.mcp_servers.disaster.models import DetectionsOut, VectorOut
from gauntlet.mcp_servers.disaster.rasters import RasterError, metadata
from gauntlet.mcp_servers.disaster.toolkit import tool
from gauntlet.mcp_servers.disaster.tools_raster import TIF, VECTOR_SUFFIXES, Image, Vector, annotate_footprints
from gauntlet.mcp_servers.disaster.workspace import Workspace

Optical = Annotated[str, Field(description="optical RGB+NIR image: 'data/<event>/pre_optical.tif' (before the "
                                           "event) or 'post_optical.tif' (after)")]
Limit = Annotated[int, Field(25, ge=0, le=500, description="how many objects to list in 'items' (all are counted "
                                                           "and written to the point layer)")]


def _detections(ws: Workspace, image: str, found: list[dict], stem: str, limit: int) -> DetectionsOut:
    path = ws.resolve(image, suffixes=TIF)
    crs = metadata(path)["crs"]
    features = [{"type": "Feature", "geometry": {"type": "Point", "coordinates": [d["x"], d["y"]]},
                 "properties": {"id": f"{stem[0]}{i:03d}", **{k: v for k, v in d.items() if k not in ("x", "y")}}}
                for i, d in enumerate(found)]
    layer = ws.write_json(stem, vectors.collection(features, crs))
    return DetectionsOut(count=len(found), items=found[:limit], path=layer, crs=crs)


@tool("seg", writes=True)
def seg_vehicles(ws: Workspace, image: Optical, limit: Limit = 25) -> DetectionsOut:
    """Detect vehicles (cars, 5 x 2.5 m) in an optical image: small bright blobs of 1-4 pixels (mean RGB+NIR
    reflectance > 0.36). Compare 'pre_optical.tif' with 'post_optical.tif' to see how many were lost
    (flooded, buried, burned). Returns the count, positions and a point layer."""
    found = detectors.vehicles(ws.resolve(image, suffixes=TIF))
    return _detections(ws, image, found, "vehicles", limit)


@tool("seg", writes=True)
def seg_ships(ws: Workspace, image: Optical, limit: Limit = 25) -> DetectionsOut:
    """Detect ships and boats in open water (river or sea) of an optical image: elongated dry objects of
    40-1000 m2 enclosed by NDWI water. Returns the count, positions, length_m/width_m and a point layer."""
    found = detectors.ships(ws.resolve(image, suffixes=TIF))
    return _detections(ws, image, found, "ships", limit)


@tool("seg", writes=True)
def seg_storage_tanks(ws: Workspace, image: Optical, limit: Limit = 25) -> DetectionsOut:
    """Detect circular storage tanks (radius 7.5-15 m, bright roofs) in an optical image with the Hough circle
    transform. Returns the count, centres, radius_m and a point layer."""
    found = detectors.storage_tanks(ws.resolve(image, suffixes=TIF))
    return _detections(ws, image, found, "tanks", limit)


@tool("seg", writes=True)
def seg_pools(ws: Workspace, image: Optical, limit: Limit = 25) -> DetectionsOut:
    """Detect swimming pools in an optical image by their clear blue water (blue > 0.15, blue much brighter than
    red, NIR < 0.1). Returns the count, positions, area_m2 and a point layer."""
    found = detectors.pools(ws.resolve(image, suffixes=TIF))
    return _detections(ws, image, found, "pools", limit)


@tool("seg", writes=True)
def seg_bridges(ws: Workspace, image: Optical, roads: Vector) -> VectorOut:
    """Find the road segments that are bridges: where a road crosses a river or the sea in the optical image
    (use 'pre_optical.tif': flood water around a road is no bridge). Returns the bridge segments (attributes
    of the road plus water_samples); 'count' is the number of bridges."""
    features, crs = vectors.read_features(ws.resolve(roads, suffixes=VECTOR_SUFFIXES))
    vectors.require_lines(features)
    flags = detectors.bridges(ws.resolve(image, suffixes=TIF), features)
    out = [{**f, "properties": {**f["properties"], "water_samples": r["water_samples"]}}
           for f, r in zip(features, flags) if r["bridge"]]
    return VectorOut(path=ws.write_json("bridges", vectors.collection(out, crs)), crs=crs, count=len(out))


@tool("seg", writes=True)
def seg_building_damage_sar(ws: Workspace, pre_image: Image, post_image: Image, buildings: Vector) -> VectorOut:
    """Per-building damage from pre/post SAR ('pre_sar.tif', 'post_sar.tif'; works through cloud and at night):
    the change of VV backscatter inside each footprint, 10*log10(post/pre); destroyed at <= -3.5 dB, partial at
    <= -2.5 dB. Less accurate than the optical seg_building_damage (10 m pixels, speckle). Returns the
    footprints with 'damage' and 'vv_change_db' (count them with poi_count_by)."""
    features, crs = vectors.read_features(ws.resolve(buildings, suffixes=VECTOR_SUFFIXES))
    results = detectors.building_damage_sar(ws.resolve(pre_image, suffixes=TIF), ws.resolve(post_image, suffixes=TIF),
                                            features)
    out = annotate_footprints(features, results, ("damage", "vv_change_db"))
    return VectorOut(path=ws.write_json("sar-damage", vectors.collection(out, crs)), crs=crs, count=len(out))


@tool("vec", writes=True)
def vec_voronoi_polygons(ws: Workspace, facilities: Vector, extent: Annotated[str, Field(
        description="polygon layer bounding the areas, e.g. 'data/<event>/admin.geojson' (its union is used)")]
        ) -> VectorOut:
    """Voronoi service areas: for each facility (e.g. shelters filtered from pois.geojson) the polygon of all
    places nearer to it than to any other facility, clipped to the extent. Attributes: the facility's plus
    area_m2. Combine with ras_zonal_stats on population.tif to get the people each facility serves."""
    from shapely.ops import unary_union

    fac, crs = vectors.read_features(ws.resolve(facilities, suffixes=VECTOR_SUFFIXES))
    ext, ext_crs = vectors.read_features(ws.resolve(extent, suffixes=VECTOR_SUFFIXES))
    if crs and ext_crs and vectors.epsg_of(crs) != vectors.epsg_of(ext_crs):
        raise vectors.VectorError(f"the facilities ({crs}) and the extent ({ext_crs}) have different CRS")
    if not fac:
        raise vectors.VectorError("the facilities layer has no features")
    area = unary_union(vectors.geometries(ext))
    if area.area <= 0:
        raise vectors.VectorError("the extent layer has no polygon area")
    return VectorOut(path=ws.write_json("voronoi", vectors.collection(vectors.voronoi_polygons(fac, area), crs)),
                     crs=crs, count=len(fac))


@tool("vec", writes=True)
def vec_to_gpkg(ws: Workspace, layer: Vector, layer_name: Annotated[str, Field(
        "layer", pattern=r"^[A-Za-z][A-Za-z0-9_]{0,62}$", description="name of the layer inside the GeoPackage")]
        = "layer") -> VectorOut:
    """Save a vector layer (GeoJSON or GeoPackage) as a GeoPackage ('ws/...gpkg'), for GIS software. Every vector
    tool also reads .gpkg paths."""
    features, crs = vectors.read_features(ws.resolve(layer, suffixes=VECTOR_SUFFIXES))
    if not features:
        raise RasterError("the layer has no features; a GeoPackage needs at least one")
    return VectorOut(path=ws.write_gpkg("layer", features, crs, layer_name), crs=crs, count=len(features))
