"""Vector geometry, road networks and logistics (shapely, pyproj, networkx); knows nothing of MCP.

Features are GeoJSON dicts in the scene's projected (metric) CRS. Road graphs join segment ends
that coincide (to 1 cm); edge weights are lengths in metres.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np


class VectorError(ValueError):
    """Malformed GeoJSON, an empty selection, or a request the geometry cannot satisfy."""


# Reading ------------------------------------------------------------------------------------------
def read_features(path: Path) -> tuple[list[dict[str, Any]], str | None]:
    """Features and CRS (``EPSG:<code>``) of a GeoJSON or GeoPackage file; ``VectorError`` says what is malformed."""
    if Path(path).suffix.lower() == ".gpkg":
        return read_gpkg(path)
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise VectorError(f"{Path(path).name} is not readable JSON ({exc})") from None
    return parse_collection(data, Path(path).name)


def parse_collection(data: Any, what: str = "the GeoJSON") -> tuple[list[dict[str, Any]], str | None]:
    """Validate a FeatureCollection (or a list of features / one geometry) and return its features."""
    from shapely.geometry import shape

    if isinstance(data, dict) and data.get("type") == "FeatureCollection":
        features = data.get("features")
        crs = (data.get("crs") or {}).get("properties", {}).get("name")
        crs = f"EPSG:{epsg_of(crs)}" if epsg_of(crs) else crs  # one spelling for raster and vector tools
    elif isinstance(data, dict) and data.get("type") == "Feature":
        features, crs = [data], None
    elif isinstance(data, dict) and "coordinates" in data:
        features, crs = [{"type": "Feature", "properties": {}, "geometry": data}], None
    elif isinstance(data, list):
        features, crs = data, None
    else:
        raise VectorError(f"{what} is not a GeoJSON FeatureCollection, Feature or geometry")
    if not isinstance(features, list):
        raise VectorError(f"{what}: 'features' must be a list")
    for index, feature in enumerate(features):
        if not isinstance(feature, dict) or not isinstance(feature.get("geometry"), dict):
            raise VectorError(f"{what}: feature {index} has no 'geometry' object")
        try:
            geom = shape(feature["geometry"])
        except Exception as exc:  # shapely raises several types for bad coordinates
            raise VectorError(f"{what}: feature {index} has an invalid geometry ({exc})") from None
        if geom.is_empty:
            raise VectorError(f"{what}: feature {index} has an empty geometry")
        feature.setdefault("properties", {})
        if feature["properties"] is None:
            feature["properties"] = {}
    return features, crs


def collection(features: list[dict[str, Any]], crs: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "FeatureCollection", "features": features}
    if crs:  # GeoJSON (2008) names a CRS by its OGC URN; the tools report it as EPSG:<code>
        epsg = epsg_of(crs)
        out["crs"] = {"type": "name", "properties": {"name": f"urn:ogc:def:crs:EPSG::{epsg}" if epsg else crs}}
    return out


# GeoPackage -----------------------------------------------------------------------------------------
# GeoPackages record a last-change time; a fixed one keeps equal layers byte-identical (content-hashed
# workspace names, checksummed scene data).
GPKG_DATE = "2000-01-01T00:00:00Z"


def read_gpkg(path: Path, layer: str | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """Features and CRS of a GeoPackage layer (default: the first) via pyogrio."""
    import pyogrio.raw
    import shapely
    from shapely.geometry import mapping

    try:
        meta, _, wkb, fields = pyogrio.raw.read(str(path), layer=layer)
    except Exception as exc:  # pyogrio raises DataSourceError, DataLayerError, ...
        raise VectorError(f"{Path(path).name} is not a readable GeoPackage ({exc})") from None
    if wkb is None:
        raise VectorError(f"{Path(path).name}: the layer has no geometry column")
    names = list(meta["fields"])
    features = []
    for index, blob in enumerate(wkb):
        if blob is None:
            raise VectorError(f"{Path(path).name}: feature {index} has no geometry")
        props = {name: _plain(fields[k][index]) for k, name in enumerate(names)}
        features.append({"type": "Feature", "properties": props, "geometry": mapping(shapely.from_wkb(blob))})
    crs = meta.get("crs")
    return features, (f"EPSG:{epsg_of(crs)}" if epsg_of(crs) else crs)


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    return None if isinstance(value, float) and math.isnan(value) else value


def write_gpkg(path: Path, features: list[dict[str, Any]], crs: str | None, layer: str = "layer") -> None:
    """Write features as a one-layer GeoPackage (fields typed from their values: int, float, bool, text)."""
    import pyogrio
    import pyogrio.raw
    import shapely
    from shapely.geometry import shape

    if not features:
        raise VectorError("nothing to write: the layer has no features")
    geoms = [shape(f["geometry"]) for f in features]
    kinds = sorted({g.geom_type for g in geoms})
    geometry_type = kinds[0] if len(kinds) == 1 else "Unknown"
    names = sorted({k for f in features for k in f["properties"]})
    columns = []
    for name in names:
        values = [f["properties"].get(name) for f in features]
        present = [v for v in values if v is not None]
        if present and all(isinstance(v, bool) for v in present):
            columns.append(np.array([bool(v) for v in values]))
        elif len(present) == len(values) and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
            columns.append(np.array(values, dtype=np.int64))
        elif present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
            columns.append(np.array([float("nan") if v is None else float(v) for v in values]))
        else:
            columns.append(np.array(["" if v is None else (v if isinstance(v, str) else json.dumps(v))
                                     for v in values], dtype=object))
    pyogrio.set_gdal_config_options({"OGR_CURRENT_DATE": GPKG_DATE})
    pyogrio.raw.write(str(path), shapely.to_wkb(np.array(geoms, dtype=object)), columns, names, driver="GPKG",
                      layer=layer, crs=crs, geometry_type=geometry_type)


def epsg_of(crs_name: str | None) -> int | None:
    if not crs_name:
        return None
    tail = crs_name.rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else None


def geometries(features: list[dict[str, Any]]):
    from shapely.geometry import shape

    return [shape(f["geometry"]) for f in features]


def feature(geom, properties: dict[str, Any]) -> dict[str, Any]:
    from shapely.geometry import mapping

    return {"type": "Feature", "properties": properties, "geometry": mapping(geom)}


# Geometry ---------------------------------------------------------------------------------------
def buffer(features, distance_m: float):
    if not 0 < distance_m <= 50_000:
        raise VectorError(f"distance_m must be in (0, 50000], got {distance_m}")
    return [feature(g.buffer(distance_m), f["properties"]) for f, g in zip(features, geometries(features))]


def multi_ring_buffer(features, distances_m: list[float]):
    """Rings (annuli) between consecutive distances around the union of the features."""
    from shapely.ops import unary_union

    if not distances_m or sorted(distances_m) != list(distances_m) or distances_m[0] <= 0:
        raise VectorError("distances_m must be positive and increasing, e.g. [100, 250, 500]")
    union = unary_union(geometries(features))
    rings, inner = [], union
    for d in distances_m:
        outer = union.buffer(d)
        rings.append(feature(outer.difference(inner), {"distance_m": d}))
        inner = outer
    return rings


def dissolve(features, by: str | None = None):
    from shapely.ops import unary_union

    groups: dict[Any, list] = {}
    for f, g in zip(features, geometries(features)):
        groups.setdefault(f["properties"].get(by) if by else None, []).append(g)
    return [feature(unary_union(gs), {by: key} if by else {"count": len(gs)}) for key, gs in groups.items()]


def intersect(a, b):
    """Pieces of features of ``a`` that overlap the union of ``b`` (attributes of ``a`` kept)."""
    from shapely.ops import unary_union

    other = unary_union(geometries(b))
    out = []
    for f, g in zip(a, geometries(a)):
        piece = g.intersection(other)
        if not piece.is_empty:
            out.append(feature(piece, f["properties"]))
    return out


def select_intersecting(a, b):
    """Features of ``a`` (whole) that touch the union of ``b``."""
    from shapely.ops import unary_union
    from shapely.prepared import prep

    other = prep(unary_union(geometries(b)))
    return [f for f, g in zip(a, geometries(a)) if other.intersects(g)]


def within_distance(a, b, distance_m: float):
    """Features of ``a`` within ``distance_m`` of any feature of ``b``."""
    from shapely.ops import unary_union

    other = unary_union(geometries(b))
    return [f for f, g in zip(a, geometries(a)) if g.distance(other) <= distance_m]


def largest(features):
    if not features:
        raise VectorError("there are no features to choose from")
    geoms = geometries(features)
    index = int(np.argmax([g.area if g.area > 0 else g.length for g in geoms]))
    return features[index], geoms[index]


def filter_by_area(features, min_m2: float = 0.0, max_m2: float = math.inf):
    return [f for f, g in zip(features, geometries(features)) if min_m2 <= g.area <= max_m2]


def filter_by_attribute(features, key: str, op: str, value: Any):
    ops = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
           "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, "in": lambda a, b: a in b,
           "contains": lambda a, b: isinstance(a, str) and str(b).lower() in a.lower()}
    if op not in ops:
        raise VectorError(f"unknown operator {op!r}; use one of {', '.join(ops)}")
    out = []
    for f in features:
        if key in f["properties"]:
            try:
                if ops[op](f["properties"][key], value):
                    out.append(f)
            except TypeError:
                raise VectorError(f"cannot compare attribute {key!r} ({f['properties'][key]!r}) with {value!r} "
                                  f"using {op!r}") from None
    return out


def nearest(features, x: float, y: float, k: int = 1):
    """The ``k`` features nearest to (x, y), with their distance in metres."""
    from shapely.geometry import Point

    point = Point(x, y)
    ranked = sorted(((g.distance(point), i) for i, g in enumerate(geometries(features))))
    return [(features[i], d) for d, i in ranked[:k]]


def points_in_polygons(points, polygons):
    from shapely.ops import unary_union
    from shapely.prepared import prep

    area = prep(unary_union(geometries(polygons)))
    return [f for f, g in zip(points, geometries(points)) if area.contains(g)]


def to_wgs84(x: float, y: float, epsg: int) -> tuple[float, float]:
    from pyproj import Transformer

    lon, lat = Transformer.from_crs(epsg, 4326, always_xy=True).transform(x, y)
    return float(lon), float(lat)


def from_wgs84(lon: float, lat: float, epsg: int) -> tuple[float, float]:
    from pyproj import Transformer

    x, y = Transformer.from_crs(4326, epsg, always_xy=True).transform(lon, lat)
    return float(x), float(y)


# Road networks ----------------------------------------------------------------------------------
def _node(xy) -> tuple[float, float]:
    return (round(xy[0], 2), round(xy[1], 2))


def require_lines(features: list[dict[str, Any]], argument: str = "roads") -> None:
    """Refuse a layer that is not all single lines (a polygon layer given as roads, say)."""
    for f in features:
        kind = (f.get("geometry") or {}).get("type")
        if kind != "LineString":
            raise VectorError(f"argument {argument!r} must be a layer of road segments (LineString features); "
                              f"feature {f['properties'].get('id')!r} is a {kind}; a valid example: "
                              "data/<event>/roads.geojson")


def route_ends(parts: list[Any]) -> tuple[tuple[float, float], tuple[float, float]]:
    """Where a route of line segments in travel order (as ``vec_shortest_path`` writes it, each segment in
    either direction) starts and ends: the end of the first segment that the second does not touch, and
    the end of the last segment that the one before it does not touch (a lone segment: its first and last
    points)."""
    def ends(part) -> list[tuple[float, float]]:
        coords = list(part.coords)
        return [(float(coords[0][0]), float(coords[0][1])), (float(coords[-1][0]), float(coords[-1][1]))]

    def free_end(part, neighbour) -> tuple[float, float]:
        touching = {_node(point) for point in ends(neighbour)}
        own = ends(part)
        return own[1] if _node(own[0]) in touching else own[0]

    if len(parts) == 1:
        start, end = ends(parts[0])
        return start, end
    return free_end(parts[0], parts[1]), free_end(parts[-1], parts[-2])


def road_graph(roads, exclude_ids: set[str] | None = None):
    """An undirected graph of the road segments (minus ``exclude_ids``), weighted by length (m)."""
    import networkx as nx

    require_lines(roads)

    graph: nx.Graph[tuple[float, float]] = nx.Graph()
    for f, g in zip(roads, geometries(roads)):
        rid = f["properties"].get("id")
        if exclude_ids and rid in exclude_ids:
            continue
        coords = list(g.coords)
        graph.add_edge(_node(coords[0]), _node(coords[-1]), id=rid, length_m=g.length)
    return graph


def nearest_node(graph, x: float, y: float):
    if graph.number_of_nodes() == 0:
        raise VectorError("the road graph has no nodes")
    nodes = np.array(list(graph.nodes))
    index = int(np.argmin(np.hypot(nodes[:, 0] - x, nodes[:, 1] - y)))
    return tuple(nodes[index])


def shortest_path(graph, start: tuple[float, float], end: tuple[float, float]):
    """Length (m), node list and segment ids of the shortest route between the nodes nearest the points."""
    import networkx as nx

    a, b = nearest_node(graph, *start), nearest_node(graph, *end)
    try:
        nodes = nx.shortest_path(graph, a, b, weight="length_m")
    except nx.NetworkXNoPath:
        raise VectorError("no route connects the two points on the usable roads; find the minimum repairs "
                          "(vec_min_repairs) or pick another destination") from None
    length = sum(graph.edges[u, v]["length_m"] for u, v in zip(nodes, nodes[1:]))
    return length, nodes, [graph.edges[u, v]["id"] for u, v in zip(nodes, nodes[1:])]


def minimum_repairs(roads, damaged_ids: set[str], start, end):
    """The fewest damaged segments to repair so that a route exists (then the shortest such route).

    Dijkstra on the full network with a large cost per damaged segment (lexicographic: repairs first,
    then length), which is exact because any route's repair count is the number of damaged edges on it.
    """
    import networkx as nx

    graph = road_graph(roads)
    big = 1e9
    for _, _, data in graph.edges(data=True):
        data["cost"] = data["length_m"] + (big if data["id"] in damaged_ids else 0.0)
    a, b = nearest_node(graph, *start), nearest_node(graph, *end)
    try:
        nodes = nx.shortest_path(graph, a, b, weight="cost")
    except nx.NetworkXNoPath:
        raise VectorError("the two points are not connected even with every road repaired") from None
    ids = [graph.edges[u, v]["id"] for u, v in zip(nodes, nodes[1:])]
    length = sum(graph.edges[u, v]["length_m"] for u, v in zip(nodes, nodes[1:]))
    return [i for i in ids if i in damaged_ids], length, ids


def service_area(graph, x: float, y: float, max_m: float):
    """Nodes reachable within ``max_m`` metres of network distance from the node nearest (x, y)."""
    import networkx as nx

    source = nearest_node(graph, x, y)
    lengths = nx.single_source_dijkstra_path_length(graph, source, cutoff=max_m, weight="length_m")
    return lengths


def connected_components_of(graph) -> list[set]:
    import networkx as nx

    return sorted(nx.connected_components(graph), key=len, reverse=True)


def voronoi_allocation(facilities, points):
    """For each point, the nearest facility (Euclidean Voronoi cell); returns facility index per point."""
    fx = np.array([g.centroid.coords[0] for g in geometries(facilities)])
    out = []
    for g in geometries(points):
        c = g.centroid.coords[0]
        out.append(int(np.argmin(np.hypot(fx[:, 0] - c[0], fx[:, 1] - c[1]))))
    return out


def voronoi_polygons(facilities, extent):
    """Voronoi service areas: one polygon per facility (the region nearer to it than to any other),
    clipped to ``extent`` (a shapely polygon); properties are the facility's plus area_m2."""
    import shapely
    from shapely.geometry import MultiPoint

    points = [g.centroid for g in geometries(facilities)]
    keys = [(round(p.x, 3), round(p.y, 3)) for p in points]
    if len(set(keys)) != len(keys):
        raise VectorError("two facilities share a location; Voronoi cells need distinct points (dissolve them first)")
    if len(points) == 1:
        cells = [extent]
    else:
        regions = shapely.voronoi_polygons(MultiPoint(points), extend_to=extent)
        cells = []
        for p in points:
            cell = next((r for r in regions.geoms if r.covers(p)), None)
            if cell is None:
                raise VectorError("a facility lies outside the Voronoi diagram; is it inside the extent?")
            cells.append(cell)
    out = []
    for f, cell in zip(facilities, cells):
        clipped = cell.intersection(extent)
        if clipped.is_empty:
            continue
        out.append(feature(clipped, {**f["properties"], "area_m2": round(clipped.area, 3)}))
    return out


def allocate_capacity(demands: list[float], capacities: list[float], distances: list[list[float]]):
    """Greedy allocation of demands to facilities by increasing distance, respecting capacities.

    Returns ``assigned[i][j]`` people of demand ``i`` sent to facility ``j`` and the unmet total.
    Deterministic: ties break by index.
    """
    remaining = list(capacities)
    assigned = [[0.0] * len(capacities) for _ in demands]
    unmet = 0.0
    pairs = sorted((distances[i][j], i, j) for i in range(len(demands)) for j in range(len(capacities)))
    left = list(demands)
    for _, i, j in pairs:
        take = min(left[i], remaining[j])
        if take > 0:
            assigned[i][j] += take
            left[i] -= take
            remaining[j] -= take
    unmet = float(sum(left))
    return assigned, unmet
