"""What a step hands out: the single env's scalar packing equals the vector env's batch, and
observations already handed out are never written into afterwards."""

from __future__ import annotations

import numpy as np
import pytest

from gauntlet.envs.tactile.env import TactilePerceptionEnv, TactilePerceptionVectorEnv
from gauntlet.info_keys import METRICS

from .conftest import SMOKE_OBJECTS


def _action(env, rng: np.random.Generator, batch: tuple[int, ...] = ()) -> dict[str, np.ndarray]:
    space = env.single_action_space if batch else env.action_space
    return {"action": rng.uniform(-1, 1, batch + space["action"].shape).astype(np.float32),
            "prediction": rng.normal(size=batch + space["prediction"].shape).astype(np.float32)}


@pytest.mark.parametrize("family", ["TactileMNIST", "TactileMNISTCenterOfMass", "ShapesVolume"])
def test_single_env_observation_and_info_equal_the_vector_slot_in_value_type_and_dtype(family):
    single = TactilePerceptionEnv(family, objects_per_split=SMOKE_OBJECTS)
    vector = TactilePerceptionVectorEnv(1, family, objects_per_split=SMOKE_OBJECTS)
    rng = np.random.default_rng(0)
    observation, info = single.reset(seed=4)
    batch_observation, batch_info = vector.reset(seed=4)
    for step in range(single.task.step_limit):
        for key, value in observation.items():
            expected = np.asarray(batch_observation[key][0])
            assert value.dtype == expected.dtype and value.shape == expected.shape and np.array_equal(value, expected)
        target = batch_info["target"][0]
        assert np.array_equal(info["target"], target)
        assert type(info["target"]) is (int if target.ndim == 0 else np.ndarray)
        assert type(info["loss"]) is float and info["loss"] == batch_info["loss"][0]
        for group in ("stats", METRICS):
            for key, value in info[group].items():
                assert type(value) is float and value == batch_info[group][key][0], (step, group, key)
        action = _action(single, rng)
        observation, reward, terminated, _, info = single.step(action)
        batch_observation, rewards, batch_terminated, _, batch_info = vector.step(
            {key: value[None] for key, value in action.items()})
        assert type(reward) is float and reward == rewards[0] and terminated == batch_terminated[0]


def test_observations_handed_out_are_never_written_into_by_later_steps_or_resets():
    single = TactilePerceptionEnv(objects_per_split=SMOKE_OBJECTS, frame_noise=0.01)
    vector = TactilePerceptionVectorEnv(3, objects_per_split=SMOKE_OBJECTS, frame_noise=0.01)
    rng = np.random.default_rng(1)
    kept = [single.reset(seed=0)[0], vector.reset(seed=0)[0]]
    copies = [{key: value.copy() for key, value in observation.items()} for observation in kept]
    for _ in range(single.task.step_limit + 2):  # through the single env's reset and the vector autoreset
        observation, _, terminated, _, _ = single.step(_action(single, rng))
        kept.append(observation)
        copies.append({key: value.copy() for key, value in observation.items()})
        if terminated:
            kept.append(single.reset()[0])
            copies.append({key: value.copy() for key, value in kept[-1].items()})
        kept.append(vector.step(_action(vector, rng, (3,)))[0])
        copies.append({key: value.copy() for key, value in kept[-1].items()})
    for observation, copy in zip(kept, copies):
        for key in observation:
            assert np.array_equal(observation[key], copy[key])


@pytest.mark.parametrize("num_envs", [1, 40])  # one env's few numbers and a batch: checked by either route
@pytest.mark.parametrize("key, value, match", [("action", np.nan, "finite"), ("action", -1.5, r"\[-1, 1\]"),
                                               ("action", np.inf, "finite"), ("prediction", -np.inf, "finite"),
                                               ("prediction", np.nan, "finite")])
def test_one_bad_number_anywhere_in_a_batch_is_a_value_error(num_envs, key, value, match):
    env = TactilePerceptionVectorEnv(num_envs, objects_per_split=SMOKE_OBJECTS)
    env.reset(seed=0)
    action = _action(env, np.random.default_rng(2), (num_envs,))
    action[key][-1, -1] = value
    with pytest.raises(ValueError, match=match) as error:
        env.step(action)
    assert "action space" in str(error.value)
    action[key][-1, -1] = 0.0
    env.step(action)  # the env is still usable
