"""Detectors follow scikit-learn's conventions (fit returns the detector, the decision function is the score
less the gate threshold, predict flags above 0), so a scikit-learn classifier drops in wherever a detector
goes: the study's held-out scoring and the fitted-detector file, whose two formats round-trip."""

from __future__ import annotations

import numpy as np
import pytest

from gauntlet.controllers.latent.detector_file import FittedDetector, load_detector, reply_example, save_detector
from gauntlet.controllers.latent.detectors import (GATE_QUANTILE, LATENT_DETECTORS, ChaosScore, LinearProbe,
                                                   response_means)
from gauntlet.controllers.latent.study import held_out_scores
from gauntlet.errors import UserError
from gauntlet.stats import auroc
from tests.latent.test_detectors import LAYER, planted


@pytest.mark.parametrize("name", sorted(LATENT_DETECTORS))
def test_every_detector_fits_in_place_and_gates_its_scores_at_its_threshold(name):
    X, y = planted(seed=0)
    test, _ = planted(seed=1)
    detector = LATENT_DETECTORS[name](LAYER)
    assert detector.fit(X, y) is detector
    compliant = [example for example, bad in zip(X, y, strict=True) if not bad]
    assert detector.threshold_ == pytest.approx(np.quantile(detector.score_samples(compliant), GATE_QUANTILE))
    decisions = detector.decision_function(test)
    np.testing.assert_allclose(decisions, detector.score_samples(test) - detector.threshold_)
    np.testing.assert_array_equal(detector.predict(test), (decisions > 0).astype(int))
    # About 5 % of the compliant examples the threshold was set on are flagged.
    assert detector.predict(compliant).mean() <= 1 - GATE_QUANTILE + 1 / len(compliant)


def test_one_class_detectors_take_no_labels_and_supervised_ones_refuse_to_fit_without_them():
    X, y = planted(seed=0)
    compliant = [example for example, bad in zip(X, y, strict=True) if not bad]
    with_labels = ChaosScore(LAYER, rank=4).fit(X, y)
    without = ChaosScore(LAYER, rank=4).fit(compliant)
    np.testing.assert_allclose(with_labels.score_samples(X), without.score_samples(X))
    with pytest.raises(ValueError, match="both compliant and violating"):
        LinearProbe(LAYER).fit(X)


def sklearn_probe():
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    return make_pipeline(FunctionTransformer(response_means, kw_args={"layer": LAYER}), LogisticRegression())


def test_a_scikit_learn_classifier_drops_in_for_held_out_scoring_and_the_detector_file(tmp_path):
    X, y = planted(seed=0)
    test, test_labels = planted(seed=1)
    groups = np.arange(len(X)) % 4
    scores, thresholds = held_out_scores(X, y, groups, sklearn_probe)
    assert auroc(scores, y) > 0.9 and set(thresholds.tolist()) == {0.0}  # a classifier's own boundary
    path = save_detector(tmp_path / "sklearn.joblib", FittedDetector(sklearn_probe().fit(X, y), LAYER, "m.gguf"))
    loaded = load_detector(path)
    assert (loaded.layer, loaded.model, loaded.source, loaded.threshold) == (LAYER, "m.gguf", "hierarchy", None)
    decisions = loaded.decision_function(test)
    assert auroc(decisions, test_labels) > 0.9
    np.testing.assert_array_equal(decisions > 0, loaded.detector.predict(test) == 1)


def test_a_chaos_score_file_is_the_monitors_npz_and_loads_back_gated_at_its_threshold(tmp_path):
    from gauntlet.controllers.latent.monitor import load_chaos_score

    X, y = planted(seed=0)
    score = ChaosScore(LAYER, rank=4).fit(X, y)
    score.threshold_ = 7.5
    path = save_detector(tmp_path / "chaos.npz", FittedDetector(score, LAYER, "m.gguf"))
    monitors, threshold, model = load_chaos_score(path)  # what the latent monitor reads
    assert (threshold, model, monitors.layer) == (7.5, "m.gguf", LAYER)
    loaded = load_detector(path)
    tokens = X[3].states.response[LAYER]
    # A reply made an example from the states that wrote it scores as the monitor scores the tokens.
    [decision] = loaded.decision_function([reply_example(tokens, LAYER)])
    assert decision == pytest.approx(score.divergence(tokens) - 7.5)


def test_a_detector_file_that_cannot_hold_or_is_not_a_detector_is_one_line(tmp_path):
    import joblib

    X, y = planted(seed=0)
    probe = FittedDetector(LinearProbe(LAYER).fit(X, y), LAYER, "m.gguf")
    with pytest.raises(UserError, match="only the chaos score"):
        save_detector(tmp_path / "probe.npz", probe)
    with pytest.raises(UserError, match=r"\.npz .* or a \.joblib"):
        save_detector(tmp_path / "probe.pkl", probe)
    joblib.dump({"something": "else"}, tmp_path / "other.joblib")
    (tmp_path / "torn.joblib").write_bytes(b"\x80\x04 not a pickle")
    for name in ("other.joblib", "torn.joblib"):
        with pytest.raises(UserError, match="is not a fitted detector"):
            load_detector(tmp_path / name)
    with pytest.raises(UserError, match="no fitted detector at"):
        load_detector(tmp_path / "missing.joblib")
