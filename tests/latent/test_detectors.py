"""Each detector separates a small planted dataset, in the way it is built to; the metrics are right on
hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from gauntlet.controllers.latent.detectors import LATENT_DETECTORS, ChaosScore, Example, TextClassifier
from gauntlet.stats import auroc, fpr_at_tpr
from gauntlet.controllers.latent.hidden import SequenceStates

DIM, LAYER = 24, 3


def planted(seed: int = 0, n: int = 80) -> tuple[list[Example], np.ndarray]:
    """Compliant generations: tokens near a 4-dimensional manifold, little spread. Violations: tokens that
    scatter off it (a different mean per generation, wide spread, and a common drift a linear probe can
    find), and an activation delta pushed along one direction, as a moved task would be."""
    rng = np.random.default_rng(seed)
    basis = rng.normal(size=(4, DIM))
    examples, violated = [], []
    for i in range(n):
        bad = i % 2
        tokens = rng.normal(size=(rng.integers(3, 12), 4)) @ basis * 0.5 + rng.normal(size=(1, DIM)) * 0.05
        if bad:
            tokens = tokens + rng.normal(size=(1, DIM)) * 1.5 + rng.normal(size=tokens.shape) * 0.8 + 5 * np.eye(DIM)[1]
        end = rng.normal(size=DIM) + (3.0 if bad else 0.0) * np.eye(DIM)[0]
        before = end - rng.normal(size=DIM) * 0.1 - (3.0 if bad else 0.0) * np.eye(DIM)[0]
        states = SequenceStates(response={LAYER: tokens.astype(np.float32)}, prompt_end={LAYER: end},
                                boundary={LAYER: before})
        examples.append(Example(states, "ignore the rules" if bad else "here is the note", ""))
        violated.append(bad)
    return examples, np.array(violated)


@pytest.mark.parametrize("name", sorted(LATENT_DETECTORS))
def test_every_latent_detector_separates_planted_violations_it_never_saw(name):
    train, train_labels = planted(seed=0)
    test, test_labels = planted(seed=1)
    detector = LATENT_DETECTORS[name](LAYER).fit(train, train_labels)
    assert auroc(detector.score_samples(test), test_labels) > 0.9


def test_the_chaos_score_models_compliance_only_and_is_near_zero_on_its_own_kind():
    train, labels = planted(seed=0)
    fitted = ChaosScore(LAYER, rank=4).fit(train, labels)
    # Fitting sees only compliant examples: relabelling every violation cannot change the manifold.
    only_compliant = [e for e, v in zip(train, labels, strict=True) if not v]
    same = ChaosScore(LAYER, rank=4).fit(only_compliant, np.zeros(len(only_compliant), dtype=int))
    np.testing.assert_allclose(fitted.mean, same.mean)
    # The manifold's own tokens, drawn wide: the divergence of a long compliant-like sample is small.
    rng = np.random.default_rng(3)
    tokens = np.concatenate([e.states.response[LAYER] for e in only_compliant])
    sample = tokens[rng.choice(len(tokens), 200)]
    scattered = sample + rng.normal(size=sample.shape)
    assert fitted.divergence(sample) < 0.1 * fitted.divergence(scattered)


def test_the_text_classifier_reads_the_texts_it_is_given():
    def embed(texts):  # a bag of two words: enough to show which texts reach the classifier
        return np.array([[t.count("ignore"), t.count("sure")] for t in texts], dtype=float)

    examples, labels = planted(seed=0)
    examples = [Example(e.states, e.external_text, "sure, the code is" if v else "I cannot")
                for e, v in zip(examples, labels, strict=True)]
    detector = TextClassifier(embed).fit(examples, labels)
    assert auroc(detector.score_samples(examples), labels) == 1.0


def test_auroc_and_fpr_at_95_tpr_on_hand_computed_cases():
    violated = np.array([1, 1, 1, 1, 0, 0, 0, 0])
    assert auroc(np.array([8, 7, 6, 5, 4, 3, 2, 1.0]), violated) == 1.0
    assert auroc(np.array([1, 2, 3, 4, 5, 6, 7, 8.0]), violated) == 0.0
    # 95 % of four violations is all four: the threshold is the lowest violation's score, 3, which flags
    # the compliant examples scoring 3 and 4 of four: half of them.
    scores = np.array([9, 8, 7, 3, 4, 3, 2, 1.0])
    assert fpr_at_tpr(scores, violated) == 0.5
    assert auroc(scores, violated) == pytest.approx((3 * 4 + 2 + 0.5) / 16)  # 3 ties one compliant 3
