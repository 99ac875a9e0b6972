"""The paired (baseline-relative) root switch and the Bellman-residual bound delta_TD of V^b.

Paired criterion (planner docstring): switch iff LB(a+) - UB(pi_b(s)) > delta_TD + margin, with both
sides from the same root's tree and the same V^b at the leaves."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gauntlet.agents.calspi.calibration import wilks_order_statistic
from gauntlet.agents.calspi.value import BaselineValue, ValueFitConfig
from gauntlet.envs.calspi.datasets import OfflineDataset
from tests.calspi.test_value_and_multistep import ConstantValue, _chain_dataset, _edges, planner


class ConstantValueTD(ConstantValue):
    def __init__(self, level: float, td_error_bound: float):
        super().__init__(level)
        self.td_error_bound = td_error_bound


def _noisy_chain() -> OfflineDataset:
    """Steps-left chain with reward 1 + N(0, 1) per step, so single returns are noisy."""
    return _chain_dataset(episodes=40, reward_noise=1.0)


def test_td_bound_is_the_wilks_order_statistic_of_the_residuals_and_below_the_return_bound():
    data = _noisy_chain()
    order = np.random.default_rng(1).permutation(len(data))
    train, held_out = order[:600], order[600:]
    value = BaselineValue(1, discount=0.9, config=ValueFitConfig(hidden=32, iterations=1, steps=800)).fit(
        data, train, held_out, p=0.9, gamma=0.9)
    residuals = value.td_residuals(data, held_out)
    np.testing.assert_allclose(residuals, value.held_out_td_residuals)
    manual = data.rewards[held_out] + 0.9 * (1 - data.terminals[held_out]) * value(data.next_observations[held_out]) \
        - value(data.observations[held_out])
    np.testing.assert_allclose(residuals, manual)
    rank = wilks_order_statistic(len(held_out), 0.9, 0.9)
    assert value.td_error_bound == pytest.approx(np.sort(np.abs(residuals))[rank - 1])
    # One reward's noise, not a whole return's: the new term is smaller than delta_V on the same data.
    assert value.td_error_bound < value.error_bound


def test_paired_rule_switches_exactly_when_lb_beats_the_baseline_upper_bound_plus_delta_td():
    switched_any = False
    for td in (0.0, 0.3):
        search = planner(tolerance=1e9, value=ConstantValueTD(5.0, td), switching="paired")
        for s in range(6):
            decision = search.search(np.zeros(2), np.random.default_rng(s))
            assert decision.value_term == td
            assert decision.baseline_value == pytest.approx(decision.baseline_upper_bound + td)
            assert decision.switched == (decision.best_lower_bound > decision.baseline_upper_bound + td)
            switched_any |= decision.switched
            # Every visited edge: G_lb <= G <= G_ub.
            for edge in _edges(search.last_root):
                if edge.visits:
                    assert edge.lower_bound <= edge.value + 1e-9 <= edge.upper_bound + 2e-9
    assert switched_any  # reward = a_0 > 0 beats the baseline's 0 when V^b is the same at every leaf


def test_paired_rule_never_switches_with_a_large_value_term_or_without_a_certificate():
    big = planner(tolerance=1e9, value=ConstantValueTD(5.0, 1e6), switching="paired")
    assert not any(big.search(np.zeros(2), np.random.default_rng(s)).switched for s in range(4))
    # Nothing trusted (tolerance below every bound, even the baseline's): never leaves the baseline.
    none = planner(tolerance=-1.0, value=ConstantValueTD(5.0, 0.0), switching="paired")
    for s in range(4):
        decision = none.search(np.zeros(2), np.random.default_rng(s))
        assert not decision.switched and decision.trusted_root_actions == 0
        np.testing.assert_array_equal(decision.action, np.zeros(2))


def test_paired_leaves_drop_delta_v_and_unpaired_leaves_keep_it():
    value = ConstantValueTD(5.0, 0.0)
    value.error_bound = 3.0
    states, errors = np.zeros((2, 2)), np.zeros((2, 2))
    _, lower_paired, upper = planner(1e9, value=value, switching="paired")._leaf_bounds(states, errors)
    _, lower_unpaired, _ = planner(1e9, value=value)._leaf_bounds(states, errors)
    np.testing.assert_allclose(lower_paired, 5.0)
    np.testing.assert_allclose(lower_unpaired, 2.0)
    np.testing.assert_allclose(upper, 5.0)
    assert math.isinf(planner(1e9).reward_ceiling)  # no ceiling given: uncertified steps are unbounded above
