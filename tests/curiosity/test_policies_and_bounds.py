"""Design policies, the optimal query count for rules, and the sPCE / sNMC bounds."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import gauntlet
from gauntlet.agents.curiosity.policies import GreedyEIGAgent, RandomDesignAgent, UncertaintySamplingAgent
from gauntlet.envs.curiosity.active_regression import RBFFeatures
from gauntlet.envs.curiosity.bounds import spce_snmc
from gauntlet.envs.curiosity.rule_discovery import conjunctions, optimal_expected_queries


def queries_to_identify(agent, n_bits: int, seeds) -> list[int]:
    counts = []
    for seed in seeds:
        env = gym.make("gauntlet/RuleDiscovery-v0", n_bits=n_bits, reward_mode="none")
        episode = gauntlet.rollout(env, agent, seed=seed, record="memory")
        counts.append(next(i + 1 for i, step in enumerate(episode.steps) if step.privileged["identified"]))
    return counts


def test_agents_are_registered_and_build_from_the_registry():
    agent = gauntlet.make_agent("curiosity-greedy-eig", env_id="RuleDiscovery-v0", n_bits=3)
    assert isinstance(agent, GreedyEIGAgent) and agent.spec().config["n_bits"] == 3
    with pytest.raises(ValueError, match="not a curiosity env"):
        RandomDesignAgent("CartPole-v1")


def test_optimal_query_count_for_one_bit_conjunctions_is_hand_computed():
    # Rules over one bit: {always 1, x, ¬x}. Query x=1: answer 0 -> ¬x (1 query); answer 1 -> {1, x},
    # one more query needed. Expected: 1 + (2/3) * 1 = 5/3.
    assert optimal_expected_queries(conjunctions(1)) == pytest.approx(5 / 3)


def test_greedy_eig_identifies_rules_faster_than_random_and_no_faster_than_optimal():
    seeds = range(12)
    greedy = np.mean(queries_to_identify(GreedyEIGAgent("RuleDiscovery-v0", n_bits=3), 3, seeds))
    random = np.mean(queries_to_identify(RandomDesignAgent("RuleDiscovery-v0", n_bits=3), 3, seeds))
    optimal = optimal_expected_queries(conjunctions(3))
    assert greedy < random
    assert optimal <= greedy + 3 * 1.0  # a mean of 12 episodes; the optimum is an expectation
    assert np.log2(27) <= optimal + 1e-9  # each noise-free answer carries at most one bit


def test_uncertainty_sampling_in_regression_never_repeats_a_known_point_early():
    env = gym.make("gauntlet/ActiveRegression-v0", horizon=5, reward_mode="none")
    episode = gauntlet.rollout(env, UncertaintySamplingAgent("ActiveRegression-v0", horizon=5), seed=0,
                               record="memory")
    designs = [step.privileged["design"][0] for step in episode.steps]
    assert len(set(np.round(designs, 6))) == 5


def test_greedy_eig_on_location_finding_gains_more_information_than_random_at_step_one():
    kwargs = {"n_particles": 512, "reward_mode": "info_gain", "horizon": 3, "n_outer": 256}
    gains = {}
    for cls in (GreedyEIGAgent, RandomDesignAgent):
        episodes = [gauntlet.rollout(gym.make("gauntlet/LocationFinding-v0", **kwargs),
                                     cls("LocationFinding-v0", **kwargs), seed=seed, record="memory")
                    for seed in range(4)]
        gains[cls] = np.mean([episode.steps[0].reward for episode in episodes])
    assert gains[GreedyEIGAgent] > gains[RandomDesignAgent]


def linear_gaussian_eig(designs: np.ndarray, features, noise_std: float) -> float:
    """Closed-form I(w; y_1..T) = ½ log det(I + Φ Φᵀ / σ²) for w ~ N(0, I)."""
    phi = features(designs)
    return 0.5 * np.linalg.slogdet(np.eye(len(phi)) + phi @ phi.T / noise_std ** 2)[1]


def test_spce_and_snmc_bracket_the_exact_information_of_a_linear_gaussian_design():
    features = RBFFeatures(4, 0.5)
    noise = 0.5
    rng = np.random.default_rng(0)
    designs = np.linspace(-1, 1, 5)[:, None]

    def mean_function(x, thetas):
        return features(x) @ thetas.T

    n_histories = 64
    thetas = rng.standard_normal((n_histories, 4))
    outcomes = mean_function(designs, thetas).T + noise * rng.standard_normal((n_histories, 5))
    bounds = spce_snmc(mean_function, np.repeat(designs[None], n_histories, axis=0), outcomes, thetas,
                       noise_std=noise, sample_prior=lambda r, n: r.standard_normal((n, 4)), n_contrastive=20_000,
                       rng=rng)
    exact = linear_gaussian_eig(designs, features, noise)
    assert (bounds["spce"] <= bounds["snmc"]).all()
    assert (bounds["spce"] <= np.log(20_001) + 1e-9).all()
    half_width = 3 * bounds["spce"].std() / np.sqrt(n_histories)
    assert bounds["spce"].mean() - half_width <= exact <= bounds["snmc"].mean() + half_width


def test_spce_rejects_mismatched_histories():
    with pytest.raises(ValueError, match=r"designs must be \(E, T, D\)"):
        spce_snmc(lambda x, t: x, np.zeros((2, 3, 2)), np.zeros((2, 4)), np.zeros((2, 2, 2)), noise_std=0.5,
                  sample_prior=lambda r, n: r.standard_normal((n, 2, 2)), n_contrastive=10,
                  rng=np.random.default_rng(0))


def test_ppo_curious_policy_trains_through_the_data_cache_and_acts_in_the_design_space():
    from gauntlet.agents.curiosity.ppo import CuriousPPOAgent

    agent = gauntlet.make_agent("curiosity-ppo", config="smoke")
    assert isinstance(agent, CuriousPPOAgent)
    env = gym.make("gauntlet/ActiveRegression-v0")
    episode = gauntlet.rollout(env, agent, seed=0, record="memory")
    designs = np.array([step.privileged["design"] for step in episode.steps])
    assert len(designs) == 20 and np.all(np.abs(designs) <= 1.0)
    with pytest.raises(ValueError, match="config must be one of"):
        CuriousPPOAgent("huge")
