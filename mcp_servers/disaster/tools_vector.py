"""Vector (vec_*) and points-of-interest (poi_*) tools: thin wrappers over vectors.py.

Coordinates are in the layer's projected CRS (metres) unless a tool says WGS84."""

from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field

from gauntlet.mcp_servers.disaster import rasters, vectors
from gauntlet.mcp_servers.disaster.models import (InfoOut, ItemsOut, MaskOut, PointOut, RouteOut, ValueOut,
                                                  VectorOut)
from gauntlet.mcp_servers.disaster.toolkit import tool
from gauntlet.mcp_servers.disaster.tools_raster import TIF, Mask, Vector
from gauntlet.mcp_servers.disaster.vectors import VectorError
from gauntlet.mcp_servers.disaster.workspace import Workspace

GEOJSON = (".geojson", ".json", ".gpkg")
XY = Annotated[list[float], Field(min_length=2, max_length=2, description="[x, y] in the layer's CRS (metres)",
                                  examples=[[350000.0, 5600000.0]])]
# Attribute values are JSON scalars, or a list of them for 'in'; declared so strict clients see a type.
AttributeValue = str | int | float | bool | list[str | int | float | bool]


def _read(ws: Workspace, path: str):
    return vectors.read_features(ws.resolve(path, suffixes=GEOJSON))


def require_attribute(features, argument: str, name: str) -> None:
    """``VectorError`` naming ``argument`` when no feature has the attribute ``name``: a missing attribute
    would read as 0 or nothing for every feature, an answer rather than the mistake it is."""
    known = sorted({key for f in features for key in f["properties"]})
    if features and name not in known:
        raise VectorError(f"argument '{argument}': no feature has the attribute {name!r}; this layer's "
                          f"attributes are {', '.join(known) or 'none'}")


def _write(ws: Workspace, stem: str, features, crs) -> VectorOut:
    return VectorOut(path=ws.write_json(stem, vectors.collection(features, crs)), crs=crs, count=len(features))


def _xy(point) -> tuple[float, float]:
    if len(point) != 2:
        raise VectorError("a point must be [x, y]")
    return float(point[0]), float(point[1])


def _same_crs(crs_a, crs_b) -> None:
    if crs_a and crs_b and vectors.epsg_of(crs_a) != vectors.epsg_of(crs_b):
        raise VectorError(f"the layers have different CRS ({crs_a} vs {crs_b}); they must share one")


# Geometry ------------------------------------------------------------------------------------------
@tool("vec")
def vec_info(ws: Workspace, layer: Vector) -> InfoOut:
    """A layer's feature count, CRS, geometry types, bounds and attribute names (with an example row)."""
    features, crs = _read(ws, layer)
    geoms = vectors.geometries(features)
    bounds = [min(g.bounds[0] for g in geoms), min(g.bounds[1] for g in geoms),
              max(g.bounds[2] for g in geoms), max(g.bounds[3] for g in geoms)] if geoms else None
    return InfoOut(info={"count": len(features), "crs": crs, "geometry_types": sorted({g.geom_type for g in geoms}),
                         "bounds": bounds, "attributes": sorted({k for f in features for k in f["properties"]}),
                         "example": features[0]["properties"] if features else None})


@tool("vec")
def vec_count(ws: Workspace, layer: Vector) -> ValueOut:
    """Number of features in a layer."""
    return ValueOut(value=len(_read(ws, layer)[0]), unit="features")


@tool("vec", writes=True)
def vec_from_geojson(ws: Workspace, geojson: Annotated[dict[str, Any], Field(
        description="a GeoJSON FeatureCollection, Feature or geometry (projected coordinates)")],
        crs: Annotated[str | None, Field(None, description="e.g. 'EPSG:32637'")] = None) -> VectorOut:
    """Save GeoJSON you wrote into the workspace so other tools can use it (validated first)."""
    features, declared = vectors.parse_collection(geojson, "the GeoJSON")
    name = declared or (f"EPSG:{vectors.epsg_of(crs)}" if vectors.epsg_of(crs) else crs)
    return _write(ws, "features", features, name)


