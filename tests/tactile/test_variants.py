"""The tactile variants: sparse reward, truncation at the step limit, domain randomisation, human rendering."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

import gauntlet  # noqa: F401 - registers the gauntlet/ envs
from gauntlet.envs.tactile import kernels, randomization
from gauntlet.envs.tactile.env import TactilePerceptionEnv, TactilePerceptionVectorEnv
from gauntlet.envs.tactile.rendering import VIEW_PX, no_display_reason
from gauntlet.envs.tactile.sensor import PRESS_DEPTH_M, SensorConfig, TactileRenderer

from .conftest import SMOKE_OBJECTS

STEP_LIMIT = 16  # TactileMNIST


def _actions(space, count, seed=0):
    space = space.__class__(space.spaces)  # a private copy to sample from
    space.seed(seed)
    return [space.sample() for _ in range(count)]


def _episode(env, actions, seed):
    env.reset(seed=seed)
    return [env.step(action)[1:4] for action in actions]


def _batch(actions, t):
    return {key: np.stack([per_slot[t][key] for per_slot in actions]) for key in ("action", "prediction")}


# -- sparse reward ---------------------------------------------------------------------------------
def test_sparse_reward_is_zero_until_the_last_step_which_gets_the_dense_final_reward():
    dense = TactilePerceptionEnv(objects_per_split=SMOKE_OBJECTS)
    sparse = TactilePerceptionEnv(objects_per_split=SMOKE_OBJECTS, sparse_reward=True)
    actions = _actions(dense.action_space, STEP_LIMIT, seed=3)
    dense_steps, sparse_steps = _episode(dense, actions, seed=5), _episode(sparse, actions, seed=5)
    dense_rewards = [reward for reward, _, _ in dense_steps]
    sparse_rewards = [reward for reward, _, _ in sparse_steps]
    assert sparse_rewards[:-1] == [0.0] * (STEP_LIMIT - 1)
    assert sparse_rewards[-1] == dense_rewards[-1] != 0.0
    assert sum(sparse_rewards) == dense_rewards[-1]
    assert [flags for _, *flags in sparse_steps] == [flags for _, *flags in dense_steps]


def test_sparse_vector_env_rewards_only_each_slots_last_step_and_zero_on_the_autoreset_step():
    dense = TactilePerceptionVectorEnv(2, objects_per_split=SMOKE_OBJECTS)
    sparse = TactilePerceptionVectorEnv(2, objects_per_split=SMOKE_OBJECTS, sparse_reward=True)
    actions = [_actions(dense.single_action_space, STEP_LIMIT + 2, seed=10 + i) for i in range(2)]
    dense.reset(seed=1)
    sparse.reset(seed=1)
    for t in range(STEP_LIMIT + 2):
        _, dense_rewards, terminated, _, _ = dense.step(_batch(actions, t))
        _, sparse_rewards, sparse_terminated, _, _ = sparse.step(_batch(actions, t))
        assert np.array_equal(sparse_terminated, terminated)
        assert np.array_equal(sparse_rewards, np.where(terminated, dense_rewards, 0.0))
        assert terminated.all() == (t == STEP_LIMIT - 1)


# -- truncation ------------------------------------------------------------------------------------
def test_truncate_instead_of_terminate_reports_the_step_limit_as_truncation_never_termination():
    env = gym.make("gauntlet/TactileMNIST-truncate-v0", objects_per_split=SMOKE_OBJECTS)
    steps = _episode(env, _actions(env.action_space, STEP_LIMIT), seed=0)
    assert [(terminated, truncated) for _, terminated, truncated in steps] == \
        [(False, False)] * (STEP_LIMIT - 1) + [(False, True)]


def test_truncating_vector_env_autoresets_on_the_next_step_as_after_termination():
    env = TactilePerceptionVectorEnv(2, objects_per_split=SMOKE_OBJECTS, truncate_instead_of_terminate=True)
    actions = [_actions(env.single_action_space, STEP_LIMIT + 1, seed=i) for i in range(2)]
    env.reset(seed=4)
    for t in range(STEP_LIMIT):
        observation, rewards, terminated, truncated, _ = env.step(_batch(actions, t))
        assert not terminated.any() and truncated.all() == (t == STEP_LIMIT - 1)
    observation, rewards, terminated, truncated, _ = env.step(_batch(actions, STEP_LIMIT))
    assert not terminated.any() and not truncated.any() and (rewards == 0).all()
    assert (observation["time_step"] == -1).all()  # the new episodes' first observations


def test_vector_slot_equals_single_env_with_every_variant_on_across_the_autoreset():
    options = {"domain_randomization": True, "sparse_reward": True, "truncate_instead_of_terminate": True}
    vector = TactilePerceptionVectorEnv(2, "Starstruck", objects_per_split=SMOKE_OBJECTS, **options)
    singles = [TactilePerceptionEnv("Starstruck", objects_per_split=SMOKE_OBJECTS, **options) for _ in range(2)]
    steps = 32 + 3
    actions = [_actions(singles[0].action_space, steps, seed=20 + i) for i in range(2)]
    batch_observation, _ = vector.reset(seed=7)
    single_observations = [env.reset(seed=7 + i)[0] for i, env in enumerate(singles)]
    ended = [False, False]
    for t in range(steps):
        for i in range(2):
            for key, value in single_observations[i].items():
                assert np.array_equal(batch_observation[key][i], value), (t, i, key)
        batch_observation, rewards, terminated, truncated, _ = vector.step(_batch(actions, t))
        for i, env in enumerate(singles):
            if ended[i]:
                single_observations[i], _ = env.reset()
                assert (rewards[i], terminated[i], truncated[i]) == (0.0, False, False)
                ended[i] = False
                continue
            single_observations[i], reward, single_terminated, single_truncated, _ = env.step(actions[i][t])
            assert (rewards[i], terminated[i], truncated[i]) == (reward, single_terminated, single_truncated)
            ended[i] = single_truncated


# -- domain randomisation --------------------------------------------------------------------------
def _appearance(env):
    state = env.unwrapped.sim.state
    return state.press_depth_m.copy(), state.colour_gains.copy(), state.frame_noise_std.copy()


def test_domain_randomization_draws_differ_across_seeds_repeat_with_a_seed_and_stay_in_range():
    env = gym.make("gauntlet/TactileMNIST-DR-v0", objects_per_split=SMOKE_OBJECTS)
    draws = {}
    for seed in (0, 1, 0):
        observation, _ = env.reset(seed=seed)
        draws.setdefault(seed, []).append((_appearance(env), observation["sensor_img"].copy()))
    (first, first_image), (again, again_image) = draws[0]
    (other, _), = draws[1]
    assert all(np.array_equal(a, b) for a, b in zip(first, again)) and np.array_equal(first_image, again_image)
    assert all(not np.array_equal(a, b) for a, b in zip(first, other))
    for seed in range(50):
        env.reset(seed=seed)
        press, gains, noise = _appearance(env)
        low, high = randomization.PRESS_SCALE_RANGE
        assert low * PRESS_DEPTH_M <= press[0] <= high * PRESS_DEPTH_M
        assert np.all(np.abs(gains[0, 0]) <= randomization.LED_GAIN_RANGE[1])
        assert np.all(np.abs(gains[0, 1]) <= randomization.LIGHT_OFFSET_RANGE[1])
        assert randomization.FRAME_NOISE_STD_RANGE[0] <= noise[0] <= randomization.FRAME_NOISE_STD_RANGE[1]


def test_domain_randomization_draws_after_the_episode_so_object_and_sensor_poses_are_unchanged():
    plain = TactilePerceptionEnv(objects_per_split=SMOKE_OBJECTS)
    randomized = TactilePerceptionEnv(objects_per_split=SMOKE_OBJECTS, domain_randomization=True)
    plain_observation, _ = plain.reset(seed=12)
    randomized_observation, _ = randomized.reset(seed=12)
    for name in ("object_index", "object_xy", "object_yaw", "sensor_xy"):
        assert np.array_equal(getattr(plain.sim.state, name), getattr(randomized.sim.state, name))
    assert not np.array_equal(plain_observation["sensor_img"], randomized_observation["sensor_img"])
    assert plain.sim.state.press_depth_m[0] == np.float32(PRESS_DEPTH_M)  # the default path: nominal press


def test_restore_brings_back_the_randomised_sensor_and_its_future():
    env = TactilePerceptionEnv(objects_per_split=SMOKE_OBJECTS, domain_randomization=True)
    actions = _actions(env.action_space, 6, seed=4)
    env.reset(seed=3)
    env.step(actions[0])
    snapshot = env.snapshot()
    saved = _appearance(env)
    future = [env.step(action) for action in actions[1:]]
    env.reset(seed=99)  # a new episode draws another sensor
    assert not np.array_equal(_appearance(env)[0], saved[0])
    env.restore(snapshot)
    assert all(np.array_equal(a, b) for a, b in zip(_appearance(env), saved))
    for action, (observation, reward, *_) in zip(actions[1:], future):
        replayed, replayed_reward, *_ = env.step(action)
        assert replayed_reward == reward and np.array_equal(replayed["sensor_img"], observation["sensor_img"])


def test_each_envs_press_depth_is_how_far_its_gel_sinks_and_both_renderers_agree():
    resolution, size_m = 9, 0.01
    renderer = TactileRenderer(SensorConfig((8, 8)), resolution, size_m)
    fields = np.zeros(2 * resolution * resolution, np.float32)  # two empty platforms
    offsets = np.array([0, resolution * resolution], np.float32)[:, None, None]
    poses = (np.zeros((2, 2)), np.zeros(2), np.zeros((2, 2)), np.zeros(2))
    press = np.array([0.0015, 0.0025], np.float32)
    results = {}
    for backend in ("numpy", "numba") if kernels.AVAILABLE else ("numpy",):
        renderer.backend = backend
        results[backend] = renderer.render(fields, offsets, *poses, press_m=press)
    depth, contact, image = results["numpy"]
    assert np.allclose(depth[0], press[0]) and np.allclose(depth[1], press[1]) and np.all(contact == 0)
    for other in results.values():
        assert all(np.array_equal(a, b) for a, b in zip(other, results["numpy"]))


# -- options are validated -------------------------------------------------------------------------
@pytest.mark.parametrize("option", ["sparse_reward", "truncate_instead_of_terminate", "domain_randomization"])
@pytest.mark.parametrize("vector", [False, True])
def test_a_non_boolean_option_raises_value_error_naming_it(option, vector):
    with pytest.raises(ValueError, match=option):
        if vector:
            TactilePerceptionVectorEnv(2, objects_per_split=SMOKE_OBJECTS, **{option: "yes"})
        else:
            TactilePerceptionEnv(objects_per_split=SMOKE_OBJECTS, **{option: 1})


def test_an_unknown_render_mode_raises_value_error_listing_the_modes():
    with pytest.raises(ValueError, match="render_mode.*'human'"):
        TactilePerceptionEnv(objects_per_split=SMOKE_OBJECTS, render_mode="window")


# -- human rendering -------------------------------------------------------------------------------
@pytest.fixture
def headless(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)


def test_human_mode_without_a_display_warns_once_and_keeps_the_frame_it_would_show(headless):
    human = gym.make("gauntlet/TactileMNIST-v0", objects_per_split=SMOKE_OBJECTS, render_mode="human")
    pictures = gym.make("gauntlet/TactileMNIST-v0", objects_per_split=SMOKE_OBJECTS, render_mode="rgb_array")
    action = _actions(human.action_space, 1)[0]
    with pytest.warns(UserWarning, match="render_mode='human' shows nothing: there is no display"):
        human.reset(seed=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        human.step(action)
        assert human.render() is None
    assert [str(warning.message) for warning in caught] == []  # the warning came once
    pictures.reset(seed=2)
    pictures.step(action)
    viewer = human.unwrapped._viewer
    assert np.array_equal(viewer.last_frame, pictures.render())
    assert viewer.last_frame.shape == (VIEW_PX, 2 * VIEW_PX, 3)
    human.close()


def test_human_vector_env_tiles_its_slots_frames(headless):
    env = TactilePerceptionVectorEnv(3, objects_per_split=SMOKE_OBJECTS, render_mode="human")
    pictures = TactilePerceptionVectorEnv(3, objects_per_split=SMOKE_OBJECTS, render_mode="rgb_array")
    with pytest.warns(UserWarning, match="shows nothing"):
        env.reset(seed=0)
    pictures.reset(seed=0)
    frames = pictures.render()
    tiled = env._viewer.last_frame
    height, width = VIEW_PX, 2 * VIEW_PX
    assert tiled.shape == (2 * height, 2 * width, 3)  # 3 slots on a 2 x 2 grid
    assert np.array_equal(tiled[:height, :width], frames[0]) and np.array_equal(tiled[:height, width:], frames[1])
    assert np.array_equal(tiled[height:, :width], frames[2]) and not tiled[height:, width:].any()
    env.close()


def test_a_display_whose_matplotlib_backend_opens_no_window_counts_as_none(monkeypatch):
    import matplotlib

    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.setattr(matplotlib, "get_backend", lambda: "agg")
    assert "backend 'agg' cannot open a window" in no_display_reason()

