"""Figures for disaster-response reports: maps (an image composite under masks, vector layers or a point
density, with map elements), image panels, charts and a report page; knows nothing of MCP.

matplotlib's object API on its Agg canvas (no pyplot, so no global figure state), imported when a figure
is first drawn. Every figure has a fixed size in pixels (the ``*_PX`` constants, drawn at ``DPI``). A
map's axes are in the layer's CRS (x = easting, y = northing) and sized so that a metre is as long
across as up; ``MapFrame`` records where they sit, so map elements can be added to a saved figure later
(``on_saved_figure``). Text from callers is drawn as plain text (no mathtext: '$' is a dollar sign);
characters the font lacks are drawn as boxes. ``png_bytes`` is deterministic (no timestamps) and embeds
a description (the figure's provenance) in a PNG text chunk.
"""

from __future__ import annotations

import contextlib
import io
import math
import textwrap
import unicodedata
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from gauntlet.mcp_servers.disaster.rasters import Grid, bounds_of

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

DPI = 100
MAP_PX = (800, 800)
PANEL_PX = (400, 400)  # one panel of a before/after or temporal panel, below its label
PANEL_LABEL_PX = 40
PANEL_COLUMNS = 4
CHART_PX = (800, 560)
PAGE_PX = (1000, 1414)  # A4 proportions
TITLE_PX = 60
MARGIN_PX = 16
COLOURBAR_PX = 90  # room right of a heatmap's map for its colour bar
MAX_DISPLAY_SIDE_PX = 1024  # rasters are read shrunk to this for drawing
DENSITY_CELLS = 200  # cells along the longer side of a heatmap's density grid
PAGE_TEXT_LINES = 32
PAGE_WRAP_CHARS = 110

DAMAGE_COLOURS = {"intact": "#2ca02c", "no-damage": "#2ca02c", "minor-damage": "#bcbd22", "partial": "#ff7f0e",
                  "major-damage": "#ff7f0e", "destroyed": "#d62728"}
OTHER_CLASS_COLOURS = ("#1f77b4", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")
Corner = Literal["upper left", "lower right"]  # where legends go: the caller's upper left, a tool's own lower right
SERIES_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")


@dataclass(frozen=True)
class MapFrame:
    """Where a map sits in its figure: its CRS, its extent (left, right, bottom, top, in CRS units), whether
    those units are metres, and its axes' box in figure fractions (left, bottom, width, height)."""

    crs: str
    extent: tuple[float, float, float, float]
    metric: bool
    box: tuple[float, float, float, float]

    def as_json(self) -> dict[str, Any]:
        return {"crs": self.crs, "extent": list(self.extent), "metric": self.metric, "box": list(self.box)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MapFrame:
        extent, box = data["extent"], data["box"]
        return cls(str(data["crs"]), (extent[0], extent[1], extent[2], extent[3]), bool(data["metric"]),
                   (box[0], box[1], box[2], box[3]))


@dataclass
class Drawing:
    """A figure, and its map (axes and frame) if it has exactly one."""

    figure: Figure
    map_axes: Axes | None = None
    frame: MapFrame | None = None

    @property
    def size_px(self) -> tuple[int, int]:
        width, height = self.figure.get_size_inches() * DPI
        return round(width), round(height)


@dataclass(frozen=True)
class Place:
    """A layer's CRS (its name, and whether its units are metres) and its extent."""

    crs: str
    metric: bool
    bounds: tuple[float, float, float, float]  # left, bottom, right, top


@dataclass(frozen=True)
class LegendEntry:
    label: str
    colour: str
    kind: str = "patch"  # patch, line or marker
    marker: str = "o"


# Drawing context and output ------------------------------------------------------------------------
@contextlib.contextmanager
def _drawing() -> Iterator[None]:
    """Caller text is plain text, and a glyph the font lacks is a box, not a warning."""
    import matplotlib

    with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Glyph .* missing")
        yield


def png_bytes(drawing: Drawing, description: str) -> bytes:
    """The figure as PNG bytes (the same figure, the same bytes), ``description`` in its text chunk."""
    buffer = io.BytesIO()
    with _drawing():
        drawing.figure.savefig(buffer, format="png", dpi=DPI, metadata={"Description": description})
    return buffer.getvalue()


def plain(text: str) -> str:
    """Caller text without control characters (a line break stays)."""
    return "".join(c for c in text if c == "\n" or unicodedata.category(c) != "Cc")


def _new_figure(size_px: tuple[int, int]) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(size_px[0] / DPI, size_px[1] / DPI), dpi=DPI)
    FigureCanvasAgg(figure)  # a renderer to measure text with (_text_within)
    return figure


def _text_within(figure: Figure, x: float, y: float, text: str, width_px: float, fontsize: float, *,
                 wrap: bool = True, **style: Any) -> None:
    """Caller text at (x, y) in figure fractions, made to fit ``width_px``: wrapped to two lines (``fitted``;
    ``wrap=False`` for a line already wrapped), then shrunk until it measures no wider (glyphs the estimate
    gets wrong: bold, wide, missing)."""
    shown, size = fitted(text, width_px, fontsize) if wrap else (plain(text), fontsize)
    with _drawing():
        artist = figure.text(x, y, shown, fontsize=size, linespacing=1.0, **style)
        renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]  # the Agg canvas's
        while size > 5 and artist.get_window_extent(renderer).width > width_px:
            size *= 0.9
            artist.set_fontsize(size)


