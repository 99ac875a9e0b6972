"""Points-of-interest and exposure tools (poi_*): search, group, rank and count people exposed."""

from typing import Annotated

import numpy as np
from pydantic import Field

from gauntlet.mcp_servers.disaster import rasters, vectors
from gauntlet.mcp_servers.disaster.models import CountsOut, ItemsOut, ValueOut
from gauntlet.mcp_servers.disaster.toolkit import tool
from gauntlet.mcp_servers.disaster.tools_raster import TIF, Mask, Vector
from gauntlet.mcp_servers.disaster.tools_vector import _read, require_attribute
from gauntlet.mcp_servers.disaster.vectors import VectorError
from gauntlet.mcp_servers.disaster.workspace import Workspace


@tool("poi")
def poi_search(ws: Workspace, pois: Vector, type: Annotated[str | None, Field(None, description="e.g. hospital, "
               "school, shelter, fire_station, police")] = None,
               name_contains: Annotated[str | None, Field(
                   None, description="case-insensitive part of the name")] = None) -> ItemsOut:
    """Points of interest by type and/or a case-insensitive name fragment, with their attributes and x/y."""
    features, _ = _read(ws, pois)
    items = []
    for f, g in zip(features, vectors.geometries(features)):
        p = f["properties"]
        if type and p.get("type") != type:
            continue
        if name_contains and name_contains.lower() not in str(p.get("name", "")).lower():
            continue
        c = g.centroid
        items.append({**p, "x": float(c.x), "y": float(c.y)})
    return ItemsOut(items=items, count=len(items))


@tool("poi")
def poi_count_by(ws: Workspace, layer: Vector, key: Annotated[str, Field(description="attribute, e.g. damage, type")]
                 ) -> CountsOut:
    """Count features by the value of an attribute (e.g. buildings by damage, POIs by type)."""
    features, _ = _read(ws, layer)
    require_attribute(features, "key", key)
    counts: dict[str, int] = {}
    for f in features:
        value = str(f["properties"].get(key))
        counts[value] = counts.get(value, 0) + 1
    return CountsOut(counts=dict(sorted(counts.items())), total=len(features))


@tool("poi")
def poi_sum_by(ws: Workspace, layer: Vector, key: Annotated[str, Field(description="attribute to group by")],
               value_field: Annotated[str, Field(description="numeric attribute to sum, e.g. occupants")]) -> ItemsOut:
    """Sum a numeric attribute per value of another (e.g. occupants by damage)."""
    features, _ = _read(ws, layer)
    require_attribute(features, "key", key)
    require_attribute(features, "value_field", value_field)
    sums: dict[str, float] = {}
    for f in features:
        sums[str(f["properties"].get(key))] = sums.get(str(f["properties"].get(key)), 0.0) + float(
            f["properties"].get(value_field) or 0)
    items = [{"key": k, "sum": v} for k, v in sorted(sums.items())]
    return ItemsOut(items=items, count=len(items))


@tool("poi")
def poi_population_exposed(ws: Workspace,
                           population: Annotated[str, Field(description="'data/<event>/population.tif'")],
                           mask: Mask) -> ValueOut:
    """People living in the selected area of a mask: population raster summed over the mask's pixels (the mask is
    sampled at the population pixel centres, so masks of any resolution on the same CRS work)."""
    pop_path = ws.resolve(population, suffixes=TIF)
    pop = rasters.read(pop_path, [1])
    grid = rasters.read(ws.resolve(mask, suffixes=TIF), [1], dtype="uint8")
    if pop.profile["crs"] != grid.profile["crs"]:
        raise VectorError(f"the population raster and the mask have different CRS ({pop.profile['crs']} vs "
                          f"{grid.profile['crs']})")
    rows, cols = np.nonzero(pop.data[0])
    # Population cell centres in world coordinates, then the mask pixel under each.
    xs, ys = pop.profile["transform"] @ (cols + 0.5, rows + 0.5)
    mask_cols, mask_rows = ~grid.profile["transform"] @ (np.asarray(xs), np.asarray(ys))
    mask_rows, mask_cols = np.floor(mask_rows).astype(int), np.floor(mask_cols).astype(int)
    band = grid.data[0]
    inside = (mask_rows >= 0) & (mask_rows < band.shape[0]) & (mask_cols >= 0) & (mask_cols < band.shape[1])
    selected = np.zeros(rows.shape, bool)
    selected[inside] = band[mask_rows[inside], mask_cols[inside]] > 0
    total = float(pop.data[0][rows[selected], cols[selected]].sum())
    return ValueOut(value=total, unit="people")


@tool("poi")
def poi_attribute_values(ws: Workspace, layer: Vector,
                         key: Annotated[str, Field(description="attribute to list")]) -> ItemsOut:
    """The (id, value) of one attribute for every feature, in layer order."""
    features, _ = _read(ws, layer)
    require_attribute(features, "key", key)
    items = [{"id": f["properties"].get("id"), key: f["properties"].get(key)} for f in features]
    return ItemsOut(items=items, count=len(items))


@tool("poi")
def poi_top_k(ws: Workspace, layer: Vector, key: Annotated[str, Field(description="numeric attribute to rank by")],
              k: Annotated[int, Field(5, ge=1, le=1000, description="features to return")] = 5,
              descending: Annotated[bool, Field(description="largest first")] = True) -> ItemsOut:
    """The k features with the largest (or smallest) value of a numeric attribute."""
    features, _ = _read(ws, layer)
    require_attribute(features, "key", key)
    valued = [f for f in features if isinstance(f["properties"].get(key), (int, float))]
    valued.sort(key=lambda f: (f["properties"][key], str(f["properties"].get("id"))), reverse=descending)
    items = [f["properties"] for f in valued[:k]]
    return ItemsOut(items=items, count=len(items))


