"""The tactile envs as users rely on them: Gymnasium API, determinism, branching, batching, rewards."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import gauntlet  # noqa: F401 - registers the gauntlet/ envs
from gauntlet.envs.tactile.env import TactilePerceptionEnv, TactilePerceptionVectorEnv
from gauntlet.envs.tactile.registration import variant_ids
from gauntlet.envs.tactile.simulation import MAX_STEP_M, WORKSPACE_HALF_M
from gauntlet.envs.tactile.tasks import CELL_HALF_M
from gauntlet.testing import check_branchable

from .conftest import SMOKE_OBJECTS, TILT_GROUP, heightfield_mesh

FAMILIES = ["TactileMNIST", "TactileMNISTCenterOfMass", "TactileMNISTVolume", "Starstruck", "Glyphs", "GlyphPose",
            "Toolbox", "ShapesCenterOfMass", "ShapesVolume"]
WITHOUT_SPLITS = {"Glyphs", "GlyphPose", "Toolbox"}
# Predictions are unbounded (logits, regression targets), which check_env merely remarks on; and
# check_env opens every render mode, "human" too, which on this headless machine warns that it shows nothing.
EXPECTED_REMARKS = ("minimum value is -infinity", "maximum value is infinity", "symmetric and normalized",
                    "render_mode='human' shows nothing")
# The ids held to check_env and the Branchable contract: every family plain and with every variant
# at once, and each variant alone on one family.
IDS_UNDER_CONTRACT = ([f"{family}-v0" for family in FAMILIES]
                      + [f"{family}-DR-sparse-truncate-v0" for family in FAMILIES]
                      + ["TactileMNIST-DR-test-v0", "TactileMNIST-sparse-v0", "TactileMNIST-truncate-v0"]
                      # v1 (the reference's features: tilt, perturbation, -Depth)
                      + ["ShapesVolume-v1", "ShapesCenterOfMass-Depth-DR-test-sparse-truncate-v1",
                         "TactileMNIST-Depth-v1", "GlyphPose-v1", "Toolbox-Depth-DR-sparse-truncate-v1",
                         "Starstruck-v1"])
CONTRACT_PARAMS = [pytest.param(env_id, marks=TILT_GROUP) if variant_ids()[env_id].get("sensor_tilt") else env_id
                   for env_id in IDS_UNDER_CONTRACT]


def make(family="TactileMNIST", split="train", **kwargs):
    env_id = f"gauntlet/{family}-v0" if family in WITHOUT_SPLITS else f"gauntlet/{family}-{split}-v0"
    return gym.make(env_id, objects_per_split=SMOKE_OBJECTS, **kwargs)


def _actions(space, count, seed=0):
    space = space.__class__(space.spaces)  # a private copy to sample from
    space.seed(seed)
    return [space.sample() for _ in range(count)]


@pytest.mark.parametrize("env_id", CONTRACT_PARAMS)
def test_every_family_and_variant_passes_gymnasiums_env_checker(env_id):
    env = gym.make(f"gauntlet/{env_id}", objects_per_split=SMOKE_OBJECTS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    other = [str(w.message) for w in caught if not any(text in str(w.message) for text in EXPECTED_REMARKS)]
    assert other == []


@pytest.mark.parametrize("env_id", CONTRACT_PARAMS)
def test_every_family_and_variant_is_branchable(env_id):
    check_branchable(lambda: gym.make(f"gauntlet/{env_id}", objects_per_split=SMOKE_OBJECTS), future_steps=20)


def test_all_registered_ids_make_envs_and_native_vector_envs():
    registered = variant_ids()
    for family in FAMILIES:
        splits = ("",) if family in WITHOUT_SPLITS else ("", "-train", "-test")
        for split in splits:
            assert f"gauntlet/{family}{split}-v0" in gym.registry
        vector = gym.make_vec(f"gauntlet/{family}{splits[-1]}-v0", num_envs=3, objects_per_split=SMOKE_OBJECTS)
        assert isinstance(vector, TactilePerceptionVectorEnv) and vector.num_envs == 3
    for env_id, kwargs in registered.items():  # every variant: registered with its options, vectorised natively
        spec = gym.registry[f"gauntlet/{env_id}"]
        assert spec.kwargs == kwargs
        assert spec.vector_entry_point == "gauntlet.envs.tactile.env:TactilePerceptionVectorEnv"
    # 21 family/split ids, each plain and in 7 variant combinations: v0, v1 and v1 -Depth
    assert len(registered) == (9 + 6 * 2) * 8 * 3
    vector = gym.make_vec("gauntlet/Starstruck-DR-test-sparse-truncate-v0", num_envs=2,
                          objects_per_split=SMOKE_OBJECTS)
    assert vector.sparse_reward and vector.truncate_instead_of_terminate
    assert vector.sim.sensor_config.domain_randomization


def test_reseeding_reproduces_observations_exactly():
    env = make()
    actions = _actions(env.action_space, 10)

    def episode():
        observations = [env.reset(seed=7)[0]]
        observations += [env.step(action)[0] for action in actions]
        return observations

    first, second = episode(), episode()
    for a, b in zip(first, second):
        for key in a:
            assert np.array_equal(a[key], b[key])
    other_seed = env.reset(seed=8)[0]
    assert not np.array_equal(other_seed["sensor_img"], first[0]["sensor_img"]) or \
        not np.array_equal(other_seed["sensor_pos"], first[0]["sensor_pos"])


@pytest.mark.parametrize("family", ["TactileMNIST", "TactileMNISTVolume", "Starstruck", "GlyphPose", "ShapesVolume"])
def test_vector_env_slot_i_equals_the_single_env_seeded_seed_plus_i(family):
    num_envs, seed = 3, 11
    steps = TactilePerceptionEnv(family, objects_per_split=SMOKE_OBJECTS).task.step_limit + 4  # crosses the autoreset
    vector = TactilePerceptionVectorEnv(num_envs, family, objects_per_split=SMOKE_OBJECTS, frame_noise=0.01,
                                        episode_noise=0.05)
    singles = [TactilePerceptionEnv(family, objects_per_split=SMOKE_OBJECTS, frame_noise=0.01, episode_noise=0.05)
               for _ in range(num_envs)]
    actions = [_actions(singles[0].action_space, steps, seed=100 + i) for i in range(num_envs)]
    batch_obs, _ = vector.reset(seed=seed)
    single_obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(singles)]
    ended = [False] * num_envs
    autoresets = 0
    for t in range(steps):
        for i in range(num_envs):
            for key in single_obs[i]:
                assert np.array_equal(batch_obs[key][i], single_obs[i][key]), (t, i, key)
        batch_action = {key: np.stack([actions[i][t][key] for i in range(num_envs)])
                        for key in ("action", "prediction")}
        batch_obs, rewards, terminated, truncated, info = vector.step(batch_action)
        for i, env in enumerate(singles):
            if ended[i]:  # next-step autoreset: the vector env starts a new episode, as reset() does
                single_obs[i], _ = env.reset()
                assert rewards[i] == 0.0 and not terminated[i]
                ended[i] = False
                autoresets += 1
                continue
            single_obs[i], reward, done, _, single_info = env.step(actions[i][t])
            assert rewards[i] == reward and terminated[i] == done and not truncated[i]
            assert info["loss"][i] == single_info["loss"]
            ended[i] = done
    assert autoresets == num_envs  # every slot crossed an episode boundary


def test_episode_ends_by_termination_at_the_step_limit():
    env = make()
    env.reset(seed=0)
    action = {"action": np.zeros(2, np.float32), "prediction": np.zeros(10, np.float32)}
    flags = [env.step(action)[2:4] for _ in range(16)]
    assert flags[-1] == (True, False) and all(flag == (False, False) for flag in flags[:-1])
    stars = make("Starstruck")
    stars.reset(seed=0)
    action = {"action": np.zeros(2, np.float32), "prediction": np.zeros(3, np.float32)}
    assert [stars.step(action)[2] for _ in range(32)] == [False] * 31 + [True]


def test_uniform_logits_cost_one_and_a_confident_right_answer_costs_almost_nothing():
    env = make()
    _, info = env.reset(seed=3)
    label = info["target"]
    move = np.array([0.6, -0.8], np.float32)  # |move| = 1
    _, reward, _, _, info = env.step({"action": move, "prediction": np.zeros(10, np.float32)})
    assert info["loss"] == pytest.approx(1.0) and reward == pytest.approx(-1.0 - 1e-3)
    logits = np.full(10, -20.0, np.float32)
    logits[label] = 20.0
    _, reward, _, _, info = env.step({"action": move, "prediction": logits})
    assert info["loss"] < 1e-12 and reward == pytest.approx(-1e-3)
    assert info["stats"] == {"final_accuracy": 1.0, "average_accuracy": 0.5}


def test_regression_targets_equal_an_independent_mesh_computation_of_the_posed_object():
    import trimesh

    for family in ("TactileMNISTCenterOfMass", "TactileMNISTVolume"):
        env = make(family)
        for seed in range(2):
            _, info = env.reset(seed=seed)
            sim = env.unwrapped.sim
            objects = sim.task.objects
            index = int(sim.state.object_index[0])
            heights = objects.fields[index].astype(np.float64) * objects.height_scale_m
            mesh = heightfield_mesh(heights, objects.footprint_m, base_m=0.0005)
            plate = objects.footprint_m ** 2 * 0.0005
            pose = trimesh.transformations.rotation_matrix(sim.state.object_yaw[0], [0, 0, 1])
            pose[:2, 3] = sim.state.object_xy[0]
            mesh.apply_transform(pose)
            volume = mesh.volume - plate
            plate_centre = np.append(sim.state.object_xy[0], -0.00025)
            centre = (mesh.volume * mesh.center_mass - plate * plate_centre) / volume
            if family == "TactileMNISTVolume":
                assert info["target"] == pytest.approx([volume * 1e6], rel=1e-5)
            else:
                assert info["target"] == pytest.approx(centre[:2] / CELL_HALF_M, abs=1e-5)


def test_predicting_the_mean_volume_costs_about_one_on_average():
    env = make("TactileMNISTVolume")
    task = env.unwrapped.sim.task
    mean = float(np.mean(task.objects.volume_m3 * 1e6))
    losses = []
    for seed in range(60):
        env.reset(seed=seed)
        losses.append(env.step({"action": np.zeros(2), "prediction": np.array([mean])})[4]["loss"])
    assert 0.6 < np.mean(losses) < 1.5  # the variance is the split's; 60 draws of 20 objects


def test_the_sensor_moves_at_most_one_transfer_and_stays_in_the_workspace():
    env = make()
    observation, _ = env.reset(seed=5)
    sim = env.unwrapped.sim
    for move in ([1.0, 1.0], [0.3, 0.0], [-1.0, 0.0], [-1.0, -1.0], [0.0, 1.0]):
        before = sim.state.sensor_xy[0].copy()
        env.step({"action": np.array(move, np.float32), "prediction": np.zeros(10, np.float32)})
        after = sim.state.sensor_xy[0]
        assert np.linalg.norm(after - before) <= MAX_STEP_M + 1e-12
        assert np.all(np.abs(after) <= WORKSPACE_HALF_M + 1e-12)
    assert MAX_STEP_M == pytest.approx(0.03)


@pytest.mark.parametrize("bad, match", [
    ({"action": np.array([np.nan, 0.0]), "prediction": np.zeros(10)}, "finite"),
    ({"action": np.array([1.5, 0.0]), "prediction": np.zeros(10)}, r"\[-1, 1\]"),
    ({"action": np.zeros(2), "prediction": np.zeros(9)}, "shape"),
    ({"action": np.zeros(2), "prediction": np.full(10, np.inf)}, "finite"),
    ({"action": np.zeros(2)}, "expected a dict"),
    (np.zeros(12), "expected a dict"),
])
def test_bad_actions_raise_value_error_naming_the_expected_space(bad, match):
    env = make().unwrapped
    env.reset(seed=0)
    with pytest.raises(ValueError, match=match) as error:
        env.step(bad)
    assert "action space" in str(error.value)
    env.step({"action": np.zeros(2), "prediction": np.zeros(10)})  # the env is still usable


def test_rgb_array_render_shows_platform_and_tactile_image():
    env = make(render_mode="rgb_array")
    observation, _ = env.reset(seed=2)
    frame = env.render()
    assert frame.shape == (240, 480, 3) and frame.dtype == np.uint8
    rows = np.arange(240) * 64 // 240  # the tactile panel is the observation, scaled to 240 rows
    expected = ((observation["sensor_img"][rows][:, rows] + 1) / 2 * 255).astype(np.uint8)
    assert np.abs(frame[:, 240:].astype(int) - expected).max() <= 1
    assert (frame[:, :240] == [229, 25, 25]).all(axis=-1).any()  # the sensor outline


def test_image_size_is_configurable():
    env = make(image_size=(32, 48))
    observation, _ = env.reset(seed=0)
    assert observation["sensor_img"].shape == (32, 48, 3)
    assert env.observation_space["sensor_img"].shape == (32, 48, 3)


def test_centre_of_mass_variance_formula_matches_sampled_poses():
    from gauntlet.envs.tactile.tasks import MAX_OBJECT_YAW_RAD, OBJECT_OFFSET_M, center_of_mass_normalised

    task = make("TactileMNISTCenterOfMass").unwrapped.task
    rng = np.random.default_rng(0)
    draws = 200_000
    index = rng.integers(len(task.objects), size=draws)
    targets = center_of_mass_normalised(task.objects.centroid_m[index, :2],
                                        rng.uniform(-OBJECT_OFFSET_M, OBJECT_OFFSET_M, (draws, 2)),
                                        rng.uniform(-MAX_OBJECT_YAW_RAD, MAX_OBJECT_YAW_RAD, draws))
    assert np.allclose(targets.var(axis=0), task.target_variance, rtol=0.03)


def test_glyph_pose_target_is_the_pose_and_its_variance_matches_sampled_poses():
    from gauntlet.envs.tactile.tasks import POSE_OFFSET_M

    env = make("GlyphPose")
    targets = []
    for seed in range(400):
        _, info = env.reset(seed=seed)
        state = env.unwrapped.sim.state
        expected = [*(state.object_xy[0] / CELL_HALF_M), np.cos(state.object_yaw[0]), np.sin(state.object_yaw[0])]
        assert np.allclose(info["target"], expected, atol=1e-6)
        assert np.all(np.abs(state.object_xy[0]) <= POSE_OFFSET_M)
        targets.append(info["target"])
    assert np.allclose(np.var(targets, axis=0), env.unwrapped.task.target_variance, rtol=0.2)


def test_glyph_families_have_no_test_split():
    with pytest.raises(ValueError, match="no 'test' split"):
        TactilePerceptionEnv("Glyphs", "test", objects_per_split=SMOKE_OBJECTS)


def test_shapes_sensor_turns_by_at_most_one_transfer_and_reports_its_yaw():
    from gauntlet.envs.tactile.simulation import MAX_TURN_RAD

    env = make("ShapesVolume")
    observation, _ = env.reset(seed=4)
    assert env.action_space["action"].shape == (3,) and observation["sensor_rot"].shape == (2,)
    yaw = np.arctan2(observation["sensor_rot"][1], observation["sensor_rot"][0])
    position = env.unwrapped.sim.state.sensor_xy[0].copy()
    observation, *_ = env.step({"action": np.array([0.0, 0.0, 1.0], np.float32), "prediction": np.zeros(1)})
    turned = np.arctan2(observation["sensor_rot"][1], observation["sensor_rot"][0])
    assert np.angle(np.exp(1j * (turned - yaw))) == pytest.approx(MAX_TURN_RAD, abs=1e-6)
    assert np.array_equal(env.unwrapped.sim.state.sensor_xy[0], position)
    assert MAX_TURN_RAD == pytest.approx(np.pi / 2 * 0.2 - (np.pi / 2) ** 2 / (10 * np.pi))
