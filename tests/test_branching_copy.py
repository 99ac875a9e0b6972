"""A branchable env copies and pickles like the env it wraps, and the copy has the same future."""

import copy
import pickle

import gymnasium as gym
import numpy as np
import pytest

from gauntlet.branching import branchable

pytest.importorskip("mujoco")


def _rollout(env: gym.Env, actions: list[np.ndarray]) -> list[tuple[np.ndarray, float]]:
    out = []
    for action in actions:
        obs, reward, *_ = env.step(action)
        out.append((np.asarray(obs), float(reward)))
    return out


@pytest.mark.parametrize("clone", [copy.deepcopy, lambda env: pickle.loads(pickle.dumps(env))],
                         ids=["deepcopy", "pickle"])
def test_copy_of_branchable_mujoco_env_follows_the_same_future(clone):
    env = branchable(gym.make("InvertedPendulum-v5"))
    assert env.strategy == "mujoco"
    env.reset(seed=3)
    env.step(env.action_space.sample())
    twin = clone(env)
    actions = [np.array([a], dtype=np.float32) for a in np.linspace(-1.0, 1.0, 12)]
    ours, theirs = _rollout(env, actions), _rollout(twin, actions)
    for (obs_a, reward_a), (obs_b, reward_b) in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(obs_a, obs_b)
        assert reward_a == reward_b


def test_copy_of_branchable_mujoco_env_can_still_snapshot_and_restore():
    env = copy.deepcopy(branchable(gym.make("InvertedPendulum-v5")))
    env.reset(seed=0)
    snap = env.snapshot()
    first = _rollout(env, [np.array([0.5], dtype=np.float32)] * 5)
    env.restore(snap)
    assert [r for _, r in _rollout(env, [np.array([0.5], dtype=np.float32)] * 5)] == [r for _, r in first]
