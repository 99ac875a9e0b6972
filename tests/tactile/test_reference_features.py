"""The reference package's features beyond v0: sensor tilt (6-D rotation, contact along the tilted
axis), objects that move when touched, the depth-only sensor, pose errors in mm and degrees, and the
v1 ids that turn them on (check_env and the Branchable contract on v1 ids: test_env.py)."""

from __future__ import annotations

import numpy as np
import pytest

from gauntlet.envs.tactile import heightfield, kernels, orientation, tilt
from gauntlet.envs.tactile.env import TactilePerceptionEnv, TactilePerceptionVectorEnv
from gauntlet.envs.tactile.registration import variant_ids
from gauntlet.envs.tactile.sensor import PRESS_DEPTH_M, SensorConfig, TactileRenderer
from gauntlet.envs.tactile.simulation import PERTURBATION_SHIFT_STD_M, depth_image
from gauntlet.envs.tactile.tasks import CELL_HALF_M, make_task

from .conftest import SMOKE_OBJECTS, TILT_GROUP

pytestmark = TILT_GROUP

RESOLUTION, FIELD_M = 128, 0.1
BACKENDS = ["numpy"] + (["numba"] if kernels.AVAILABLE else [])


def _render(field: np.ndarray, rotation: np.ndarray, backend: str, sensor_xy=(0.0, 0.0)):
    renderer = TactileRenderer(SensorConfig(), RESOLUTION, FIELD_M)
    renderer.backend = backend
    depth, contact, _ = renderer.render_tilted(
        field.reshape(-1).astype(np.float32), np.zeros((1, 1, 1), np.float32), np.zeros((1, 2)), np.zeros(1),
        np.array([sensor_xy]), rotation[None], tilt.block_maxima(field.astype(np.float32))[None], rgb=False)
    return renderer, depth[0].astype(np.float64), float(contact[0])


def _pixel_rays(renderer: TactileRenderer, rotation: np.ndarray, sensor_xy=(0.0, 0.0)):
    """Each pixel's point on the sensor plane (x, y, z), world frame."""
    u, v = np.meshgrid(renderer.u.astype(np.float64), renderer.v.astype(np.float64))
    points = rotation[:, 0, None, None] * u + rotation[:, 1, None, None] * v
    return points[0] + sensor_xy[0], points[1] + sensor_xy[1], points[2]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tilted_sensor_on_a_flat_top_sees_the_ramp_of_its_tilt(backend):
    height_m = 0.003
    field = np.full((RESOLUTION, RESOLUTION), height_m)
    field[:2] = field[-2:] = 0
    field[:, :2] = field[:, -2:] = 0
    rotation = orientation.rotation_zyz(0.4, np.radians(30), 1.1)
    renderer, depth, contact = _render(field, rotation, backend)
    _, _, plane_z = _pixel_rays(renderer, rotation)
    along_axis = (height_m - plane_z) / rotation[2, 2]  # where each pixel's ray meets the top
    expected = np.maximum(along_axis - (along_axis.max() - PRESS_DEPTH_M), 0)
    assert contact == pytest.approx(along_axis.max(), abs=1e-7)
    np.testing.assert_allclose(depth, expected, atol=1e-7)
    assert 0 < (depth > 0).mean() < 1  # a 30 degree tilt over 18.9 mm is deeper than the 2.1 mm press


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tilted_sensor_over_a_step_meets_the_top_and_the_floor_where_its_rays_do(backend):
    height_m = 0.001
    spacing = heightfield.vertex_spacing(RESOLUTION, FIELD_M)
    wall_column = RESOLUTION // 2  # the top ends at this vertex column, the floor starts at the next
    field = np.zeros((RESOLUTION, RESOLUTION))
    field[2:-2, 2:wall_column + 1] = height_m
    edge_x = (wall_column - (RESOLUTION - 1) / 2) * spacing
    rotation = orientation.rotation_zyz(0.0, np.radians(-20), 0.0)  # axis tilted towards -x: rays fall towards +x
    renderer, depth, contact = _render(field, rotation, backend)
    x, _, plane_z = _pixel_rays(renderer, rotation)
    sideways = rotation[0, 2] / rotation[2, 2]
    x_at_top = x + (height_m - plane_z) * sideways  # where each ray is at the top's height
    x_at_floor = x - plane_z * sideways
    on_top = x_at_top < edge_x - 0.5 * spacing
    on_floor = x_at_top > edge_x + 1.5 * spacing  # past the one-cell wall at the top's height, and further below
    assert on_top.any() and on_floor.any() and (x_at_floor > x_at_top).all()
    along_axis = np.where(on_top, height_m - plane_z, -plane_z) / rotation[2, 2]
    touched = depth > 0
    measured = depth + contact - PRESS_DEPTH_M  # the contact coordinate along the axis, where the gel touches
    clear = (on_top | on_floor) & touched
    assert clear.sum() > 500
    np.testing.assert_allclose(measured[clear], along_axis[clear], atol=1e-7)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_untilted_sensor_through_the_tilt_path_equals_the_vertical_renderer(backend):
    rng = np.random.default_rng(0)
    x = np.linspace(-1, 1, RESOLUTION)
    field = (0.003 * (np.sin(5 * x)[None] * np.cos(4 * x)[:, None] + 1) / 2).astype(np.float32)
    field[:2] = field[-2:] = 0
    field[:, :2] = field[:, -2:] = 0
    renderer = TactileRenderer(SensorConfig(), RESOLUTION, FIELD_M)
    renderer.backend = backend
    n = 3
    offsets = (np.arange(n) * RESOLUTION ** 2).astype(np.float32)[:, None, None]
    object_xy, object_yaw = rng.uniform(-0.01, 0.01, (n, 2)), rng.uniform(-1, 1, n)
    sensor_xy, sensor_yaw = rng.uniform(-0.02, 0.02, (n, 2)), rng.uniform(-3, 3, n)
    flat = np.tile(field.reshape(-1), n)
    depth, contact, _ = renderer.render(flat, offsets, object_xy, object_yaw, sensor_xy, sensor_yaw, rgb=False)
    rotations = np.stack([orientation.rotation_zyz(yaw, 0.0, 0.0) for yaw in sensor_yaw])
    tilted, tilted_contact, _ = renderer.render_tilted(flat, offsets, object_xy, object_yaw, sensor_xy, rotations,
                                                       np.stack([tilt.block_maxima(field)] * n), rgb=False)
    np.testing.assert_allclose(tilted, depth, atol=2e-9)
    np.testing.assert_allclose(tilted_contact, contact, atol=2e-9)


