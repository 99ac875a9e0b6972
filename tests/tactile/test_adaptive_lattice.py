"""The adaptive policy over the scan's lattice: it follows the lookahead among unfelt lattice points,
keeps the lattice coverage when the moves left are tight, falls back to the grid when every point is
felt; the stopping rule's arithmetic; the agent and the experiment's lattice evaluation end to end."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch

import gauntlet
from gauntlet.agents.tactile.adaptive import AdaptivePolicy, BeliefModel, moves_between, new_area, tour_moves
from gauntlet.agents.tactile.belief_training import save_belief
from gauntlet.agents.tactile.model import TouchMapModel
from gauntlet.agents.tactile.touchmap import MAP_CHANNELS, MAP_PIXELS
from gauntlet.agents.tactile.training import save
from gauntlet.envs.tactile.simulation import MAX_STEP_M, WORKSPACE_HALF_M
from gauntlet.runner import rollout
from tests.shared import load_experiment

from .conftest import SMOKE_OBJECTS

ROW = np.array([[-0.02, 0.0], [0.0, 0.0], [0.02, 0.0]])  # three lattice points 2 cm apart along x


def _sensor_pos(x_m: float, y_m: float) -> np.ndarray:
    return np.array([[x_m / WORKSPACE_HALF_M[0], y_m / WORKSPACE_HALF_M[1], 0.0]], np.float32)


def _empty_maps(batch: int = 1) -> torch.Tensor:
    return torch.zeros(batch, MAP_CHANNELS, MAP_PIXELS, MAP_PIXELS)


def _rising_to_the_left() -> torch.Tensor:
    """A lookahead map ``(1, 1, 8, 8)`` whose predicted loss falls towards +x."""
    return (-torch.linspace(-1, 1, 8))[None, :].expand(1, 1, 8, 8).clone()


def test_moves_count_capped_steps_and_the_tour_visits_every_point():
    assert moves_between(np.zeros(2), np.array([MAX_STEP_M * 0.99, 0.0])) == 1
    assert moves_between(np.zeros(2), np.array([0.04, 0.0])) == 2
    # from the left end: 1 + 1 move; from the middle: 1 to a neighbour, then 2 across
    assert tour_moves(ROW[0], ROW[1:]) == 2 and tour_moves(ROW[1], ROW[[0, 2]]) == 3


def test_it_follows_the_lookahead_when_the_budget_allows_and_keeps_the_coverage_when_it_is_tight():
    here = _sensor_pos(-0.02, 0.0)  # at the left lattice point, which is not felt yet (empty map)
    policy = AdaptivePolicy(lattice=ROW)
    # plenty of moves: the lowest predicted loss, the far right point (two moves away)
    far = policy.choose(here, _empty_maps(), _rising_to_the_left(), moves_left=10).numpy()[0]
    np.testing.assert_allclose(far, ROW[2], atol=1e-6)
    # two moves left feel all three points only by starting here (left -> middle -> right)
    tight = policy.choose(here, _empty_maps(), _rising_to_the_left(), moves_left=2).numpy()[0]
    np.testing.assert_allclose(tight, ROW[0], atol=1e-6)
    # a soft constraint with no weight is the plain lookahead order again
    soft = AdaptivePolicy(lattice=ROW, over_weight=0.0)
    np.testing.assert_allclose(soft.choose(here, _empty_maps(), _rising_to_the_left(), moves_left=2).numpy()[0],
                               ROW[2], atol=1e-6)
    # the far point is reached over capped moves, the first one at full length towards it
    move = policy.act(here, _empty_maps(), _rising_to_the_left(), moves_left=10)[0]
    np.testing.assert_allclose(move, [1.0, 0.0], atol=1e-5)


def test_felt_lattice_points_are_skipped_and_the_grid_takes_over_when_all_are_felt():
    policy = AdaptivePolicy(lattice=ROW)
    maps = _empty_maps()
    maps[0, -1, :, MAP_PIXELS // 2 + 2:] = 1.0  # the right side of the platform is felt
    assert float(new_area(maps[:, -1:], torch.from_numpy(ROW[None, 2:]).float())[0, 0]) == 0.0
    chosen = policy.choose(_sensor_pos(0.0, 0.0), maps, _rising_to_the_left(), moves_left=10).numpy()[0]
    np.testing.assert_allclose(chosen, ROW[1], atol=1e-6)  # the best of the unfelt ones
    maps[0, -1] = 1.0  # everything felt: the grid rule, within one move of the sensor
    fallback = policy.choose(_sensor_pos(0.0, 0.0), maps, _rising_to_the_left(), moves_left=10).numpy()[0]
    grid = AdaptivePolicy().choose(_sensor_pos(0.0, 0.0), maps, _rising_to_the_left()).numpy()[0]
    np.testing.assert_allclose(fallback, grid)
    assert not any(np.allclose(fallback, point) for point in ROW)


def test_stopping_rule_declares_at_the_first_confident_touch():
    experiment = load_experiment("tactile")
    scores = np.array([[0.0, 1.0, 1.0], [0.0, 0.0, 1.0]])
    confidence = np.array([[0.2, 0.9, 0.95], [0.3, 0.4, 0.5]])
    rows = experiment.stopping_rule(scores, confidence, (0.85, 1.01))
    assert rows[0]["touches"] == pytest.approx(2.5) and rows[0]["accuracy"][0] == pytest.approx(1.0)
    assert rows[1]["touches"] == pytest.approx(3.0)  # never confident enough: all touches
    scores[0, 1] = 0.0  # the declared guess is wrong now
    assert experiment.stopping_rule(scores, confidence, (0.85,))[0]["accuracy"][0] == pytest.approx(0.5)


@pytest.fixture
def checkpoints(tmp_path):
    torch.manual_seed(0)
    belief, classifier = tmp_path / "belief.pt", tmp_path / "scan.pt"
    save_belief(BeliefModel(10).eval(), belief, family="TactileMNIST", step_limit=16, seed=0)
    save(TouchMapModel(10).eval(), classifier, family="TactileMNIST", step_limit=16)
    return belief, classifier


def test_registered_agent_with_lattice_candidates_and_the_scan_classifier(checkpoints):
    belief, classifier = checkpoints
    env = gym.make("gauntlet/TactileMNIST-test-v0", objects_per_split=SMOKE_OBJECTS)
    agent = gauntlet.make_agent("tactile-adaptive", checkpoint=str(belief), candidates="lattice",
                                classifier=str(classifier))
    episode = rollout(env, agent, seed=2)
    assert len(episode.steps) == 16
    assert agent.config()["candidates"] == "lattice" and agent.config()["classifier"] == str(classifier)
    # the predictions are the scan classifier's
    assert isinstance(agent.model.classifier, TouchMapModel)
    with pytest.raises(ValueError, match="candidates"):
        gauntlet.make_agent("tactile-adaptive", checkpoint=str(belief), candidates="spiral")


def test_lattice_evaluation_smoke_run(checkpoints, tmp_path, capsys):
    belief, classifier = checkpoints
    experiment = load_experiment("tactile")
    results = [experiment.main(["--adaptive", "--smoke", "--checkpoint", str(belief), "--candidates", "lattice",
                                "--classifier", str(classifier), "--seed", str(seed), "--policies", "scan,adaptive",
                                "--out", str(tmp_path)])
               for seed in (0, 1)]
    assert [r["episode_seeds_from"] for r in results] == [10_000, 110_000]
    saved = json.loads((tmp_path / "belief-lattice-with-scan-test1.json").read_text())
    assert saved["candidates"] == "lattice" and saved["eval_episodes"] == 8
    covered = saved["region_covered_by_touches"]["adaptive"]["mean"]
    assert all(0 < a <= b <= 1 for a, b in zip(covered, covered[1:]))
    stops = saved["stopping_rule"]["adaptive"]
    assert stops[-1]["touches"] == 16 and all(1 <= row["touches"] <= 16 for row in stops)
    summary = json.loads((tmp_path / "belief-lattice-with-scan.json").read_text())
    assert summary["seeds"] == [0, 1] and summary["candidates"] == "lattice"
    assert (tmp_path / "belief-lattice-with-scan.png").stat().st_size > 0
    with pytest.raises(SystemExit) as stop:
        experiment.main(["--adaptive", "--smoke", "--checkpoint", str(belief), "--candidates", "lattice",
                         "--classifier", str(tmp_path / "missing.pt"), "--out", str(tmp_path)])
    assert stop.value.code == 2 and "classifier" in capsys.readouterr().err
