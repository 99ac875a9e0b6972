"""Branchable: the contract on real Gymnasium envs, every strategy, and the self-checking fallback."""

from __future__ import annotations

import pickle

import gymnasium as gym
import numpy as np
import pytest

import gauntlet
from gauntlet.branching import BranchingError, branchable, choose_strategy
from gauntlet.testing import check_branchable


@pytest.mark.parametrize("env_id,strategy", [
    ("CartPole-v1", "attributes"),
    ("Pendulum-v1", "attributes"),
    ("InvertedPendulum-v5", "mujoco"),
    ("HalfCheetah-v5", "mujoco"),
    ("FrozenLake-v1", "deepcopy"),
])
def test_restore_then_same_actions_gives_identical_future(env_id, strategy):
    assert choose_strategy(gym.make(env_id)) == strategy
    check_branchable(lambda: gym.make(env_id))


def test_restore_also_rewinds_the_time_limit_counter():
    env = branchable(gym.make("Pendulum-v1"))  # truncates at 200 steps
    env.reset(seed=0)
    for _ in range(150):
        env.step(env.action_space.sample())
    snapshot = env.snapshot()
    for _ in range(50):
        *_, truncated, _ = env.step(np.zeros(1, dtype=np.float32))
    assert truncated
    env.restore(snapshot)
    for _ in range(49):
        *_, truncated, _ = env.step(np.zeros(1, dtype=np.float32))
        assert not truncated
    *_, truncated, _ = env.step(np.zeros(1, dtype=np.float32))
    assert truncated


def test_restore_rewinds_the_env_rng_used_by_reset():
    env = branchable(gym.make("CartPole-v1"))
    env.reset(seed=5)
    snapshot = env.snapshot()
    first = env.reset()[0]
    env.restore(snapshot)
    again = env.reset()[0]
    np.testing.assert_array_equal(first, again)


def test_fork_is_independent_of_the_original():
    env = branchable(gym.make("InvertedPendulum-v5"))
    env.reset(seed=1)
    qpos_at_snapshot = env.unwrapped.data.qpos.copy()
    snapshot = env.snapshot()
    twin = gauntlet.fork(env, snapshot)
    action = np.array([0.5], dtype=np.float32)
    for _ in range(3):
        env.step(action)
    # The original moved on; the twin is still at the snapshot.
    np.testing.assert_array_equal(twin.unwrapped.data.qpos, qpos_at_snapshot)
    assert not np.array_equal(env.unwrapped.data.qpos, qpos_at_snapshot)


def test_snapshot_from_another_strategy_is_refused():
    cartpole = branchable(gym.make("CartPole-v1"))
    cartpole.reset(seed=0)
    pendulum = branchable(gym.make("InvertedPendulum-v5"))
    pendulum.reset(seed=0)
    with pytest.raises(BranchingError, match="strategy"):
        pendulum.restore(cartpole.snapshot())


class _Unfaithful(gym.Env):
    """An env whose deep copies diverge: it draws from a module-level RNG the copy cannot capture."""

    _shared = np.random.default_rng(0)
    observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float64)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1), {}

    def step(self, action):
        return self._shared.normal(size=1), 0.0, False, False, {}


def test_deepcopy_fallback_refuses_an_env_whose_copies_diverge():
    env = branchable(_Unfaithful())
    env.reset(seed=0)
    assert env.strategy == "deepcopy"
    with pytest.raises(BranchingError, match="diverged"):
        env.snapshot()


def test_snapshot_pickles_small():
    env = branchable(gym.make("InvertedPendulum-v5"))
    env.reset(seed=0)
    blob = pickle.dumps(env.snapshot())
    assert len(blob) < 4096
    restored = pickle.loads(blob)
    assert restored.strategy == "mujoco" and restored.env_id == "InvertedPendulum-v5"
    # The unpickled snapshot restores a fresh env to the same physical state.
    twin = branchable(gym.make("InvertedPendulum-v5"))
    twin.reset(seed=1)
    twin.restore(restored)
    np.testing.assert_array_equal(twin.unwrapped.data.qpos, env.unwrapped.data.qpos)
    np.testing.assert_array_equal(twin.unwrapped.data.qvel, env.unwrapped.data.qvel)


def test_restoring_one_snapshot_twice_through_gym_make_wrappers_keeps_stepping():
    env = branchable(gym.make("CartPole-v1"))  # includes the passive env checker
    env.reset(seed=0)
    env.step(0)
    snapshot = env.snapshot()
    env.restore(snapshot)
    first = env.step(1)
    env.restore(snapshot)
    second = env.step(1)
    np.testing.assert_array_equal(first[0], second[0])