def fitted(text: str, width_px: float, fontsize: float) -> tuple[str, float]:
    """Caller text made to fit ``width_px``: one line at ``fontsize`` (points) if it is short enough, else
    two lines at four fifths of it, cut with '…' if it needs more (widths estimated at 0.65 em a character)."""
    text = " ".join(plain(text).split())
    for size in (fontsize, fontsize * 0.8):
        per_line = max(8, int(width_px / (size * DPI / 72 * 0.65)))
        lines = textwrap.wrap(text, per_line) or [""]
        if len(lines) == 1:
            return lines[0], size
    if len(lines) > 2:
        lines = [lines[0], lines[1][:per_line - 1].rstrip() + "…"]
    return "\n".join(lines), size


def _title(figure: Figure, text: str | None, size_px: tuple[int, int], fontsize: float = 16) -> None:
    if text:
        _text_within(figure, 0.5, 1 - TITLE_PX / 2 / size_px[1], text, size_px[0] - 2 * MARGIN_PX, fontsize,
                     ha="center", va="center", fontweight="bold")


# Layers as pixels ----------------------------------------------------------------------------------
def composite(grid: Grid) -> np.ndarray:
    """An RGBA image (rows, cols, 4) in 0..1 of one band (grey) or three (red, green, blue), each stretched
    between its 2nd and 98th percentile; pixels without a value are transparent."""
    bands = grid.data[:3] if grid.data.shape[0] >= 3 else grid.data[:1]
    valid = np.all(np.isfinite(bands), axis=0)
    stretched = []
    for band in bands:
        values = band[valid]
        low, high = (np.percentile(values, [2, 98]) if values.size else (0.0, 0.0))
        scaled = (band - low) / (high - low) if high > low else np.zeros_like(band)
        stretched.append(np.clip(np.nan_to_num(scaled), 0, 1))
    rgb = np.stack(stretched * 3 if len(stretched) == 1 else stretched, axis=-1)
    return np.concatenate([rgb, valid[..., None].astype(rgb.dtype)], axis=-1)


def mask_rgba(mask: Grid, colour: str, opacity: float) -> np.ndarray:
    """Selected pixels of a mask in ``colour`` at ``opacity``, the rest transparent."""
    from matplotlib.colors import to_rgb

    selected = mask.data[0] > 0
    rgba = np.zeros((*selected.shape, 4), np.float32)
    rgba[selected] = (*to_rgb(colour), opacity)
    return rgba


