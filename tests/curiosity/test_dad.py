"""The curious design network (DAD-style, trained on summed icl_lp) and the data builders' registration."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch

import gauntlet
from gauntlet.agents.curiosity import dad
from gauntlet.envs.curiosity.learners import ParticleLearner
from gauntlet.envs.curiosity.location_finding import LocationFindingEnv, SourceIntensity
from gauntlet.registry import registry

SMOKE = dad.CONFIGS["smoke"]


def test_training_return_equals_the_sum_of_the_envs_icl_lp_rewards():
    """Equation (return): Σ_t icl_lp_t of the env with a particle learner equals ``total_icl_lp``."""
    particles = np.random.default_rng(3).standard_normal((64, 2, 2))
    learner = ParticleLearner(SourceIntensity(0.1, 1e-4), particles, noise_std=0.5, design_dim=2)
    env = LocationFindingEnv(horizon=6, n_probes=8, learner=learner, record_true_lp=False)
    env.reset(seed=5)
    rng = np.random.default_rng(0)
    rewards = [env.step(rng.uniform(-0.5, 0.5, 2).astype(np.float32))[1] for _ in range(6)]
    designs, outcomes = env.context
    as_tensor = lambda a: torch.as_tensor(a, dtype=torch.float64)
    total = dad.total_icl_lp(as_tensor(particles), as_tensor(designs)[None], as_tensor(outcomes)[None],
                             as_tensor(env._probe_x)[None], as_tensor(env._probe_y)[None], SMOKE)
    np.testing.assert_allclose(float(total[0]), sum(rewards), rtol=1e-6, atol=1e-9)


def test_with_the_truth_among_the_particles_the_return_is_the_contrastive_learners_summed_icl_lp():
    """The training learner of ``include_truth`` configs: particles {θ} ∪ prior draws, θ the episode's own."""
    first = LocationFindingEnv(horizon=6, n_probes=8, record_true_lp=False, n_particles=8)
    first.reset(seed=5)
    theta = first._theta  # the episode's θ; the learner does not touch the env's RNG, so a second env draws it again
    prior = np.random.default_rng(3).standard_normal((64, 2, 2))
    learner = ParticleLearner(SourceIntensity(0.1, 1e-4), np.concatenate([theta[None], prior]), noise_std=0.5,
                              design_dim=2)
    env = LocationFindingEnv(horizon=6, n_probes=8, learner=learner, record_true_lp=False)
    env.reset(seed=5)
    np.testing.assert_array_equal(env._theta, theta)
    rng = np.random.default_rng(0)
    rewards = [env.step(rng.uniform(-0.5, 0.5, 2).astype(np.float32))[1] for _ in range(6)]
    designs, outcomes = env.context
    as_tensor = lambda a: torch.as_tensor(a, dtype=torch.float64)
    total = dad.total_icl_lp(as_tensor(prior), as_tensor(designs)[None], as_tensor(outcomes)[None],
                             as_tensor(env._probe_x)[None], as_tensor(env._probe_y)[None], SMOKE,
                             true_thetas=as_tensor(theta)[None])
    np.testing.assert_allclose(float(total[0]), sum(rewards), rtol=1e-6, atol=1e-9)


