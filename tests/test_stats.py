"""The shared statistics against independent computations: scikit-learn's ROC area, hand-counted
thresholds, and the bootstraps' defining properties."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from gauntlet.stats import (
    auroc,
    bootstrap_ci,
    cluster_bootstrap_ci,
    expected_calibration_error,
    fpr_at_tpr,
    macro_mean_ci,
    sign_test,
    stratified_bootstrap_ci,
)


@pytest.mark.parametrize("seed", range(5))
def test_auroc_is_scikit_learns_roc_area_with_ties(seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, size=60)
    scores = rng.integers(0, 6, size=60).astype(float)  # many ties
    assert auroc(scores, labels) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)


def test_auroc_of_one_class_is_nan():
    assert np.isnan(auroc(np.array([0.1, 0.2]), np.array([1, 1])))
    assert np.isnan(auroc(np.array([0.1, 0.2]), np.array([0, 0])))


def test_fpr_at_tpr_flags_negatives_at_the_threshold_that_keeps_the_share_of_positives():
    positives = np.arange(1.0, 21.0)  # 20 positives: 95 % of them are the top 19, threshold 2
    negatives = np.array([0.0, 1.5, 2.0, 3.0])
    scores = np.concatenate([positives, negatives])
    labels = np.array([1] * 20 + [0] * 4)
    assert fpr_at_tpr(scores, labels) == 0.5  # 2.0 and 3.0 reach the threshold
    assert fpr_at_tpr(scores, labels, tpr=0.5) == 0.0  # threshold 11


def test_the_mean_bootstrap_brackets_the_mean_is_seeded_and_handles_tiny_samples():
    values = np.random.default_rng(0).normal(3.0, 1.0, size=200)
    low, high = bootstrap_ci(values, resamples=2000)
    assert low < values.mean() < high and high - low < 0.5
    assert bootstrap_ci(values, resamples=2000) == (low, high)
    assert bootstrap_ci([4.0]) == (4.0, 4.0)
    assert all(np.isnan(bound) for bound in bootstrap_ci([]))


def test_the_cluster_bootstrap_moves_whole_clusters():
    # Two clusters of constant values: every resample's mean is one of three cluster mixes.
    values = np.array([0.0, 0.0, 0.0, 1.0])
    clusters = np.array([0, 0, 0, 1])
    low, high = cluster_bootstrap_ci(values, clusters, resamples=500, level=1.0)
    assert {low, high} <= {0.0, 0.25, 1.0}  # a row resample would also give 0.5 and 0.75


def test_the_stratified_bootstrap_keeps_both_classes_in_every_resample():
    scores = np.array([0.9, 0.1, 0.2, 0.3, 0.4])
    labels = np.array([1, 0, 0, 0, 0])
    low, high = stratified_bootstrap_ci(auroc, scores, labels, resamples=200)
    assert low == high == 1.0  # the one positive is always drawn, and always ranks first


def test_expected_calibration_error_by_hand():
    probabilities = np.array([0.1, 0.1, 0.9, 0.9])
    labels = np.array([0, 1, 1, 1])
    assert expected_calibration_error(probabilities, labels, bins=10) == pytest.approx((2 * 0.4 + 2 * 0.1) / 4)


@pytest.mark.parametrize(("better", "worse", "expected"), [
    (9, 1, 2 * (1 + 10) / 2**10), (1, 9, 2 * (1 + 10) / 2**10), (19, 1, 2 * (1 + 20) / 2**20),
    (7, 3, 2 * (1 + 10 + 45 + 120) / 2**10), (0, 0, 1.0), (5, 5, 1.0), (1, 0, 1.0), (0, 6, 2 / 2**6)])
def test_the_sign_test_is_the_two_sided_exact_binomial_test_by_hand(better, worse, expected):
    # P(a split at least as uneven) = 2 * sum_{k <= min} C(n, k) / 2^n, at most 1.
    assert sign_test(better, worse) == pytest.approx(min(1.0, expected), rel=1e-12)


def test_the_macro_mean_interval_resamples_each_group_apart():
    # Groups 1 and 2 are constant, so every resample's macro mean is 1/3 + (0, 1/2 or 1)/3.
    assert macro_mean_ci([[1.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0]]) == (pytest.approx(1 / 3), pytest.approx(2 / 3))
    low, high = macro_mean_ci([[0.0, 1.0] * 20], level=0.5)
    assert 0.4 < low < 0.5 < high < 0.6
    with pytest.raises(ValueError, match="a value in each"):
        macro_mean_ci([[1.0], []])


def test_the_sign_test_refuses_negative_counts():
    with pytest.raises(ValueError, match=">= 0"):
        sign_test(-1, 3)
