"""The wrench of the Toolbox task: a procedural combination wrench as a height field.

Dimensions (the curated ``data/tactile/wrench.json``, in mm): length 80 from the ring end's tip to
the open end's rim on the axis (the jaw cuts that rim, so the jaw tips end 1.3 short of it); handle
10 wide; open end: a disc of radius 12 centred 12 from the +x tip, with a jaw slot 11 wide and 14
deep opening towards +x; ring end: a disc of radius 10 centred 10 from the -x tip, with a round hole
of radius 5.5. Extruded 3 mm with soft walls on a 128 x 128 vertex grid spanning 10 x 10 cm,
centred on the handle's midpoint. Its two ends differ, so its yaw is defined over the full circle.
Built through the data cache like every object set (one object).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from gauntlet.curated import curated_path
from gauntlet.envs.tactile.heightfield import MeshSplit, cached_split, extrude_mask, volume_and_centroid

NAME = "tactile-wrench"
VERSION = "1"
FOOTPRINT_M = 0.10
HEIGHT_M = 0.003
DEFAULT_RESOLUTION = 128
DIMENSIONS_FILE = "tactile/wrench.json"  # curated input: the dimensions, part of the wrench's cache key


def load_dimensions_m(path: Path | None = None) -> dict[str, float]:
    """The wrench's dimensions in metres, keyed like the file's ``*_mm`` entries without the unit
    (``data/tactile/wrench.json`` unless ``path``)."""
    table = json.loads((path or curated_path(DIMENSIONS_FILE)).read_text(encoding="utf-8"))
    return {key.removesuffix("_mm"): value / 1000 for key, value in table.items() if key.endswith("_mm")}


_DIMENSIONS = load_dimensions_m()
LENGTH_M = _DIMENSIONS["length"]
HANDLE_WIDTH_M = _DIMENSIONS["handle_width"]
OPEN_END_RADIUS_M = _DIMENSIONS["open_end_radius"]
JAW_WIDTH_M = _DIMENSIONS["jaw_width"]
JAW_DEPTH_M = _DIMENSIONS["jaw_depth"]
RING_END_RADIUS_M = _DIMENSIONS["ring_end_radius"]
RING_HOLE_RADIUS_M = _DIMENSIONS["ring_hole_radius"]


def wrench_mask(resolution: int) -> np.ndarray:
    coords = np.linspace(-FOOTPRINT_M / 2, FOOTPRINT_M / 2, resolution)
    x, y = np.meshgrid(coords, coords)
    open_centre = LENGTH_M / 2 - OPEN_END_RADIUS_M
    ring_centre = -LENGTH_M / 2 + RING_END_RADIUS_M
    handle = (np.abs(y) <= HANDLE_WIDTH_M / 2) & (x >= ring_centre) & (x <= open_centre)
    open_end = np.hypot(x - open_centre, y) <= OPEN_END_RADIUS_M
    jaw = (np.abs(y) <= JAW_WIDTH_M / 2) & (x >= LENGTH_M / 2 - JAW_DEPTH_M)
    ring_end = np.hypot(x - ring_centre, y) <= RING_END_RADIUS_M
    hole = np.hypot(x - ring_centre, y) <= RING_HOLE_RADIUS_M
    return (handle | open_end | ring_end) & ~jaw & ~hole


def build(folder: Path, *, resolution: int = DEFAULT_RESOLUTION) -> None:
    """The builder run by ``ensure_built``: the one wrench."""
    fields = extrude_mask(wrench_mask(resolution))[None]
    volume, centroid = volume_and_centroid(fields.astype(np.float64) * (HEIGHT_M / 255.0), FOOTPRINT_M)
    np.save(folder / "all-fields.npy", fields)
    np.save(folder / "all-labels.npy", np.zeros(1, np.int64))
    np.save(folder / "all-volume-m3.npy", volume)
    np.save(folder / "all-centroid-m.npy", centroid)


@lru_cache(maxsize=2)
def load(*, resolution: int = DEFAULT_RESOLUTION) -> MeshSplit:
    return cached_split(NAME, VERSION, build, "all", resolution=resolution, default_resolution=DEFAULT_RESOLUTION,
                        count=None, height_scale_m=HEIGHT_M / 255.0, footprint_m=FOOTPRINT_M,
                        inputs=(DIMENSIONS_FILE,))
