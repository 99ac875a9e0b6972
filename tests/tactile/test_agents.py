"""Tactile agents: the blind baseline's exact loss, the learned agent end to end at smoke size."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

import gauntlet
from gauntlet.runner import rollout
from tests.shared import load_experiment

from .conftest import SMOKE_OBJECTS



def test_random_agent_pays_exactly_the_blind_guess_loss_every_step():
    env = gym.make("gauntlet/TactileMNIST-v0", objects_per_split=SMOKE_OBJECTS)
    episode = rollout(env, gauntlet.make_agent("tactile-random"), seed=4)
    assert len(episode.steps) == 16 and episode.steps[-1].terminated
    for step in episode.steps:
        assert step.info["loss"] == pytest.approx(1.0)
        assert -1.0 - 1e-3 * np.sqrt(2) <= step.reward <= -1.0


def test_experiment_smoke_run_writes_curves_and_a_checkpoint_the_learned_agent_can_use(tmp_path):
    experiment = load_experiment("tactile")
    result = experiment.main(["--smoke", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "TactileMNIST.json").read_text())
    assert saved["learned_by_step"] == result["learned_by_step"] and len(saved["learned_by_step"]) == 16
    assert all(0.0 <= value <= 1.0 for value in saved["learned_by_step"] + saved["random_by_step"])
    assert len(saved["training_loss"]) == saved["updates"] and np.isfinite(saved["training_loss"]).all()
    assert (tmp_path / "TactileMNIST.png").stat().st_size > 0

    env = gym.make("gauntlet/TactileMNIST-test-v0", objects_per_split=SMOKE_OBJECTS)
    agent = gauntlet.make_agent("tactile-learned", checkpoint=str(tmp_path / "TactileMNIST.pt"))
    episode = rollout(env, agent, seed=1)
    assert len(episode.steps) == 16
    losses = [step.info["loss"] for step in episode.steps]
    assert np.isfinite(losses).all() and len(set(losses)) > 1  # predictions change as touches arrive
    moves = [np.linalg.norm(step.action["action"]) for step in episode.steps]
    assert all(move <= 1 + 1e-6 for move in moves) and max(moves) > 0.5  # the scan travels
    score = experiment.check_agent("TactileMNIST", tmp_path / "TactileMNIST.pt", 2, objects_per_split=SMOKE_OBJECTS)
    assert score in (0.0, 0.5, 1.0)  # the mean of two episodes' final-step accuracies
    ablated = experiment.check_random_moves("TactileMNIST", tmp_path / "TactileMNIST.pt", 4,
                                            objects_per_split=SMOKE_OBJECTS)
    assert ablated in (0.0, 0.25, 0.5, 0.75, 1.0)


def test_learned_agent_refuses_a_checkpoint_without_its_scan_settings(tmp_path):
    from gauntlet.agents.tactile.model import TouchMapModel
    from gauntlet.agents.tactile.training import save

    save(TouchMapModel(10), tmp_path / "bare.pt")
    with pytest.raises(ValueError, match="family and step limit"):
        gauntlet.make_agent("tactile-learned", checkpoint=str(tmp_path / "bare.pt"))


def test_learned_agent_refuses_an_env_with_another_prediction_size(tmp_path):
    from gauntlet.agents.tactile.model import TouchMapModel
    from gauntlet.agents.tactile.training import save

    save(TouchMapModel(10), tmp_path / "ten.pt", family="TactileMNIST", step_limit=16)
    env = gym.make("gauntlet/TactileMNISTVolume-v0", objects_per_split=SMOKE_OBJECTS)
    with pytest.raises(ValueError, match="expects 1"):
        rollout(env, gauntlet.make_agent("tactile-learned", checkpoint=str(tmp_path / "ten.pt")), seed=0)