@tool("vec", writes=True)
def vec_buffer(ws: Workspace, layer: Vector, distance_m: Annotated[float, Field(
        gt=0, le=50000, description="buffer distance, m")]) -> VectorOut:
    """Buffer every feature by distance_m metres (attributes kept)."""
    features, crs = _read(ws, layer)
    return _write(ws, "buffer", vectors.buffer(features, distance_m), crs)


RingDistance = Annotated[float, Field(gt=0, le=50000)]


@tool("vec", writes=True)
def vec_multi_ring_buffer(ws: Workspace, layer: Vector, distances_m: Annotated[list[RingDistance], Field(
        min_length=1, description="increasing distances, m", examples=[[100.0, 250.0, 500.0]])]) -> VectorOut:
    """Concentric rings around the layer (0-d1, d1-d2, ...), attribute distance_m = the ring's outer distance."""
    features, crs = _read(ws, layer)
    return _write(ws, "rings", vectors.multi_ring_buffer(features, list(distances_m)), crs)


@tool("vec", writes=True)
def vec_intersect(ws: Workspace, layer: Vector, overlay: Vector) -> VectorOut:
    """The parts of the layer's features inside the overlay (attributes of the layer kept)."""
    (a, crs_a), (b, crs_b) = _read(ws, layer), _read(ws, overlay)
    _same_crs(crs_a, crs_b)
    return _write(ws, "intersect", vectors.intersect(a, b), crs_a)


@tool("vec", writes=True)
def vec_select_intersecting(ws: Workspace, layer: Vector, overlay: Vector) -> VectorOut:
    """Whole features of the layer that touch the overlay (e.g. buildings touching flood polygons)."""
    (a, crs_a), (b, crs_b) = _read(ws, layer), _read(ws, overlay)
    _same_crs(crs_a, crs_b)
    return _write(ws, "selected", vectors.select_intersecting(a, b), crs_a)


@tool("vec", writes=True)
def vec_select_in_mask(ws: Workspace, layer: Vector, mask: Mask) -> VectorOut:
    """Features of the layer whose centroid lies on a selected pixel of the mask (e.g. POIs in the flood)."""
    features, crs = _read(ws, layer)
    grid = rasters.read(ws.resolve(mask, suffixes=TIF), [1], dtype="uint8")
    if crs and vectors.epsg_of(crs) != grid.profile["crs"].to_epsg():
        raise VectorError(f"the layer ({crs}) and the mask (EPSG:{grid.profile['crs'].to_epsg()}) have different CRS")
    band = grid.data[0]
    keep = []
    for f, g in zip(features, vectors.geometries(features)):
        row, col = rasters.world_to_pixel(grid.profile, *g.centroid.coords[0])
        if 0 <= row < band.shape[0] and 0 <= col < band.shape[1] and band[row, col]:
            keep.append(f)
    return _write(ws, "in-mask", keep, crs)


@tool("vec", writes=True)
def vec_within_distance(ws: Workspace, layer: Vector, reference: Vector,
                        distance_m: Annotated[float, Field(
                            ge=0, le=50000, description="greatest distance to the reference, m")]) -> VectorOut:
    """Features of the layer within distance_m metres of any feature of the reference layer."""
    (a, crs_a), (b, crs_b) = _read(ws, layer), _read(ws, reference)
    _same_crs(crs_a, crs_b)
    return _write(ws, "within", vectors.within_distance(a, b, distance_m), crs_a)


@tool("vec", writes=True)
def vec_largest_polygon(ws: Workspace, layer: Vector) -> VectorOut:
    """The feature with the largest area (or length, for lines)."""
    features, crs = _read(ws, layer)
    best, _ = vectors.largest(features)
    return _write(ws, "largest", [best], crs)


