"""The Wilks certificate, checked against exact binomial arithmetic."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from gauntlet.agents.calspi.calibration import (
    binomial_cdf,
    calibrate,
    min_calibration_size,
    nonconformity_scores,
    wilks_order_statistic,
)


def exact_binomial_cdf(k: int, n: int, p: Fraction) -> Fraction:
    return sum((math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1)), Fraction(0))


@pytest.mark.parametrize(("p", "gamma"), [(Fraction(95, 100), Fraction(95, 100)), (Fraction(9, 10), Fraction(99, 100)),
                                          (Fraction(99, 100), Fraction(9, 10)), (Fraction(8, 10), Fraction(8, 10))])
@pytest.mark.parametrize("n", [300, 500, 1000])
def test_wilks_rank_is_the_smallest_order_statistic_with_exact_binomial_confidence(p, gamma, n):
    rank = wilks_order_statistic(n, float(p), float(gamma))
    # P(F(X_(k)) >= p) = P(Binomial(n, p) <= k - 1): the chosen rank reaches gamma, the one below does not.
    assert exact_binomial_cdf(rank - 1, n, p) >= gamma
    assert rank == 1 or exact_binomial_cdf(rank - 2, n, p) < gamma


def test_p_and_gamma_of_095_need_59_calibration_transitions():
    assert min_calibration_size(0.95, 0.95) == 59
    assert 1 - Fraction(95, 100) ** 59 >= Fraction(95, 100) > 1 - Fraction(95, 100) ** 58
    assert wilks_order_statistic(59, 0.95, 0.95) == 59


def test_too_little_calibration_data_says_how_much_is_needed():
    with pytest.raises(ValueError, match="needs at least 59"):
        wilks_order_statistic(58, 0.95, 0.95)


@pytest.mark.parametrize(("p", "gamma"), [(0.0, 0.9), (1.0, 0.9), (0.9, 1.0), (0.9, -0.1), (1.5, 0.5)])
def test_p_or_gamma_outside_the_open_unit_interval_is_refused(p, gamma):
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        wilks_order_statistic(1000, p, gamma)


def test_binomial_cdf_matches_exact_arithmetic():
    for n, k, p in [(30, 12, 0.4), (300, 280, 0.95), (59, 58, 0.95)]:
        assert binomial_cdf(k, n, p) == pytest.approx(float(exact_binomial_cdf(k, n, Fraction(p))), rel=1e-9)


def test_certificate_covers_at_least_p_of_fresh_scores_in_at_least_gamma_of_draws():
    # Scores from a fixed distribution: the Wilks bound must hold for fresh draws of the same law.
    rng = np.random.default_rng(0)
    p, gamma, n, draws = 0.9, 0.9, 100, 400
    held = 0
    for _ in range(draws):
        scores = rng.exponential(size=n)
        certificate = calibrate(scores, np.ones((n, 2)), p=p, gamma=gamma)
        coverage = 1 - np.exp(-certificate.q_hat)  # the exponential's CDF at the threshold
        held += coverage >= p
    # gamma of draws in expectation; 400 draws put the binomial 3-sigma band at about +-0.045.
    assert held / draws >= gamma - 0.045


def test_nonconformity_score_is_the_largest_error_in_disagreement_units():
    targets = np.array([[1.0, 0.0], [0.0, 3.0]])
    mean = np.zeros((2, 2))
    disagreement = np.array([[0.5, 1.0], [1.0, 1.0]])
    np.testing.assert_allclose(nonconformity_scores(targets, mean, disagreement), [2.0, 3.0], rtol=1e-5)


def test_gate_trusts_exactly_the_transitions_whose_certified_bound_is_within_tolerance():
    certificate = calibrate(np.linspace(0, 1, 100), np.full((100, 3), 0.1), p=0.9, gamma=0.9)
    disagreement = np.array([[0.1, 0.1, 0.1], [0.1, 10.0, 0.1]])
    assert certificate.trusted(disagreement).tolist() == [True, False]
