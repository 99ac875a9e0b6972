"""Cal-SPI's gate and root switch (with a model whose answers are known), and the agent end to end."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import gauntlet
from gauntlet.agents.calspi.agent import CalSPIAgent
from gauntlet.agents.calspi.calibration import Certificate
from gauntlet.agents.calspi.ensemble import Normaliser, Prediction
from gauntlet.agents.calspi.planner import GatedSearch, SearchConfig

SMALL_MODEL = {"members": 3, "elites": 2, "hidden": 32, "layers": 2, "epochs": 3, "value_steps": 100}
SMALL_SEARCH = {"simulations": 16, "wave_size": 8, "max_depth": 2, "rollout_horizon": 3}


class KnownModel:
    """Dynamics with known answers: the state stays put; reward = sum(a) (so larger actions than the
    baseline's look better); the elites disagree in proportion to how far a is from the baseline's 0."""

    target_norm = Normaliser(np.zeros(3), np.ones(3))

    def predict(self, states: np.ndarray, actions: np.ndarray) -> Prediction:
        spread = 10.0 * np.abs(actions).max(axis=1, keepdims=True)
        disagreement = np.concatenate([np.repeat(spread, 2, axis=1), np.zeros((len(states), 1))], axis=1)
        rewards = actions.sum(axis=1)
        return Prediction(next_states=states.copy(), rewards=rewards,
                          normalised_mean=np.concatenate([np.zeros_like(states), rewards[:, None]], axis=1),
                          disagreement=disagreement)


def search(tolerance: float, **config) -> GatedSearch:
    certificate = Certificate(p=0.95, gamma=0.95, n=100, rank=100, q_hat=1.0, tolerance=tolerance)
    return GatedSearch(KnownModel(), certificate, lambda s: np.zeros((len(s), 2)), lambda s: np.zeros(len(s), bool),
                       -np.ones(2), np.ones(2), reward_floor=-2.0, reward_scale=1.0,
                       config=SearchConfig(**{**SMALL_SEARCH, "simulations": 64, **config}))


def test_without_a_certificate_the_switch_never_leaves_the_baseline():
    # Tolerance below every perturbed action's bound: only the baseline's own edge is trusted.
    planner = search(tolerance=1e-4)
    rng = np.random.default_rng(0)
    for _ in range(20):
        decision = planner.search(np.zeros(2), rng)
        assert not decision.switched
        np.testing.assert_array_equal(decision.action, np.zeros(2))
        assert decision.trusted_root_actions == 1 and decision.untrusted_root_actions >= 1


def test_the_same_search_without_the_gate_does_switch_to_the_untrusted_actions():
    planner = search(tolerance=1e-4, gate=False, switching="greedy")
    decisions = [planner.search(np.zeros(2), np.random.default_rng(seed)) for seed in range(5)]
    assert all(d.switched and d.action.sum() > 0 for d in decisions)


def test_with_a_certificate_cal_spi_switches_only_when_the_lower_bound_beats_the_baseline():
    planner = search(tolerance=1e9)
    decisions = [planner.search(np.zeros(2), np.random.default_rng(seed)) for seed in range(10)]
    assert any(d.switched for d in decisions)
    for decision in decisions:
        assert decision.switched == (decision.best_lower_bound > decision.baseline_value)
        if decision.switched:
            assert decision.action.sum() > 0  # the certified improvement is real in this model


def test_a_margin_larger_than_any_gain_keeps_the_baseline():
    planner = search(tolerance=1e9, margin=1e6)
    assert not any(planner.search(np.zeros(2), np.random.default_rng(s)).switched for s in range(5))


def test_progressive_widening_bounds_the_root_children():
    planner = search(tolerance=1e9, simulations=64, widening_k=1.0, widening_alpha=0.5)
    decision = planner.search(np.zeros(2), np.random.default_rng(0))
    assert decision.trusted_root_actions + decision.untrusted_root_actions <= int(np.ceil(64 ** 0.5)) + 1


def test_search_batches_the_ensemble_calls_of_each_wave():
    planner = search(tolerance=1e9, simulations=32, wave_size=8, rollout_horizon=3)
    planner.search(np.zeros(2), np.random.default_rng(0))
    # Per wave: one call for the expansions and at most one per rollout step.
    assert planner.model_calls <= 4 * (1 + 3)


@pytest.fixture(scope="module")
def pendulum_agent():
    return CalSPIAgent("InvertedPendulum", 2000, model=SMALL_MODEL, search=SMALL_SEARCH)


def test_agent_logs_every_decision_with_its_certificate(pendulum_agent):
    env = gym.make("gauntlet/CalSPI-InvertedPendulum-v0", max_episode_steps=40)
    episode = gauntlet.rollout(env, pendulum_agent, seed=1)
    assert episode.steps
    for step in episode.steps:
        (event,) = step.events
        assert event.source == "calspi" and event.kind == "decision"
        assert event.data["certificate"]["p"] == 0.95 and event.data["certificate"]["gamma"] == 0.95
        if event.data["switched"]:
            assert event.data["best_lower_bound"] > event.data["baseline_value"]
        else:
            np.testing.assert_allclose(step.action, event.data["baseline_action"], rtol=1e-6)


def test_agent_is_reproducible_for_a_seed(pendulum_agent):
    env = gym.make("gauntlet/CalSPI-InvertedPendulum-v0", max_episode_steps=15)
    first = gauntlet.rollout(env, pendulum_agent, seed=2)
    second = gauntlet.rollout(env, pendulum_agent, seed=2)
    assert [s.action for s in first.steps] == [s.action for s in second.steps]


def test_too_little_data_for_the_requested_certificate_says_how_much_is_needed():
    with pytest.raises(ValueError, match=r"needs at least 459 \(a dataset of at least 2295 transitions\)"):
        CalSPIAgent("InvertedPendulum", 2000, p=0.99, gamma=0.99, model=SMALL_MODEL)


def test_p_outside_the_unit_interval_is_refused():
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        CalSPIAgent("InvertedPendulum", 2000, p=1.0, model=SMALL_MODEL)


def test_registered_agents_build_by_name():
    agent = gauntlet.make_agent("calspi-bc", domain="InvertedPendulum", dataset_size=500, epochs=1)
    env = gym.make("gauntlet/CalSPI-InvertedPendulum-v0", max_episode_steps=5)
    assert gauntlet.rollout(env, agent, seed=0).steps