@tool("vec")
def vec_centroid(ws: Workspace, layer: Vector) -> PointOut:
    """Centroid (x, y) of the union of the layer's features."""
    from shapely.ops import unary_union

    features, crs = _read(ws, layer)
    if not features:
        raise VectorError("the layer has no features")
    c = unary_union(vectors.geometries(features)).centroid
    return PointOut(x=float(c.x), y=float(c.y), crs=crs)


@tool("vec", writes=True)
def vec_centroids(ws: Workspace, layer: Vector) -> VectorOut:
    """One point per feature at its centroid (attributes kept)."""
    features, crs = _read(ws, layer)
    return _write(ws, "centroids", [vectors.feature(g.centroid, f["properties"])
                                    for f, g in zip(features, vectors.geometries(features))], crs)


@tool("vec", writes=True)
def vec_filter_area(ws: Workspace, layer: Vector,
                    min_m2: Annotated[float, Field(0.0, ge=0, description="smallest area kept, m2")] = 0.0,
                    max_m2: Annotated[float | None, Field(
                        None, gt=0, description="largest area kept, m2 (null: no limit)")] = None) -> VectorOut:
    """Polygons whose area (m2) is within [min_m2, max_m2]."""
    features, crs = _read(ws, layer)
    return _write(ws, "by-area", vectors.filter_by_area(features, min_m2, max_m2 or float("inf")), crs)


@tool("vec", writes=True)
def vec_filter_attribute(ws: Workspace, layer: Vector, key: Annotated[str, Field(description="attribute to test")],
                         op: Annotated[Literal["==", "!=", ">", ">=", "<", "<=", "in", "contains"], Field(
                             description="comparison: attribute op value")],
                         value: Annotated[AttributeValue, Field(description="value to compare with (a list for 'in')",
                                                                examples=["destroyed"])]
                         ) -> VectorOut:
    """Features whose attribute key compares true with value (e.g. damage == destroyed, type in [school, shelter])."""
    features, crs = _read(ws, layer)
    require_attribute(features, "key", key)
    return _write(ws, "filtered", vectors.filter_by_attribute(features, key, op, value), crs)


@tool("vec")
def vec_nearest(ws: Workspace, layer: Vector, point: XY,
                k: Annotated[int, Field(1, ge=1, le=100, description="features to return")] = 1) -> ItemsOut:
    """The k features nearest to a point (straight-line), with distance_m and their attributes."""
    features, _ = _read(ws, layer)
    if not features:
        raise VectorError("the layer has no features")
    ranked = vectors.nearest(features, *_xy(point), k)
    items = [{**f["properties"], "distance_m": round(d, 3)} for f, d in ranked]
    return ItemsOut(items=items, count=len(items))


@tool("vec")
def vec_length_m(ws: Workspace, layer: Vector) -> ValueOut:
    """Total length of the layer's lines (m)."""
    return ValueOut(value=float(sum(g.length for g in vectors.geometries(_read(ws, layer)[0]))), unit="m")


@tool("vec")
def vec_area_m2(ws: Workspace, layer: Vector) -> ValueOut:
    """Total area of the layer's polygons (m2), overlaps counted once."""
    from shapely.ops import unary_union

    return ValueOut(value=float(unary_union(vectors.geometries(_read(ws, layer)[0])).area), unit="m2")


@tool("vec")
def vec_perimeter_m(ws: Workspace, layer: Vector) -> ValueOut:
    """Total perimeter of the layer's polygons (m)."""
    return ValueOut(value=float(sum(g.boundary.length for g in vectors.geometries(_read(ws, layer)[0]))), unit="m")


@tool("vec", writes=True)
def vec_convex_hull(ws: Workspace, layer: Vector) -> VectorOut:
    """The convex hull of all features (one polygon)."""
    from shapely.ops import unary_union

    features, crs = _read(ws, layer)
    return _write(ws, "hull", [vectors.feature(unary_union(vectors.geometries(features)).convex_hull, {})], crs)