def _show(axes: Axes, rgba: np.ndarray, grid: Grid, zorder: float = 0) -> None:
    left, bottom, right, top = bounds_of(grid)
    # aspect 'auto': the axes' box already has the extent's proportions (_fit), and must stay where it is.
    axes.imshow(rgba, extent=(left, right, bottom, top), origin="upper", interpolation="nearest", aspect="auto",
                zorder=zorder)


# Maps ----------------------------------------------------------------------------------------------
def _fit(extent_size: tuple[float, float], box_px: tuple[float, float, float, float],
         size_px: tuple[int, int]) -> tuple[float, float, float, float]:
    """The largest box of the extent's proportions centred in ``box_px`` (left, bottom, width, height in
    pixels), in figure fractions."""
    left, bottom, width, height = box_px
    scale = min(width / extent_size[0], height / extent_size[1])
    fitted_w, fitted_h = extent_size[0] * scale, extent_size[1] * scale
    x0, y0 = left + (width - fitted_w) / 2, bottom + (height - fitted_h) / 2
    return x0 / size_px[0], y0 / size_px[1], fitted_w / size_px[0], fitted_h / size_px[1]


def _map_axes(figure: Figure, place: Place, box_px: tuple[float, float, float, float],
              size_px: tuple[int, int]) -> tuple[Axes, MapFrame]:
    left, bottom, right, top = place.bounds
    box = _fit((right - left, top - bottom), box_px, size_px)
    axes = figure.add_axes(box)
    axes.set_xlim(left, right)
    axes.set_ylim(bottom, top)
    axes.set_autoscale_on(False)
    axes.set_xticks([])
    axes.set_yticks([])
    return axes, MapFrame(place.crs, (left, right, bottom, top), place.metric, box)


def _single_map(place: Place, title: str | None, right_px: int = 0) -> Drawing:
    """A map figure: the title band on top, the map below it (``right_px`` kept free on the right)."""
    size = MAP_PX
    figure = _new_figure(size)
    _title(figure, title, size)
    box_px = (MARGIN_PX, MARGIN_PX, size[0] - 2 * MARGIN_PX - right_px, size[1] - TITLE_PX - 2 * MARGIN_PX)
    axes, frame = _map_axes(figure, place, box_px, size)
    return Drawing(figure, axes, frame)


def raster_map(image: Grid, place: Place, title: str | None) -> Drawing:
    """An image composite as a map."""
    drawing = _single_map(place, title)
    assert drawing.map_axes is not None
    _show(drawing.map_axes, composite(image), image)
    return drawing


def overlay_map(image: Grid, mask: Grid, place: Place, *, colour: str, opacity: float, label: str,
                title: str | None) -> Drawing:
    """A mask drawn in ``colour`` at ``opacity`` over an image composite, with a legend entry."""
    drawing = raster_map(image, place, title)
    assert drawing.map_axes is not None
    _show(drawing.map_axes, mask_rgba(mask, colour, opacity), mask, zorder=1)
    _legend(drawing.map_axes, [LegendEntry(label, colour)], "lower right")
    return drawing


def _polygon_paths(geometry: Any) -> list[Any]:
    from matplotlib.path import Path
    from shapely.geometry.polygon import orient

    paths = []
    for polygon in getattr(geometry, "geoms", [geometry]):
        # Exterior anticlockwise, holes clockwise: the non-zero fill rule then leaves the holes empty.
        oriented = orient(polygon, 1.0)
        rings = [oriented.exterior, *oriented.interiors]
        paths.append(Path.make_compound_path(*[Path(np.asarray(ring.coords)[:, :2], closed=True) for ring in rings]))
    return paths


