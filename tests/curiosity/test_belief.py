"""The curious belief-map policy (REINFORCE on icl_lp, location finding)."""

from __future__ import annotations

import dataclasses
import json

import gymnasium as gym
import numpy as np
import pytest
import torch

import gauntlet
from gauntlet.agents.curiosity import belief
from gauntlet.agents.curiosity.policies import candidates
from gauntlet.envs.curiosity.learners import ParticleLearner
from gauntlet.envs.curiosity.location_finding import LocationFindingEnv, SourceIntensity
from gauntlet.registry import registry

SMOKE = belief.CONFIGS["smoke"]


def as_tensor(array) -> torch.Tensor:
    return torch.as_tensor(np.asarray(array), dtype=torch.float64)


def test_rewards_equal_the_envs_icl_lp_with_the_contrastive_learner_step_by_step():
    first = LocationFindingEnv(horizon=6, n_probes=8, record_true_lp=False, n_particles=8)
    first.reset(seed=11)
    theta = first._theta  # the learner does not touch the env's RNG, so a second env draws the same θ
    prior = np.random.default_rng(4).standard_normal((64, 2, 2))
    learner = ParticleLearner(SourceIntensity(0.1, 1e-4), np.concatenate([theta[None], prior]), noise_std=0.5,
                              design_dim=2)
    env = LocationFindingEnv(horizon=6, n_probes=8, learner=learner, record_true_lp=False)
    env.reset(seed=11)
    rng = np.random.default_rng(2)
    rewards = [env.step(rng.uniform(-0.6, 0.6, 2).astype(np.float32))[1] for _ in range(6)]
    designs, outcomes = env.context
    ours = belief.icl_lp_rewards(as_tensor(prior), as_tensor(designs)[None], as_tensor(outcomes)[None],
                                 as_tensor(env._probe_x)[None], as_tensor(env._probe_y)[None], as_tensor(theta)[None],
                                 SMOKE)
    np.testing.assert_allclose(ours[0].numpy(), rewards, rtol=1e-6, atol=1e-9)


def test_the_belief_map_is_the_particle_learners_predictive_mean_and_spread():
    particles = np.random.default_rng(0).standard_normal((200, 2, 2))
    learner = ParticleLearner(SourceIntensity(0.1, 1e-4), particles, noise_std=0.5, design_dim=2)
    history_x = np.array([[0.5, -1.0], [2.0, 1.0], [-0.3, 0.2]])
    history_y = np.array([1.2, -0.5, 2.5])
    grid = belief.design_grid(SMOKE)
    predictive = learner.predict(history_x[None], history_y[None], grid.numpy()[None])
    log_w = (-0.5 * (as_tensor(history_y)[:, None] - belief.intensity(as_tensor(history_x), as_tensor(particles),
                                                                        SMOKE)) ** 2 / 0.25).sum(0)[None]
    mean, variance = belief.belief_map(log_w, belief.intensity(grid, as_tensor(particles), SMOKE).T)
    weights = np.exp(learner.log_weights(history_x[None], history_y[None], np.ones((1, 3), dtype=bool)))[0]
    means = SourceIntensity(0.1, 1e-4)(grid.numpy(), particles)  # (G, P)
    np.testing.assert_allclose(mean[0].numpy(), means @ weights, rtol=1e-9)
    np.testing.assert_allclose(mean[0].numpy(), predictive.mean[0], rtol=1e-9)
    np.testing.assert_allclose(variance[0].numpy() + 0.25, predictive.total_variance[0], rtol=1e-9)


def test_the_grid_is_the_planning_policies_candidate_set():
    env = LocationFindingEnv(horizon=2, n_particles=8)
    env.reset(seed=0)
    _, designs = candidates(env)
    np.testing.assert_allclose(belief.design_grid(belief.CONFIGS["default"]).numpy(), designs, atol=1e-12)


def test_training_is_deterministic_and_moves_the_policy_away_from_uniform():
    (first, history), (second, _) = belief.train(SMOKE), belief.train(SMOKE)
    for a, b in zip(first.parameters(), second.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert first.score[-1].weight.abs().sum() > 0  # the zero-initialised (uniform) last layer moved
    assert all(np.isfinite(history["mean_return_per_block"]))


def test_sampled_rollouts_follow_the_policy_and_greedy_ones_take_the_best_cell():
    network = belief.CellScorer(SMOKE)
    with torch.no_grad():
        network.score[-1].bias.fill_(0.0)
        network.score[-1].weight.normal_(generator=torch.Generator().manual_seed(0))
    generator = torch.Generator().manual_seed(1)
    thetas, noise = torch.randn(3, 2, 2, generator=generator), torch.randn(3, SMOKE.horizon, generator=generator)
    particles = torch.randn(SMOKE.n_belief_particles, 2, 2, generator=generator)
    designs, outcomes, log_probs = belief.rollout(network, thetas, noise, particles, SMOKE)
    grid = belief.design_grid(SMOKE).float()
    assert all((grid == d).all(-1).any() for d in designs.reshape(-1, 2))  # every design is a grid cell
    expected = belief.own_intensity(designs, thetas, SMOKE) + SMOKE.noise_std * noise
    torch.testing.assert_close(outcomes, expected)
    assert (log_probs <= 0).all()
    again = belief.rollout(network, thetas, noise, particles, SMOKE)
    torch.testing.assert_close(designs, again[0])


def test_agent_acts_on_the_grid_in_the_env_and_is_deterministic(tmp_path, monkeypatch):
    monkeypatch.setenv("GAUNTLET_HOME", str(tmp_path))
    agent = gauntlet.make_agent("curiosity-belief", config="smoke")
    env = gym.make("gauntlet/LocationFinding-v0", horizon=SMOKE.horizon, reward_mode="none", record_true_lp=False,
                   n_particles=64)
    first = gauntlet.rollout(env, agent, seed=3)
    second = gauntlet.rollout(env, agent, seed=3)
    designs = np.array([s.privileged["design"] for s in first.steps])
    np.testing.assert_array_equal(designs, [s.privileged["design"] for s in second.steps])
    grid = belief.design_grid(SMOKE).numpy()
    assert all(np.isclose(grid, d, atol=1e-5).all(-1).any() for d in designs)


def test_agent_rejects_malformed_observations_and_unknown_configs(tmp_path, monkeypatch):
    monkeypatch.setenv("GAUNTLET_HOME", str(tmp_path))
    agent = gauntlet.make_agent("curiosity-belief", config="smoke")
    with pytest.raises(ValueError, match=r"designs \(T, 2\)"):
        agent.act({"designs": np.zeros((4, 3)), "outcomes": np.zeros(4), "steps": 1}, {})
    with pytest.raises(ValueError, match="config must be one of"):
        belief.load_policy("huge")


def test_data_builder_registered_with_the_modules_version():
    entry = registry.get("data", belief.DATA_NAME)
    assert entry.metadata["version"] == belief.DATA_VERSION
    assert callable(entry.load())


def test_the_shipped_default_weights_match_the_default_config_and_are_trained():
    record = json.loads(belief.SHIPPED.read_text())
    assert record["config"] == dataclasses.asdict(belief.CONFIGS["default"])  # re-export after changing it
    assert record["version"] == belief.DATA_VERSION
    network, _ = belief.load_policy("default")  # the shipped file: no training
    assert network.score[-1].weight.abs().sum() > 0
    returns = record["training"]["mean_return_per_block"]
    assert returns[-1] > returns[0]  # the icl_lp return rose during training
    with pytest.raises(ValueError, match="source must be"):
        belief.load_policy("default", source="internet")
