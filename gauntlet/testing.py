"""Contract checks that every Gauntlet env family reuses in its tests.

``check_branchable(make_env)`` asserts the Branchable guarantee (DESIGN.md): after ``restore``, the
same actions give bit-identical observations, rewards and termination flags; restoring twice from
one snapshot gives two identical futures; a snapshot survives pickling; ``gauntlet.fork`` gives an
independent copy with the same future.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from gauntlet.branching import branchable, fork, outputs_identical


def _future(env: gym.Env, actions: list[Any]) -> list[tuple[Any, ...]]:
    outputs = []
    for action in actions:
        observation, reward, terminated, truncated, _ = env.step(copy.deepcopy(action))
        outputs.append((observation, float(reward), bool(terminated), bool(truncated)))
        if terminated or truncated:
            break
    return outputs


def check_branchable(make_env: Callable[[], gym.Env], *, seed: int = 0, prefix_steps: int = 5,
                     future_steps: int = 25) -> None:
    """Raise ``AssertionError`` unless the env made by ``make_env`` honours the Branchable contract."""
    env = branchable(make_env())
    env.reset(seed=seed)
    sampler = copy.deepcopy(env.action_space)
    sampler.seed(seed + 1)
    for _ in range(prefix_steps):
        _, _, terminated, truncated, _ = env.step(sampler.sample())
        if terminated or truncated:
            env.reset(seed=seed + 2)
    snapshot = env.snapshot()
    pickled = pickle.loads(pickle.dumps(snapshot))
    actions = [sampler.sample() for _ in range(future_steps)]

    original = _future(env, actions)
    assert original, "the env ended before any future step could be compared"
    env.restore(snapshot)
    first = _future(env, actions)
    env.restore(snapshot)
    second = _future(env, actions)
    env.restore(pickled)
    from_pickle = _future(env, actions)
    twin = fork(env, snapshot)
    forked = _future(twin, actions)
    twin.close()

    assert outputs_identical(original, first), "restore then the same actions gave a different future"
    assert outputs_identical(first, second), "restoring twice from one snapshot gave two different futures"
    assert outputs_identical(original, from_pickle), "a pickled snapshot restored to a different future"
    assert outputs_identical(original, forked), "gauntlet.fork gave a copy with a different future"
    env.close()