def draw_geometries(axes: Axes, geometries: Sequence[Any], colours: Sequence[str], *, zorder: float = 2,
                    line_width: float = 1.0, marker_size: float = 30.0) -> None:
    """Shapely geometries in their colours: polygons filled (dark outline), lines stroked, points as dots."""
    from matplotlib.collections import LineCollection, PathCollection

    paths, path_colours, lines, line_colours, xs, ys, point_colours = [], [], [], [], [], [], []
    for geometry, colour in zip(geometries, colours):
        kind = geometry.geom_type
        if kind in ("Polygon", "MultiPolygon"):
            found = _polygon_paths(geometry)
            paths += found
            path_colours += [colour] * len(found)
        elif kind in ("LineString", "MultiLineString", "LinearRing"):
            parts = getattr(geometry, "geoms", [geometry])
            lines += [np.asarray(part.coords)[:, :2] for part in parts]
            line_colours += [colour] * len(parts)
        elif kind in ("Point", "MultiPoint"):
            for point in getattr(geometry, "geoms", [geometry]):
                xs.append(point.x)
                ys.append(point.y)
                point_colours.append(colour)
        else:  # a collection: draw its members
            members = list(geometry.geoms)
            draw_geometries(axes, members, [colour] * len(members), zorder=zorder, line_width=line_width,
                            marker_size=marker_size)
    if paths:
        axes.add_collection(PathCollection(paths, facecolors=path_colours, edgecolors="#222222", linewidths=0.5,
                                           zorder=zorder))
    if lines:
        axes.add_collection(LineCollection(lines, colors=line_colours, linewidths=line_width, zorder=zorder,
                                           capstyle="round", joinstyle="round"))
    if xs:
        axes.scatter(xs, ys, s=marker_size, c=point_colours, edgecolors="#222222", linewidths=0.5, zorder=zorder + 0.5)


