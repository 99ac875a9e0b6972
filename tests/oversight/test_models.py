"""The oversight learners on synthetic rows whose best action is a known function of the features."""

from __future__ import annotations

from itertools import combinations_with_replacement
from typing import Any

import numpy as np
import pytest

from gauntlet.stats import auroc, expected_calibration_error
from gauntlet.controllers.oversight.models import (
    MODEL_FILE_VERSION,
    ActionConditioned,
    Calibrated,
    RiskScore,
    ScalarRouter,
    TwoThresholdRouter,
    actions_in,
    design_matrix,
    failure_data,
    load_model,
    save_model,
    tune_threshold,
    tune_two_thresholds,
    utility_data,
)
from gauntlet.controllers.oversight.utility import ACTIONS, UtilityConfig


def known_best_action(x0: float, x1: float) -> str:
    """The synthetic rule: a good prefix (x0 < 0.4) continues; a bad one needs the expert unless it is
    also late (x1 >= 0.6), where even the expert fails and quitting is best."""
    if x0 < 0.4:
        return "continue"
    return "expert" if x1 < 0.6 else "quit"


def synthetic_rows(n_episodes: int, prefixes: int = 10, *, seed: int = 0, noise: float = 0.02,
                   strength: float = 1.0) -> list[dict[str, Any]]:
    """Rows in the protocol's format whose utilities follow ``known_best_action`` (plus small noise).

    Features: x0, x1 (decisive) and x2 (irrelevant). Utilities: continue 0.9 if x0 < 0.4 else -0.1;
    expert 0.8 * strength if x1 < 0.6 else -0.15 (when it is not best it still loses to continue on
    good prefixes); quit 0.
    """
    rng = np.random.default_rng(seed)
    config = UtilityConfig()
    rows = []
    for episode in range(n_episodes):
        for t in range(prefixes):
            x0, x1, x2 = rng.random(3)
            continue_ok = x0 < 0.4
            expert_ok = x1 < 0.6
            u_continue = (0.9 if continue_ok else -0.1) + rng.normal(0, noise)
            u_expert = (0.8 * strength if expert_ok else -0.15) + rng.normal(0, noise)
            rows.append({
                "benchmark": "synthetic", "episode": episode, "seed": episode, "t": t, "draw": 0,
                "features": {"x0": float(x0), "x1": float(x1), "x2": float(x2)},
                "branches": {
                    "continue": {"success": bool(continue_ok), "steps": 10, "utility": float(u_continue)},
                    "quit": {"success": False, "steps": 0, "utility": config.u_quit},
                    "expert": {"success": bool(expert_ok), "steps": 10, "utility": float(u_expert)},
                },
                "prefix_match": True, "base_success": bool(continue_ok), "base_length": prefixes,
                "expert_strength": strength, "benchmark_meta": {},
            })
    return rows


def test_design_matrix_columns_are_the_sorted_union_and_missing_features_are_zero() -> None:
    rows = [{"features": {"b": 2.0, "a": 1.0}}, {"features": {"c": 3.0}}]
    X, names = design_matrix(rows)
    assert names == ["a", "b", "c"]
    assert X.tolist() == [[1.0, 2.0, 0.0], [0.0, 0.0, 3.0]]
    assert design_matrix(list(reversed(rows)))[1] == names


def test_design_matrix_with_a_models_names_drops_features_the_model_never_saw() -> None:
    X, names = design_matrix([{"features": {"a": 1.0, "new": 5.0}}], ["b", "a"])
    assert names == ["b", "a"]
    assert X.tolist() == [[0.0, 1.0]]


def test_actions_are_those_every_row_has_in_the_canonical_order() -> None:
    rows = synthetic_rows(2, 2)
    rows[0]["branches"]["stronger"] = {"success": True, "steps": 3, "utility": 0.9}
    assert actions_in(rows) == ("continue", "quit", "expert")


@pytest.mark.parametrize("kind", ["rf", "gbr"])
def test_action_conditioned_recovers_the_known_best_action(kind: str) -> None:
    model = ActionConditioned(kind, seed=1).fit(*utility_data(synthetic_rows(60, seed=1)))
    test = synthetic_rows(20, seed=2)
    X, _ = design_matrix(test, model.feature_names)
    chosen = model.choose(X)
    truth = [known_best_action(row["features"]["x0"], row["features"]["x1"]) for row in test]
    agreement = np.mean([a == b for a, b in zip(chosen, truth)])
    assert agreement >= 0.95, agreement


