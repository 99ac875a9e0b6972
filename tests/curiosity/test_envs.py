"""The four curiosity envs: Gymnasium's checker, the Branchable contract, determinism, bad input."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import gauntlet
from gauntlet.testing import check_branchable

# Small particle sets keep location finding fast; the behaviour under test does not depend on it.
ENVS = {
    "ActiveRegression-v0": {},
    "LocationFinding-v0": {"n_particles": 256, "n_outer": 32},
    "RuleDiscovery-v0": {},
    "CuriousGridworld-v0": {},
}
MODES = ("icl_lp", "true_lp", "info_gain", "none")


def make(name: str, **kwargs) -> gym.Env:
    return gym.make(f"gauntlet/{name}", **{**ENVS[name], **kwargs})


def play(env: gym.Env, seed: int, n_steps: int | None = None) -> list[tuple]:
    env.reset(seed=seed)
    env.action_space.seed(seed)
    outputs = []
    while n_steps is None or len(outputs) < n_steps:
        observation, reward, terminated, truncated, info = env.step(env.action_space.sample())
        outputs.append((observation, reward, info["privileged"]))
        if terminated or truncated:
            break
    return outputs


def test_gauntlet_registers_the_four_envs():
    assert {f"gauntlet/{name}" for name in ENVS} <= set(gauntlet.registry.env_ids())


@pytest.mark.parametrize("name", ENVS)
@pytest.mark.parametrize("mode", MODES)
def test_env_passes_gymnasium_checker_in_every_reward_mode(name, mode):
    check_env(make(name, reward_mode=mode).unwrapped, skip_render_check=True)


@pytest.mark.parametrize("name", ENVS)
def test_env_honours_the_branchable_contract(name):
    check_branchable(lambda: make(name), future_steps=10)


@pytest.mark.parametrize("name", ENVS)
def test_same_seed_gives_identical_episodes(name):
    first, second = play(make(name), seed=3, n_steps=8), play(make(name), seed=3, n_steps=8)
    for (obs_a, reward_a, priv_a), (obs_b, reward_b, priv_b) in zip(first, second):
        assert reward_a == reward_b and priv_a == priv_b
        for key in obs_a:
            np.testing.assert_array_equal(obs_a[key], obs_b[key])


@pytest.mark.parametrize("name", ENVS)
def test_episode_terminates_after_horizon_and_history_fills_up(name):
    env = make(name, horizon=6).unwrapped
    outputs = play(env, seed=0)
    assert len(outputs) == 6
    observation = outputs[-1][0]
    assert observation["steps"] == 6
    np.testing.assert_allclose(observation["designs"], np.array([p["design"] for _, _, p in outputs]), rtol=1e-6)
    with pytest.raises(RuntimeError, match="ended"):
        env.step(env.action_space.sample())


@pytest.mark.parametrize("name", ENVS)
def test_privileged_info_carries_theta_and_the_reward_quantity(name):
    for mode, key in (("icl_lp", "icl_lp"), ("true_lp", "true_lp"), ("info_gain", "info_gain")):
        env = make(name, reward_mode=mode)
        _, info = env.reset(seed=1)
        assert "theta" in info["privileged"]
        _, reward, _, _, info = env.step(env.action_space.sample())
        assert reward == pytest.approx(info["privileged"][key])
    env = make(name, reward_mode="none")
    env.reset(seed=1)
    assert env.step(env.action_space.sample())[1] == 0.0


def test_information_gain_reward_of_rule_discovery_is_one_bit_at_most():
    env = make("RuleDiscovery-v0", reward_mode="info_gain")
    rewards = [reward for _, reward, _ in play(env, seed=2)]
    assert all(-1e-12 <= r <= np.log(2) + 1e-12 for r in rewards)


@pytest.mark.parametrize("name, bad, expected", [
    ("ActiveRegression-v0", [1.5], r"shape \(1,\) in \[\[-1.0\], \[1.0\]\]"),
    ("ActiveRegression-v0", [np.nan], "finite"),
    ("ActiveRegression-v0", [0.1, 0.2], r"shape \(1,\)"),
    ("LocationFinding-v0", [0.0, np.nan], r"shape \(2,\)"),
    ("LocationFinding-v0", [2.0, 0.0], r"shape \(2,\)"),
    ("RuleDiscovery-v0", 16, r"Discrete\(16\)"),
    ("RuleDiscovery-v0", 1.5, r"Discrete\(16\)"),
    ("CuriousGridworld-v0", -1, r"Discrete\(4\)"),
    ("CuriousGridworld-v0", [0, 1], r"Discrete\(4\)"),
])
def test_designs_outside_the_space_raise_value_error_naming_it(name, bad, expected):
    env = make(name)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=expected):
        env.step(bad)


def test_unknown_reward_mode_is_refused():
    with pytest.raises(ValueError, match="reward_mode must be one of"):
        make("ActiveRegression-v0", reward_mode="surprise")


def test_learner_with_wrong_design_dimension_is_refused():
    rules = make("RuleDiscovery-v0").unwrapped
    with pytest.raises(ValueError, match="dimension 4"):
        make("ActiveRegression-v0", learner=rules.exact_learner)


def test_location_finding_uses_the_dad_parameters():
    env = gym.make("gauntlet/LocationFinding-v0").unwrapped
    assert env.horizon == 30 and env.n_sources == 2 and env.noise_std == 0.5
    assert env.intensity.background == 0.1 and env.intensity.max_signal == 1e-4
    env.reset(seed=0)
    theta = np.array(env.theta_json())
    design = np.array([0.5, -0.25])
    expected = np.log(0.1 + sum(1.0 / (1e-4 + np.sum((design - theta[k]) ** 2)) for k in range(2)))
    assert env._truth(design[None]).mean[0, 0] == pytest.approx(expected)
