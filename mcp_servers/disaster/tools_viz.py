"""Visualisation tools (viz_*): maps, image panels, charts, a point heatmap and a report page, drawn as PNG
figures into the workspace and sent back as image content too: thin wrappers over figures.py.

Each figure is ``ws/figure-<kind>-<hash>.png`` with a JSON sidecar beside it, ``ws/figure-<kind>-<hash>.json``:
its provenance (kind, size in pixels, the layers it was drawn from and the data layers behind them, what
was drawn) and, for a figure with one map, where the map sits (viz_add_map_elements reads it). Rasters
are drawn shrunk to at most 1024 pixels a side; masks keep every selected pixel visible.
"""

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from mcp.types import ImageContent
from pydantic import BaseModel, Field

from gauntlet.bridges.tool_errors import ToolInputError
from gauntlet.mcp_servers.disaster import figures as draw
from gauntlet.mcp_servers.disaster import rasters, vectors
from gauntlet.mcp_servers.disaster.figures import Drawing, LegendEntry, MapFrame, Place
from gauntlet.mcp_servers.disaster.models import FigureOut
from gauntlet.mcp_servers.disaster.rasters import Grid, RasterError
from gauntlet.mcp_servers.disaster.toolkit import tool
from gauntlet.mcp_servers.disaster.tools_raster import TIF, VECTOR_SUFFIXES, Band, Image, Mask
from gauntlet.mcp_servers.disaster.tools_vector import require_attribute
from gauntlet.mcp_servers.disaster.vectors import VectorError
from gauntlet.mcp_servers.disaster.workspace import PathNotAllowed, Workspace

PNG = (".png",)
MAX_PANELS = 8
MAX_CLASSES = 12

Title = Annotated[str | None, Field(None, max_length=120, description="title written above the figure")]
Colour = Annotated[str, Field(max_length=40, description="a colour name ('red') or hex code ('#1f77b4')")]
Label = Annotated[str, Field(max_length=60, description="a short label")]
Bands = Annotated[list[Band] | None, Field(None, min_length=1, max_length=3, description=(
    "1 band (drawn grey) or 3 (drawn red, green, blue), by number or name; default: red, green, blue (or B4, B3, "
    "B2) when the image has them, else band 1"), examples=[["red", "green", "blue"]])]
Number = Annotated[float, Field(allow_inf_nan=False, ge=-1e15, le=1e15)]
Share = Annotated[float, Field(allow_inf_nan=False, ge=0, le=1e15)]
ValueLabel = Annotated[str | None, Field(None, max_length=60, description="the values' name and unit, e.g. "
                                                                         "'area (m2)'")]


@dataclass
class RasterLayer:
    """A raster read for drawing: its virtual path, file, metadata, pixels and place."""

    path: str
    real: Path
    meta: dict[str, Any]
    grid: Grid
    place: Place
    band_names: list[str]


def _raster(ws: Workspace, path: str, argument: str, bands: list[int | str] | None = None, *,
            mask: bool = False) -> RasterLayer:
    real = ws.resolve(path, suffixes=TIF)
    meta = rasters.metadata(real)
    indexes = [1] if mask else _band_indexes(real, meta, bands, argument)
    grid = rasters.read_for_display(real, indexes, draw.MAX_DISPLAY_SIDE_PX, mask=mask)
    left, bottom, right, top = meta["bounds"]
    place = Place(meta["crs"], rasters.is_metric(grid.profile["crs"]), (left, bottom, right, top))
    return RasterLayer(ws.virtual(real), real, meta, grid, place, [meta["bands"][index - 1] for index in indexes])


def _band_indexes(real: Path, meta: dict[str, Any], bands: list[int | str] | None, argument: str) -> list[int]:
    if bands is None:
        names = [name.lower() for name in meta["bands"]]
        for triple in (("red", "green", "blue"), ("b4", "b3", "b2")):
            if all(name in names for name in triple):
                return [names.index(name) + 1 for name in triple]
        return [1]
    if len(bands) == 2:
        raise ToolInputError(f"argument 'bands' (for {argument}): give 1 band (drawn grey) or 3 (red, green, blue), "
                             'not 2; a valid example: {"bands": ["red", "green", "blue"]}')
    return [rasters.band_index(real, band) for band in bands]