def test_quit_is_the_constant_the_rows_record_and_has_no_dispersion() -> None:
    rows = synthetic_rows(10, seed=3)
    for row in rows:
        row["branches"]["quit"]["utility"] = -0.2
    model = ActionConditioned("rf", n_estimators=20, seed=0).fit(*utility_data(rows))
    mean, std = model.predict(design_matrix(rows[:5], model.feature_names)[0], return_std=True)
    quit_column = model.actions.index("quit")
    assert np.all(mean[:, quit_column] == -0.2) and np.all(std[:, quit_column] == 0)
    rows[0]["branches"]["quit"]["utility"] = 0.0
    with pytest.raises(ValueError, match="quit utilities differ"):
        ActionConditioned("rf", n_estimators=5).fit(*utility_data(rows))


def test_choose_allowed_restricts_the_argmax_to_those_actions() -> None:
    model = ActionConditioned("rf", n_estimators=20, seed=0).fit(*utility_data(synthetic_rows(30, seed=4)))
    X = np.array([[0.9, 0.9, 0.5]])  # a bad, late prefix: quit is best
    assert model.choose(X) == ["quit"]
    assert model.choose(X, allowed=["continue", "expert"]) == ["continue"]
    with pytest.raises(ValueError, match="none of the allowed"):
        model.choose(X, allowed=["rollback"])


def test_a_dispersion_penalty_turns_away_from_an_action_whose_utility_the_trees_disagree_on() -> None:
    rng = np.random.default_rng(5)
    rows = synthetic_rows(100, seed=5)
    for row in rows:  # expert: slightly better than continue on average, but very noisy
        row["branches"]["continue"]["utility"] = 0.5
        row["branches"]["expert"]["utility"] = 0.55 + float(rng.normal(0, 0.5))
    X = design_matrix(rows[:200], ["x0", "x1", "x2"])[0]
    bold = ActionConditioned("rf", dispersion=0.0, seed=0).fit(*utility_data(rows))
    careful = ActionConditioned("rf", dispersion=3.0, seed=0).fit(*utility_data(rows))
    _, std = careful.predict(X, return_std=True)
    assert np.all(std[:, careful.actions.index("expert")] > std[:, careful.actions.index("continue")])
    assert careful.choose(X).count("expert") < bold.choose(X).count("expert")
    assert careful.choose(X).count("continue") > 0.9 * len(X)


def test_the_forest_members_average_to_the_forest_prediction() -> None:
    model = ActionConditioned("rf", n_estimators=15, seed=0).fit(*utility_data(synthetic_rows(20, seed=6)))
    X = design_matrix(synthetic_rows(3, seed=7), model.feature_names)[0]
    forest_mean = model.predict(X, return_std=False)[:, model.actions.index("expert")]
    members = model.member_predictions(X)["expert"]
    assert members.shape == (15, len(X))
    np.testing.assert_allclose(members.mean(axis=0), forest_mean)


