"""The learned agent's parts: touch-map geometry, training maps = the agent's maps, the coverage scan."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import gauntlet  # noqa: F401 - registers the envs
from gauntlet.agents.tactile.scan import CoverageScan, _simulate, scan_lattice
from gauntlet.agents.tactile.touchmap import (MAP_CHANNELS, MAP_HALF_M, MAP_PIXELS, TouchMap, episode_maps,
                                              gel_background, paste, touch_features)
from gauntlet.envs.tactile.sensor import SENSOR_HEIGHT_M, SENSOR_WIDTH_M
from gauntlet.envs.tactile.simulation import MAX_STEP_M, WORKSPACE_HALF_M

from .conftest import SMOKE_OBJECTS


def _map_pixel(x_m: float, y_m: float) -> tuple[int, int]:
    """(row, col) of the map pixel holding world point (x, y): rows run from +y down."""
    pixel = 2 * MAP_HALF_M / MAP_PIXELS
    return int((MAP_HALF_M - y_m) // pixel), int((x_m + MAP_HALF_M) // pixel)


@pytest.mark.parametrize("yaw", [0.0, np.pi / 2])
def test_paste_puts_a_sensor_corner_where_the_sensor_frame_says(yaw):
    # The image's top-right 4 x 4 cells lit = the sensor's (+x, +y) corner in its own frame.
    features = torch.zeros(1, 1, 16, 16)
    features[0, 0, :4, -4:] = 1.0
    centre = np.array([0.01, -0.02])
    position = torch.tensor([[centre[0] / WORKSPACE_HALF_M[0], centre[1] / WORKSPACE_HALF_M[1], 0.0]],
                            dtype=torch.float32)
    rotation = torch.tensor([[np.cos(yaw), np.sin(yaw)]], dtype=torch.float32)
    pasted, covered = paste(features, position, rotation)
    corner_local = np.array([SENSOR_WIDTH_M * (0.5 - 2 / 16), SENSOR_HEIGHT_M * (0.5 - 2 / 16)])
    rotate = np.array([[np.cos(yaw), -np.sin(yaw)], [np.sin(yaw), np.cos(yaw)]])
    corner = centre + rotate @ corner_local
    brightest = np.unravel_index(int(pasted[0, 0].argmax()), (MAP_PIXELS, MAP_PIXELS))
    assert abs(brightest[0] - _map_pixel(*corner)[0]) <= 1 and abs(brightest[1] - _map_pixel(*corner)[1]) <= 1
    # coverage is the sensor's footprint: 18.88 x 14.16 mm, in map pixels
    pixel_area = (2 * MAP_HALF_M / MAP_PIXELS) ** 2
    assert float(covered.sum()) * pixel_area == pytest.approx(SENSOR_WIDTH_M * SENSOR_HEIGHT_M, rel=0.25)
    assert float(pasted[0, 1].max()) == pytest.approx(1.0)  # contact height channel: z + 1 where covered


def test_training_maps_equal_the_agents_running_map_on_real_touches():
    env = gym.make_vec("gauntlet/TactileMNIST-v0", num_envs=3, objects_per_split=SMOKE_OBJECTS)
    background = gel_background((64, 64))
    observation, _ = env.reset(seed=5)
    running = TouchMap(3, background)
    rng = np.random.default_rng(0)
    features, positions, agent_maps = [], [], []
    for _ in range(5):
        agent_maps.append(running.add(observation["sensor_img"], observation["sensor_pos"]))
        features.append(touch_features(torch.from_numpy(observation["sensor_img"]), background))
        positions.append(torch.from_numpy(observation["sensor_pos"].copy()))
        observation, *_ = env.step({"action": rng.uniform(-0.5, 0.5, (3, 2)).astype(np.float32),
                                    "prediction": np.zeros((3, 10), np.float32)})
    steps = torch.arange(5).expand(3, 5)
    maps = episode_maps(torch.stack(features, 1), torch.stack(positions, 1), None, steps).reshape(3, 5, MAP_CHANNELS,
                                                                                                 MAP_PIXELS, MAP_PIXELS)
    for t in range(5):
        torch.testing.assert_close(maps[:, t], agent_maps[t], atol=1e-5, rtol=1e-5)
    assert float(maps[:, -1, -1].sum()) > float(maps[:, 0, -1].sum())  # coverage grows touch by touch


def test_scan_lattice_tiles_the_region_without_gaps_along_x_and_fits_the_budget():
    points = scan_lattice(16, (0.0375, 0.040))
    xs, ys = np.unique(points[:, 0]), np.unique(points[:, 1])
    assert len(points) <= 16 and len(xs) * len(ys) == len(points)
    assert np.diff(xs).max() <= SENSOR_WIDTH_M + 1e-12  # neighbouring footprints touch or overlap
    assert xs[0] - SENSOR_WIDTH_M / 2 <= -0.0375 + 1e-9 and xs[-1] + SENSOR_WIDTH_M / 2 >= 0.0375 - 1e-9
    assert (np.abs(points) <= WORKSPACE_HALF_M + 1e-12).all()


@pytest.mark.parametrize("touches", [16, 32])
def test_scan_tours_reach_almost_every_point_from_any_start(touches):
    scan = CoverageScan(touches, (0.0375, 0.040) if touches == 16 else (0.0475, 0.0475))
    starts = np.random.default_rng(1).uniform(-1, 1, (200, 3))
    scan.reset(starts)
    reached = [_simulate(scan.points, plan, start[:2] * WORKSPACE_HALF_M, scan.moves)[0]
               for plan, start in zip(scan.plans, starts)]
    assert sorted(set(np.concatenate(scan.plans[:1]))) == list(range(len(scan.points)))  # a tour visits each once
    # from a far start the first move or two only travel; after that every move lands on a new point
    assert min(reached) >= min(len(scan.points), scan.moves) - 2


def test_scan_moves_in_the_real_env_land_on_scan_points_and_stay_in_the_action_space():
    env = gym.make_vec("gauntlet/TactileMNIST-v0", num_envs=4, objects_per_split=SMOKE_OBJECTS)
    scan = CoverageScan(16, (0.0375, 0.040))
    observation, _ = env.reset(seed=11)
    scan.reset(observation["sensor_pos"])
    visited = []
    for _ in range(15):
        moves = scan.act(observation["sensor_pos"])
        assert (np.linalg.norm(moves, axis=1) <= 1 + 1e-6).all()
        observation, *_ = env.step({"action": moves, "prediction": np.zeros((4, 10), np.float32)})
        visited.append(observation["sensor_pos"][:, :2] * WORKSPACE_HALF_M)
    visited = np.stack(visited, 1)  # (4, 15, 2)
    distance = np.linalg.norm(visited[:, :, None] - scan.points[None, None], axis=-1).min(axis=2)
    on_point = distance < 1e-4
    assert (on_point.sum(axis=1) >= 13).all()
    for episode in range(4):  # never the same scan point twice
        hits = np.linalg.norm(visited[episode, on_point[episode], None] - scan.points[None], axis=-1).argmin(axis=1)
        assert len(set(hits.tolist())) == len(hits)
    assert MAX_STEP_M == pytest.approx(0.03)