@pytest.mark.skipif(not kernels.AVAILABLE, reason="needs numba")
def test_the_compiled_tilt_kernel_agrees_with_the_array_version_on_a_rough_scene():
    rng = np.random.default_rng(1)
    field = np.zeros((RESOLUTION, RESOLUTION), np.float32)
    field[2:-2, 2:-2] = rng.uniform(0, 0.004, (RESOLUTION - 4, RESOLUTION - 4)).astype(np.float32)
    for seed in range(3):
        rotation = orientation.draw_orientation(np.random.default_rng(seed))
        _, fast, fast_contact = _render(field, rotation, "numba", sensor_xy=(0.005 * seed, -0.004))
        _, slow, slow_contact = _render(field, rotation, "numpy", sensor_xy=(0.005 * seed, -0.004))
        np.testing.assert_allclose(fast, slow, atol=1e-9)
        assert fast_contact == pytest.approx(slow_contact, abs=1e-9)


def test_six_d_rotation_features_round_trip_and_the_tilt_stays_within_45_degrees():
    rng = np.random.default_rng(2)
    rotations = np.stack([orientation.draw_orientation(rng, max_tilt_rad=np.pi) for _ in range(50)])
    round_trip = orientation.feature_to_rotation(orientation.rotation_to_feature(rotations))
    np.testing.assert_allclose(round_trip, rotations, atol=1e-6)
    limited = orientation.limit_tilt(rotations)
    assert (orientation.tilt_angle(limited) <= np.pi / 4 + 1e-9).all()
    np.testing.assert_allclose(np.einsum("nji,njk->nik", limited, limited), np.tile(np.eye(3), (50, 1, 1)), atol=1e-9)
    within = orientation.tilt_angle(rotations) < np.pi / 4
    np.testing.assert_allclose(limited[within], rotations[within], atol=1e-9)  # inside the cone: unchanged
    quarter = orientation.rotation_from_vector(np.array([[0.0, 0.0, np.pi / 2]]))[0]
    np.testing.assert_allclose(quarter, [[0, -1, 0], [1, 0, 0], [0, 0, 1]], atol=1e-12)
    assert orientation.rotation_to_feature(np.eye(3)).tolist() == [0, 1, 0, 0, 0, 1]


