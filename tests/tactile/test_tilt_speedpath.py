"""The tilted sensor's compiled kernel skips work (first visits in one sweep, runs of visits under low
blocks, tiles of rays that cannot reach the contact); what it skips must never change a crossing.
The array fallback samples every visit of every ray down to the floor, so the two agree only if each
skip was sound. Scenes with vertical walls (as the Shapes solids) are where a wrong skip would show."""

from __future__ import annotations

import numpy as np
import pytest

from gauntlet.envs.tactile import kernels, orientation, tilt
from gauntlet.envs.tactile.sensor import PRESS_DEPTH_M, SensorConfig, TactileRenderer

from .conftest import TILT_GROUP

RESOLUTION, FIELD_M = 128, 0.1
pytestmark = [pytest.mark.skipif(not kernels.AVAILABLE, reason="needs numba"), TILT_GROUP]


def _walled_scene(seed: int) -> np.ndarray:
    """A Shapes-like solid: a box base, a taller round boss on it, a through-hole (vertical walls)."""
    rng = np.random.default_rng(seed)
    rows, cols = np.mgrid[:RESOLUTION, :RESOLUTION]
    field = np.zeros((RESOLUTION, RESOLUTION), np.float32)
    top, left = rng.integers(20, 50, 2)
    bottom, right = top + rng.integers(30, 60), left + rng.integers(30, 60)
    field[top:bottom, left:right] = rng.uniform(0.004, 0.010)
    centre = rng.uniform([top + 10, left + 10], [bottom - 10, right - 10])
    boss = (rows - centre[0]) ** 2 + (cols - centre[1]) ** 2 < rng.uniform(5, 12) ** 2
    field[boss] = field.max() + rng.uniform(0.002, 0.006)
    hole = (rows - (top + 5)) ** 2 + (cols - (left + 5)) ** 2 < 3.5 ** 2
    field[hole] = 0.0
    return field


def _render_both(fields: list[np.ndarray], rng: np.random.Generator, touches: int, image_size=(64, 64)):
    """The same random tilted touches (sensor over the walls and off the solid) by both backends."""
    renderer = TactileRenderer(SensorConfig(image_size=image_size), RESOLUTION, FIELD_M)
    flat = np.concatenate([field.reshape(-1) for field in fields])
    which = rng.integers(0, len(fields), touches)
    offsets = (which * RESOLUTION ** 2).reshape(-1, 1, 1)
    blocks = np.stack([tilt.block_maxima(fields[i]) for i in which])
    rotations = np.stack([orientation.draw_orientation(rng) for _ in range(touches)])
    object_xy = rng.uniform(-0.01, 0.01, (touches, 2))
    object_yaw = rng.uniform(-np.pi, np.pi, touches)
    sensor_xy = rng.uniform(-0.035, 0.035, (touches, 2))
    press = rng.uniform(0.5, 1.0, touches).astype(np.float32) * np.float32(PRESS_DEPTH_M)
    results = {}
    for backend in ("numba", "numpy"):
        renderer.backend = backend
        depth, contact, _ = renderer.render_tilted(flat, offsets, object_xy, object_yaw, sensor_xy, rotations, blocks,
                                                   rgb=False, press_m=press)
        results[backend] = depth.astype(np.float64), contact.astype(np.float64)
    return results


def test_the_kernel_skips_only_visits_and_rays_that_cannot_change_a_depth():
    rng = np.random.default_rng(7)
    results = _render_both([_walled_scene(seed) for seed in range(3)], rng, touches=40)
    (fast, fast_contact), (slow, slow_contact) = results["numba"], results["numpy"]
    assert (fast > 0).any() and (fast == 0).any()  # touches that meet walls, tops and the floor
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-9)
    np.testing.assert_allclose(fast_contact, slow_contact, rtol=0, atol=1e-9)


def test_a_touch_where_nothing_rises_above_the_platform_meets_it_at_every_pixel():
    rng = np.random.default_rng(3)
    empty = np.zeros((RESOLUTION, RESOLUTION), np.float32)
    results = _render_both([empty], rng, touches=6)
    renderer = TactileRenderer(SensorConfig(), RESOLUTION, FIELD_M)
    for backend in ("numba", "numpy"):
        depth, contact = results[backend]
        assert (depth > 0).any()
        # each pixel meets z = 0 at s = -bz / nz; the gel rests on the highest of them
        np.testing.assert_allclose(depth, results["numpy"][0], rtol=0, atol=1e-9)
        assert np.all(contact >= 0) and np.all(depth <= PRESS_DEPTH_M + 1e-9)
    # analytic check of one touch: a ramp of the sensor's tilt, capped by the press depth
    rotation = orientation.rotation_zyz(0.3, np.radians(25), -0.7)
    renderer.backend = "numba"
    depth, contact, _ = renderer.render_tilted(empty.reshape(-1), np.zeros((1, 1, 1), np.int64), np.zeros((1, 2)),
                                               np.zeros(1), np.zeros((1, 2)), rotation[None],
                                               tilt.block_maxima(empty)[None], rgb=False)
    u, v = np.meshgrid(renderer.u.astype(np.float64), renderer.v.astype(np.float64))
    s = -(rotation[2, 0] * u + rotation[2, 1] * v) / rotation[2, 2]
    np.testing.assert_allclose(depth[0], np.maximum(s - (s.max() - PRESS_DEPTH_M), 0), rtol=0, atol=1e-9)
    assert contact[0] == pytest.approx(s.max(), abs=1e-9)


