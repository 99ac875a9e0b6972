"""Objects as triangulated height fields: exact volume and centre of mass, and batched sampling.

An object is a square grid of ``R x R`` vertex heights spanning ``size_m x size_m`` centred on the
object's origin. Every grid cell is split along its diagonal from vertex ``(x0, y0)`` to
``(x0 + 1, y0 + 1)`` into two triangles, and the surface is linear on each triangle. The solid is
everything between that surface and the platform (z = 0). The renderer samples exactly this
surface (``sample``), so the volume and centre of mass below are exact for what the sensor feels.
The two outermost rings of vertices are zero, so sampling outside the footprint gives 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

BORDER = 2  # zero rings around every field, so clipped look-ups outside the footprint read 0


def extrude_mask(mask: np.ndarray, sigma_vertices: float = 1.0) -> np.ndarray:
    """A binary footprint ``(R, R)`` as a quantised extruded relief (uint8, 255 = full height).

    The mask is blurred and passed through a smoothstep, so walls are soft (about two vertices
    wide) and tops flat; the two outer vertex rings are zeroed (see ``BORDER``).
    """
    from scipy import ndimage

    soft = ndimage.gaussian_filter(mask.astype(np.float64), sigma=sigma_vertices)
    t = np.clip((soft - 0.2) / 0.6, 0.0, 1.0)
    field = np.rint(t * t * (3 - 2 * t) * 255).astype(np.uint8)
    field[:BORDER] = field[-BORDER:] = 0
    field[:, :BORDER] = field[:, -BORDER:] = 0
    return field


def vertex_spacing(resolution: int, size_m: float) -> float:
    return size_m / (resolution - 1)


def _triangles(heights: np.ndarray, size_m: float):
    """The two triangle families of the grid: corner heights and corner x, y coordinates (m)."""
    resolution = heights.shape[-1]
    spacing = vertex_spacing(resolution, size_m)
    coords = np.arange(resolution) * spacing - size_m / 2
    x, y = np.meshgrid(coords, coords)  # [row = y, column = x]
    h = heights.astype(np.float64)
    c00 = (h[..., :-1, :-1], x[:-1, :-1], y[:-1, :-1])
    c10 = (h[..., :-1, 1:], x[:-1, 1:], y[:-1, 1:])  # +x neighbour
    c01 = (h[..., 1:, :-1], x[1:, :-1], y[1:, :-1])  # +y neighbour
    c11 = (h[..., 1:, 1:], x[1:, 1:], y[1:, 1:])
    return spacing, ((c00, c10, c11), (c00, c11, c01))


def volume_and_centroid(heights: np.ndarray, size_m: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact volume (m^3) and centre of mass (x, y, z in m, object frame) of height-field solids.

    ``heights`` is ``(..., R, R)`` in metres. For a triangle T of area A with linear functions f, g
    given by their corner values, the integral of f g over T is A/12 (sum f_i g_i + sum f_i sum g_i);
    the prism under a linear height h has volume = integral of h, moments integral of x h, y h, and
    integral of h^2 / 2 for z.
    """
    spacing, families = _triangles(heights, size_m)
    area = spacing * spacing / 2
    volume: float | np.ndarray = 0.0
    moment: list[float | np.ndarray] = [0.0, 0.0, 0.0]
    for corners in families:
        hs = [c[0] for c in corners]
        xs = [c[1] for c in corners]
        ys = [c[2] for c in corners]
        sum_h = hs[0] + hs[1] + hs[2]
        volume = volume + (area / 3 * sum_h).sum(axis=(-2, -1))
        for axis, coordinate in enumerate((xs, ys)):
            sum_c = coordinate[0] + coordinate[1] + coordinate[2]
            products = coordinate[0] * hs[0] + coordinate[1] * hs[1] + coordinate[2] * hs[2]
            moment[axis] = moment[axis] + (area / 12 * (products + sum_c * sum_h)).sum(axis=(-2, -1))
        squares = hs[0] ** 2 + hs[1] ** 2 + hs[2] ** 2
        moment[2] = moment[2] + (area / 24 * (squares + sum_h ** 2)).sum(axis=(-2, -1))
    volumes = np.asarray(volume)
    safe = np.where(volumes > 0, volumes, 1.0)
    centroid = np.stack([np.asarray(m) / safe for m in moment], axis=-1)
    return volumes, centroid


