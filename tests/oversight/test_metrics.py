"""Regret, calibration and bootstrap metrics against hand computation, and the result table."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gauntlet.stats import auroc, cluster_bootstrap_ci, expected_calibration_error
from gauntlet.controllers.oversight.metrics import (
    EvaluationConfig,
    comparison_lines,
    control_regret,
    cross_evaluate,
    cross_evaluate_by_strength,
    evaluate,
    evaluate_by_strength,
    identical_risk_different_action,
    markdown_table,
    normalised_regret,
    optimal_actions,
    prefix_table,
    reference_policies,
    regret_per_prefix,
    split_by_episode,
    split_into_folds,
    within_action_variance,
)

from .test_models import synthetic_rows

ACTIONS = ("continue", "quit", "expert")
# Two prefixes: continue is best on the first, the expert on the second.
UTILITIES = np.array([[1.0, 0.0, 0.5],
                      [0.2, 0.0, 0.9]])


def test_control_regret_is_the_mean_gap_to_the_best_action() -> None:
    assert regret_per_prefix(UTILITIES, ACTIONS, ["continue", "continue"]).tolist() == pytest.approx([0.0, 0.7])
    assert control_regret(UTILITIES, ACTIONS, ["continue", "continue"]) == pytest.approx(0.35)
    assert control_regret(UTILITIES, ACTIONS, ["quit", "expert"]) == pytest.approx(0.5)


def test_normalised_regret_divides_by_the_mean_spread_of_the_actions() -> None:
    # spreads: 1.0 - 0.0 and 0.9 - 0.0
    assert normalised_regret(UTILITIES, ACTIONS, ["continue", "continue"]) == pytest.approx(0.35 / 0.95)
    assert np.isnan(normalised_regret(np.zeros((2, 3)), ACTIONS, ["quit", "quit"]))


def test_the_oracle_has_no_regret_and_each_fixed_policy_its_own() -> None:
    policies = reference_policies(UTILITIES, ACTIONS)
    assert policies["oracle"] == optimal_actions(UTILITIES, ACTIONS) == ["continue", "expert"]
    regrets = {name: control_regret(UTILITIES, ACTIONS, chosen) for name, chosen in policies.items()}
    assert regrets == pytest.approx({"oracle": 0.0, "always_continue": 0.35, "always_quit": 0.95,
                                     "always_expert": 0.25})


def test_ece_by_hand() -> None:
    # Bin of 0.1: mean label 0.5 vs 0.1 on 2 of 4 -> 0.2; last bin (0.9 and 1.0): mean label 1 vs 0.95 -> 0.025.
    probabilities = np.array([0.1, 0.1, 0.9, 1.0])
    labels = np.array([0, 1, 1, 1])
    assert expected_calibration_error(probabilities, labels) == pytest.approx(0.2 + 0.025)
    assert expected_calibration_error(np.array([0.3, 0.7]), np.array([0.3, 0.7])) == pytest.approx(0.0)


def test_auroc_by_hand() -> None:
    # Positives 0.35 and 0.8 against negatives 0.1 and 0.4: 3 of 4 pairs ordered right.
    assert auroc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1])) == pytest.approx(0.75)
    assert np.isnan(auroc(np.array([0.1, 0.2]), np.array([1, 1])))


def test_identical_risk_different_action_by_hand() -> None:
    # Bins of width 0.05: [0.00, 0.05) holds continue, continue, expert -> 1 off the majority;
    # [0.50, 0.55) holds expert, quit, quit, expert, expert -> 2; [0.95, 1.0] holds quit only -> 0.
    risk = np.array([0.01, 0.02, 0.04, 0.50, 0.51, 0.52, 0.53, 0.54, 1.0, 0.97])
    best = ["continue", "continue", "expert", "expert", "quit", "quit", "expert", "expert", "quit", "quit"]
    assert identical_risk_different_action(risk, best, bins=20) == 3
    # One bin for everything: majority quit or expert (4 each; ties: the first in sorted order, expert) -> 6.
    assert identical_risk_different_action(risk, best, bins=1) == 6


def test_bootstrap_interval_contains_the_estimate() -> None:
    rng = np.random.default_rng(0)
    episodes = np.repeat(np.arange(30), 8)
    values = rng.normal(size=len(episodes)) + episodes % 3
    low, high = cluster_bootstrap_ci(values, episodes, resamples=500, seed=1)
    assert low < values.mean() < high


def test_bootstrap_resamples_episodes_not_rows() -> None:
    # One episode of 100 zeros and one of a single 1: resampling rows would keep the mean near 0.01,
    # resampling episodes draws {B, B} (mean 1) in a quarter of the resamples.
    values = np.r_[np.zeros(100), 1.0]
    episodes = np.r_[np.zeros(100, dtype=int), 1]
    low, high = cluster_bootstrap_ci(values, episodes, resamples=1000, seed=0)
    assert low == 0.0 and high == 1.0


def test_bootstrap_of_a_ratio_divides_episode_sums() -> None:
    values, denominators = np.array([1.0, 1.0, 2.0]), np.array([2.0, 2.0, 4.0])
    assert cluster_bootstrap_ci(values, np.array([0, 1, 2]), denominators=denominators, resamples=50) == (0.5, 0.5)


def test_split_by_episode_shares_no_episode_and_keeps_every_row() -> None:
    rows = synthetic_rows(20, 3)
    train, test = split_by_episode(rows, 0.25, seed=3)
    train_episodes = {row["episode"] for row in train}
    test_episodes = {row["episode"] for row in test}
    assert not train_episodes & test_episodes and len(test_episodes) == 5
    assert len(train) + len(test) == len(rows)
    assert split_by_episode(rows, 0.25, seed=3) == (train, test)
    assert split_by_episode(rows, 0.25, seed=4)[1] != test


def repeated_draw_rows() -> list[dict[str, Any]]:
    """Prefix (e0, t0) drawn three times, (e0, t1) once."""
    rows = synthetic_rows(1, 2, seed=0)
    first = rows[0]
    for draw, (u_continue, u_expert) in enumerate([(0.0, 0.5), (1.0, 0.5), (0.5, 0.5)]):
        row = {**first, "draw": draw, "branches": {**first["branches"],
                                                    "continue": {"success": True, "steps": 1, "utility": u_continue},
                                                    "expert": {"success": True, "steps": 1, "utility": u_expert}}}
        rows.append(row)
    return rows[1:]


def test_a_prefix_drawn_several_times_counts_once_with_its_mean_utility() -> None:
    table = prefix_table(repeated_draw_rows())
    assert len(table.rows) == 2 and table.draws.tolist() == [3, 1]
    assert table.utilities[0].tolist() == pytest.approx([0.5, 0.0, 0.5])
    assert table.rows[0]["draw"] == 0


def test_within_action_variance_uses_only_repeated_prefixes() -> None:
    result = within_action_variance(repeated_draw_rows())
    assert result["prefixes"] == 1
    assert result["actions"]["continue"]["within"] == pytest.approx(0.25)  # var(0, 1, 0.5) with ddof 1
    assert result["actions"]["expert"]["within"] == 0.0
    assert within_action_variance(synthetic_rows(2, 2)) == {"prefixes": 0, "actions": {}}


def test_evaluate_builds_the_result_table() -> None:
    rows = synthetic_rows(60, 6, seed=20, noise=0.1)
    train, test = split_by_episode(rows, 0.3, seed=0)
    config = {"n_boot": 200, "controller_kinds": ["rf"]}
    result = evaluate(train, test, config, seed=0)
    methods = result["methods"]
    assert set(methods) == {"oracle", "always_continue", "always_quit", "always_expert", "scalar_raw",
                            "scalar_platt", "scalar_platt_raw_threshold", "scalar_isotonic",
                            "scalar_isotonic_raw_threshold", "scalar_two_threshold", "action_conditioned_rf",
                            "action_conditioned_rf_lambda0"}
    assert methods["oracle"]["regret"] == 0.0
    for method in methods.values():
        low, high = method["regret_ci"]
        assert low <= method["regret"] <= high
    learned = methods["action_conditioned_rf"]["regret"]
    assert learned < min(methods[name]["regret"] for name in methods if name.startswith(("always", "scalar")))
    # A strictly increasing recalibration with the threshold re-tuned on the same rows routes the same.
    assert result["calibration"]["platt"]["slope"] > 0
    assert methods["scalar_platt"]["regret"] == methods["scalar_raw"]["regret"]
    assert set(result["calibration"]) == {"raw", "platt", "isotonic"}
    # Risk cannot tell the expert's prefixes from quit's: both have a failing continue.
    assert result["identical_risk_different_action"]["raw"] > 0
    assert "| action_conditioned_rf |" in markdown_table(result)


def test_evaluate_sizes_every_forest_with_trees(monkeypatch) -> None:
    from gauntlet.controllers.oversight import metrics, models

    built: list[tuple[str, int]] = []

    class CountingRisk(models.RiskScore):
        def fit(self, X, y, feature_names=None):
            fitted = super().fit(X, y, feature_names)
            built.append(("risk", len(fitted._classifier.estimators_)))
            return fitted

    class CountingController(models.ActionConditioned):
        def fit(self, X, y, feature_names=None):
            built.append((self.kind, self.n_estimators))
            return super().fit(X, y, feature_names)

    monkeypatch.setattr(metrics, "RiskScore", CountingRisk)
    monkeypatch.setattr(metrics, "ActionConditioned", CountingController)
    rows = synthetic_rows(30, 6, seed=21, noise=0.1)
    train, test = split_by_episode(rows, 0.3, seed=0)
    result = evaluate(train, test, {"n_boot": 50, "trees": 7}, seed=0)
    assert result["config"]["trees"] == 7
    # the risk forest, and per controller kind: the tuning fit, the untuned fit and the final fit
    assert built == [("risk", 7), ("rf", 7), ("rf", 7), ("rf", 7), ("gbr", 100), ("gbr", 100), ("gbr", 100)]
    built.clear()
    evaluate(train, test, {"n_boot": 50, "controller_kinds": ["rf"]}, seed=0)
    assert built == [("risk", 200), ("rf", 200), ("rf", 200), ("rf", 200)]  # the paper's forests by default


def test_evaluate_refuses_rows_of_one_episode_on_both_sides() -> None:
    rows = synthetic_rows(4, 2)
    with pytest.raises(ValueError, match="both the training and the test rows"):
        evaluate(rows, rows[:1], seed=0)
    with pytest.raises(ValueError, match="unknown evaluation settings"):
        evaluate(rows[:4], rows[4:], {"bins": 3}, seed=0)
    # One training episode cannot both fit the risk score and tune its threshold: said so, not a fit's shape error.
    one = [row for row in rows if row["episode"] == rows[0]["episode"]]
    with pytest.raises(ValueError, match="training rows hold 1 episode; .* collect more episodes"):
        evaluate(one, [row for row in rows if row["episode"] != rows[0]["episode"]], seed=0)


def test_evaluate_by_strength_evaluates_each_expert_strength_apart() -> None:
    weak = synthetic_rows(20, 4, seed=30, strength=0.2)
    strong = synthetic_rows(20, 4, seed=31, strength=1.0)
    for row in strong:  # episodes of the two strengths are distinct episodes
        row["episode"] += 100
    train, test = split_by_episode([*weak, *strong], 0.3, seed=0)
    results = evaluate_by_strength(train, test, EvaluationConfig(n_boot=50, controller_kinds=("rf",)), seed=0)
    assert list(results) == ["0.2", "1.0"]
    # A weak expert is worth less, so always handing over costs more against the oracle.
    assert results["0.2"]["methods"]["always_expert"]["regret"] > results["1.0"]["methods"]["always_expert"]["regret"]


def test_folds_partition_the_episodes_evenly() -> None:
    rows = synthetic_rows(11, 3, seed=4)
    groups = split_into_folds(rows, 4, seed=1)
    episodes = [{row["episode"] for row in group} for group in groups]
    assert sorted(len(group) for group in episodes) == [2, 3, 3, 3]
    assert set().union(*episodes) == set(range(11)) and sum(map(len, episodes)) == 11  # each episode once
    assert sorted(map(len, groups)) == [6, 9, 9, 9]  # every row of an episode goes with it
    assert split_into_folds(rows, 4, seed=1) == groups and split_into_folds(rows, 4, seed=2) != groups
    with pytest.raises(ValueError, match="2 or more folds"):
        split_into_folds(rows, 1, seed=0)
    with pytest.raises(ValueError, match="12 folds need 12 or more episodes; the rows hold 11"):
        split_into_folds(rows, 12, seed=0)


def test_cross_evaluate_tests_every_episode_once_with_overseers_that_never_saw_it() -> None:
    rows = synthetic_rows(24, 5, seed=22, noise=0.1)
    config = EvaluationConfig(n_boot=100, controller_kinds=("rf",), trees=25)
    result = cross_evaluate(rows, 3, config, seed=0)
    assert result["n_test_episodes"] == 24 and result["n_test_prefixes"] == 24 * 5 == result["n_test_rows"]
    assert [fold["test_episodes"] for fold in result["folds_detail"]] == [8, 8, 8]
    # The pooled table is each fold's evaluate (trained on the other folds) weighted by its prefixes.
    by_fold = []
    for test in split_into_folds(rows, 3, seed=0):
        held_out = {row["episode"] for row in test}
        by_fold.append(evaluate([row for row in rows if row["episode"] not in held_out], test, config, seed=0))
    for name, method in result["methods"].items():
        pooled = sum(part["methods"][name]["regret"] * part["n_test_prefixes"] for part in by_fold) / 120
        assert method["regret"] == pytest.approx(pooled), name
        low, high = method["regret_ci"]
        assert low <= method["regret"] <= high
    assert [fold["thresholds"] for fold in result["folds_detail"]] == [part["thresholds"] for part in by_fold]
    methods = result["methods"]
    learned = methods["action_conditioned_rf"]["regret"]
    assert learned < min(methods[name]["regret"] for name in methods if name.startswith(("always", "scalar")))
    assert set(result["calibration"]) == {"raw", "platt", "isotonic"}
    assert "| action_conditioned_rf |" in markdown_table(result)


def test_the_controllers_are_compared_with_scalar_routing_and_fixed_policies_prefix_by_prefix() -> None:
    rows = synthetic_rows(24, 5, seed=22, noise=0.1)
    result = cross_evaluate(rows, 3, EvaluationConfig(n_boot=200, controller_kinds=("rf",), trees=25), seed=0)
    methods, comparisons = result["methods"], result["comparisons"]
    assert set(comparisons) == {f"action_conditioned_{kind} vs {role}" for kind in ("rf", "rf_lambda0")
                                for role in ("scalar_raw", "best_scalar", "best_fixed")}
    best_scalar = min((name for name in methods if name.startswith("scalar_")), key=lambda n: methods[n]["regret"])
    best_fixed = min((name for name in methods if name.startswith("always_")), key=lambda n: methods[n]["regret"])
    for role, rival in (("scalar_raw", "scalar_raw"), ("best_scalar", best_scalar), ("best_fixed", best_fixed)):
        part = comparisons[f"action_conditioned_rf vs {role}"]
        assert part["rival"] == rival
        # The mean of paired differences is the difference of the means.
        assert part["regret_difference"] == pytest.approx(methods["action_conditioned_rf"]["regret"]
                                                          - methods[rival]["regret"])
        low, high = part["ci"]
        assert low <= part["regret_difference"] <= high
    # On rows whose best action the features decide, the learned controller wins, and surely.
    assert comparisons["action_conditioned_rf vs best_scalar"]["ci"][1] < 0
    assert "action_conditioned_rf vs best_fixed (always_" in comparison_lines(result)


def test_cross_evaluate_refuses_folds_that_leave_too_little_to_train_on() -> None:
    rows = synthetic_rows(2, 3)
    with pytest.raises(ValueError, match="a fold trains on 1 episode; .* use fewer folds or collect more episodes"):
        cross_evaluate(rows, 2, seed=0)
    with pytest.raises(ValueError, match="3 folds need 3 or more episodes"):
        cross_evaluate(rows, 3, seed=0)
    with pytest.raises(ValueError, match="needs rows"):
        cross_evaluate([], 2, seed=0)
    weak = synthetic_rows(6, 3, seed=30, strength=0.2)
    strong = synthetic_rows(6, 3, seed=31, strength=1.0)
    for row in strong:
        row["episode"] += 100
    results = cross_evaluate_by_strength([*weak, *strong], 3, {"n_boot": 20, "controller_kinds": ["rf"], "trees": 5},
                                         seed=0)
    assert list(results) == ["0.2", "1.0"] and all(part["n_test_episodes"] == 6 for part in results.values())


def test_a_reference_action_is_reported_but_never_chosen() -> None:
    rows = synthetic_rows(24, 5, seed=23, noise=0.1)
    config = EvaluationConfig(n_boot=50, controller_kinds=("rf",), trees=15, intervention="quit", reference=("expert",))
    train, test = split_by_episode(rows, 0.3, seed=0)
    for result in (evaluate(train, test, config, seed=0), cross_evaluate(rows, 3, config, seed=0)):
        methods = result["methods"]
        assert result["actions"] == ["continue", "quit"] and "always_expert" not in methods
        assert all("expert" not in method["action_share"] for name, method in methods.items()
                   if not name.startswith("reference_"))
        # Always taking the reference, against the oracle of the two actions an overseer has, by hand.
        scored = test if "folds" not in result else rows
        table = prefix_table(scored)
        by_hand = np.mean([max(u[0], u[1]) - u[2] for u in table.utilities])
        assert methods["reference_expert"]["regret"] == pytest.approx(by_hand)
        assert methods["reference_expert"]["regret"] < 0  # the privileged expert beats both where it is best
        assert methods["reference_expert"]["action_share"] == {"expert": 1.0}
        assert methods["oracle"]["mean_utility"] == pytest.approx(np.mean(table.utilities[:, :2].max(axis=1)))
    with pytest.raises(ValueError, match="intervention 'expert' is a reference"):
        evaluate(train, test, {"reference": ["expert"]}, seed=0)
    with pytest.raises(ValueError, match=r"reference actions \['stronger'\] are not among"):
        cross_evaluate(rows, 3, {"reference": ["stronger"]}, seed=0)


def test_the_dispersion_penalty_is_tuned_on_the_calibration_split_and_recorded() -> None:
    from gauntlet.controllers.oversight.metrics import tune_dispersion

    rows = synthetic_rows(40, seed=3, noise=0.3)
    train, test = split_by_episode(rows, 0.3, 0)
    fit, calibration = split_by_episode(train, 0.3, 0)
    grid = (0.0, 0.5, 4.0)
    chosen = tune_dispersion("rf", fit, calibration, grid, seed=0)
    assert chosen in grid and chosen == tune_dispersion("rf", fit, calibration, grid, seed=0)
    tuned = evaluate(train, test, {"controller_kinds": ["rf"], "dispersion_grid": list(grid), "n_boot": 50}, seed=0)
    assert tuned["dispersion"]["rf"] in grid and "action_conditioned_rf_lambda0" in tuned["methods"]
    fixed = evaluate(train, test, {"controller_kinds": ["rf"], "dispersion": 0.5, "n_boot": 50}, seed=0)
    assert fixed["dispersion"] == {"rf": 0.5} and "action_conditioned_rf_lambda0" not in fixed["methods"]
    with pytest.raises(ValueError, match="empty"):
        tune_dispersion("rf", fit, calibration, (), seed=0)


def test_rows_with_a_stated_confidence_get_its_scalar_routers_and_rows_without_do_not() -> None:
    rows = synthetic_rows(60, 6, seed=21, noise=0.05)
    rng = np.random.default_rng(3)
    for row in rows:  # an agent that knows when it will fail, with some noise: confidence ~ P(continue succeeds)
        ok = row["branches"]["continue"]["success"]
        row["features"]["verbal_confidence"] = float(np.clip((0.8 if ok else 0.2) + rng.normal(0, 0.1), 0, 1))
    train, test = split_by_episode(rows, 0.3, seed=0)
    result = evaluate(train, test, {"n_boot": 50, "controller_kinds": ["rf"], "trees": 25}, seed=0)
    methods, calibration = result["methods"], result["calibration"]
    assert {"scalar_confidence", "scalar_confidence_platt"} <= set(methods)
    assert {"confidence", "confidence_platt"} <= set(calibration) and set(result["thresholds"]) >= {"confidence"}
    # The stated risk is 1 - confidence: it ranks the failing prefixes first almost always.
    assert calibration["confidence"]["auroc"] > 0.95 and calibration["confidence_platt"]["slope"] > 0
    assert methods["scalar_confidence"]["regret"] < methods["always_continue"]["regret"]
    plain = evaluate(*split_by_episode(synthetic_rows(20, 4, seed=22), 0.3, seed=0),
                     {"n_boot": 50, "controller_kinds": ["rf"], "trees": 25}, seed=0)
    assert not any("confidence" in name or "latent" in name for name in [*plain["methods"], *plain["calibration"]])


def test_rows_with_a_latent_risk_route_on_it_as_a_risk_not_as_a_confidence() -> None:
    rows = synthetic_rows(60, 6, seed=21, noise=0.05)
    rng = np.random.default_rng(4)
    for row in rows:  # a monitor that scores failing prefixes high, with some noise
        ok = row["branches"]["continue"]["success"]
        row["features"]["latent_risk"] = float(np.clip((0.2 if ok else 0.8) + rng.normal(0, 0.1), 0, 1))
    train, test = split_by_episode(rows, 0.3, seed=0)
    result = evaluate(train, test, {"n_boot": 50, "controller_kinds": ["rf"], "trees": 25}, seed=0)
    methods, calibration = result["methods"], result["calibration"]
    assert {"scalar_latent", "scalar_latent_platt"} <= set(methods) and "scalar_confidence" not in methods
    # Read as a risk (high = failing), it ranks the failing prefixes first; read as a confidence it would invert.
    assert calibration["latent"]["auroc"] > 0.95 and calibration["latent_platt"]["slope"] > 0
    assert methods["scalar_latent"]["regret"] < methods["always_continue"]["regret"]
