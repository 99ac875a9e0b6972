"""The simulated GelSight Mini: contact depth against the scene, colour from the gel's slopes."""

from __future__ import annotations

import numpy as np
import pytest

from gauntlet.envs.tactile import heightfield
from gauntlet.envs.tactile.sensor import (PRESS_DEPTH_M, SENSOR_HEIGHT_M, SENSOR_WIDTH_M, SensorConfig,
                                          TactileRenderer, colour_response)

SIZE_M = 0.1
RESOLUTION = 101  # 1 mm between vertices


def _render(field: np.ndarray, sensor_xy, sensor_yaw=0.0, object_yaw=0.0, image_size=(32, 48)):
    renderer = TactileRenderer(SensorConfig(image_size), RESOLUTION, SIZE_M)
    fields = field[None].astype(np.float32)
    offsets = np.zeros((1, 1, 1), np.float32)
    fx, fy = renderer.grid_coordinates(np.zeros((1, 2)), np.array([object_yaw]), np.array([sensor_xy], float),
                                       np.array([sensor_yaw]))
    depth, contact_z = renderer.depth(fields.reshape(-1), offsets, fx, fy)
    return renderer, depth[0], float(contact_z[0]), renderer.tactile_rgb(depth)[0]


def _ramp(slope: float) -> np.ndarray:
    """A field rising along +x with the given slope (dz/dx), inside the zero border."""
    coords = np.linspace(-SIZE_M / 2, SIZE_M / 2, RESOLUTION)
    field = np.tile(np.clip((coords + 0.03) * slope, 0, None), (RESOLUTION, 1))
    field[:, :heightfield.BORDER] = field[:, -heightfield.BORDER:] = 0
    field[:heightfield.BORDER] = field[-heightfield.BORDER:] = 0
    return field


def test_pressing_on_the_flat_platform_gives_uniform_depth_and_the_background_image():
    renderer, depth, contact_z, image = _render(np.zeros((RESOLUTION, RESOLUTION)), (0.0, 0.0))
    assert np.allclose(depth, PRESS_DEPTH_M) and contact_z == 0.0
    assert np.allclose(image, renderer.background * 2 - 1, atol=1e-6)


def test_depth_on_a_ramp_is_the_ramp_below_the_gel_pressed_half_its_thickness():
    slope = 0.1
    renderer, depth, contact_z, _ = _render(_ramp(slope), (0.0, 0.0))
    # the gel's lowest point sits on the highest point under it, then sinks by the press depth
    top = slope * (0.03 + SENSOR_WIDTH_M / 2 * (1 - 1 / depth.shape[1]))
    assert contact_z == pytest.approx(top, rel=1e-4)
    u = renderer.u.astype(np.float64)
    expected = np.clip(slope * (0.03 + u) - (top - PRESS_DEPTH_M), 0, None)
    assert np.allclose(depth, np.broadcast_to(expected, depth.shape), atol=1e-7)


def test_tactile_colour_follows_the_calibrated_response_to_the_slope():
    slope = 0.8
    _, depth, _, image = _render(_ramp(slope), (0.0, 0.0))
    background = TactileRenderer(SensorConfig((32, 48)), RESOLUTION, SIZE_M).background
    touched = depth[:, 1:-1] > 0  # interior pixels in contact with the ramp see its slope
    expected = (background + colour_response(np.array(slope), np.array(0.0))) * 2 - 1
    region = np.zeros_like(depth, bool)
    region[:, 2:-2] = touched[:, 1:-1] & touched[:, :-2] & touched[:, 2:]
    region[[0, -1]] = False
    assert region.sum() > 100
    assert np.abs(image[region] - expected[region]).max() < 0.03  # one slope bin of the table


def test_rotating_the_object_rotates_what_the_sensor_feels():
    field = _ramp(0.5)
    _, _, _, image_0 = _render(field, (0.0, 0.0), image_size=(40, 40))
    # ramp rising along +x seen by a sensor turned by 90 degrees rises along the sensor's -y axis
    _, depth_turned, _, _ = _render(field, (0.0, 0.0), sensor_yaw=np.pi / 2, image_size=(40, 40))
    profile = depth_turned.mean(axis=1)
    assert np.all(np.diff(profile[profile > 0]) > 0)  # image rows run towards -y: depth grows downwards
    assert not np.allclose(image_0, 0)


def test_sampling_reads_vertex_heights_exactly_and_zero_outside_the_footprint():
    rng = np.random.default_rng(0)
    field = np.zeros((8, 8), np.float32)
    field[2:-2, 2:-2] = rng.uniform(0, 1, (4, 4))
    rows, cols = np.mgrid[0:8, 0:8]
    got = heightfield.sample(field.reshape(-1), np.zeros((1, 1, 1), np.float32),
                             cols[None].astype(np.float32), rows[None].astype(np.float32), 8)[0]
    assert np.array_equal(got[:7, :7], field[:7, :7])
    outside = heightfield.sample(field.reshape(-1), np.zeros((1, 1, 1), np.float32),
                                 np.array([[[-5.0, 20.0]]], np.float32), np.array([[[3.0, 3.0]]], np.float32), 8)
    assert np.array_equal(outside, np.zeros((1, 1, 2), np.float32))


def test_a_batch_renders_exactly_what_each_member_renders_alone():
    rng = np.random.default_rng(1)
    renderer = TactileRenderer(SensorConfig((24, 24)), RESOLUTION, SIZE_M)
    fields = np.stack([_ramp(s) for s in (0.2, 0.6, 1.5)]).astype(np.float32)
    object_yaw = rng.uniform(-np.pi, np.pi, 3)
    sensor_xy = rng.uniform(-0.03, 0.03, (3, 2))

    def render(members):
        members = np.asarray(members)
        offsets = (members * RESOLUTION ** 2).astype(np.float32)[:, None, None]
        fx, fy = renderer.grid_coordinates(np.zeros((len(members), 2)), object_yaw[members], sensor_xy[members],
                                           np.zeros(len(members)))
        depth, _ = renderer.depth(fields.reshape(-1), offsets, fx, fy)
        return renderer.tactile_rgb(depth)

    batch = render([0, 1, 2])
    for i in range(3):
        assert np.array_equal(batch[i], render([i])[0])


def test_sensor_geometry_is_the_gelsight_mini():
    assert (SENSOR_WIDTH_M, SENSOR_HEIGHT_M, PRESS_DEPTH_M) == (0.01888, 0.01416, 0.002125)
    with pytest.raises(ValueError, match="image_size"):
        SensorConfig((2, 64))
