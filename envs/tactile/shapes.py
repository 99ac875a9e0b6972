"""Shapes: procedural CAD-like solids (our stand-in for the ABC CAD dataset), built with manifold3d.

Each solid is a constructive-solid-geometry union of a base (a box or a cylinder, 3-6 cm across,
4-10 mm tall) and one or two bosses standing on it (boxes, cylinders or chamfered cylinders, i.e.
frusta, 2-6 mm taller), minus zero to two vertical through-holes (radius 2.5-5 mm). Every part is
vertical or slopes inwards going up, so the solid has no overhangs: seen from above it is exactly
its top surface, which is what the sensor feels. Volume and centre of mass are computed from the
watertight ``manifold3d`` mesh itself (``trimesh``), not from the height field. The height field
is the analytic top surface of the same parts on a 128 x 128 vertex grid spanning 10 x 10 cm.
Splits: 1,000 train and 200 test solids from fixed seeds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from gauntlet.envs.tactile.heightfield import BORDER, split_loader

NAME = "tactile-shapes"
VERSION = "1"
FOOTPRINT_M = 0.10
DEFAULT_RESOLUTION = 128
MAX_HEIGHT_M = 0.016  # heights are stored as uint8 over this range
SOLIDS = {"train": 1000, "test": 200}
SPLIT_SEEDS = {"train": 11, "test": 12}
SEGMENTS = 64  # polygon sides of the mesh's cylinders


def _part(rng: np.random.Generator, half_extent: float, z0: float, height: float, centre: np.ndarray) -> dict:
    kind = ["box", "cylinder", "frustum"][int(rng.integers(3))]
    if kind == "box":
        return {"kind": kind, "centre": centre, "half": rng.uniform(0.5, 1.0, 2) * half_extent, "z0": z0,
                "height": height}
    radius = rng.uniform(0.6, 1.0) * half_extent
    top = radius if kind == "cylinder" else radius * rng.uniform(0.4, 0.8)
    return {"kind": kind, "centre": centre, "radius": radius, "top_radius": top, "z0": z0, "height": height}


def design(rng: np.random.Generator) -> tuple[list[dict], list[dict]]:
    """Parts (solid, unioned) and holes (subtracted) of one random solid (m)."""
    base_half = rng.uniform(0.015, 0.03)
    base = _part(rng, base_half, 0.0, rng.uniform(0.004, 0.010), np.zeros(2))
    if base["kind"] == "frustum":
        base["top_radius"] = base["radius"]  # keep the base a plain cylinder, bosses need its flat top
    parts = [base]
    # the largest disc inside the base's top, so bosses never overhang its edge
    inner = base["radius"] if base["kind"] != "box" else float(base["half"].min())
    for _ in range(int(rng.integers(1, 3))):
        half = rng.uniform(0.2, 0.4) * inner
        centre = rng.uniform(-1, 1, 2) * (inner - half) / np.sqrt(2)
        parts.append(_part(rng, half, base["height"], rng.uniform(0.002, 0.006), centre))
    holes = [{"centre": rng.uniform(-1, 1, 2) * inner * 0.6, "radius": rng.uniform(0.0025, 0.005)}
             for _ in range(int(rng.integers(0, 3)))]
    return parts, holes


def mesh(parts: list[dict], holes: list[dict]):
    """The watertight solid as a ``trimesh.Trimesh`` (via manifold3d booleans)."""
    import manifold3d
    import trimesh

    solid: Any = None  # a manifold3d.Manifold (an untyped extension) once the first part is in
    for part in parts:
        x, y = part["centre"]
        if part["kind"] == "box":
            w, d = 2 * part["half"]
            piece = manifold3d.Manifold.cube([w, d, part["height"]], True)
            piece = piece.translate([x, y, part["z0"] + part["height"] / 2])
        else:
            piece = manifold3d.Manifold.cylinder(part["height"], part["radius"], part["top_radius"], SEGMENTS)
            piece = piece.translate([x, y, part["z0"]])
        solid = piece if solid is None else solid + piece
    for hole in holes:
        x, y = hole["centre"]
        drill = manifold3d.Manifold.cylinder(1.0, hole["radius"], hole["radius"], SEGMENTS)
        solid = solid - drill.translate([x, y, -0.5])
    result = solid.to_mesh()
    return trimesh.Trimesh(np.asarray(result.vert_properties)[:, :3], np.asarray(result.tri_verts), process=False)


def top_surface(parts: list[dict], holes: list[dict], resolution: int) -> np.ndarray:
    """Height (m) of the solid's top at every vertex: the highest part there, zero in holes."""
    coords = np.linspace(-FOOTPRINT_M / 2, FOOTPRINT_M / 2, resolution)
    x, y = np.meshgrid(coords, coords)
    heights = np.zeros_like(x)
    for part in parts:
        dx, dy = x - part["centre"][0], y - part["centre"][1]
        if part["kind"] == "box":
            inside = (np.abs(dx) <= part["half"][0]) & (np.abs(dy) <= part["half"][1])
            top = np.where(inside, part["z0"] + part["height"], 0.0)
        else:  # a frustum's side falls linearly from the top radius to the bottom radius
            r = np.hypot(dx, dy)
            low, high = part["radius"], part["top_radius"]
            fraction = np.clip((low - r) / max(low - high, 1e-12), 0.0, 1.0) if low > high else (r <= low).astype(float)
            top = np.where(r <= low, part["z0"] + part["height"] * fraction, 0.0)
        heights = np.maximum(heights, top)
    for hole in holes:
        heights[np.hypot(x - hole["centre"][0], y - hole["centre"][1]) < hole["radius"]] = 0.0
    heights[:BORDER] = heights[-BORDER:] = 0.0
    heights[:, :BORDER] = heights[:, -BORDER:] = 0.0
    return heights


def build(folder: Path, *, resolution: int = DEFAULT_RESOLUTION, count: int | None = None) -> None:
    """The builder run by ``ensure_built``: solids' height fields, exact volumes and centres of mass."""
    for split, solids in SOLIDS.items():
        rng = np.random.default_rng(SPLIT_SEEDS[split])
        fields, volumes, centroids = [], [], []
        for _ in range(solids if count is None else min(count, solids)):
            parts, holes = design(rng)
            solid = mesh(parts, holes)
            fields.append(np.rint(np.clip(top_surface(parts, holes, resolution) / MAX_HEIGHT_M, 0, 1) * 255))
            volumes.append(solid.volume)
            centroids.append(solid.center_mass)
        np.save(folder / f"{split}-fields.npy", np.asarray(fields, np.uint8))
        np.save(folder / f"{split}-labels.npy", np.zeros(len(fields), np.int64))
        np.save(folder / f"{split}-volume-m3.npy", np.asarray(volumes))
        np.save(folder / f"{split}-centroid-m.npy", np.asarray(centroids))


load = split_loader(NAME, VERSION, build, tuple(SOLIDS), default_resolution=DEFAULT_RESOLUTION,
                    height_scale_m=MAX_HEIGHT_M / 255.0, footprint_m=FOOTPRINT_M, title="Shapes")
