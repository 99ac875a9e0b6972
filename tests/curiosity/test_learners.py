"""In-context learners: exact posteriors agree with Monte Carlo; bad shapes are refused."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import gauntlet  # noqa: F401  (registers the envs)
from gauntlet.envs.curiosity.active_regression import RBFFeatures
from gauntlet.envs.curiosity.learners import BayesianLinearLearner, ParticleLearner


def regression_learner(max_context: int = 1024) -> BayesianLinearLearner:
    return BayesianLinearLearner(RBFFeatures(8, 0.3), 8, weight_std=1.0, noise_std=0.2, max_context=max_context)


def test_closed_form_regression_predictive_matches_importance_sampled_prior():
    rng = np.random.default_rng(0)
    learner = regression_learner()
    context_x = rng.uniform(-1, 1, (1, 3, 1))
    context_y = np.array([[0.5, -0.3, 0.8]])
    queries = np.array([[[-0.9], [0.0], [0.7]]])
    exact = learner.predict(context_x, context_y, queries)
    # Monte Carlo: weights from the prior, weighted by the likelihood of the context.
    weights = rng.standard_normal((400_000, 8))
    residuals = context_y[0][:, None] - learner.features(context_x[0]) @ weights.T  # (N, S)
    log_lik = -0.5 * np.sum(residuals ** 2, axis=0) / 0.2 ** 2
    w = np.exp(log_lik - log_lik.max())
    w /= w.sum()
    f = learner.features(queries[0]) @ weights.T  # (M, S)
    mc_mean = f @ w
    mc_var = (f - mc_mean[:, None]) ** 2 @ w + 0.2 ** 2
    ess = 1.0 / np.sum(w ** 2)
    assert ess > 2000
    np.testing.assert_allclose(exact.mean[0], mc_mean, atol=4 * np.sqrt(exact.variance[0].max() / ess))
    np.testing.assert_allclose(exact.variance[0], mc_var, rtol=0.1)


def test_rule_enumeration_posterior_matches_rejection_sampling():
    env = gym.make("gauntlet/RuleDiscovery-v0", n_bits=3).unwrapped
    learner = env.exact_learner
    rng = np.random.default_rng(1)
    context_x = env.inputs[[0, 5]][None]
    context_y = np.array([[0.0, 0.0]])
    predictive = learner.predict(context_x, context_y, env.inputs[None])
    rules = rng.integers(len(env.truth_tables), size=200_000)  # uniform prior
    kept = rules[(env.truth_tables[rules][:, [0, 5]] == [False, False]).all(axis=1)]
    frequencies = env.truth_tables[kept].mean(axis=0)
    np.testing.assert_allclose(predictive.probs[0, :, 1], frequencies, atol=4 * np.sqrt(0.25 / len(kept)))


def test_gridworld_enumeration_posterior_matches_rejection_sampling():
    env = gym.make("gauntlet/CuriousGridworld-v0", size=3, ice_columns=1).unwrapped
    learner = env.exact_learner
    rng = np.random.default_rng(2)
    # From the centre (cell 4, not ice), action 0 was seen to lead to cell 5 (right).
    context_x, context_y = np.array([[[1.0, 1.0, 0.0]]]), np.array([[5.0]])
    query = np.array([[[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]])
    predictive = learner.predict(context_x, context_y, query)
    hypotheses = rng.integers(24, size=200_000)
    table = learner.likelihood
    seen = rng.random(len(hypotheses)) < table[hypotheses, 4 * 4 + 0, 5]
    kept = hypotheses[seen]
    for m, index in enumerate((0 * 4 + 0, 4 * 4 + 1)):
        outcomes = np.array([rng.choice(9, p=table[h, index]) for h in kept[:20_000]])
        frequencies = np.bincount(outcomes, minlength=9) / len(outcomes)
        np.testing.assert_allclose(predictive.probs[0, m], frequencies, atol=0.015)


def test_particle_learner_converges_to_the_closed_form_posterior():
    exact = regression_learner()
    particles = np.random.default_rng(3).standard_normal((200_000, 8))

    def linear(designs, thetas):
        return exact.features(designs) @ thetas.T

    approx = ParticleLearner(linear, particles, noise_std=0.2, design_dim=1)
    context_x, context_y = np.array([[[-0.5], [0.5]]]), np.array([[1.0, -1.0]])
    queries = np.array([[[-0.5], [0.0], [0.9]]])
    a, b = approx.predict(context_x, context_y, queries), exact.predict(context_x, context_y, queries)
    np.testing.assert_allclose(a.mean[0], b.mean[0], atol=0.03)
    np.testing.assert_allclose(a.total_variance[0], b.variance[0], rtol=0.05)
    y = np.array([[0.9, 0.1, -0.2]])
    np.testing.assert_allclose(a.log_prob(y), b.log_prob(y), atol=0.03)


def test_masked_rows_are_ignored():
    learner = regression_learner()
    x, y = np.array([[[0.1], [0.7]]]), np.array([[0.3, 99.0]])
    masked = learner.predict(x, y, np.array([[[0.5]]]), np.array([[True, False]]))
    short = learner.predict(x[:, :1], y[:, :1], np.array([[[0.5]]]))
    np.testing.assert_allclose(masked.mean, short.mean)
    np.testing.assert_allclose(masked.variance, short.variance)


@pytest.mark.parametrize("context_x, context_y, queries, message", [
    (np.zeros((1, 3, 2)), np.zeros((1, 3)), np.zeros((1, 1, 1)), r"context_x must have shape \(B, N, 1\)"),
    (np.zeros((1, 3, 1)), np.zeros((1, 2)), np.zeros((1, 1, 1)), r"context_y must have shape \(B, N\) = \(1, 3\)"),
    (np.zeros((1, 3, 1)), np.zeros((1, 3)), np.zeros((2, 1, 1)), r"queries must have shape \(B, M, 1\) with B = 1"),
    (np.zeros((1, 3, 1)), np.array([[0.0, np.nan, 0.0]]), np.zeros((1, 1, 1)), "finite"),
    (np.zeros((1, 5, 1)), np.zeros((1, 5)), np.zeros((1, 1, 1)), "longer than this learner's maximum of 4"),
])
def test_bad_shapes_raise_value_error_with_the_expected_shapes(context_x, context_y, queries, message):
    with pytest.raises(ValueError, match=message):
        regression_learner(max_context=4).predict(context_x, context_y, queries)


def test_impossible_context_is_reported():
    env = gym.make("gauntlet/RuleDiscovery-v0", n_bits=2).unwrapped
    x = env.inputs[[3, 3]][None]
    with pytest.raises(ValueError, match="probability zero"):
        env.exact_learner.predict(x, np.array([[0.0, 1.0]]), x)