@tool("vec", writes=True)
def vec_dissolve(ws: Workspace, layer: Vector, by: Annotated[str | None, Field(None, description="attribute")] = None
                 ) -> VectorOut:
    """Merge features into one per value of attribute 'by' (or into one overall)."""
    features, crs = _read(ws, layer)
    return _write(ws, "dissolved", vectors.dissolve(features, by), crs)


@tool("vec", writes=True)
def vec_simplify(ws: Workspace, layer: Vector, tolerance_m: Annotated[float, Field(
        gt=0, le=1000, description="largest vertex shift allowed, m")]) -> VectorOut:
    """Simplify geometries (Douglas-Peucker, topology preserved) with tolerance in metres."""
    features, crs = _read(ws, layer)
    return _write(ws, "simplified", [vectors.feature(g.simplify(tolerance_m), f["properties"])
                                     for f, g in zip(features, vectors.geometries(features))], crs)


@tool("vec", writes=True)
def vec_clip_bounds(ws: Workspace, layer: Vector, bounds: Annotated[list[float], Field(
        description="[min_x, min_y, max_x, max_y]")]) -> VectorOut:
    """The layer clipped to a rectangle."""
    from shapely.geometry import box

    if len(bounds) != 4 or bounds[0] >= bounds[2] or bounds[1] >= bounds[3]:
        raise VectorError("bounds must be [min_x, min_y, max_x, max_y] with min < max")
    features, crs = _read(ws, layer)
    rect = box(bounds[0], bounds[1], bounds[2], bounds[3])
    out = [vectors.feature(g.intersection(rect), f["properties"])
           for f, g in zip(features, vectors.geometries(features)) if g.intersects(rect)]
    return _write(ws, "clipped", out, crs)


@tool("vec")
def vec_point_in_polygon(ws: Workspace, layer: Vector, point: XY) -> ItemsOut:
    """The polygons of the layer that contain the point (their attributes)."""
    from shapely.geometry import Point

    features, _ = _read(ws, layer)
    p = Point(*_xy(point))
    items = [f["properties"] for f, g in zip(features, vectors.geometries(features)) if g.contains(p)]
    return ItemsOut(items=items, count=len(items))


@tool("vec")
def vec_to_wgs84(ws: Workspace, point: XY,
                 epsg: Annotated[int, Field(description="the point's EPSG code")]) -> PointOut:
    """Convert a projected point to WGS84 longitude (x) and latitude (y)."""
    try:
        lon, lat = vectors.to_wgs84(*_xy(point), epsg)
    except Exception as exc:  # pyproj raises CRSError for unknown codes
        raise VectorError(f"cannot convert from EPSG:{epsg} ({exc})") from None
    return PointOut(x=lon, y=lat, crs="EPSG:4326")


@tool("vec")
def vec_from_wgs84(ws: Workspace, lon: Annotated[float, Field(ge=-180, le=180, description="longitude, degrees")],
                   lat: Annotated[float, Field(ge=-90, le=90, description="latitude, degrees")],
                   epsg: Annotated[int, Field(description="EPSG code of the target CRS (the scene's manifest has it)",
                                              examples=[32632])]) -> PointOut:
    """Convert WGS84 longitude/latitude to a projected CRS (e.g. the scene's UTM EPSG)."""
    if not (-180 <= lon <= 180 and -90 <= lat <= 90):
        raise VectorError("lon must be in [-180, 180] and lat in [-90, 90]")
    try:
        x, y = vectors.from_wgs84(lon, lat, epsg)
    except Exception as exc:
        raise VectorError(f"cannot convert to EPSG:{epsg} ({exc})") from None
    return PointOut(x=x, y=y, crs=f"EPSG:{epsg}")


# Networks -------------------------------------------------------------------------------------------
AvoidStates = Annotated[list[str], Field(default_factory=lambda: ["flooded", "blocked"],
                                         description="segment states to avoid (roads need a 'state' attribute, "
                                         "e.g. from seg_road_damage)")]


def _unusable(features, avoid_states) -> set[str]:
    return {f["properties"].get("id") for f in features if f["properties"].get("state") in set(avoid_states)}