def sample(fields_flat: np.ndarray, offsets: np.ndarray, fx: np.ndarray, fy: np.ndarray,
           resolution: int) -> np.ndarray:
    """Heights at fractional grid coordinates, on the triangulated surface (batched).

    ``fields_flat`` is every field of the batch raveled into one float32 array, ``offsets`` the flat
    index of each batch member's first vertex (float32, shape ``(n, 1, 1)``), ``fx``/``fy`` the
    float32 grid coordinates ``(n, H, W)`` (overwritten). Coordinates outside the field read 0
    (see ``BORDER``).
    """
    limit = np.float32(resolution - BORDER)
    # ufuncs directly: np.clip's dispatch costs more than the work at these sizes
    np.minimum(np.maximum(fx, 0, out=fx), limit, out=fx)
    np.minimum(np.maximum(fy, 0, out=fy), limit, out=fy)
    x0 = np.floor(fx)
    y0 = np.floor(fy)
    fx -= x0  # now the fractional part t_x
    fy -= y0
    y0 *= np.float32(resolution)
    y0 += x0
    y0 += offsets  # float32 holds these integers exactly (below 2^24 vertices per batch)
    index = y0.astype(np.int32)
    h00 = fields_flat.take(index)
    h11 = fields_flat.take(index + np.int32(resolution + 1))
    upper = fx >= fy  # the triangle (00, 10, 11); else (00, 11, 01)
    index += np.where(upper, np.int32(1), np.int32(resolution))
    h_side = fields_flat.take(index)
    # upper: h00 + tx (h10 - h00) + ty (h11 - h10); lower: h00 + ty (h01 - h00) + tx (h11 - h01)
    t_side = np.where(upper, fx, fy)
    t_diag = np.where(upper, fy, fx)
    h11 -= h_side
    h11 *= t_diag
    h_side -= h00
    h_side *= t_side
    h00 += h_side
    h00 += h11
    return h00


@dataclass(frozen=True)
class MeshSplit:
    """One split of a height-field object set, as the envs consume it."""

    fields: np.ndarray  # (N, R, R) uint8, memory-mapped
    height_scale_m: float  # metres per unit of ``fields``
    footprint_m: float
    labels: np.ndarray  # (N,) int
    volume_m3: np.ndarray  # (N,)
    centroid_m: np.ndarray  # (N, 3), object frame

    def __len__(self) -> int:
        return len(self.labels)

    def heights_m(self, index: int, out: np.ndarray | None = None) -> np.ndarray:
        """Object ``index``'s vertex heights (m, float32), written into ``out`` when given."""
        return np.multiply(self.fields[index], np.float32(self.height_scale_m), out=out, dtype=np.float32)


def cached_split(name: str, version: str, build, split: str, *, resolution: int, default_resolution: int,
                 count: int | None, height_scale_m: float, footprint_m: float,
                 inputs: tuple[str, ...] = ()) -> MeshSplit:
    """A split of an object set built by ``build`` through the data cache (built on first use).

    Default parameters are left out of the cache key, so ``gauntlet data build NAME`` (which passes
    none) fills the same entry the envs read. ``inputs``: the curated files ``build`` reads (their
    digest is part of the key, as in the registry's data entry).
    """
    from gauntlet.datacache import ensure_built

    params = {}
    if resolution != default_resolution:
        params["resolution"] = resolution
    if count is not None:
        params["count"] = count
    folder = ensure_built(name, version, build, params=params, inputs=inputs)
    return MeshSplit(fields=np.load(folder / f"{split}-fields.npy", mmap_mode="r"), height_scale_m=height_scale_m,
                     footprint_m=footprint_m, labels=np.load(folder / f"{split}-labels.npy"),
                     volume_m3=np.load(folder / f"{split}-volume-m3.npy"),
                     centroid_m=np.load(folder / f"{split}-centroid-m.npy"))


def split_loader(name: str, version: str, build, splits: tuple[str, ...], *, default_resolution: int,
                 height_scale_m: float, footprint_m: float, title: str):
    """``load(split, *, resolution, count) -> MeshSplit`` for a split object set (memoised)."""

    @lru_cache(maxsize=8)
    def load(split: str = "train", *, resolution: int = default_resolution, count: int | None = None) -> MeshSplit:
        if split not in splits:
            raise ValueError(f"unknown {title} split {split!r}; expected one of {splits}")
        return cached_split(name, version, build, split, resolution=resolution, default_resolution=default_resolution,
                            count=count, height_scale_m=height_scale_m, footprint_m=footprint_m)

    load.__doc__ = f"Load (building on first use) a split of {title}. ``count`` limits each split (smoke sizes)."
    return load
