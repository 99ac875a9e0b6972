"""pass@k and pass^k (gauntlet.pass_k): the estimators against hand-computed values and brute force, their
order in k, and their bootstrap confidence intervals."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest

from gauntlet.pass_k import pass_at_k, pass_hat_k, pass_k_table, task_pass_at_k, task_pass_hat_k

# Three tasks, three attempts each: always right, right once, never right.
ATTEMPTS, SUCCESSES = [3, 3, 3], [3, 1, 0]


def test_the_estimators_give_the_hand_computed_values():
    # pass@k per task: 1 - C(3-c, k)/C(3, k); pass^k per task: C(c, k)/C(3, k).
    assert [pass_at_k(ATTEMPTS, SUCCESSES, k) for k in (1, 2, 3)] == pytest.approx([4 / 9, 5 / 9, 2 / 3])
    assert [pass_hat_k(ATTEMPTS, SUCCESSES, k) for k in (1, 2, 3)] == pytest.approx([4 / 9, 1 / 3, 1 / 3])
    assert task_pass_at_k(3, 1, 2) == pytest.approx(2 / 3) and task_pass_hat_k(3, 1, 2) == 0.0
    assert task_pass_hat_k(5, 3, 2) == pytest.approx(3 / 10)


@pytest.mark.parametrize("n", [1, 2, 4, 6])
def test_each_task_estimate_is_the_share_of_k_subsets_of_its_attempts_where_any_or_all_succeed(n):
    for c in range(n + 1):
        outcomes = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            subsets = list(combinations(outcomes, k))
            assert task_pass_at_k(n, c, k) == pytest.approx(float(Fraction(sum(map(any, subsets)), len(subsets))))
            assert task_pass_hat_k(n, c, k) == pytest.approx(float(Fraction(sum(map(all, subsets)), len(subsets))))


def test_at_k_one_both_are_the_mean_success_rate():
    rng = np.random.default_rng(3)
    attempts = [5] * 40
    successes = rng.integers(0, 6, size=40).tolist()
    rate = sum(successes) / sum(attempts)
    assert pass_at_k(attempts, successes, 1) == pytest.approx(rate)
    assert pass_hat_k(attempts, successes, 1) == pytest.approx(rate)


def test_pass_at_k_rises_and_pass_hat_k_falls_with_k():
    rng = np.random.default_rng(7)
    for _ in range(20):
        n = int(rng.integers(2, 9))
        successes = rng.integers(0, n + 1, size=int(rng.integers(1, 30))).tolist()
        attempts = [n] * len(successes)
        at = [pass_at_k(attempts, successes, k) for k in range(1, n + 1)]
        hat = [pass_hat_k(attempts, successes, k) for k in range(1, n + 1)]
        assert at == sorted(at) and hat == sorted(hat, reverse=True)
        assert all(h <= a for h, a in zip(hat, at))


def test_the_table_goes_to_the_fewest_attempts_and_its_intervals_hold_the_estimates_in_order():
    rng = np.random.default_rng(11)
    successes = rng.integers(0, 5, size=25).tolist()
    attempts = [4] * 24 + [5]
    rows = pass_k_table(attempts, successes)
    assert [row.k for row in rows] == [1, 2, 3, 4]
    for row in rows:
        assert row.pass_at_k == pytest.approx(pass_at_k(attempts, successes, row.k))
        assert row.pass_hat_k == pytest.approx(pass_hat_k(attempts, successes, row.k))
        assert row.pass_at_k_ci[0] <= row.pass_at_k <= row.pass_at_k_ci[1]
        assert row.pass_hat_k_ci[0] <= row.pass_hat_k <= row.pass_hat_k_ci[1]
        assert row.pass_hat_k_ci[1] - row.pass_hat_k_ci[0] > 0  # the tasks differ, so the interval has width
    # One set of bootstrap samples serves every k, so the interval bounds move with k as the estimates do.
    for bound in (0, 1):
        at = [row.pass_at_k_ci[bound] for row in rows]
        hat = [row.pass_hat_k_ci[bound] for row in rows]
        assert at == sorted(at) and hat == sorted(hat, reverse=True)


def test_a_suite_where_every_task_succeeds_every_time_has_degenerate_intervals_at_one():
    rows = pass_k_table([3, 3], [3, 3])
    assert all((row.pass_at_k, row.pass_hat_k, row.pass_hat_k_ci) == (1.0, 1.0, (1.0, 1.0)) for row in rows)


@pytest.mark.parametrize(("attempts", "successes", "k", "problem"), [
    ([3], [4], 1, "cannot have 4 successes"),
    ([3], [1], 4, "between 1 and the task's 3 attempts"),
    ([3], [1], 0, "between 1 and the task's 3 attempts"),
    ([3, 3], [1], 1, "one of each per task"),
    ([], [], 1, "at least one task"),
])
def test_impossible_counts_are_refused(attempts, successes, k, problem):
    with pytest.raises(ValueError, match=problem):
        pass_hat_k(attempts, successes, k)