def _layer_auto(ws: Workspace, path: str, argument: str, bands: list[int | str] | None) -> tuple[RasterLayer, bool]:
    """A raster drawn as a mask if it is one (one band of only 0 and 1), else as an image (``bands`` apply to
    images of several bands)."""
    if len(rasters.metadata(ws.resolve(path, suffixes=TIF))["bands"]) > 1:
        return _raster(ws, path, argument, bands), False
    layer = _raster(ws, path, argument, [1])
    values = layer.grid.data[0][np.isfinite(layer.grid.data[0])]
    if np.isin(values, (0, 1)).all():
        return _raster(ws, path, argument, mask=True), True
    return layer, False


def _same_crs(image: RasterLayer, other: Place, what: str) -> None:
    if image.place.crs != other.crs:
        raise RasterError(f"the image and the {what} have different CRS ({image.place.crs} vs {other.crs}); "
                          "reproject one first (ras_reproject)")


def _overlaps(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _colour(value: str, argument: str) -> str:
    from matplotlib.colors import is_color_like

    if not is_color_like(value):
        raise ToolInputError(f"argument '{argument}': {value[:40]!r} is not a colour; give a name such as 'red' or "
                             "a hex code such as '#1f77b4'")
    return value


def _vector(ws: Workspace, path: str, argument: str, image: RasterLayer) -> tuple[str, list[dict], list[Any]]:
    """A vector layer's features and geometries (those with finite coordinates), on the image's CRS."""
    real = ws.resolve(path, suffixes=VECTOR_SUFFIXES)
    features, crs = vectors.read_features(real)
    image_epsg, layer_epsg = vectors.epsg_of(image.place.crs), vectors.epsg_of(crs)
    if image_epsg and layer_epsg and image_epsg != layer_epsg:
        raise VectorError(f"argument '{argument}' is in {crs} but the image in {image.place.crs}; they must share "
                          "one CRS")
    kept = [(f, g) for f, g in zip(features, vectors.geometries(features)) if np.isfinite(g.bounds).all()]
    if not any(_overlaps(g.bounds, image.place.bounds) for _, g in kept):
        raise VectorError(f"argument '{argument}': none of its {len(features)} features lies inside the image's "
                          f"extent {[round(v, 1) for v in image.place.bounds]}; give a layer of the same place")
    return ws.virtual(real), [f for f, _ in kept], [g for _, g in kept]


def _provenance(ws: Workspace, real: Path) -> dict[str, Any] | None:
    """The sidecar of a figure file, if it has a readable one."""
    try:
        sidecar = ws.resolve(ws.virtual(real.with_suffix(".json")), suffixes=(".json",))
        data = json.loads(sidecar.read_text())
    except (PathNotAllowed, OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _frame(provenance: dict[str, Any] | None) -> MapFrame | None:
    try:
        frame = MapFrame.from_json(provenance["map"]) if provenance and provenance.get("map") else None
    except (KeyError, TypeError, IndexError, ValueError):
        return None
    if frame is None or not np.isfinite([*frame.extent, *frame.box]).all():
        return None
    return frame


def _png(ws: Workspace, path: str, argument: str) -> tuple[Path, np.ndarray]:
    real = ws.resolve(path, suffixes=PNG)
    try:
        return real, draw.read_png(real.read_bytes())
    except ValueError as exc:
        raise ToolInputError(f"argument '{argument}': {path[:80]!r} is {exc}; give a figure a viz_* tool "
                             "made") from None


def _publish(ws: Workspace, drawing: Drawing, kind: str, layers: list[str], details: dict[str, Any],
             sources: list[str] | None = None) -> FigureOut:
    """Write the figure and its provenance sidecar; the result carries the PNG as image content."""
    width, height = drawing.size_px
    source_layers = sorted(set(layers if sources is None else sources))
    provenance = {"kind": kind, "width_px": width, "height_px": height, "layers": layers,
                  "source_layers": source_layers, "details": details,
                  "map": drawing.frame.as_json() if drawing.frame else None}
    # The provenance is in the PNG too: the same picture drawn from other layers gets another name.
    png = draw.png_bytes(drawing, json.dumps(provenance, sort_keys=True))
    path = ws.write_bytes(f"figure-{kind.replace('_', '-')}", png, ".png", sidecar=provenance)
    out = FigureOut(path=path, kind=kind, width_px=width, height_px=height, layers=layers,
                    source_layers=source_layers, provenance_path=path.removesuffix(".png") + ".json", details=details)
    return out.attach(ImageContent(type="image", data=base64.b64encode(png).decode(), mimeType="image/png"))


def _iso(days: list[date]) -> list[str]:
    return [day.isoformat() for day in days]


# Maps -------------------------------------------------------------------------------------------------
@tool("viz", writes=True)
def viz_overlay_mask(ws: Workspace, image: Image, mask: Mask, colour: Colour = "red",
                     opacity: Annotated[float, Field(0.5, gt=0, le=1, description="0 (clear) to 1 (opaque)")] = 0.5,
                     label: Label = "mask", bands: Bands = None, title: Title = None) -> FigureOut:
    """Map of a 0/1 mask drawn semi-transparently (colour, opacity) over an image composite, with a legend entry
    'label'. The mask may have another pixel size than the image but must share its CRS and overlap it. Returns
    the PNG's path and provenance (the image is attached)."""
    base = _raster(ws, image, "image", bands)
    selected = _raster(ws, mask, "mask", mask=True)
    _same_crs(base, selected.place, "mask")
    if not _overlaps(base.place.bounds, selected.place.bounds):
        raise RasterError("the mask does not overlap the image; give a mask of the same place")
    drawing = draw.overlay_map(base.grid, selected.grid, base.place, colour=_colour(colour, "colour"),
                                  opacity=opacity, label=label, title=title)
    return _publish(ws, drawing, "overlay_mask", [base.path, selected.path],
                    {"bands": base.band_names, "colour": colour, "opacity": opacity, "label": label})


class LegendItem(BaseModel):
    """One legend entry: a coloured box and its label."""

    label: str = Field(min_length=1, max_length=60, description="what the colour shows, e.g. 'flooded'")
    colour: Colour


@tool("viz", writes=True)
def viz_add_map_elements(ws: Workspace, layer: Annotated[str, Field(description=(
        "a raster to draw as a map ('data/<event>/post_optical.tif' or 'ws/...tif') or a figure a viz_* tool made "
        "('ws/figure-...png')"))], title: Title = None,
        legend: Annotated[Sequence[LegendItem], Field(max_length=12, description="legend entries to add (upper "
                                                      "left)", examples=[[{"label": "flooded", "colour": "blue"}]])
                          ] = (),
        north_arrow: Annotated[bool, Field(description="add a north arrow (grid north, up)")] = True,
        scale_bar: Annotated[bool, Field(description="add a scale bar in m or km (needs a CRS in metres)")] = True,
        bands: Bands = None) -> FigureOut:
    """Add a title, a legend, a north arrow and a scale bar (about a quarter of the map's width, in metres from
    the raster's CRS transform) to a map figure made by a viz_* tool, or draw a raster as a map with them.
    Figures without a single map (charts, panels, report pages) take a title and a legend only. Returns the new
    PNG's path and provenance (the image is attached)."""
    if not (title or legend or north_arrow or scale_bar):
        raise ToolInputError("nothing to add: give a title or a legend, or keep north_arrow or scale_bar true")
    entries = [LegendEntry(item.label, _colour(item.colour, f"legend[{index}].colour"))
               for index, item in enumerate(legend)]
    real = ws.resolve(layer, suffixes=(*PNG, *TIF))
    if real.suffix.lower() in PNG:
        real, pixels = _png(ws, layer, "layer")
        provenance = _provenance(ws, real)
        frame = _frame(provenance)
        if frame is None and (north_arrow or scale_bar):
            raise ToolInputError(f"argument 'layer': {layer[:80]!r} is not a figure with one map, so it takes no north "
                                 "arrow or scale bar; set north_arrow and scale_bar to false to add a title or legend, "
                                 "or give the raster layer instead")
        drawing = draw.on_saved_figure(pixels, frame)
        path = ws.virtual(real)
        sources = list(provenance.get("source_layers", [])) if provenance else [path]
    else:
        raster = _raster(ws, layer, "layer", bands)
        drawing = draw.raster_map(raster.grid, raster.place, None)
        path = raster.path
        sources = [path]
    if scale_bar and drawing.frame is not None and not drawing.frame.metric:
        raise ToolInputError(f"argument 'layer': the map is in {drawing.frame.crs}, not a CRS in metres, so a scale "
                             "bar in metres cannot be drawn; reproject the raster to the scene's UTM CRS "
                             "(ras_reproject) or set scale_bar to false")
    length = draw.add_map_elements(drawing, title=title, legend=entries, north=north_arrow, scale=scale_bar)
    details = {"title": title, "legend": [item.label for item in legend], "north_arrow": north_arrow,
               "scale_bar_m": length}
    return _publish(ws, drawing, "map_elements", [path], details, sources=sources)


@tool("viz", writes=True)
def viz_damage_map(ws: Workspace, image: Image, layer: Annotated[str, Field(description=(
        "footprints or points with a damage class, e.g. the 'ws/building-damage-...geojson' of seg_building_damage "
        "or 'ws/sar-damage-...'"))], damage_field: Annotated[str, Field(
            "damage", max_length=60, description="the attribute holding each feature's class")] = "damage",
        bands: Bands = None, title: Title = None) -> FigureOut:
    """Map of buildings or objects coloured by damage class over an image (intact green, partial orange,
    destroyed red; other classes in other colours), with a legend giving each class's count. Returns the PNG's
    path and provenance (the image is attached); details.counts holds the counts."""
    base = _raster(ws, image, "image", bands)
    path, features, geometries = _vector(ws, layer, "layer", base)
    require_attribute(features, "damage_field", damage_field)
    classes = [str(f["properties"].get(damage_field)) if f["properties"].get(damage_field) is not None else "unknown"
               for f in features]
    distinct = sorted(set(classes))
    if len(distinct) > MAX_CLASSES:
        raise ToolInputError(f"argument 'damage_field': {damage_field!r} has {len(distinct)} distinct values; a damage "
                             f"map colours at most {MAX_CLASSES} classes (e.g. 'damage': intact, partial, destroyed)")
    drawing = draw.damage_map(base.grid, base.place, geometries, classes, title)
    counts = {name: classes.count(name) for name in distinct}
    return _publish(ws, drawing, "damage_map", [base.path, path],
                    {"bands": base.band_names, "damage_field": damage_field, "counts": counts})


@tool("viz", writes=True)
def viz_route_map(ws: Workspace, image: Image, route: Annotated[str, Field(description=(
        "the route as line features in travel order: the 'path' vec_shortest_path returned"))],
        bands: Bands = None, title: Title = None) -> FigureOut:
    """Map of a route (line features in travel order) drawn over an image, its start marked with a green
    triangle and its end with a black square, a legend giving its length. Returns the PNG's path and
    provenance (the image is attached); details hold the length (m) and the start and end points."""
    base = _raster(ws, image, "image", bands)
    path, _, geometries = _vector(ws, route, "route", base)
    parts = [part for g in geometries for part in getattr(g, "geoms", [g])]
    if any(part.geom_type != "LineString" for part in parts):
        raise VectorError("argument 'route' must hold line features (the route from vec_shortest_path); it has "
                          f"{sorted({part.geom_type for part in parts} - {'LineString'})[0]} features")
    start, end = vectors.route_ends(parts)
    length = float(sum(part.length for part in parts))
    drawing = draw.route_map(base.grid, base.place, parts, start, end, length, title)
    return _publish(ws, drawing, "route_map", [base.path, path],
                    {"bands": base.band_names, "length_m": round(length, 3), "segments": len(parts),
                     "start": [start[0], start[1]], "end": [end[0], end[1]]})


@tool("viz", writes=True)
def viz_heatmap(ws: Workspace, image: Image, points: Annotated[str, Field(description=(
        "a point layer (or any features: their centroids are used), e.g. 'data/<event>/pois.geojson' or the "
        "'path' of a seg_vehicles detection"))], bandwidth_m: Annotated[float | None, Field(
            None, gt=0, le=100000, description="the Gaussian kernel's standard deviation, m; default Scott's rule")
        ] = None, bands: Bands = None, title: Title = None) -> FigureOut:
    """Heatmap of where points concentrate: a Gaussian kernel density estimate (points per km2) of the features'
    centroids over the image's extent, drawn over the image in grey, with the points and a colour bar. Returns
    the PNG's path and provenance (the image is attached); details hold the number of points, the bandwidth
    used and the densest place (peak_x, peak_y, peak_density_per_km2)."""
    base = _raster(ws, image, "image", bands)
    if not base.place.metric:
        raise RasterError(f"the image is in {base.place.crs}, not a CRS in metres; a density per km2 needs the "
                          "scene's UTM CRS (ras_reproject)")
    path, _, geometries = _vector(ws, points, "points", base)
    left, bottom, right, top = base.place.bounds
    centres = np.array([(g.centroid.x, g.centroid.y) for g in geometries])
    inside = (centres[:, 0] >= left) & (centres[:, 0] <= right) & (centres[:, 1] >= bottom) & (centres[:, 1] <= top)
    if not inside.any():
        raise VectorError("argument 'points': no feature's centroid lies inside the image's extent")
    if bandwidth_m is not None and bandwidth_m > max(right - left, top - bottom):
        raise ToolInputError(f"argument 'bandwidth_m': {bandwidth_m:g} m is wider than the scene "
                             f"({max(right - left, top - bottom):g} m); give a smaller one or leave it out")
    xs, ys = centres[inside, 0], centres[inside, 1]
    density, used = draw.point_density(xs, ys, base.place, bandwidth_m)
    row, col = np.unravel_index(int(np.argmax(density)), density.shape)
    cell_w, cell_h = (right - left) / density.shape[1], (top - bottom) / density.shape[0]
    drawing = draw.heatmap(base.grid, base.place, density, xs, ys, title)
    details = {"bands": base.band_names, "points": int(inside.sum()), "outside": int((~inside).sum()),
               "bandwidth_m": round(used, 3), "peak_density_per_km2": round(float(density.max()), 6),
               "peak_x": round(left + (col + 0.5) * cell_w, 3), "peak_y": round(top - (row + 0.5) * cell_h, 3)}
    return _publish(ws, drawing, "heatmap", [base.path, path], details)


# Panels -----------------------------------------------------------------------------------------------
@tool("viz", writes=True)
def viz_before_after_panel(ws: Workspace, before: Image, after: Image, before_label: Label = "Before",
                           after_label: Label = "After", bands: Bands = None, title: Title = None) -> FigureOut:
    """Two images side by side at the same extent, each labelled (e.g. 'pre_optical.tif' and 'post_optical.tif').
    They must share CRS and extent (pixel sizes may differ). Returns the PNG's path and provenance (the image is
    attached)."""
    first, second = _raster(ws, before, "before", bands), _raster(ws, after, "after", bands)
    rasters.same_extent(first.meta, second.meta, "before and after images")
    drawing = draw.image_panel([(first.grid, False), (second.grid, False)], [before_label, after_label],
                                  first.place, title)
    return _publish(ws, drawing, "before_after_panel", [first.path, second.path],
                    {"labels": [before_label, after_label], "bands": [first.band_names, second.band_names]})


@tool("viz", writes=True)
def viz_temporal_panel(ws: Workspace, layers: Annotated[list[str], Field(
        min_length=2, max_length=MAX_PANELS, description="images or 0/1 masks of the same place (same CRS and "
                                                          "extent)")],
        dates: Annotated[list[date], Field(min_length=2, max_length=MAX_PANELS, description=(
            "the date of each layer, 'YYYY-MM-DD', in the same order"), examples=[["2021-07-12", "2021-07-15"]])],
        bands: Bands = None, title: Title = None) -> FigureOut:
    """Images or masks in date order (up to 8, four to a row), each labelled with its date; masks (one band of
    0 and 1) are drawn dark blue on white. Returns the PNG's path and provenance (the image is attached);
    details hold the dates and the layers in date order."""
    if len(layers) != len(dates):
        raise ToolInputError(f"arguments 'layers' and 'dates' differ in length ({len(layers)} layers, {len(dates)} "
                             "dates); give one date per layer, in the same order")
    if len(set(dates)) < len(dates):
        raise ToolInputError("argument 'dates': each layer needs its own date; a date is given more than once")
    read = [_layer_auto(ws, path, f"layers[{index}]", bands) for index, path in enumerate(layers)]
    for (layer, _), path in zip(read[1:], layers[1:]):
        rasters.same_extent(read[0][0].meta, layer.meta, f"layers {layers[0][:80]!r} and {path[:80]!r}")
    order = sorted(range(len(dates)), key=lambda index: dates[index])
    drawing = draw.image_panel([(read[index][0].grid, read[index][1]) for index in order],
                                  [dates[index].isoformat() for index in order], read[0][0].place, title)
    details = {"dates": _iso(sorted(dates)), "in_date_order": [read[index][0].path for index in order],
               "masks": [read[index][1] for index in order]}
    return _publish(ws, drawing, "temporal_panel", [layer.path for layer, _ in read], details)


# Charts -----------------------------------------------------------------------------------------------
def _same_length(labels: list[str], values: list[float], what: str = "values") -> None:
    if len(labels) != len(values):
        raise ToolInputError(f"arguments 'labels' and '{what}' differ in length ({len(labels)} labels, {len(values)} "
                             "values); give one value per label")


@tool("viz", writes=True)
def viz_pie_chart(ws: Workspace, labels: Annotated[list[Label], Field(min_length=1, max_length=12, description=(
        "one label per slice"), examples=[["intact", "partial", "destroyed"]])],
        values: Annotated[list[Share], Field(min_length=1, max_length=12, description=(
            "one non-negative value per label (the slices' shares are value / sum)"), examples=[[120, 30, 12]])],
        title: Title = None) -> FigureOut:
    """Pie chart of shares of a whole (e.g. buildings by damage class), each slice labelled with its percentage.
    Returns the PNG's path and provenance (the image is attached)."""
    _same_length(labels, values)
    if sum(values) <= 0:
        raise ToolInputError("argument 'values': a pie needs a positive total; give at least one value above 0")
    drawing = draw.pie_chart(labels, values, title)
    return _publish(ws, drawing, "pie_chart", [], {"labels": labels, "values": values})


@tool("viz", writes=True)
def viz_bar_chart(ws: Workspace, labels: Annotated[list[Label], Field(min_length=1, max_length=40, description=(
        "one label per bar"), examples=[["Ahrweiler", "Altenahr", "Sinzig"]])],
        values: Annotated[list[Number], Field(min_length=1, max_length=40, description="one value per label",
                                              examples=[[5200, 1830, 940]])],
        value_label: ValueLabel = None, title: Title = None) -> FigureOut:
    """Bar chart, one bar per label with its value written on it (e.g. exposed people per district). Returns the
    PNG's path and provenance (the image is attached)."""
    _same_length(labels, values)
    drawing = draw.bar_chart(labels, values, title, value_label)
    return _publish(ws, drawing, "bar_chart", [], {"labels": labels, "values": values, "value_label": value_label})


class Series(BaseModel):
    """One line of a line chart."""

    name: str = Field(max_length=60, description="the series' name, shown in the legend")
    values: list[Number] = Field(min_length=2, max_length=200, description="one value per x label")


@tool("viz", writes=True)
def viz_line_chart(ws: Workspace, x_labels: Annotated[list[Label], Field(min_length=2, max_length=200, description=(
        "the x axis' labels in order, e.g. dates"), examples=[["2021-07-12", "2021-07-15"]])],
        series: Annotated[list[Series], Field(min_length=1, max_length=8, description="the lines, each with one value "
                                              "per x label", examples=[[{"name": "flooded area", "values": [1, 2]}]])],
        value_label: ValueLabel = None, title: Title = None) -> FigureOut:
    """Line chart of one or more series over the same x labels (e.g. flooded area per date), with markers and a
    legend. Returns the PNG's path and provenance (the image is attached)."""
    for index, line in enumerate(series):
        if len(line.values) != len(x_labels):
            raise ToolInputError(f"argument 'series[{index}].values' has {len(line.values)} values for "
                                 f"{len(x_labels)} x labels; give one value per x label")
    drawing = draw.line_chart(x_labels, [(line.name, line.values) for line in series], title, value_label)
    return _publish(ws, drawing, "line_chart", [], {"x_labels": x_labels, "value_label": value_label,
                                                    "series": [line.model_dump() for line in series]})


# Report page ------------------------------------------------------------------------------------------
class Section(BaseModel):
    """A block of text on a report page."""

    heading: str = Field("", max_length=80, description="the section's heading (may be empty)")
    text: str = Field(max_length=1500, description="the section's text (wrapped to the page)")


@tool("viz", writes=True)
def viz_report_page(ws: Workspace, title: Annotated[str, Field(min_length=1, max_length=120, description=(
        "the page's title"))], sections: Annotated[Sequence[Section], Field(max_length=6, description=(
            "text blocks under the title"), examples=[[{"heading": "Situation", "text": "..."}]])] = (),
        figures: Annotated[Sequence[str], Field(max_length=4, description=(
            "up to 4 figures ('ws/figure-...png' paths from viz_* tools), drawn below the text"))] = (),
        captions: Annotated[list[Annotated[str, Field(max_length=100)]] | None, Field(
            None, description="one caption per figure, in the same order")] = None) -> FigureOut:
    """A one-page report (A4 proportions, 1000 x 1414 pixels): the title, the text sections (about 32 lines of
    text in all), then up to four figures with captions (one, a row of two, or two rows of two). Returns the
    PNG's path and provenance (the image is attached); its source_layers are those behind the draw."""
    if not sections and not figures:
        raise ToolInputError("the page is empty: give sections of text, figures, or both")
    if captions is not None and len(captions) != len(figures):
        raise ToolInputError(f"arguments 'figures' and 'captions' differ in length ({len(figures)} figures, "
                             f"{len(captions)} captions); give one caption per figure or none")
    lines = draw.page_lines([(section.heading, section.text) for section in sections])
    if len(lines) > draw.PAGE_TEXT_LINES:
        raise ToolInputError(f"argument 'sections': the text fills {len(lines)} lines and a page holds "
                             f"{draw.PAGE_TEXT_LINES}; shorten it")
    read = [_png(ws, path, f"figures[{index}]") for index, path in enumerate(figures)]
    paths, sources = [ws.virtual(real) for real, _ in read], []
    for real, path in zip((real for real, _ in read), paths):
        provenance = _provenance(ws, real)
        sources += list(provenance.get("source_layers", [])) if provenance else [path]
    drawing = draw.report_page(title, lines, [pixels for _, pixels in read], captions or [""] * len(read))
    details = {"title": title, "headings": [section.heading for section in sections], "captions": captions,
               "text_lines": len(lines)}
    return _publish(ws, drawing, "report_page", paths, details, sources=sources)
