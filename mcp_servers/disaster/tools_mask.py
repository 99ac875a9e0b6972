"""Mask algebra tools (mask_*): set operations, morphology and regions of 0/1 masks on one grid."""

from typing import Annotated

import numpy as np
from pydantic import Field

from gauntlet.mcp_servers.disaster import perception, rasters
from gauntlet.mcp_servers.disaster.models import CountsOut, ItemsOut, MaskOut, ValueOut
from gauntlet.mcp_servers.disaster.rasters import Grid, RasterError
from gauntlet.mcp_servers.disaster.toolkit import tool
from gauntlet.mcp_servers.disaster.tools_raster import TIF, Image, Mask, _mask, mask_out
from gauntlet.mcp_servers.disaster.workspace import Workspace


def _pair(ws, a, b):
    ga, gb = _mask(ws, a), _mask(ws, b)
    rasters.same_grid(ga, gb, "masks")
    return ga, gb


@tool("mask", writes=True)
def mask_union(ws: Workspace, mask_a: Mask, mask_b: Mask) -> MaskOut:
    """Pixels selected in either mask (same grid)."""
    a, b = _pair(ws, mask_a, mask_b)
    return mask_out(ws, Grid((a.data > 0) | (b.data > 0), a.profile), "union")


@tool("mask", writes=True)
def mask_intersection(ws: Workspace, mask_a: Mask, mask_b: Mask) -> MaskOut:
    """Pixels selected in both masks (same grid)."""
    a, b = _pair(ws, mask_a, mask_b)
    return mask_out(ws, Grid((a.data > 0) & (b.data > 0), a.profile), "intersection")


@tool("mask", writes=True)
def mask_difference(ws: Workspace, mask_a: Mask, mask_b: Mask) -> MaskOut:
    """Pixels selected in mask_a but not in mask_b (same grid)."""
    a, b = _pair(ws, mask_a, mask_b)
    return mask_out(ws, Grid((a.data > 0) & (b.data == 0), a.profile), "difference")


@tool("mask", writes=True)
def mask_invert(ws: Workspace, mask: Mask) -> MaskOut:
    """Pixels not selected in the mask."""
    grid = _mask(ws, mask)
    return mask_out(ws, Grid(grid.data == 0, grid.profile), "invert")


@tool("mask", writes=True)
def mask_dilate(ws: Workspace, mask: Mask,
                pixels: Annotated[int, Field(1, ge=1, le=50, description="cells to grow by")] = 1) -> MaskOut:
    """Grow the mask by a number of pixels (8-connected)."""
    from scipy import ndimage

    grid = _mask(ws, mask)
    dilated = ndimage.binary_dilation(grid.data[0] > 0, np.ones((3, 3), bool), pixels)
    return mask_out(ws, Grid(dilated[None], grid.profile), "dilate")


@tool("mask", writes=True)
def mask_erode(ws: Workspace, mask: Mask,
               pixels: Annotated[int, Field(1, ge=1, le=50, description="cells to shrink by")] = 1) -> MaskOut:
    """Shrink the mask by a number of pixels (8-connected)."""
    from scipy import ndimage

    grid = _mask(ws, mask)
    eroded = ndimage.binary_erosion(grid.data[0] > 0, np.ones((3, 3), bool), pixels)
    return mask_out(ws, Grid(eroded[None], grid.profile), "erode")


@tool("mask", writes=True)
def mask_remove_small(ws: Workspace, mask: Mask, min_area_m2: Annotated[float, Field(
        gt=0, description="smallest region kept, m2")]) -> MaskOut:
    """Drop connected regions smaller than min_area_m2 (cleans speckle in detector masks)."""
    grid = _mask(ws, mask)
    labels, count = rasters.connected_components(grid)
    sizes = np.bincount(labels.ravel()) * grid.pixel_area_m2
    keep = sizes >= min_area_m2
    keep[0] = False
    return mask_out(ws, Grid(keep[labels][None], grid.profile), "denoised")


@tool("mask")
def mask_components(ws: Workspace, mask: Mask, min_area_m2: Annotated[float, Field(
        0.0, ge=0, description="smallest region listed, m2")] = 0.0) -> ItemsOut:
    """Connected regions (8-connected) of a mask, largest first: label, pixel count, area_m2, centroid x/y."""
    grid = _mask(ws, mask)
    labels, count = rasters.connected_components(grid)
    if count == 0:
        raise RasterError("the mask is empty: it has no regions")
    sizes = np.bincount(labels.ravel())
    rows, cols = np.indices(labels.shape)
    sum_r, sum_c = np.bincount(labels.ravel(), rows.ravel()), np.bincount(labels.ravel(), cols.ravel())
    items = []
    for label in range(1, count + 1):
        area = float(sizes[label] * grid.pixel_area_m2)
        if area >= min_area_m2:
            row, col = sum_r[label] / sizes[label] - 0.5, sum_c[label] / sizes[label] - 0.5
            x, y = rasters.pixel_to_world(grid.profile, row, col)
            items.append({"label": label, "pixel_count": int(sizes[label]), "area_m2": area, "x": x, "y": y})
    items.sort(key=lambda item: (-item["pixel_count"], item["label"]))
    return ItemsOut(items=items, count=len(items))


@tool("mask", writes=True)
def mask_largest_component(ws: Workspace, mask: Mask) -> MaskOut:
    """Only the largest connected region of a mask."""
    grid = _mask(ws, mask)
    labels, count = rasters.connected_components(grid)
    if count == 0:
        raise RasterError("the mask is empty: it has no regions")
    sizes = np.bincount(labels.ravel())
    sizes[0] = 0
    return mask_out(ws, Grid((labels == int(np.argmax(sizes)))[None], grid.profile), "largest")


@tool("mask")
def mask_iou(ws: Workspace, mask_a: Mask, mask_b: Mask) -> ValueOut:
    """Intersection over union of two masks on the same grid (1.0 when both are empty)."""
    a, b = _pair(ws, mask_a, mask_b)
    return ValueOut(value=perception.iou(a.data[0] > 0, b.data[0] > 0))


@tool("mask")
def mask_fraction(ws: Workspace, mask: Mask) -> ValueOut:
    """Fraction (0-1) of the raster's pixels that the mask selects."""
    grid = _mask(ws, mask)
    return ValueOut(value=float(np.count_nonzero(grid.data[0]) / grid.data[0].size))


@tool("mask")
def mask_count_by_class(ws: Workspace, image: Image) -> CountsOut:
    """Pixel count of each value of an integer class raster (e.g. from ras_compose_classes)."""
    grid = rasters.read(ws.resolve(image, suffixes=TIF), [1], dtype="int64")
    values, counts = np.unique(grid.data[0], return_counts=True)
    return CountsOut(counts={str(int(v)): int(c) for v, c in zip(values, counts)}, total=int(counts.sum()))