def class_colours(classes: Sequence[str]) -> dict[str, str]:
    """A colour for each class: the damage scale's own (intact green ... destroyed red), then others in turn."""
    colours, others = {}, iter(OTHER_CLASS_COLOURS * (len(classes) // len(OTHER_CLASS_COLOURS) + 1))
    for name in classes:
        colours[name] = DAMAGE_COLOURS.get(name.lower()) or next(others)
    return colours


def damage_map(image: Grid, place: Place, geometries: Sequence[Any], classes: Sequence[str],
               title: str | None) -> Drawing:
    """Features (footprints or points) coloured by damage class over an image, a legend with each class's count."""
    drawing = raster_map(image, place, title)
    assert drawing.map_axes is not None
    colours = class_colours(sorted(set(classes), key=_damage_order))
    draw_geometries(drawing.map_axes, geometries, [colours[c] for c in classes])
    counts = {name: classes.count(name) for name in colours}
    _legend(drawing.map_axes, [LegendEntry(f"{name} ({counts[name]})", colour) for name, colour in colours.items()],
            "lower right")
    return drawing


def _damage_order(name: str) -> tuple[int, str]:
    scale = list(DAMAGE_COLOURS)
    return (scale.index(name.lower()) if name.lower() in scale else len(scale), name)


def route_map(image: Grid, place: Place, lines: Sequence[Any], start: tuple[float, float],
              end: tuple[float, float], length_m: float, title: str | None) -> Drawing:
    """A route drawn over an image, its start (green triangle) and end (black square) marked."""
    drawing = raster_map(image, place, title)
    axes = drawing.map_axes
    assert axes is not None
    route_colour = "#e31a1c"
    draw_geometries(axes, lines, [route_colour] * len(lines), line_width=4.0)
    axes.scatter([start[0]], [start[1]], s=160, marker="^", c="#2ca02c", edgecolors="white", linewidths=1.5, zorder=4)
    axes.scatter([end[0]], [end[1]], s=140, marker="s", c="#111111", edgecolors="white", linewidths=1.5, zorder=4)
    _legend(axes, [LegendEntry(f"route ({length_m:,.0f} m)", route_colour, "line"),
                   LegendEntry("start", "#2ca02c", "marker", "^"), LegendEntry("end", "#111111", "marker", "s")],
            "lower right")
    return drawing


def point_density(xs: np.ndarray, ys: np.ndarray, place: Place, bandwidth_m: float | None
                  ) -> tuple[np.ndarray, float]:
    """Gaussian kernel density of points over the place's extent, in points per km2, on a grid of
    ``DENSITY_CELLS`` cells along the longer side (row 0 at the top); and the bandwidth used.

    KDE: f(x) = sum_i K_h(x - x_i) with K_h the isotropic 2-D Gaussian of standard deviation h (integral 1),
    so f integrates to the number of points. Binned: points are counted per cell and the counts smoothed
    with the same Gaussian (``ndimage.gaussian_filter`` keeps their sum). Without ``bandwidth_m``, h is
    Scott's rule, h = sigma n^(-1/6) with sigma the mean of the coordinates' standard deviations (one
    twentieth of the longer side when the points coincide). h is at least one cell.
    """
    from scipy import ndimage

    left, bottom, right, top = place.bounds
    cell = max(right - left, top - bottom) / DENSITY_CELLS
    cols, rows = max(1, round((right - left) / cell)), max(1, round((top - bottom) / cell))
    if bandwidth_m is None:
        sigma = (float(np.std(xs)) + float(np.std(ys))) / 2
        bandwidth_m = sigma * len(xs) ** (-1 / 6) if sigma > 0 else max(right - left, top - bottom) / 20
    bandwidth_m = max(bandwidth_m, cell)
    counts, _, _ = np.histogram2d(top - ys, xs - left, bins=(rows, cols), range=((0, top - bottom), (0, right - left)))
    smoothed = ndimage.gaussian_filter(counts, sigma=bandwidth_m / cell, mode="constant")
    cell_area_km2 = ((right - left) / cols) * ((top - bottom) / rows) / 1e6
    return smoothed / cell_area_km2, bandwidth_m


def heatmap(image: Grid, place: Place, density: np.ndarray, xs: np.ndarray, ys: np.ndarray,
            title: str | None) -> Drawing:
    """A point density (points per km2, transparent where low) over a grey image, the points as dots and
    a colour bar."""
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    drawing = _single_map(place, title, right_px=COLOURBAR_PX)
    axes = drawing.map_axes
    assert axes is not None
    grey = composite(image)
    grey[..., :3] = grey[..., :3].mean(axis=-1, keepdims=True) * 0.8 + 0.2  # a light backdrop
    _show(axes, grey, image)
    peak = float(density.max())
    weights = density / peak if peak > 0 else density
    colours = colormaps["inferno"](weights)
    colours[..., 3] = np.clip(weights * 1.5, 0, 0.85)
    left, bottom, right, top = place.bounds
    axes.imshow(colours, extent=(left, right, bottom, top), origin="upper", interpolation="bilinear", aspect="auto",
                zorder=1)
    axes.scatter(xs, ys, s=6, c="#00e5ff", edgecolors="none", zorder=2)
    # The colour bar's scale is the density's, not the RGBA image's 0..1.
    scale = ScalarMappable(norm=Normalize(0, peak if peak > 0 else 1), cmap=colormaps["inferno"])
    x0, y0, width, height = axes.get_position().bounds
    bar = drawing.figure.add_axes((x0 + width + 12 / MAP_PX[0], y0, 14 / MAP_PX[0], height))
    drawing.figure.colorbar(scale, cax=bar, label="points per km²")
    _legend(axes, [LegendEntry(f"points ({len(xs)})", "#00e5ff", "marker")], "lower right")
    return drawing


# Map elements --------------------------------------------------------------------------------------
def _legend(axes: Axes, entries: Sequence[LegendEntry], where: Corner) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = []
    for entry in entries:
        if entry.kind == "line":
            handles.append(Line2D([], [], color=entry.colour, linewidth=3))
        elif entry.kind == "marker":
            handles.append(Line2D([], [], color=entry.colour, marker=entry.marker, linestyle="none", markersize=8))
        else:
            handles.append(Patch(facecolor=entry.colour, edgecolor="#222222"))
    with _drawing():
        legend = axes.legend(handles, [plain(entry.label) for entry in entries], loc=where, framealpha=0.9,
                             fontsize=9)
    axes.add_artist(legend)  # a later legend on the same axes does not replace this one


def nice_length(target: float) -> float:
    """The largest 1, 2 or 5 times a power of ten that is at most ``target`` (> 0)."""
    power = 10 ** math.floor(math.log10(target))
    return max(step * power for step in (1, 2, 5) if step * power <= target)


def scale_bar(axes: Axes, frame: MapFrame) -> float:
    """A scale bar about a quarter of the map's width, lower left, labelled in m or km; its length in metres."""
    from matplotlib.patches import Rectangle

    left, right, bottom, top = frame.extent
    length = nice_length((right - left) / 4)
    x0, y0 = left + (right - left) * 0.05, bottom + (top - bottom) * 0.05
    thickness = (top - bottom) * 0.012
    axes.add_patch(Rectangle((x0 - (right - left) * 0.02, y0 - (top - bottom) * 0.025), length + (right - left) * 0.04,
                             (top - bottom) * 0.085, facecolor="white", alpha=0.85, edgecolor="none", zorder=5))
    for part in range(4):  # alternating black and white quarters
        axes.add_patch(Rectangle((x0 + part * length / 4, y0), length / 4, thickness, zorder=6, edgecolor="black",
                                 facecolor="black" if part % 2 == 0 else "white", linewidth=0.8))
    label = f"{length / 1000:g} km" if length >= 1000 else f"{length:g} m"
    axes.text(x0 + length / 2, y0 + thickness * 1.6, label, ha="center", va="bottom", fontsize=9, zorder=6)
    return length


def north_arrow(axes: Axes) -> None:
    """An arrow pointing up (grid north: the map's y axis) with an N, upper right."""
    axes.annotate("N", xy=(0.93, 0.95), xytext=(0.93, 0.82), xycoords="axes fraction", textcoords="axes fraction",
                  ha="center", va="center", fontsize=13, fontweight="bold", zorder=6,
                  bbox={"boxstyle": "circle,pad=0.2", "facecolor": "white", "alpha": 0.85, "edgecolor": "none"},
                  arrowprops={"facecolor": "black", "edgecolor": "white", "width": 5, "headwidth": 14})


def add_map_elements(drawing: Drawing, *, title: str | None, legend: Sequence[LegendEntry], north: bool,
                     scale: bool) -> float | None:
    """Add a title (over any earlier one), a legend (upper left of the map, or of the figure when it has
    no map), a north arrow and a scale bar; returns the scale bar's length in metres (None without one).
    The caller checks that a north arrow or scale bar has a map, and a scale bar a metric one."""
    figure, size = drawing.figure, drawing.size_px
    if title:
        from matplotlib.patches import Rectangle

        band = TITLE_PX / size[1]
        figure.add_artist(Rectangle((0, 1 - band), 1, band, transform=figure.transFigure, facecolor="white",
                                    edgecolor="none", zorder=1))
        _title(figure, title, size)  # text is drawn above patches
    if legend:
        if drawing.map_axes is not None:
            _legend(drawing.map_axes, legend, "upper left")
        else:
            _figure_legend(figure, legend)
    if north and drawing.map_axes is not None:
        north_arrow(drawing.map_axes)
    if scale and drawing.map_axes is not None and drawing.frame is not None:
        return scale_bar(drawing.map_axes, drawing.frame)
    return None


def _figure_legend(figure: Figure, entries: Sequence[LegendEntry]) -> None:
    from matplotlib.patches import Patch

    with _drawing():
        figure.legend([Patch(facecolor=entry.colour, edgecolor="#222222") for entry in entries],
                      [plain(entry.label) for entry in entries], loc="upper left", framealpha=0.9, fontsize=9)


def on_saved_figure(pixels: np.ndarray, frame: MapFrame | None) -> Drawing:
    """A figure showing a saved figure's pixels at their size, with its map's axes (transparent) recreated
    from ``frame``, so new elements land where the old map is."""
    height, width = pixels.shape[:2]
    figure = _new_figure((width, height))
    figure.figimage(pixels, xo=0, yo=0, origin="upper", zorder=-1)  # under the recreated axes
    if frame is None:
        return Drawing(figure)
    axes = figure.add_axes(frame.box)
    left, right, bottom, top = frame.extent
    axes.set_xlim(left, right)
    axes.set_ylim(bottom, top)
    axes.set_axis_off()
    axes.patch.set_alpha(0)
    return Drawing(figure, axes, frame)


# Panels --------------------------------------------------------------------------------------------
def panel_size(count: int) -> tuple[int, int]:
    """The size of a panel of ``count`` images: up to ``PANEL_COLUMNS`` a row, each with its label band."""
    columns = min(count, PANEL_COLUMNS)
    rows = math.ceil(count / columns)
    return columns * PANEL_PX[0], TITLE_PX + rows * (PANEL_PX[1] + PANEL_LABEL_PX)


def image_panel(layers: Sequence[tuple[Grid, bool]], labels: Sequence[str], place: Place,
                title: str | None, mask_colour: str = "#1f4e9c") -> Drawing:
    """Images (or masks, ``True``: drawn in ``mask_colour`` on white) side by side in reading order, every
    one at the same extent, each under its label."""
    size = panel_size(len(layers))
    figure = _new_figure(size)
    _title(figure, title, size)
    columns = min(len(layers), PANEL_COLUMNS)
    for index, ((grid, is_mask), label) in enumerate(zip(layers, labels)):
        row, column = divmod(index, columns)
        top_px = size[1] - TITLE_PX - row * (PANEL_PX[1] + PANEL_LABEL_PX)
        box_px = (column * PANEL_PX[0] + MARGIN_PX / 2, top_px - PANEL_LABEL_PX - PANEL_PX[1] + MARGIN_PX / 2,
                  PANEL_PX[0] - MARGIN_PX, PANEL_PX[1] - MARGIN_PX)
        axes, _ = _map_axes(figure, place, box_px, size)
        rgba = mask_rgba(grid, mask_colour, 1.0) if is_mask else composite(grid)
        _show(axes, rgba, grid)
        _text_within(figure, (column + 0.5) * PANEL_PX[0] / size[0], (top_px - PANEL_LABEL_PX / 2) / size[1], label,
                     PANEL_PX[0] - MARGIN_PX, 12, ha="center", va="center")
    return Drawing(figure)


# Charts --------------------------------------------------------------------------------------------
def _chart(title: str | None) -> tuple[Drawing, Axes]:
    figure = _new_figure(CHART_PX)
    _title(figure, title, CHART_PX)
    top = 1 - (TITLE_PX + MARGIN_PX) / CHART_PX[1]
    axes = figure.add_axes((0.12, 0.16, 0.82, top - 0.16))
    return Drawing(figure), axes


def pie_chart(labels: Sequence[str], values: Sequence[float], title: str | None) -> Drawing:
    """Shares of a whole: one slice per label (with its percentage), anticlockwise from the top."""
    drawing, axes = _chart(title)
    with _drawing():
        axes.pie(values, labels=[plain(label) for label in labels], colors=_cycled(len(values)),
                 autopct="%1.1f%%", startangle=90, counterclock=True, wedgeprops={"edgecolor": "white"})
    axes.set_aspect("equal")
    return drawing


def bar_chart(labels: Sequence[str], values: Sequence[float], title: str | None, value_label: str | None
              ) -> Drawing:
    """One bar per label, its value written on it."""
    drawing, axes = _chart(title)
    positions = np.arange(len(values))
    bars = axes.bar(positions, values, color=_cycled(len(values)))
    with _drawing():
        axes.bar_label(bars, labels=[f"{value:,.6g}" for value in values], fontsize=9, padding=2)
        axes.set_xticks(positions, [plain(label) for label in labels], rotation=30 if len(values) > 6 else 0,
                        ha="right" if len(values) > 6 else "center")
        if value_label:
            axes.set_ylabel(plain(value_label))
    axes.axhline(0, color="#444444", linewidth=0.8)
    axes.margins(y=0.15)
    return drawing


def line_chart(x_labels: Sequence[str], series: Sequence[tuple[str, Sequence[float]]], title: str | None,
               value_label: str | None) -> Drawing:
    """Series over the same x labels (e.g. dates), each a line with markers, a legend naming them."""
    drawing, axes = _chart(title)
    positions = np.arange(len(x_labels))
    lines = [axes.plot(positions, values, marker="o", color=colour)[0]
             for (_, values), colour in zip(series, _cycled(len(series)))]
    with _drawing():
        step = max(1, math.ceil(len(x_labels) / 12))  # at most a dozen x labels are written
        axes.set_xticks(positions[::step], [plain(label) for label in x_labels[::step]], rotation=30, ha="right")
        if value_label:
            axes.set_ylabel(plain(value_label))
        # Labels given with their lines: none is dropped, not even one starting with '_'.
        axes.legend(lines, [plain(name) for name, _ in series], loc="best", fontsize=9)
    axes.grid(True, alpha=0.3)
    return drawing


def _cycled(count: int) -> list[str]:
    return [SERIES_COLOURS[index % len(SERIES_COLOURS)] for index in range(count)]


# Report page ---------------------------------------------------------------------------------------
def page_lines(sections: Sequence[tuple[str, str]]) -> list[tuple[str, bool]]:
    """The text of a report page as lines (heading or not), each section's text wrapped to the page."""
    lines: list[tuple[str, bool]] = []
    for heading, text in sections:
        if heading:
            lines.append((plain(heading), True))
        for paragraph in plain(text).split("\n"):
            lines += [(line, False) for line in textwrap.wrap(paragraph, PAGE_WRAP_CHARS) or [""]]
    return lines


def report_page(title: str, lines: Sequence[tuple[str, bool]], figures: Sequence[np.ndarray],
                captions: Sequence[str]) -> Drawing:
    """One page: the title, the text lines, then up to four figures (one, a row of two, or two rows of
    two), each fitted to its cell with its caption below."""
    size = PAGE_PX
    figure = _new_figure(size)
    _title(figure, title, size, fontsize=20)
    line_px = 20.0
    y = float(size[1] - TITLE_PX - MARGIN_PX)
    for text, is_heading in lines:
        y -= line_px * (1.3 if is_heading else 1.0)
        _text_within(figure, MARGIN_PX * 2 / size[0], y / size[1], text, size[0] - MARGIN_PX * 4,
                     13 if is_heading else 11, wrap=False, ha="left", va="baseline",
                     fontweight="bold" if is_heading else "normal")
    if figures:
        columns = 1 if len(figures) == 1 else 2
        rows = math.ceil(len(figures) / columns)
        area_top, caption_px = y - MARGIN_PX * 2, 28
        cell_w, cell_h = (size[0] - 2 * MARGIN_PX) / columns, (area_top - MARGIN_PX) / rows
        for index, (pixels, caption) in enumerate(zip(figures, captions)):
            row, column = divmod(index, columns)
            left = MARGIN_PX + column * cell_w
            bottom = area_top - (row + 1) * cell_h
            box = _fit((pixels.shape[1], pixels.shape[0]),
                       (left + 8, bottom + caption_px, cell_w - 16, cell_h - caption_px - 8), size)
            axes = figure.add_axes(box)
            axes.imshow(pixels, interpolation="antialiased", aspect="auto")
            axes.set_axis_off()
            _text_within(figure, (left + cell_w / 2) / size[0], (bottom + caption_px / 2) / size[1], caption,
                         cell_w - 16, 10, ha="center", va="center", style="italic")
    return Drawing(figure)


def read_png(data: bytes, max_side_px: int = 2000) -> np.ndarray:
    """The RGB pixels (rows, cols, 3, uint8) of PNG bytes, shrunk to ``max_side_px``; ``ValueError`` if they
    are not a readable PNG."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.format != "PNG":
                raise ValueError("not a PNG image")
            if max(image.size) > 8 * max_side_px:
                raise ValueError(f"the image is too large ({image.size[0]} x {image.size[1]} pixels)")
            image.thumbnail((max_side_px, max_side_px))
            return np.asarray(image.convert("RGB"))
    except (OSError, UnidentifiedImageError, Image.DecompressionBombError, SyntaxError) as exc:
        raise ValueError(f"not a readable PNG image ({type(exc).__name__})") from None
