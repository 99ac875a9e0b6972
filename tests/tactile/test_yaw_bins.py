"""The pose model's binned yaw head: the arcs, the heading it submits, its loss, a checkpoint round trip."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch

import gauntlet
from gauntlet.agents.tactile.model import TouchMapModel, bin_centres, heading_of, yaw_bin
from gauntlet.agents.tactile.training import binned_pose_loss, load, save
from gauntlet.runner import rollout
from tests.shared import load_experiment

from .conftest import SMOKE_OBJECTS


def test_a_heading_falls_in_the_arc_that_contains_its_angle():
    bins = 36
    angles = torch.tensor([-np.pi + 1e-4, -0.01, 0.0, 0.01, 0.5, np.pi / 2, np.pi - 1e-4])
    found = yaw_bin(torch.cos(angles), torch.sin(angles), bins)
    # independent: the arc index counted from -pi in 10-degree steps
    expected = [int(np.floor((np.degrees(a) + 180) / 10)) for a in angles.tolist()]
    assert found.tolist() == expected
    centres = bin_centres(bins)
    assert torch.allclose(centres[found], angles, atol=np.radians(5) + 1e-6)


def test_the_submitted_heading_is_the_most_probable_arc_not_the_average_of_two_modes():
    bins = 36
    centres = bin_centres(bins)
    logits = torch.full((3, bins), -20.0)
    logits[0, 9] = 5.0  # one sharp mode
    logits[1, 9], logits[1, 27] = 5.0, 4.9  # two opposite modes (a glyph symmetric under a half turn)
    logits[2, 9], logits[2, 10] = 5.0, 5.0  # a mode between two arcs
    heading = heading_of(logits)
    assert torch.allclose(heading.norm(dim=1), torch.ones(3))
    angle = torch.atan2(heading[:, 1], heading[:, 0])
    assert angle[0] == pytest.approx(float(centres[9]), abs=1e-4)
    assert angle[1] == pytest.approx(float(centres[9]), abs=1e-4)  # not pulled to zero length nor between
    assert angle[2] == pytest.approx(float(centres[9] + centres[10]) / 2, abs=1e-4)
    # the mode across the seam of (-pi, pi] still averages on the circle
    seam = torch.full((1, bins), -20.0)
    seam[0, 0], seam[0, bins - 1] = 5.0, 5.0
    seam_heading = heading_of(seam)[0]
    assert seam_heading[0] == pytest.approx(-1.0, abs=1e-4) and seam_heading[1] == pytest.approx(0.0, abs=1e-4)


def test_the_binned_loss_is_one_for_a_blind_guess_and_falls_for_the_right_arc():
    model = TouchMapModel(4, yaw_bins=36)
    variance = torch.tensor([0.1, 0.2, 0.5, 0.5])
    model.set_target_scale(torch.tensor([0.05, -0.02, 0.0, 0.0]), variance.sqrt())
    targets = torch.tensor([[0.05, -0.02, 0.0, 1.0], [0.05, -0.02, -1.0, 0.0]])  # at the mean position
    blind = torch.zeros(2, 2 + 36)
    # position at the mean: its term is the mean's error (0); uniform yaw: cross-entropy log K, and half the
    # mass on the half circle around the true heading: -log 1/2
    assert float(binned_pose_loss(model, blind, targets, variance)) == pytest.approx(2 / 3, abs=1e-6)
    off = blind.clone()
    off[:, 0] = 1.0  # one target spread off along x: normalised squared error 1 on x, 0 on y
    assert float(binned_pose_loss(model, off, targets, variance)) == pytest.approx((0.5 + 2) / 3, abs=1e-6)
    # the two ends of the axis equally likely: the bins' cross-entropy is log 2 (of log 36), the direction's
    # a whole term (log 2 / log 2)
    both_ends = blind.clone()
    for row, heading in enumerate(targets):
        true_bin = int(yaw_bin(heading[2:3], heading[3:4], 36))
        both_ends[row, 2 + true_bin] = both_ends[row, 2 + (true_bin + 18) % 36] = 30.0
    expected = (0 + np.log(2) / np.log(36) + 1) / 3
    assert float(binned_pose_loss(model, both_ends, targets, variance)) == pytest.approx(expected, abs=1e-5)
    right = blind.clone()
    right[0, 2 + int(yaw_bin(targets[:1, 2], targets[:1, 3], 36))] = 10.0
    right[1, 2 + int(yaw_bin(targets[1:, 2], targets[1:, 3], 36))] = 10.0
    assert float(binned_pose_loss(model, right, targets, variance)) < 0.01


def test_yaw_bins_need_a_pose_prediction_and_enough_arcs():
    with pytest.raises(ValueError, match="pose prediction"):
        TouchMapModel(10, yaw_bins=36)
    with pytest.raises(ValueError, match="at least 8"):
        TouchMapModel(4, yaw_bins=4)


def test_a_binned_checkpoint_round_trips_and_predicts_unit_headings(tmp_path):
    torch.manual_seed(0)
    model = TouchMapModel(4, yaw_bins=24).eval()
    model.set_target_scale(torch.tensor([0.1, 0.2, 0.0, 0.0]), torch.tensor([0.3, 0.3, 0.7, 0.7]))
    save(model, tmp_path / "pose.pt", family="GlyphPose", step_limit=32)
    loaded, metadata = load(tmp_path / "pose.pt")
    assert loaded.yaw_bins == 24 and metadata["family"] == "GlyphPose"
    maps = torch.rand(5, *_map_shape())
    with torch.no_grad():
        out = loaded(maps)
        assert torch.allclose(out, model(maps), atol=2e-3)  # the checkpoint keeps half-precision weights
    assert out.shape == (5, 4) and torch.allclose(out[:, 2:].norm(dim=1), torch.ones(5))


def test_the_experiment_trains_a_binned_pose_model_the_learned_agent_plays(tmp_path):
    experiment = load_experiment("tactile")
    experiment.main(["--family", "GlyphPose", "--smoke", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "GlyphPose.json").read_text())
    assert saved["yaw_bins"] == experiment.POSE_YAW_BINS == 36  # the pose families' default
    assert np.isfinite(saved["training_loss"]).all()
    env = gym.make("gauntlet/GlyphPose-v0", objects_per_split=SMOKE_OBJECTS)
    agent = gauntlet.make_agent("tactile-learned", checkpoint=str(tmp_path / "GlyphPose.pt"))
    episode = rollout(env, agent, seed=3)
    headings = np.array([step.action["prediction"][2:] for step in episode.steps])
    assert np.allclose(np.linalg.norm(headings, axis=1), 1.0, atol=1e-5)
    yaw_errors = [step.info["metrics"]["yaw_error_deg"] for step in episode.steps]
    assert all(0.0 <= error <= 180.0 for error in yaw_errors)
    scores = experiment.check_scores("GlyphPose", tmp_path / "GlyphPose.pt", 4, tmp_path)
    assert scores["episodes"] == 4 and json.loads((tmp_path / "GlyphPose-scores.json").read_text()) == scores
    for name in ("position_error_mm", "yaw_error_deg", "yaw_error_up_to_symmetry_deg"):
        mean, low, high = scores[name]["learned"]
        assert low <= mean <= high
    # forgiving the object's own turns never makes an error larger
    assert scores["yaw_error_up_to_symmetry_deg"]["learned"][0] <= scores["yaw_error_deg"]["learned"][0]
    assert 0 <= scores["symmetric_objects"]["half_turn"] <= 4


@pytest.mark.parametrize("argv, message", [
    (["--family", "Glyphs", "--yaw-bins", "36"], "pose families"),
    (["--family", "Toolbox", "--yaw-bins", "4"], "8 or more"),
    (["--family", "Toolbox", "--yaw-bins", "-36"], "8 or more"),
])
def test_the_experiment_refuses_yaw_bins_it_cannot_use(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        load_experiment("tactile").main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def _map_shape() -> tuple[int, int, int]:
    from gauntlet.agents.tactile.touchmap import MAP_CHANNELS, MAP_PIXELS

    return MAP_CHANNELS, MAP_PIXELS, MAP_PIXELS
