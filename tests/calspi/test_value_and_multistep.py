"""The learned baseline value V^b, the multi-step (accumulated) gate, the terminal-box check, and the
root switch against V^b (with models whose answers are known)."""

from __future__ import annotations

import numpy as np
import pytest

from gauntlet.agents.calspi.calibration import Certificate, wilks_order_statistic
from gauntlet.agents.calspi.ensemble import Normaliser, Prediction
from gauntlet.agents.calspi.planner import GatedSearch, SearchConfig
from gauntlet.agents.calspi.value import BaselineValue, ValueFitConfig, returns_to_go
from gauntlet.envs.calspi.datasets import OfflineDataset


def test_returns_to_go_bootstrap_only_where_an_episode_was_cut_not_where_it_terminated():
    rewards = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    terminals = np.array([False, True, False, False, False])
    timeouts = np.array([False, False, False, True, False])
    bootstrap = np.array([100.0, 100.0, 100.0, 10.0, 20.0])
    g = returns_to_go(rewards, terminals, terminals | timeouts, bootstrap, discount=0.5)
    # episode 1 terminates at index 1; episode 2 is cut at index 3 (timeout); index 4 is the dataset's end.
    np.testing.assert_allclose(g, [1 + 0.5 * 2, 2, 3 + 0.5 * (4 + 0.5 * 10), 4 + 0.5 * 10, 5 + 0.5 * 20])


def _chain_dataset(episodes: int = 30, length: int = 20, reward_noise: float = 0.0, seed: int = 0) -> OfflineDataset:
    """Reward 1 (+ N(0, reward_noise^2)) per step, the observation is the number of steps left, each
    episode terminates."""
    left = np.tile(np.arange(length, 0, -1, dtype=float), episodes)[:, None]
    terminals = np.tile(np.arange(length) == length - 1, episodes)
    n = len(left)
    rewards = 1.0 + reward_noise * np.random.default_rng(seed).standard_normal(n)
    return OfflineDataset(left, np.zeros((n, 1)), rewards, left - 1, terminals, np.zeros(n, bool))


def test_value_fits_discounted_returns_and_its_error_bound_is_the_wilks_order_statistic():
    data = _chain_dataset()
    order = np.random.default_rng(0).permutation(len(data))
    train, held_out = order[:450], order[450:]
    value = BaselineValue(1, discount=0.9, config=ValueFitConfig(hidden=32, iterations=1, steps=800)).fit(
        data, train, held_out, p=0.9, gamma=0.9)
    truth = (1 - 0.9 ** data.observations[:, 0]) / (1 - 0.9)  # sum of 0.9^k over the steps left
    assert np.abs(value(data.observations) - truth).max() < 0.5
    rank = wilks_order_statistic(len(held_out), 0.9, 0.9)
    assert value.error_bound == pytest.approx(np.sort(value.held_out_errors)[rank - 1])
    # First-order value error of a state error: |dV/ds| * E, with dV/ds > 0 here.
    assert value.lipschitz_term(np.array([[5.0]]), np.array([[0.0]]))[0] == 0.0
    assert value.lipschitz_term(np.array([[5.0]]), np.array([[1.0]]))[0] > 0.1


class DriftModel:
    """s' = s + a (first coordinate), reward = a_0; elites disagree by |a_0| in every state coordinate."""

    target_norm = Normaliser(np.zeros(3), np.ones(3))

    def predict(self, states: np.ndarray, actions: np.ndarray) -> Prediction:
        spread = np.abs(actions[:, :1])
        disagreement = np.concatenate([np.repeat(spread, 2, axis=1), np.zeros((len(states), 1))], axis=1)
        next_states = states.copy()
        next_states[:, 0] += actions[:, 0]
        rewards = actions[:, 0].copy()
        return Prediction(next_states=next_states, rewards=rewards,
                          normalised_mean=np.concatenate([next_states - states, rewards[:, None]], axis=1),
                          disagreement=disagreement)


class ConstantValue:
    error_bound = 0.0

    def __init__(self, level: float):
        self.level = level

    def __call__(self, states: np.ndarray) -> np.ndarray:
        return np.full(len(np.atleast_2d(states)), self.level)

    def lipschitz_term(self, states: np.ndarray, error: np.ndarray) -> np.ndarray:
        return np.zeros(len(np.atleast_2d(states)))


def planner(tolerance: float, *, value=None, is_terminal=None, **config) -> GatedSearch:
    certificate = Certificate(p=0.95, gamma=0.95, n=100, rank=100, q_hat=1.0, tolerance=tolerance)
    return GatedSearch(DriftModel(), certificate, lambda s: np.zeros((len(s), 2)),
                       is_terminal or (lambda s: np.zeros(len(s), bool)), -np.ones(2), np.ones(2),
                       reward_floor=-1.0, reward_scale=1.0, value=value,
                       config=SearchConfig(**{"simulations": 64, "wave_size": 8, "max_depth": 3,
                                              "rollout_horizon": 2, **config}))


def _edges(node):
    for edge in node.edges:
        yield edge
        yield from _edges(edge.child)


def test_the_accumulated_bound_cuts_paths_whose_one_step_bounds_each_pass():
    search = planner(tolerance=0.6, path_tolerance=1.0)
    search.search(np.zeros(2), np.random.default_rng(0))
    edges = list(_edges(search.last_root))
    limit = 1.0 * 0.6
    assert all(edge.child.path_bound <= limit + 1e-9 for edge in edges if edge.trusted)
    # Some edges pass the one-step gate (own bound <= 0.6) yet are cut because the path's sum exceeds it.
    cut = [e for e in edges if not e.trusted and abs(e.action[0]) + 1e-6 <= 0.6]
    assert cut and all(e.child.path_bound > limit for e in cut)


def test_a_state_that_could_be_terminal_within_its_error_box_is_flagged():
    search = planner(tolerance=1.0, is_terminal=lambda s: s[:, 0] < 0.6)
    states = np.array([[0.65, 0.0], [0.65, 0.0], [0.5, 0.0]])
    errors = np.array([[0.1, 0.0], [0.01, 5.0], [0.0, 0.0]])
    np.testing.assert_array_equal(search._maybe_terminal(states, errors), [True, False, True])


def test_with_a_value_model_cal_spi_switches_only_when_the_lower_bound_beats_the_baseline_value():
    low, high = planner(tolerance=1e9, value=ConstantValue(0.0)), planner(tolerance=1e9, value=ConstantValue(50.0))
    low_decisions = [low.search(np.zeros(2), np.random.default_rng(s)) for s in range(6)]
    high_decisions = [high.search(np.zeros(2), np.random.default_rng(s)) for s in range(6)]
    assert any(d.switched for d in low_decisions)
    assert not any(d.switched for d in high_decisions)  # V^b(s) = 50 is above anything the search can certify
    for decision in low_decisions + high_decisions:
        assert decision.baseline_value in (0.0, 50.0)  # the learned value at the real root, not a model value
        assert decision.switched == (decision.best_lower_bound > decision.baseline_value)