def test_the_models_fit_features_and_targets_as_scikit_learn_estimators_do() -> None:
    rows = synthetic_rows(30, seed=13)
    X, y, names = utility_data(rows)
    assert names == ["x0", "x1", "x2"] and y.shape == (len(rows), len(ACTIONS))
    assert np.isnan(y[:, ACTIONS.index("rollback")]).all()  # no row has a rollback branch
    model = ActionConditioned("rf", n_estimators=10, seed=0).fit(X, y, names)
    assert model.actions == ("continue", "quit", "expert") and model.feature_names == names
    mean, std = model.predict(X, return_std=True)
    np.testing.assert_array_equal(model.predict(X, return_std=False), mean)
    np.testing.assert_array_equal(model.decision_function(X), mean)  # no dispersion penalty
    assert model.choose(X) == [model.actions[j] for j in mean.argmax(axis=1)]
    partial = y.copy()
    partial[0, ACTIONS.index("expert")] = np.nan  # one row without an expert branch: expert is not comparable
    unnamed = ActionConditioned("rf", n_estimators=5, seed=0).fit(X, partial)
    assert unnamed.actions == ("continue", "quit") and unnamed.feature_names == ["x0", "x1", "x2"]
    with pytest.raises(ValueError, match="one column per overseer action"):
        ActionConditioned("rf", n_estimators=5).fit(X, y[:, :3])
    with pytest.raises(ValueError, match="one entry per prefix"):
        ActionConditioned("rf", n_estimators=5).fit(X[:-1], y)

    X, failed, _ = failure_data(rows)
    risk = RiskScore("logistic").fit(X, failed, names)
    proba = risk.predict_proba(X)
    assert proba.shape == (len(rows), 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(proba[:, 1], risk.predict_risk(X))
    np.testing.assert_array_equal(risk.predict(X), (proba[:, 1] > 0.5).astype(int))
    assert np.mean(risk.predict(X) == failed) > 0.9  # continue fails exactly where x0 >= 0.4
    calibrated = Calibrated(risk, "isotonic").fit(X, failed, names)
    np.testing.assert_array_equal(calibrated.predict_proba(X)[:, 1], calibrated.predict_risk(X))


def test_a_router_refuses_features_of_other_columns_and_rows_without_its_intervention() -> None:
    rows = synthetic_rows(10, seed=14)
    risk = RiskScore("logistic").fit(*failure_data(rows))
    X, y, names = utility_data(rows, risk.feature_names)
    assert ScalarRouter(risk).fit(X, y, names).threshold is not None
    with pytest.raises(ValueError, match="not those the risk model was trained on"):
        ScalarRouter(risk).fit(X, y, ["x1", "x0", "x2"])
    with pytest.raises(ValueError, match="not those the risk model was trained on"):
        Calibrated(risk).fit(*failure_data(rows, ["x0", "x1"]))
    with pytest.raises(ValueError, match="'rollback' branch"):
        ScalarRouter(risk, intervention="rollback").fit(X, y)


def overconfident_scores(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Labels ~ Bernoulli(p) and a score sigmoid(3 logit p): right order, overconfident values."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.05, 0.95, n)
    labels = (rng.random(n) < p).astype(int)
    logit = np.log(p / (1 - p))
    return 1 / (1 + np.exp(-3 * logit)), labels


@pytest.mark.parametrize("method", ["platt", "isotonic"])
def test_recalibration_lowers_ece_on_held_out_scores_and_keeps_their_order(method: str) -> None:
    fit_scores, fit_labels = overconfident_scores(3000, seed=0)
    scores, labels = overconfident_scores(3000, seed=1)
    calibrated = Calibrated(RiskScore(), method).fit_scores(fit_scores, fit_labels)  # type: ignore[arg-type]
    recalibrated = calibrated.transform(scores)
    assert expected_calibration_error(recalibrated, labels) < 0.5 * expected_calibration_error(scores, labels)
    order = np.argsort(scores)
    assert np.all(np.diff(recalibrated[order]) >= 0)  # monotone: never reverses two scores
    if method == "platt":  # strictly increasing, so the ranking and hence AUROC are exactly kept
        assert calibrated.platt_slope > 0
        assert np.all(np.diff(recalibrated[order]) > 0)
        assert auroc(recalibrated, labels) == auroc(scores, labels)


def test_tune_threshold_finds_the_best_cut_of_a_brute_force_search() -> None:
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 30, 200) / 30  # ties included
    u_continue, u_intervene = rng.normal(size=200), rng.normal(size=200)

    def total(threshold: float) -> float:
        return float(np.where(scores > threshold, u_intervene, u_continue).sum())

    best = max(total(t) for t in [-np.inf, *np.unique(scores)])
    assert total(tune_threshold(scores, u_continue, u_intervene)) == pytest.approx(best)


def test_tune_two_thresholds_finds_the_best_pair_of_a_brute_force_search() -> None:
    rng = np.random.default_rng(1)
    scores = rng.integers(0, 25, 150) / 25
    u_c, u_i, u_q = rng.normal(size=(3, 150))

    def total(low: float, high: float) -> float:
        return float(np.where(scores <= low, u_c, np.where(scores <= high, u_i, u_q)).sum())

    candidates = [-np.inf, *np.unique(scores)]
    best = max(total(low, high) for low, high in combinations_with_replacement(candidates, 2))
    low, high = tune_two_thresholds(scores, u_c, u_i, u_q)
    assert low <= high
    assert total(low, high) == pytest.approx(best)


def test_a_router_retuned_after_a_strictly_increasing_recalibration_routes_every_prefix_as_before() -> None:
    rows = synthetic_rows(40, seed=8, noise=0.3)
    fit_rows, tune_rows, test_rows = rows[:150], rows[150:300], synthetic_rows(20, seed=9)
    risk = RiskScore("logistic").fit(*failure_data(fit_rows))
    platt = Calibrated(risk, "platt").fit(*failure_data(tune_rows, risk.feature_names))
    assert platt.platt_slope > 0
    tune = utility_data(tune_rows, risk.feature_names)
    raw_router = ScalarRouter(risk).fit(*tune)
    platt_router = ScalarRouter(platt).fit(*tune)
    X = design_matrix(test_rows, risk.feature_names)[0]
    assert platt_router.choose(X) == raw_router.choose(X)
    two_raw, two_platt = TwoThresholdRouter(risk).fit(*tune), TwoThresholdRouter(platt).fit(*tune)
    assert two_platt.choose(X) == two_raw.choose(X)


def test_isotonic_recalibration_cannot_lower_the_tuned_routers_regret_on_its_tuning_rows() -> None:
    # Isotonic regression may merge neighbouring scores: the re-tuned router can only choose among
    # fewer cuts of the same order, so on the rows it is tuned on it does no better than the raw one.
    rows = synthetic_rows(40, seed=10, noise=0.3)
    fit_rows, tune_rows = rows[:150], rows[150:]
    risk = RiskScore("logistic").fit(*failure_data(fit_rows))
    isotonic = Calibrated(risk, "isotonic").fit(*failure_data(tune_rows, risk.feature_names))
    X = design_matrix(tune_rows, risk.feature_names)[0]
    u = {a: np.array([row["branches"][a]["utility"] for row in tune_rows]) for a in ("continue", "expert")}

    def routed_utility(router: ScalarRouter) -> float:
        return float(sum(u[action][i] for i, action in enumerate(router.choose(X))))

    tune = utility_data(tune_rows, risk.feature_names)
    raw_total = routed_utility(ScalarRouter(risk).fit(*tune))
    assert routed_utility(ScalarRouter(isotonic).fit(*tune)) <= raw_total + 1e-9


def test_the_risk_score_is_the_probability_that_continue_fails() -> None:
    rows = synthetic_rows(40, seed=11)
    for kind in ("rf", "logistic"):
        risk = RiskScore(kind, seed=0).fit(*failure_data(rows))  # type: ignore[arg-type]
        X = np.array([[0.1, 0.5, 0.5], [0.9, 0.5, 0.5]])
        low, high = risk.predict_risk(X)
        assert low < 0.2 < 0.8 < high


def test_saved_models_load_with_their_names_utility_and_benchmark(tmp_path: Any) -> None:
    rows = synthetic_rows(10, seed=12)
    model = ActionConditioned("rf", n_estimators=10, dispersion=0.5, seed=0).fit(*utility_data(rows))
    utility = UtilityConfig(c_intervene=0.1, k=4)
    path = save_model(tmp_path / "m.joblib", model, utility=utility, benchmark="corridor",
                      metadata={"rows": len(rows)})
    loaded = load_model(path)
    assert loaded.kind == "ActionConditioned" and loaded.benchmark == "corridor"
    assert loaded.utility == utility and loaded.feature_names == ["x0", "x1", "x2"]
    assert loaded.actions == ("continue", "quit", "expert") and loaded.metadata["rows"] == len(rows)
    X = design_matrix(rows, loaded.feature_names)[0]
    np.testing.assert_array_equal(loaded.model.decision_function(X), model.decision_function(X))

    risk = RiskScore("logistic").fit(*failure_data(rows))
    calibrated = Calibrated(risk, "isotonic").fit(*failure_data(rows, risk.feature_names))
    router = ScalarRouter(calibrated).fit(*utility_data(rows, risk.feature_names))
    again = load_model(save_model(tmp_path / "r.joblib", router, utility=utility, benchmark="corridor"))
    assert again.model.choose(X) == router.choose(X) and again.actions == ("continue", "expert")


def test_load_model_refuses_missing_files_and_other_versions(tmp_path: Any) -> None:
    import joblib

    with pytest.raises(FileNotFoundError, match="no model file"):
        load_model(tmp_path / "absent.joblib")
    joblib.dump({"format": "something else"}, tmp_path / "other.joblib")
    with pytest.raises(ValueError, match="not an oversight model file"):
        load_model(tmp_path / "other.joblib")
    path = save_model(tmp_path / "m.joblib", RiskScore().fit(*failure_data(synthetic_rows(3))), utility=UtilityConfig(),
                      benchmark="corridor")
    payload = joblib.load(path)
    joblib.dump({**payload, "version": MODEL_FILE_VERSION + 1}, path)
    with pytest.raises(ValueError, match="train the model again"):
        load_model(path)
