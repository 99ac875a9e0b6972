"""The experiment's per-episode scores: pose tasks report position (mm) and yaw (degrees) errors apart."""

from __future__ import annotations

import numpy as np
import pytest

from tests.shared import load_experiment


def test_pose_scores_split_position_in_mm_and_yaw_in_degrees_with_wrap_around():
    experiment = load_experiment("tactile")
    yaw = np.radians([179.0, 10.0, -90.0])
    targets = np.stack([np.zeros(3), np.zeros(3), np.cos(yaw), np.sin(yaw)], axis=1)
    guess = np.radians([-179.0, 40.0, 90.0])
    # 0.05 platform units = 3 mm (the platform's half side is 6 cm); the yaw guess's length does not matter
    predictions = np.stack([[0.05, 0.0, 0.0], [0.0, 0.0, -0.05], 3 * np.cos(guess), 3 * np.sin(guess)], axis=1)
    scores = experiment.episode_scores("GlyphPose", predictions, targets)
    np.testing.assert_allclose(scores["position_error_mm"], [3.0, 0.0, 3.0], atol=1e-9)
    np.testing.assert_allclose(scores["yaw_error_deg"], [2.0, 30.0, 180.0], atol=1e-9)
    accuracy = experiment.episode_scores("Starstruck", np.array([[0.1, 2.0], [3.0, 1.0]]), np.array([1, 1]))
    np.testing.assert_array_equal(accuracy["accuracy"], [1.0, 0.0])
    assert experiment._interval(np.array([0.0, 1.0, 0.0, 1.0]))[0] == pytest.approx(0.5)


def test_glyph_scores_add_the_character_with_the_faces_probabilities_summed():
    experiment = load_experiment("tactile")
    logits = np.zeros((3, 248))
    logits[0, 2 * 62 + 5] = 5.0  # right character (5), wrong face (2 against 1)
    logits[1, 1 * 62 + 5] = 5.0  # right class
    logits[2, 0 * 62 + 7] = 2.0  # the top class is character 7 in face 0, but character 9 holds more in all faces
    logits[2, [9, 62 + 9, 124 + 9, 186 + 9]] = 1.5
    scores = experiment.episode_scores("Glyphs", logits, np.array([62 + 5, 62 + 5, 186 + 9]))
    np.testing.assert_array_equal(scores["accuracy"], [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(scores["character_accuracy"], [1.0, 1.0, 1.0])