def test_rays_marched_in_lockstep_meet_the_scene_where_the_array_version_does_on_every_kind_of_touch():
    # many touches, tilted up to the limit and beyond the solids' edges: the parts whose rays march
    # together, the tiles whose first visits are skipped and the coarse rays all take part
    rng = np.random.default_rng(11)
    results = _render_both([_walled_scene(seed) for seed in range(3, 9)], rng, touches=120)
    (fast, fast_contact), (slow, slow_contact) = results["numba"], results["numpy"]
    assert (fast_contact > 0.004).sum() > 20  # touches on the solids, not only beside them
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-9)
    np.testing.assert_allclose(fast_contact, slow_contact, rtol=0, atol=1e-9)


@pytest.mark.parametrize("image_size", [(5, 4), (23, 37), (40, 17)])
def test_images_whose_edges_cut_the_tiles_meet_the_scene_where_the_array_version_does(image_size):
    # the kernel takes rays a tile (and a quarter tile) at a time; here the image edge cuts tiles, quarters
    # and the tile centres the kernel marches first
    rng = np.random.default_rng(17)
    results = _render_both([_walled_scene(seed) for seed in range(9, 12)], rng, touches=60, image_size=image_size)
    (fast, fast_contact), (slow, slow_contact) = results["numba"], results["numpy"]
    assert (fast_contact > 0.004).sum() > 5
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-9)
    np.testing.assert_allclose(fast_contact, slow_contact, rtol=0, atol=1e-9)


def test_the_field_map_is_the_ray_carried_into_the_object_frame():
    # field_map's affine coefficients against the long way: the pixel's point on the sensing plane,
    # down its ray to height z, into the object's frame, into field cells
    rng = np.random.default_rng(19)
    scale, half = TactileRenderer(SensorConfig(), RESOLUTION, FIELD_M).field_scale()
    for _ in range(20):
        rotation = orientation.draw_orientation(rng)
        object_xy, sensor_xy = rng.uniform(-0.02, 0.02, 2), rng.uniform(-0.04, 0.04, 2)
        object_yaw = rng.uniform(-np.pi, np.pi)
        x0, x_u, x_v, x_z, y0, y_u, y_v, y_z = tilt.field_map(rotation, object_xy, object_yaw, sensor_xy, scale, half)
        u, v, z = rng.uniform(-0.01, 0.01), rng.uniform(-0.007, 0.007), rng.uniform(0, 0.016)
        plane = np.array([*sensor_xy, 0.0]) + rotation[:, 0] * u + rotation[:, 1] * v
        point = plane + (z - plane[2]) / rotation[2, 2] * rotation[:, 2]
        cos_o, sin_o = np.cos(object_yaw), np.sin(object_yaw)
        dx, dy = point[0] - object_xy[0], point[1] - object_xy[1]
        expected = np.array([cos_o * dx + sin_o * dy, cos_o * dy - sin_o * dx]) * scale + half
        np.testing.assert_allclose([x0 + x_u * u + x_v * v + x_z * z, y0 + y_u * u + y_v * v + y_z * z], expected,
                                   rtol=0, atol=1e-9)


def test_the_compiled_turn_is_the_array_turn():
    rng = np.random.default_rng(5)
    rotations = np.stack([orientation.draw_orientation(rng) for _ in range(200)])
    moves = rng.uniform(-1, 1, (200, 3))
    moves[:3] = 0.0  # no turn
    moves[3:6] *= 1e-14  # a turn too small to have an axis
    moves[6:9] *= 3.0  # outside the unit ball: projected onto it
    norm = np.linalg.norm(moves, axis=1, keepdims=True)
    turned = orientation.rotation_from_vector(moves / np.maximum(norm, 1.0) * 0.236) @ rotations
    expected = orientation.limit_tilt(turned)
    np.testing.assert_allclose(orientation.turn(rotations, moves, 0.236), expected, rtol=0, atol=1e-12)