def test_training_with_the_truth_among_the_particles_is_deterministic_and_changes_the_designs():
    tiny = dataclasses.replace(SMOKE, include_truth=True, steps=3)
    (first, history), (second, _) = dad.train(tiny), dad.train(tiny)
    untrained = dad.DesignNetwork(tiny)
    for a, b in zip(first.parameters(), second.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert not torch.equal(first.schedule, untrained.schedule)
    assert all(np.isfinite(history["mean_return_per_block"]))


def test_the_return_is_differentiable_through_designs_and_outcomes():
    network = dad.DesignNetwork(SMOKE)
    generator = torch.Generator().manual_seed(0)
    thetas, noise = torch.randn(4, 2, 2, generator=generator), torch.randn(4, SMOKE.horizon, generator=generator)
    designs, outcomes = dad.rollout(network, thetas, noise, SMOKE)
    probe_x = torch.randn(4, 8, 2, generator=generator)
    total = dad.total_icl_lp(torch.randn(32, 2, 2, generator=generator), designs, outcomes, probe_x,
                             torch.randn(4, 8, generator=generator), SMOKE)
    total.sum().backward()
    gradients = [p.grad for p in network.parameters()]
    assert all(g is not None for g in gradients) and sum(float(g.abs().sum()) for g in gradients) > 0
    assert designs.abs().max() <= dad.DESIGN_BOUND


def test_the_design_network_ignores_the_order_of_the_history_and_padding():
    network = dad.DesignNetwork(SMOKE)
    generator = torch.Generator().manual_seed(1)
    designs, outcomes = torch.randn(1, 5, 2, generator=generator), torch.randn(1, 5, generator=generator)
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0, 0.0]])
    first = network(designs, outcomes, mask)
    order = torch.tensor([2, 0, 1, 4, 3])
    shuffled = network(designs[:, order], outcomes[:, order], mask[:, order])
    torch.testing.assert_close(first, shuffled)
    padded = network(designs[:, :3], outcomes[:, :3], mask[:, :3])
    torch.testing.assert_close(first, padded)


def test_smoke_training_is_deterministic(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    dad.build(first, config="smoke")
    dad.build(second, config="smoke")
    assert (first / "weights.pt").read_bytes() == (second / "weights.pt").read_bytes()
    with pytest.raises(ValueError, match="config must be one of"):
        dad.build(tmp_path, config="huge")


def test_the_registered_agent_acts_in_location_finding_from_the_data_cache():
    agent = gauntlet.make_agent("curiosity-dad", config="smoke")
    env = gym.make("gauntlet/LocationFinding-v0", horizon=SMOKE.horizon, reward_mode="none", record_true_lp=False,
                   n_particles=64)
    episode = gauntlet.rollout(env, agent, seed=0)
    designs = np.array([step.privileged["design"] for step in episode.steps])
    assert designs.shape == (SMOKE.horizon, 2) and np.all(np.abs(designs) <= 4.0)
    assert len({tuple(d) for d in designs.round(6)}) > 1  # a design per step, not one point repeated
    again = gauntlet.rollout(env, gauntlet.make_agent("curiosity-dad", config="smoke"), seed=0)
    assert [s.privileged["design"] for s in again.steps] == designs.tolist()
    with pytest.raises(ValueError, match=r"designs \(T, 2\) and outcomes \(T,\)"):
        agent.act({"designs": np.zeros((3, 1)), "outcomes": np.zeros(3), "steps": 0}, {})


def test_prior_random_baseline_draws_near_the_sources_and_refuses_other_envs():
    agent = gauntlet.make_agent("curiosity-random-prior")
    env = gym.make("gauntlet/LocationFinding-v0", horizon=20, reward_mode="none", record_true_lp=False,
                   n_particles=64)
    designs = np.array([s.privileged["design"] for s in gauntlet.rollout(env, agent, seed=1).steps])
    assert 0.5 < designs.std() < 1.5  # N(0, I): unit spread, unlike the uniform square's 2.3
    with pytest.raises(ValueError, match="LocationFinding-v0 only"):
        gauntlet.make_agent("curiosity-random-prior", env_id="RuleDiscovery-v0")


def test_data_builders_are_registered_with_their_modules_versions():
    from gauntlet.agents.curiosity import ppo
    from gauntlet.envs.curiosity import transformer

    for module in (dad, ppo, transformer):
        entry = registry.get("data", module.DATA_NAME)
        assert entry.metadata["version"] == module.DATA_VERSION
        assert callable(entry.load())


def test_a_random_agent_does_not_replay_the_envs_stream():
    """The runner gives env and agent the same seed; the prior-random design must not be θ itself."""
    env = gym.make("gauntlet/LocationFinding-v0", horizon=3, reward_mode="none", record_true_lp=False,
                   n_particles=64)
    episode = gauntlet.rollout(env, gauntlet.make_agent("curiosity-random-prior"), seed=7)
    theta = np.array(episode.steps[0].privileged["theta"])
    first = np.array(episode.steps[0].privileged["design"])
    assert np.min(np.linalg.norm(theta - first, axis=1)) > 1e-3
