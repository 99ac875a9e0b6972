"""Pydantic result models shared by the disaster tools (the MCP output schemas)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class RasterOut(BaseModel):
    """A raster written to the workspace."""

    path: str = Field(description="workspace path of the GeoTIFF (pass it to other tools)")
    crs: str = Field(description="coordinate reference system, e.g. EPSG:32637")
    width: int
    height: int
    pixel_size_m: float
    bands: list[str]


class MaskOut(BaseModel):
    """A 0/1 mask written to the workspace, with its size."""

    path: str = Field(description="workspace path of the mask GeoTIFF (uint8, 1 = selected)")
    crs: str
    pixel_size_m: float
    pixel_count: int = Field(description="number of selected pixels")
    area_m2: float = Field(description="selected area in square metres")


class VectorOut(BaseModel):
    """A GeoJSON layer written to the workspace."""

    path: str = Field(description="workspace path of the GeoJSON (pass it to other tools)")
    crs: str | None
    count: int = Field(description="number of features")


class ValueOut(BaseModel):
    """One number with its unit."""

    value: float
    unit: str = ""


class ValuesOut(BaseModel):
    """Several numbers (or nulls where undefined)."""

    values: list[float | None]
    unit: str = ""


class CountsOut(BaseModel):
    """Counts by category."""

    counts: dict[str, int]
    total: int


class ItemsOut(BaseModel):
    """A list of records (features' properties, rankings, allocations...)."""

    items: list[dict[str, Any]]
    count: int


class PointOut(BaseModel):
    """A point in the layer's CRS (x = easting, y = northing), or a pixel (row, col)."""

    x: float | None = None
    y: float | None = None
    row: int | None = None
    col: int | None = None
    crs: str | None = None


class RouteOut(BaseModel):
    """A route on the road network."""

    length_m: float = Field(description="route length in metres")
    segment_ids: list[str] = Field(description="road segment ids along the route, in order")
    path: str = Field(description="workspace path of the route as GeoJSON")


class BoolOut(BaseModel):
    value: bool


class InfoOut(BaseModel):
    """A file's metadata."""

    info: dict[str, Any]


class DetectionsOut(BaseModel):
    """Objects found by a detector: how many, where (the first ``limit``), and a point layer of all."""

    count: int = Field(description="number of objects found")
    items: list[dict[str, Any]] = Field(description="the first objects (x, y in the image's CRS and sizes in m)")
    path: str = Field(description="workspace path of a GeoJSON point layer of every object found")
    crs: str
