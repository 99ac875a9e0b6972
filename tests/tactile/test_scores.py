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
    np.testing.assert_allclose(scores["yaw_axis_error_deg"], [2.0, 30.0, 0.0], atol=1e-9)  # a reversed heading: 0
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


def test_footprint_symmetries_find_the_half_and_quarter_turns_a_footprint_survives():
    experiment = load_experiment("tactile")
    bar = np.zeros((16, 16), np.uint8)
    bar[6:10, 2:14] = 200  # a centred bar: the same after a half turn, not after a quarter
    cross = bar | bar.T  # a centred plus sign: the same after every quarter turn
    hook = bar.copy()
    hook[2:6, 2:6] = 200  # the bar with a block at one end: no turn maps it onto itself
    turns = experiment.footprint_symmetries(np.stack([bar, cross, hook]))
    assert turns[0] == (np.pi,)
    assert turns[1] == (np.pi / 2, np.pi, 3 * np.pi / 2)
    assert turns[2] == ()
    # the glyph set itself: "o" looks the same after a half turn, "L" after none
    from gauntlet.envs.tactile import glyphs

    objects = glyphs.load()
    names = glyphs.class_names()
    found = dict(zip([names[label] for label in objects.labels], experiment.footprint_symmetries(objects.fields)))
    assert np.pi in found["o (DejaVuSans)"] and found["L (DejaVuSans)"] == ()
    from gauntlet.envs.tactile import wrench

    assert experiment.footprint_symmetries(wrench.load().fields) == [()]  # its open jaw and ring end differ


def test_the_yaw_error_up_to_symmetry_forgives_only_the_object_s_own_turns():
    experiment = load_experiment("tactile")
    true = np.radians([10.0, 10.0, 10.0])
    guess = np.radians([190.0, 190.0, 100.0])  # a half turn off, a half turn off, a quarter turn off
    targets = np.stack([np.zeros(3), np.zeros(3), np.cos(true), np.sin(true)], axis=1)
    predictions = np.stack([np.zeros(3), np.zeros(3), np.cos(guess), np.sin(guess)], axis=1)
    symmetries = [(np.pi,), (), (np.pi,)]
    scores = experiment.episode_scores("GlyphPose", predictions, targets, symmetries)
    np.testing.assert_allclose(scores["yaw_error_deg"], [180.0, 180.0, 90.0], atol=1e-9)
    np.testing.assert_allclose(scores["yaw_error_up_to_symmetry_deg"], [0.0, 180.0, 90.0], atol=1e-9)
    assert "yaw_error_up_to_symmetry_deg" not in experiment.episode_scores("GlyphPose", predictions, targets)