def test_the_tilting_env_observes_6d_rotations_and_its_tilt_never_exceeds_45_degrees():
    env = TactilePerceptionEnv("ShapesVolume", sensor_tilt=True, objects_per_split=SMOKE_OBJECTS)
    assert env.action_space["action"].shape == (5,) and env.observation_space["sensor_rot"].shape == (6,)
    env.action_space.seed(0)
    observation, _ = env.reset(seed=0)
    for _ in range(20):
        rotation = orientation.feature_to_rotation(observation["sensor_rot"])
        np.testing.assert_allclose(orientation.rotation_to_feature(rotation), observation["sensor_rot"], atol=1e-6)
        assert orientation.tilt_angle(rotation) <= np.pi / 4 + 1e-6
        observation, *_ = env.step(env.action_space.sample())
    with pytest.raises(ValueError, match="sensor_tilt"):
        TactilePerceptionEnv("TactileMNIST", sensor_tilt=True, objects_per_split=SMOKE_OBJECTS)


def test_objects_move_a_little_at_every_touch_reproducibly_from_the_seed():
    def poses(seed):
        env = TactilePerceptionEnv("GlyphPose", perturb_object_pose=True, objects_per_split=SMOKE_OBJECTS)
        _, info = env.reset(seed=seed)
        action = {"action": np.zeros(2, np.float32), "prediction": np.zeros(4, np.float32)}
        trail = [(env.sim.state.object_xy[0].copy(), float(env.sim.state.object_yaw[0]), info["target"])]
        for _ in range(31):
            _, _, _, _, info = env.step(action)
            trail.append((env.sim.state.object_xy[0].copy(), float(env.sim.state.object_yaw[0]), info["target"]))
        return trail

    first, again, other = poses(3), poses(3), poses(4)
    shifts = np.array([np.linalg.norm(b[0] - a[0]) for a, b in zip(first, first[1:])])
    assert (shifts > 0).all() and np.median(shifts) < 5 * PERTURBATION_SHIFT_STD_M
    for (xy, yaw, target), (xy2, yaw2, target2) in zip(first, again):
        assert np.array_equal(xy, xy2) and yaw == yaw2 and np.array_equal(target, target2)
    assert not np.array_equal(first[-1][0], other[-1][0])
    for xy, yaw, target in first:  # the pose target follows the object
        np.testing.assert_allclose(target, [xy[0] / CELL_HALF_M, xy[1] / CELL_HALF_M, np.cos(yaw), np.sin(yaw)],
                                   atol=1e-6)
    unperturbed = TactilePerceptionEnv("GlyphPose", objects_per_split=SMOKE_OBJECTS)
    unperturbed.reset(seed=3)
    start = unperturbed.sim.state.object_xy.copy()
    unperturbed.step({"action": np.zeros(2, np.float32), "prediction": np.zeros(4, np.float32)})
    assert np.array_equal(unperturbed.sim.state.object_xy, start)  # v0's default: the object stays put


def test_restore_brings_back_the_perturbed_pose_and_its_future():
    env = TactilePerceptionEnv("TactileMNISTCenterOfMass", perturb_object_pose=True, objects_per_split=SMOKE_OBJECTS)
    env.reset(seed=5)
    action = {"action": np.array([0.3, -0.2], np.float32), "prediction": np.zeros(2, np.float32)}
    env.step(action)
    snapshot = env.snapshot()
    pose = (env.sim.state.object_xy.copy(), env.sim.state.object_yaw.copy())
    future = [env.step(action)[4]["target"] for _ in range(4)]
    env.restore(snapshot)
    assert np.array_equal(env.sim.state.object_xy, pose[0]) and np.array_equal(env.sim.state.object_yaw, pose[1])
    assert all(np.array_equal(env.step(action)[4]["target"], target) for target in future)


def test_vector_slot_equals_the_single_env_with_tilt_perturbation_and_depth_on():
    options = dict(sensor_tilt=True, perturb_object_pose=True, depth_only=True, domain_randomization=True,
                   objects_per_split=SMOKE_OBJECTS)
    vector = TactilePerceptionVectorEnv(2, "ShapesCenterOfMass", **options)
    singles = [TactilePerceptionEnv("ShapesCenterOfMass", **options) for _ in range(2)]
    batch, _ = vector.reset(seed=9)
    observations = [env.reset(seed=9 + i)[0] for i, env in enumerate(singles)]
    rng = np.random.default_rng(0)
    for _ in range(6):
        for i in range(2):
            for key in observations[i]:
                assert np.array_equal(batch[key][i], observations[i][key]), key
        moves = rng.uniform(-1, 1, (2, 5)).astype(np.float32)
        predictions = rng.normal(size=(2, 2)).astype(np.float32)
        batch, rewards, _, _, _ = vector.step({"action": moves, "prediction": predictions})
        for i, env in enumerate(singles):
            observations[i], reward, *_ = env.step({"action": moves[i], "prediction": predictions[i]})
            assert reward == rewards[i]