@tool("vec")
def vec_road_network_stats(ws: Workspace, roads: Vector, avoid_states: AvoidStates) -> InfoOut:
    """Nodes, segments, total length (m) and connected components of the usable road network."""
    features, _ = _read(ws, roads)
    graph = vectors.road_graph(features, _unusable(features, avoid_states))
    parts = vectors.connected_components_of(graph)
    return InfoOut(info={"nodes": graph.number_of_nodes(), "segments": graph.number_of_edges(),
                         "length_m": float(sum(d["length_m"] for _, _, d in graph.edges(data=True))),
                         "components": len(parts), "largest_component_nodes": len(parts[0]) if parts else 0})


@tool("vec", writes=True)
def vec_shortest_path(ws: Workspace, roads: Vector, start: XY, end: XY, avoid_states: AvoidStates) -> RouteOut:
    """Shortest route on the road network between the nodes nearest start and end, avoiding segments whose
    'state' is in avoid_states. Returns length_m, the segment ids and the route as GeoJSON."""
    features, crs = _read(ws, roads)
    graph = vectors.road_graph(features, _unusable(features, avoid_states))
    length, _, ids = vectors.shortest_path(graph, _xy(start), _xy(end))
    by_id = {f["properties"].get("id"): f for f in features}
    path = ws.write_json("route", vectors.collection([by_id[i] for i in ids], crs))
    return RouteOut(length_m=round(length, 3), segment_ids=ids, path=path)


@tool("vec")
def vec_min_repairs(ws: Workspace, roads: Vector, start: XY, end: XY, avoid_states: AvoidStates) -> ItemsOut:
    """The fewest damaged segments to repair to connect start and end (then the shortest such route).
    Items: one per segment to repair (id, state); 'count' is the number of repairs."""
    features, _ = _read(ws, roads)
    damaged = _unusable(features, avoid_states)
    repairs, length, _ = vectors.minimum_repairs(features, damaged, _xy(start), _xy(end))
    state = {f["properties"].get("id"): f["properties"].get("state") for f in features}
    return ItemsOut(items=[{"id": i, "state": state[i]} for i in repairs], count=len(repairs))


@tool("vec")
def vec_service_area(ws: Workspace, roads: Vector, origin: XY, max_distance_m: Annotated[float, Field(
        gt=0, description="greatest network distance, m")],
                     avoid_states: AvoidStates) -> InfoOut:
    """Network service area (isochrone by distance): road nodes reachable within max_distance_m of the origin,
    their count and the reachable road length (m)."""
    features, _ = _read(ws, roads)
    graph = vectors.road_graph(features, _unusable(features, avoid_states))
    reach = vectors.service_area(graph, *_xy(origin), max_distance_m)
    length = sum(d["length_m"] for u, v, d in graph.edges(data=True) if u in reach and v in reach)
    return InfoOut(info={"reachable_nodes": len(reach), "reachable_length_m": float(length)})


@tool("vec")
def vec_network_distance(ws: Workspace, roads: Vector, origin: XY, destinations: Vector,
                         avoid_states: AvoidStates) -> ItemsOut:
    """Road distance (m) from the origin to every feature of the destinations layer (null if unreachable),
    nearest first. Use it to find the closest reachable hospital or shelter."""
    import networkx as nx

    features, _ = _read(ws, roads)
    targets, _ = _read(ws, destinations)
    graph = vectors.road_graph(features, _unusable(features, avoid_states))
    source = vectors.nearest_node(graph, *_xy(origin))
    lengths = nx.single_source_dijkstra_path_length(graph, source, weight="length_m")
    items = []
    for f, g in zip(targets, vectors.geometries(targets)):
        node = vectors.nearest_node(graph, *g.centroid.coords[0])
        d = lengths.get(node)
        items.append({**f["properties"], "network_distance_m": None if d is None else round(d, 3)})
    items.sort(key=lambda item: (item["network_distance_m"] is None, item["network_distance_m"] or 0.0))
    return ItemsOut(items=items, count=len(items))


