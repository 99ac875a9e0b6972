"""Pydantic result models shared by the disaster tools (the MCP output schemas)."""

from __future__ import annotations

from datetime import date
from typing import Any

from pydantic import BaseModel, Field

from gauntlet.bridges.tool_server import ResultWithContent
from gauntlet.mcp_servers.disaster.reporting import Direction, Trend


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


class FigureOut(ResultWithContent):
    """A figure written to the workspace as a PNG (and sent with the result as image content), with its
    provenance: what kind of figure, its size, and the layers it was drawn from."""

    path: str = Field(description="workspace path of the PNG (give it to viz_add_map_elements or viz_report_page)")
    kind: str = Field(description="what the figure is: overlay_mask, map_elements, damage_map, route_map, "
                                  "before_after_panel, temporal_panel, pie_chart, bar_chart, line_chart, heatmap "
                                  "or report_page")
    width_px: int
    height_px: int
    layers: list[str] = Field(description="the layers and figures it was drawn from, in argument order")
    source_layers: list[str] = Field(description="the data and workspace layers behind it, through the figures it "
                                                 "composes (sorted)")
    provenance_path: str = Field(description="workspace path of the JSON sidecar that records this provenance")
    details: dict[str, Any] = Field(description="what was drawn: classes and counts, dates, values, bandwidth...")


class EvidenceStep(BaseModel):
    """The change of the mapped area between two consecutive dates."""

    start_date: date
    end_date: date
    days: int
    change_m2: float = Field(description="area on end_date minus area on start_date, m2")
    rate_m2_per_day: float = Field(description="change_m2 / days")
    direction: Direction


class EvidenceOut(BaseModel):
    """Evidence from dated masks: the area on each date, the peak, growth and recession, and the trend class."""

    dates: list[date] = Field(description="the dates in order")
    masks: list[str] = Field(description="the mask of each date, in date order")
    areas_m2: list[float] = Field(description="the selected area of each date's mask, m2")
    first_date: date
    first_area_m2: float
    peak_date: date = Field(description="the (first) date of the largest area")
    peak_area_m2: float
    last_date: date
    last_area_m2: float
    growth_rate_m2_per_day: float = Field(description="(peak - first area) / days from the first date to the peak; "
                                                      "0 when the peak is the first date")
    recession_rate_m2_per_day: float = Field(description="(peak - last area) / days from the peak to the last date "
                                                         "(area lost per day); 0 when the peak is the last date")
    tolerance_m2: float = Field(description="changes no larger than this count as flat (1% of the peak area)")
    steps: list[EvidenceStep]
    trend: Trend = Field(description="expanding, shrinking, expand-then-recede or mixed (rule in the tool's "
                                     "description)")


class SummaryOut(BaseModel):
    """A report summary: written from a fixed template, or by the client's language model from it."""

    text: str = Field(description="the summary, one sentence per line")
    sentences: list[str]
    word_count: int
    writer: str = Field("template", description="'template', or 'client_model' when the client's model wrote text")
    model: str | None = Field(None, description="the client's model, as the client names it (client_model only)")
    template_text: str | None = Field(None, description="the template's summary the model was given (client_model "
                                      "only)")
    facts_missing: list[str] = Field(default_factory=list, description="labels of findings whose value is not in "
                                     "the model's text as the template writes it (client_model only)")