def test_the_depth_only_sensor_observes_one_channel_of_depth():
    env = TactilePerceptionEnv("TactileMNIST", depth_only=True, objects_per_split=SMOKE_OBJECTS,
                               render_mode="rgb_array")
    assert env.observation_space["sensor_img"].shape == (64, 64, 1)
    observation, _ = env.reset(seed=1)
    assert env.observation_space.contains(observation)
    np.testing.assert_array_equal(observation["sensor_img"], depth_image(env.sim.state.depth)[0])
    assert observation["sensor_img"].max() == pytest.approx(1.0)  # the deepest point: the full press
    assert observation["sensor_img"].min() == -1.0  # the gel the scene does not touch
    assert env.render().shape == (240, 480, 3)
    assert depth_image(np.array([[[0.0, PRESS_DEPTH_M / 2, 2 * PRESS_DEPTH_M]]], np.float32))[0, 0, :, 0].tolist() \
        == [-1.0, 0.0, 1.0]


def test_pose_errors_in_millimetres_and_degrees_on_hand_worked_examples():
    task = make_task("GlyphPose", objects_per_split=SMOKE_OBJECTS)
    targets = np.array([[0.0, 0.0, 1.0, 0.0], [0.1, 0.2, np.cos(np.radians(170)), np.sin(np.radians(170))],
                        [0.0, 0.0, 1.0, 0.0]])
    predictions = np.array([[0.1, 0.0, np.cos(np.radians(30)), np.sin(np.radians(30))],  # 6 mm, 30 degrees
                            [0.13, 0.24, np.cos(np.radians(-170)), np.sin(np.radians(-170))],  # 3 mm, 20 degrees
                            [0.0, 0.0, 0.0, 0.0]])  # no heading: counts as 45 degrees, as in the reference
    position_mm, yaw_deg = task.pose_errors(predictions, targets)
    np.testing.assert_allclose(position_mm, [6.0, 3.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(yaw_deg, [30.0, 20.0, 45.0], atol=1e-9)
    env = TactilePerceptionEnv("Toolbox")
    _, info = env.reset(seed=0)
    target = np.asarray(info["target"], np.float64)
    guess = target + np.array([0.05, 0.0, 0.0, 0.0])  # 3 mm off along x; heading still exact
    _, _, _, _, info = env.step({"action": np.zeros(2, np.float32), "prediction": guess.astype(np.float32)})
    assert info["metrics"]["position_error_mm"] == pytest.approx(3.0, abs=1e-3)
    assert info["metrics"]["yaw_error_deg"] == pytest.approx(0.0, abs=1e-3)


def test_v1_ids_turn_on_the_references_defaults_and_v0_ids_stay_as_they_were():
    ids = variant_ids()
    assert len(ids) == 168 * 3  # v0: 168; v1: the same with and without -Depth
    assert ids["TactileMNIST-v0"] == {"family": "TactileMNIST", "split": "train"}
    assert ids["TactileMNIST-v1"] == {"family": "TactileMNIST", "split": "train", "perturb_object_pose": True}
    assert ids["Starstruck-Depth-test-v1"] == {"family": "Starstruck", "split": "test", "perturb_object_pose": False,
                                               "depth_only": True}
    assert ids["ShapesVolume-DR-v1"]["sensor_tilt"] and ids["ShapesVolume-DR-v1"]["domain_randomization"]


def test_block_maxima_bound_every_point_of_their_cells_and_are_attained():
    rng = np.random.default_rng(3)
    field = rng.uniform(0, 1, (21, 21)).astype(np.float32)  # 20 cells: blocks of 8, 8 and 4
    blocks = tilt.block_maxima(field, block=8)
    assert blocks.shape == (3, 3)
    for by in range(3):
        for bx in range(3):
            rows, cols = slice(8 * by, min(8 * by + 9, 21)), slice(8 * bx, min(8 * bx + 9, 21))
            assert blocks[by, bx] == field[rows, cols].max()
