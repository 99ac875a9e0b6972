"""Starstruck: count the stars (1 to 3) among distractor shapes on the platform.

Procedural scenes from a stable seeded generator (``numpy.random.default_rng`` with a fixed seed
per split), built through ``gauntlet.datacache.ensure_built``. Each scene covers the whole
12 x 12 cm platform and holds 1 to 3 five-pointed stars and 1 or 2 distractors (discs, squares,
triangles, crosses), every shape 1.8 to 2.4 cm across, extruded 3 mm with soft walls, randomly
turned, not overlapping (a crowded layout is redrawn whole), and centred where the sensor can
reach them (within +-3.8 cm of the platform centre). Label = number of stars - 1 (classes 0, 1, 2
mean 1, 2, 3 stars).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gauntlet.envs.tactile.heightfield import extrude_mask, split_loader, volume_and_centroid

NAME = "tactile-starstruck"
VERSION = "1"
FOOTPRINT_M = 0.12
HEIGHT_M = 0.003
DEFAULT_RESOLUTION = 128
SCENES = {"train": 2000, "test": 400}
SPLIT_SEEDS = {"train": 1, "test": 2}
PLACEMENT_HALF_M = 0.038
RADIUS_RANGE_M = (0.009, 0.012)
GAP_M = 0.004
DISTRACTORS = ("disc", "square", "triangle", "cross")


def outline(kind: str, radius: float, angle: float, centre: np.ndarray) -> np.ndarray:
    """Polygon vertices (k, 2) of a shape of circumradius ``radius`` (m), turned by ``angle``."""
    if kind == "star":
        theta = np.arange(10) * np.pi / 5
        r = np.where(np.arange(10) % 2 == 0, radius, radius * 0.45)
    elif kind == "disc":
        theta = np.linspace(0, 2 * np.pi, 48, endpoint=False)
        r = np.full(48, radius * 0.85)
    elif kind == "square":
        theta = np.arange(4) * np.pi / 2 + np.pi / 4
        r = np.full(4, radius * 0.9)
    elif kind == "triangle":
        theta = np.arange(3) * 2 * np.pi / 3
        r = np.full(3, radius)
    elif kind == "cross":
        arm, half = radius, radius * 0.32
        corners = np.array([[arm, half], [half, half], [half, arm], [-half, arm], [-half, half], [-arm, half],
                            [-arm, -half], [-half, -half], [-half, -arm], [half, -arm], [half, -half], [arm, -half]])
        theta = np.arctan2(corners[:, 1], corners[:, 0])
        r = np.hypot(corners[:, 0], corners[:, 1])
    else:
        raise ValueError(f"unknown shape {kind!r}")
    theta = theta + angle
    return centre + np.stack([r * np.cos(theta), r * np.sin(theta)], axis=1)


def scene(rng: np.random.Generator, resolution: int) -> tuple[np.ndarray, int]:
    """One scene: quantised height field (uint8, 255 = full height) and its number of stars."""
    from matplotlib.path import Path as PolygonPath

    stars = int(rng.integers(1, 4))
    distractors = rng.integers(len(DISTRACTORS), size=int(rng.integers(1, 3)))
    kinds = ["star"] * stars + [DISTRACTORS[int(k)] for k in distractors]
    coords = np.linspace(-FOOTPRINT_M / 2, FOOTPRINT_M / 2, resolution)
    x, y = np.meshgrid(coords, coords)
    while True:  # rejection sampling of a whole layout without overlaps
        placed: list[tuple[np.ndarray, float, str, float]] = []
        for kind in kinds:
            radius = rng.uniform(*RADIUS_RANGE_M)
            centre = rng.uniform(-PLACEMENT_HALF_M, PLACEMENT_HALF_M, size=2)
            if any(np.hypot(*(centre - c)) <= radius + r + GAP_M for c, r, _, _ in placed):
                break
            placed.append((centre, radius, kind, rng.uniform(0, 2 * np.pi)))
        if len(placed) == len(kinds):
            break
    mask = np.zeros((resolution, resolution), bool)
    spacing = FOOTPRINT_M / (resolution - 1)
    for centre, radius, kind, angle in placed:
        # test only the vertices in the shape's bounding square
        low = np.maximum(((centre - radius + FOOTPRINT_M / 2) / spacing).astype(int) - 1, 0)
        high = np.minimum(((centre + radius + FOOTPRINT_M / 2) / spacing).astype(int) + 2, resolution)
        rows, cols = slice(low[1], high[1]), slice(low[0], high[0])
        window = np.stack([x[rows, cols].ravel(), y[rows, cols].ravel()], axis=1)
        inside = PolygonPath(outline(kind, radius, angle, centre)).contains_points(window)
        mask[rows, cols] |= inside.reshape(high[1] - low[1], high[0] - low[0])
    field = extrude_mask(mask)
    return field, stars


def build(folder: Path, *, resolution: int = DEFAULT_RESOLUTION, count: int | None = None) -> None:
    """The builder run by ``ensure_built``: scenes, labels, volumes and centroids per split."""
    for split, scenes in SCENES.items():
        rng = np.random.default_rng(SPLIT_SEEDS[split])
        made = [scene(rng, resolution) for _ in range(scenes if count is None else min(count, scenes))]
        fields = np.stack([field for field, _ in made])
        labels = np.array([stars - 1 for _, stars in made], np.int64)
        volume, centroid = volume_and_centroid(fields.astype(np.float64) * (HEIGHT_M / 255.0), FOOTPRINT_M)
        np.save(folder / f"{split}-fields.npy", fields)
        np.save(folder / f"{split}-labels.npy", labels)
        np.save(folder / f"{split}-volume-m3.npy", volume)
        np.save(folder / f"{split}-centroid-m.npy", centroid)


load = split_loader(NAME, VERSION, build, tuple(SCENES), default_resolution=DEFAULT_RESOLUTION,
                    height_scale_m=HEIGHT_M / 255.0, footprint_m=FOOTPRINT_M, title="Starstruck")
