"""Helpers for the tactile tests: an independent mesh of a height-field solid (trimesh)."""

from __future__ import annotations

import numpy as np
import pytest

SMOKE_OBJECTS = 20  # objects per split in smoke tests
# The tilted sensor's kernel compiles for about 11 s of CPU on first use (numba then caches it on disk): every test
# that tilts a sensor carries this mark, so a run compiles it on one worker, not on both.
TILT_GROUP = pytest.mark.xdist_group("tactile-tilt")


def heightfield_mesh(heights_m: np.ndarray, size_m: float, base_m: float = 0.001):
    """A watertight trimesh of the solid under a height field, standing on a plate ``base_m`` thick.

    Built independently of ``gauntlet.envs.tactile.heightfield``: top surface triangulated along
    the same diagonal, a flat bottom at ``-base_m`` and walls around the border.
    """
    import trimesh

    resolution = heights_m.shape[0]
    coords = np.linspace(-size_m / 2, size_m / 2, resolution)
    x, y = np.meshgrid(coords, coords)
    top = np.stack([x, y, heights_m], axis=-1).reshape(-1, 3)
    bottom = np.stack([x, y, np.full_like(x, -base_m)], axis=-1).reshape(-1, 3)
    vertices = np.concatenate([top, bottom])
    offset = resolution * resolution
    row, col = np.mgrid[0:resolution - 1, 0:resolution - 1]
    v00 = (row * resolution + col).ravel()
    v10, v01, v11 = v00 + 1, v00 + resolution, v00 + resolution + 1
    # Counter-clockwise seen from above.
    top_faces = np.concatenate([np.stack([v00, v10, v11], 1), np.stack([v00, v11, v01], 1)])
    bottom_faces = top_faces[:, ::-1] + offset
    last = resolution - 1
    ring = ([(0, c) for c in range(last)] + [(r, last) for r in range(last)]
            + [(last, c) for c in range(last, 0, -1)] + [(r, 0) for r in range(last, 0, -1)])
    walls = []
    for (r0, c0), (r1, c1) in zip(ring, ring[1:] + ring[:1]):
        a, b = r0 * resolution + c0, r1 * resolution + c1
        walls += [[a, a + offset, b + offset], [a, b + offset, b]]
    faces = np.concatenate([top_faces, bottom_faces, np.array(walls)])
    mesh = trimesh.Trimesh(vertices, faces, process=False)
    if mesh.volume < 0:
        mesh.invert()
    return mesh


@pytest.fixture
def mesh_of():
    return heightfield_mesh
