"""Glyphs: extruded letters and digits in four DejaVu faces (248 classes), from fonts shipped offline.

The fonts are the DejaVu TrueType files inside the installed ``matplotlib`` package
(``matplotlib/mpl-data/fonts/ttf``; DejaVu fonts licence, a permissive Bitstream Vera derivative).
Classes: the 62 characters A-Z, a-z, 0-9 in each of DejaVu Sans, Sans Bold, Serif and Serif Bold
(the curated glyph list ``data/tactile/glyphs.json``).
Each glyph's outline (``matplotlib.textpath.TextPath``) is filled with the even-odd rule on a
128 x 128 vertex grid spanning 10 x 10 cm, at one common scale (1 em = 7 cm, so lower case stays
smaller than upper case), centred on its bounding box, and extruded 3 mm with soft walls. One
object per class: the envs randomise the pose, so there is no train/test split of objects.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from gauntlet.curated import curated_path
from gauntlet.envs.tactile.heightfield import MeshSplit, cached_split, extrude_mask, volume_and_centroid

NAME = "tactile-glyphs"
VERSION = "1"
FOOTPRINT_M = 0.10
HEIGHT_M = 0.003
EM_M = 0.07
DEFAULT_RESOLUTION = 128
GLYPHS_FILE = "tactile/glyphs.json"  # curated input: the glyph list, part of the set's cache key


def load_glyph_list(path: Path | None = None) -> tuple[str, tuple[str, ...]]:
    """The characters and the font faces of the set (``data/tactile/glyphs.json`` unless ``path``)."""
    table = json.loads((path or curated_path(GLYPHS_FILE)).read_text(encoding="utf-8"))
    return table["characters"], tuple(table["faces"])


CHARACTERS, FACES = load_glyph_list()


def class_names() -> list[str]:
    return [f"{character} ({face.removesuffix('.ttf')})" for face in FACES for character in CHARACTERS]


def font_path(face: str) -> Path:
    import matplotlib

    return Path(matplotlib.get_data_path()) / "fonts" / "ttf" / face


def glyph_mask(character: str, face: str, resolution: int) -> np.ndarray:
    """The glyph's filled outline on the vertex grid (even-odd rule, so counters are holes)."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.path import Path as PolygonPath
    from matplotlib.textpath import TextPath

    path = TextPath((0, 0), character, size=1.0, prop=FontProperties(fname=str(font_path(face))))
    polygons = [polygon * EM_M for polygon in map(np.asarray, path.to_polygons()) if len(polygon) >= 3]
    points = np.concatenate(polygons)
    centre = (points.min(axis=0) + points.max(axis=0)) / 2
    coords = np.linspace(-FOOTPRINT_M / 2, FOOTPRINT_M / 2, resolution)
    x, y = np.meshgrid(coords, coords)
    grid = np.stack([x.ravel(), y.ravel()], axis=1)
    mask = np.zeros(resolution * resolution, bool)
    for polygon in polygons:
        mask ^= PolygonPath(polygon - centre).contains_points(grid)
    return mask.reshape(resolution, resolution)


def build(folder: Path, *, resolution: int = DEFAULT_RESOLUTION, count: int | None = None) -> None:
    """The builder run by ``ensure_built``: one extruded glyph per class (``count``: the first few)."""
    pairs = [(character, face) for face in FACES for character in CHARACTERS]
    chosen = range(len(pairs)) if count is None else np.linspace(0, len(pairs) - 1, count).round().astype(int)
    fields = np.stack([extrude_mask(glyph_mask(*pairs[i], resolution)) for i in chosen])
    labels = np.asarray(list(chosen), np.int64)
    volume, centroid = volume_and_centroid(fields.astype(np.float64) * (HEIGHT_M / 255.0), FOOTPRINT_M)
    np.save(folder / "all-fields.npy", fields)
    np.save(folder / "all-labels.npy", labels)
    np.save(folder / "all-volume-m3.npy", volume)
    np.save(folder / "all-centroid-m.npy", centroid)


@lru_cache(maxsize=4)
def load(*, resolution: int = DEFAULT_RESOLUTION, count: int | None = None) -> MeshSplit:
    """Load (building on first use) the glyph set. ``count`` keeps an evenly spread subset of classes."""
    return cached_split(NAME, VERSION, build, "all", resolution=resolution, default_resolution=DEFAULT_RESOLUTION,
                        count=count, height_scale_m=HEIGHT_M / 255.0, footprint_m=FOOTPRINT_M, inputs=(GLYPHS_FILE,))
