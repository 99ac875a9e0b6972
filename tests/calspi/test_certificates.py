"""The tighter certificates (``agents/calspi/certificates.py``): coverage on cases with known truth,
and their use in the planner's lower bound; the gap-decomposition command at smoke size."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gauntlet.agents.calspi.calibration import wilks_order_statistic
from gauntlet.agents.calspi.certificates import LocalThreshold, ValueAwareBound, ValueEnsemble, wilks_threshold
from gauntlet.agents.calspi.ensemble import Normaliser, Prediction
from gauntlet.agents.calspi.value import ValueFitConfig
from gauntlet.agents.calspi.calibration import Certificate
from gauntlet.agents.calspi.planner import GatedSearch, SearchConfig
from tests.calspi.test_value_and_multistep import ConstantValue, DriftModel, _chain_dataset, planner
from tests.shared import load_experiment


def _heteroscedastic(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """score = |N(0, f^2)| with feature f uniform on [0.1, 3]: the spread grows with the feature."""
    features = rng.uniform(0.1, 3.0, n)
    return features, np.abs(features * rng.standard_normal(n))


def test_wilks_threshold_is_the_order_statistic_and_refuses_bad_scores():
    scores = np.random.default_rng(0).random(200)
    assert wilks_threshold(scores, 0.9, 0.9) == np.sort(scores)[wilks_order_statistic(200, 0.9, 0.9) - 1]
    with pytest.raises(ValueError, match="finite"):
        wilks_threshold(np.array([1.0, np.nan]), 0.9, 0.9)


def test_local_calibration_covers_every_bin_where_the_global_one_does_not():
    p = gamma = 0.9
    local_held, global_held = [], []
    for repeat in range(20):
        rng = np.random.default_rng(repeat)
        features, scores = _heteroscedastic(2000, rng)
        local = LocalThreshold.fit(features, scores, p=p, gamma=gamma, bins=5)
        assert len(local.thresholds) == 5 and local.counts.sum() == 2000
        fresh_features, fresh_scores = _heteroscedastic(10000, rng)
        top = fresh_features > local.edges[-1]  # the highest-spread bin
        local_held.append(np.mean(fresh_scores[top] <= local(fresh_features[top])) >= p)
        global_held.append(np.mean(fresh_scores[top] <= local.global_threshold) >= p)
    # Per-bin certificate: coverage >= p in the top bin in >= gamma of the draws (up to sampling slack);
    # the global threshold, valid only on average, under-covers that bin every time.
    assert np.mean(local_held) >= 0.8
    assert np.mean(global_held) == 0.0
    # Thresholds grow with the spread.
    assert np.all(np.diff(local.thresholds) > 0)


def test_local_calibration_falls_back_to_one_bin_with_little_data():
    features, scores = _heteroscedastic(300, np.random.default_rng(0))
    local = LocalThreshold.fit(features, scores, p=0.9, gamma=0.9, bins=10)
    assert len(local.thresholds) == 1 and local.thresholds[0] == local.global_threshold


def test_value_ensemble_fits_the_chain_and_its_state_dependent_bound_covers_fresh_returns():
    data, fresh = _chain_dataset(episodes=40, reward_noise=0.5, seed=0), _chain_dataset(episodes=40, reward_noise=0.5,
                                                                                         seed=1)
    order = np.random.default_rng(0).permutation(len(data))
    train, held_out = order[:500], order[500:]
    ensemble = ValueEnsemble(1, discount=0.9, members=2, config=ValueFitConfig(hidden=16, iterations=1, steps=300),
                             bins=3).fit(data, train, held_out, p=0.9, gamma=0.9)
    truth = (1 - 0.9 ** data.observations[:, 0]) / (1 - 0.9)
    assert np.abs(ensemble(data.observations) - truth).max() < 1.0
    assert np.all(ensemble.spread(data.observations) >= 0)
    rank = wilks_order_statistic(len(held_out), 0.9, 0.9)
    assert ensemble.error_bound == pytest.approx(np.sort(ensemble.held_out_errors)[rank - 1])
    # Fresh returns (new reward noise) against the certified bounds: global, normalised, binned.
    rewards = fresh.rewards  # 20-step episodes: the return from step i sums to the episode's end
    returns = np.array([sum(0.9**k * r for k, r in enumerate(rewards[i:i - (i % 20) + 20]))
                        for i in range(len(rewards))])
    errors = np.abs(ensemble(fresh.observations) - returns)
    assert np.mean(errors <= ensemble.error_bound) >= 0.85
    assert np.mean(errors <= ensemble.local_error_bound(fresh.observations)) >= 0.85
    ensemble.local = "binned"
    assert np.mean(errors <= ensemble.local_error_bound(fresh.observations)) >= 0.85
    with pytest.raises(ValueError, match="at least 2"):
        ValueEnsemble(1, discount=0.9, members=1)


class NoisyModel:
    """Predicts s' = s + a exactly up to additive noise of scale |s_0| in the first coordinate; the
    'disagreement' reported is that scale, so the true one-step error is known."""

    target_norm = Normaliser(np.zeros(3), np.ones(3))

    def predict(self, states: np.ndarray, actions: np.ndarray) -> Prediction:
        scale = np.abs(states[:, :1]) + 0.01
        next_states = states + actions
        rewards = np.zeros(len(states))
        return Prediction(next_states=next_states, rewards=rewards,
                          normalised_mean=np.concatenate([next_states - states, rewards[:, None]], axis=1),
                          disagreement=np.concatenate([np.repeat(scale, 2, axis=1), np.zeros((len(states), 1))], 1))


class LinearValue:
    def __call__(self, states: np.ndarray) -> np.ndarray:
        return 2.0 * np.atleast_2d(states)[:, 0]


def _transitions(n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    states = rng.uniform(-2, 2, (n, 2))
    actions = rng.uniform(-1, 1, (n, 2))
    next_states = states + actions
    next_states[:, 0] += (np.abs(states[:, 0]) + 0.01) * rng.standard_normal(n)
    return states, actions, next_states


@pytest.mark.parametrize("local", [False, True])
def test_value_aware_bound_covers_the_true_one_step_value_error(local):
    rng = np.random.default_rng(0)
    bound = ValueAwareBound(local=local, bins=4).fit(NoisyModel(), LinearValue(), *_transitions(3000, rng),
                                                     p=0.9, gamma=0.9)
    states, actions, next_states = _transitions(20000, rng)
    truth = np.abs(LinearValue()(next_states) - LinearValue()(NoisyModel().predict(states, actions).next_states))
    limit = bound(NoisyModel().predict(states, actions).state_disagreement)
    assert np.mean(truth <= limit) >= 0.9
    if local:  # per bin too, including the noisiest states
        noisy = np.abs(states[:, 0]) > 1.6
        assert np.mean(truth[noisy] <= limit[noisy]) >= 0.9
        assert np.mean(truth[noisy] <= bound.global_threshold) < 0.9  # where the global one falls short


def test_value_aware_state_term_charges_the_summed_one_step_value_bounds():
    class Bound:
        def __call__(self, disagreement):
            return np.full(len(disagreement), 0.25)

    certificate = Certificate(p=0.95, gamma=0.95, n=100, rank=100, q_hat=1.0, tolerance=1e9)
    search = GatedSearch(DriftModel(), certificate, lambda s: np.zeros((len(s), 2)), lambda s: np.zeros(len(s), bool),
                         -np.ones(2), np.ones(2), reward_floor=-1.0, reward_scale=1.0, value=ConstantValue(5.0),
                         value_aware=Bound(), config=SearchConfig(simulations=32, max_depth=1, rollout_horizon=2,
                                                                  discount=1.0, state_value_term="value-aware"))
    search.search(np.zeros(2), np.random.default_rng(0))
    visited = [edge for edge in search.last_root.edges if edge.visits]
    assert visited
    for edge in visited:
        assert edge.child.value_error == pytest.approx(0.25)
        # One tree step + two rollout steps: three model steps of 0.25 each charged at the leaf (the
        # DriftModel's reward bounds are q_hat * eps, ~1e-6 per step).
        assert edge.lower_bound == pytest.approx(edge.value - 3 * 0.25, abs=1e-4)
        assert edge.upper_bound == pytest.approx(edge.value + 3 * 0.25, abs=1e-4)
    gradient = planner(tolerance=1e9, value=ConstantValue(5.0), max_depth=1, rollout_horizon=2, discount=1.0)
    gradient.search(np.zeros(2), np.random.default_rng(0))
    for edge in gradient.last_root.edges:  # the default term (|grad V| . E = 0 for a constant V) charges nothing
        if edge.visits:
            assert edge.lower_bound == pytest.approx(edge.value, abs=1e-4)
    with pytest.raises(ValueError, match="ValueAwareBound"):
        planner(tolerance=1e9, value=ConstantValue(5.0), state_value_term="value-aware")
    with pytest.raises(ValueError, match="local_error_bound"):
        planner(tolerance=1e9, value=ConstantValue(5.0), value_bound="local")
    with pytest.raises(ValueError, match="state_value_term"):
        planner(tolerance=1e9, state_value_term="bogus")


class LocalValue(ConstantValue):
    def local_error_bound(self, states: np.ndarray) -> np.ndarray:
        return np.full(len(np.atleast_2d(states)), 1.5)


def test_local_value_bound_replaces_the_global_delta_v_in_the_leaf():
    value = LocalValue(5.0)
    value.error_bound = 4.0
    states, errors = np.zeros((2, 2)), np.zeros((2, 2))
    _, lower_global, _ = planner(1e9, value=value)._leaf_bounds(states, errors)
    _, lower_local, _ = planner(1e9, value=value, value_bound="local")._leaf_bounds(states, errors)
    np.testing.assert_allclose(lower_global, 1.0)
    np.testing.assert_allclose(lower_local, 3.5)


def test_gap_decomposition_smoke_prints_every_term_and_rule(tmp_path, capsys):
    experiment = load_experiment("calspi_gap")
    result = experiment.main(["--smoke", "--out", str(tmp_path)])
    stored = json.loads((tmp_path / "gap-decomposition.json").read_text())
    (cell,) = stored["cells"]
    certificates = cell["certificates"]
    assert cell["states"]
    for state in cell["states"]:
        if np.isfinite(state["advantage"]):
            terms = state["terms"]
            assert terms["reward_bound"] > 0 and terms["state_gradient"] >= 0
            assert terms["delta_V_global"] == pytest.approx(0.99 * certificates["delta_V"])
            assert terms["delta_TD"] == pytest.approx(certificates["delta_TD"])
        assert set(state["gaps"]) == set(experiment.RULES)
    (summary,) = result["summary"]
    assert all(0.0 <= rate <= 1.0 for rate in summary["switch_rate"].values())
    printed = capsys.readouterr().out
    assert "dV ens" in printed and "certified+VA-local" in printed
    # --markdown re-prints the stored file without running anything.
    again = experiment.main(["--markdown", str(tmp_path / "gap-decomposition.json")])
    assert again["summary"] == stored["summary"]


def test_experiment_runs_the_tighter_rule_from_distinct_start_states(tmp_path):
    experiment = load_experiment("calspi")
    tight = {"search": {"value_bound": "local", "state_value_term": "value-aware", "max_depth": 1,
                        "rollout_horizon": 1}, "value_members": 2, "value_aware": "local"}
    experiment.main(["--smoke", "--out", str(tmp_path), "--methods", "baseline", "calspi", "calspi-tight",
                     "--start-stride", "1000", "--search-coverage-steps", "0", "--tight", json.dumps(tight)])
    result = json.loads((tmp_path / "results.json").read_text())
    assert [row["start_seed"] for row in result["rows"]] == [10_000, 11_000]
    for row in result["rows"]:
        assert len(row["episode_returns"]["calspi-tight"]) == 1
        assert 0.0 <= row["switch_fraction"]["calspi-tight"] <= 1.0
    assert {e["method"] for e in result["table"]} == {"baseline", "calspi", "calspi-tight"}
    for entry in result["table"]:  # worse-than-baseline counted per episode, paired by start state
        assert entry["episodes_worse"][1] == 2 and 0 <= entry["episodes_worse"][0] <= 2
    assert next(e for e in result["table"] if e["method"] == "baseline")["episodes_worse"][0] == 0