@tool("vec")
def vec_voronoi_allocation(ws: Workspace, facilities: Vector, demand: Vector,
                           weight_field: Annotated[str | None, Field(None, description="demand attribute to sum, "
                                                                      "e.g. occupants")] = None) -> ItemsOut:
    """Assign each demand feature to its nearest facility (Voronoi cells); per facility: id, name, features
    assigned and summed weight."""
    fac, _ = _read(ws, facilities)
    dem, _ = _read(ws, demand)
    if not fac:
        raise VectorError("the facilities layer has no features")
    if weight_field:
        require_attribute(dem, "weight_field", weight_field)
    owner = vectors.voronoi_allocation(fac, dem)
    items = []
    for j, f in enumerate(fac):
        mine = [d for d, o in zip(dem, owner) if o == j]
        total = sum(float(d["properties"].get(weight_field, 0) or 0) for d in mine) if weight_field else len(mine)
        items.append({"id": f["properties"].get("id"), "name": f["properties"].get("name"), "count": len(mine),
                      "weight": total})
    return ItemsOut(items=items, count=len(items))


@tool("vec")
def vec_road_centerline_length(ws: Workspace, mask: Mask) -> ValueOut:
    """Length (m) of the centrelines of a road mask: the mask is skeletonised (scikit-image) and each skeleton
    pixel step counted (diagonal steps as sqrt 2 pixels)."""
    from skimage.morphology import skeletonize

    grid = rasters.read(ws.resolve(mask, suffixes=TIF), [1], dtype="uint8")
    skeleton = skeletonize(grid.data[0] > 0)
    if not skeleton.any():
        raise VectorError("the mask is empty: no centreline")
    pixel = abs(grid.profile["transform"].a)
    straight = (skeleton[:, :-1] & skeleton[:, 1:]).sum() + (skeleton[:-1, :] & skeleton[1:, :]).sum()
    diagonal = (skeleton[:-1, :-1] & skeleton[1:, 1:]).sum() + (skeleton[:-1, 1:] & skeleton[1:, :-1]).sum()
    return ValueOut(value=float(pixel * (straight + np.sqrt(2) * diagonal)), unit="m")


@tool("vec", writes=True)
def vec_rasterize(ws: Workspace, layer: Vector, like: Annotated[str, Field(
        description="raster whose grid the mask takes, e.g. 'data/<event>/dem.tif'")]) -> MaskOut:
    """Burn the layer's features into a 0/1 mask on the grid of another raster (pixels touched by a feature)."""
    import rasterio
    from rasterio.features import rasterize

    from gauntlet.mcp_servers.disaster.rasters import Grid
    from gauntlet.mcp_servers.disaster.tools_raster import mask_out

    features, crs = _read(ws, layer)
    with rasterio.open(ws.resolve(like, suffixes=TIF)) as src:
        if crs and vectors.epsg_of(crs) != src.crs.to_epsg():
            raise VectorError(f"the layer ({crs}) and the raster (EPSG:{src.crs.to_epsg()}) have different CRS")
        profile = {"crs": src.crs, "transform": src.transform, "nodata": None}
        shape = (src.height, src.width)
    data = rasterize([f["geometry"] for f in features], out_shape=shape, transform=profile["transform"],
                     all_touched=True, dtype="uint8") if features else np.zeros(shape, np.uint8)
    return mask_out(ws, Grid(data[None], profile), "rasterized")


@tool("vec")
def vec_get_features(ws: Workspace, layer: Vector,
                     limit: Annotated[int, Field(50, ge=1, le=500, description="most features to return")] = 50
                     ) -> ItemsOut:
    """The first features of a layer with their attributes and GeoJSON geometry (to read a result)."""
    features, _ = _read(ws, layer)
    items = [{"properties": f["properties"], "geometry": f["geometry"]} for f in features[:limit]]
    return ItemsOut(items=items, count=len(features))
