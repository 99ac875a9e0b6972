"""The adaptive tactile agent: its policy follows the belief's lookahead, skips covered ground, stays in
reach; training maps equal the agent's maps; the experiment's smoke run end to end."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch

import gauntlet
from gauntlet.agents.tactile.adaptive import AdaptivePolicy, lookahead_at, new_area
from gauntlet.agents.tactile.belief_training import draw_histories, subset_maps
from gauntlet.agents.tactile.touchmap import (MAP_CHANNELS, MAP_HALF_M, MAP_PIXELS, TouchMap, episode_maps,
                                              gel_background, paste, touch_features)
from gauntlet.envs.tactile.simulation import MAX_STEP_M, WORKSPACE_HALF_M
from gauntlet.runner import rollout
from tests.shared import load_experiment

from .conftest import SMOKE_OBJECTS


def _sensor_pos(x_m: float, y_m: float) -> np.ndarray:
    return np.array([[x_m / WORKSPACE_HALF_M[0], y_m / WORKSPACE_HALF_M[1], 0.0]], np.float32)


def _empty_maps(batch: int) -> torch.Tensor:
    return torch.zeros(batch, MAP_CHANNELS, MAP_PIXELS, MAP_PIXELS)


def _slope(batch: int, x_weight: float, y_weight: float) -> torch.Tensor:
    """A lookahead map ``(batch, 1, 8, 8)`` that falls along ``(x_weight, y_weight)`` in world directions."""
    coords = torch.linspace(-1, 1, 8)
    columns, rows = coords[None, :], coords[:, None]  # columns run along +x, rows from +y down
    return (-(x_weight * columns - y_weight * rows)).expand(batch, 1, 8, 8).clone()


def test_the_choice_follows_the_belief_and_stays_within_one_move():
    policy = AdaptivePolicy()
    position = np.repeat(_sensor_pos(0.0, 0.0), 2, axis=0)
    lookahead = torch.cat([_slope(1, -1.0, 0.0), _slope(1, 1.0, 0.0)])  # lowest loss: left for 0, right for 1
    chosen = policy.choose(position, _empty_maps(2), lookahead).numpy()
    assert chosen[0, 0] < -0.02 and chosen[1, 0] > 0.02
    assert (np.hypot(chosen[:, 0], chosen[:, 1]) <= MAX_STEP_M + 1e-6).all()
    moves = policy.act(position, _empty_maps(2), lookahead)
    np.testing.assert_allclose(moves, chosen / MAX_STEP_M, atol=1e-5)  # one move gets there
    # from a far corner with the lowest loss at the opposite corner, it still moves at most one step
    corner = _sensor_pos(-0.035, -0.035)
    far = policy.choose(corner, _empty_maps(1), _slope(1, 1.0, 1.0)).numpy()[0]
    assert np.hypot(far[0] + 0.035, far[1] + 0.035) <= MAX_STEP_M + 1e-6 and far[0] > -0.035 and far[1] > -0.035
    # with any reach it picks the far corner itself, and the move heads there at full length
    anywhere = AdaptivePolicy(reach_m=None)
    target = anywhere.choose(corner, _empty_maps(1), _slope(1, 1.0, 1.0)).numpy()[0]
    assert target[0] > 0.03 and target[1] > 0.03
    assert np.hypot(*anywhere.act(corner, _empty_maps(1), _slope(1, 1.0, 1.0))[0]) == pytest.approx(1.0, abs=1e-5)


def test_it_does_not_touch_again_where_the_map_is_already_covered():
    policy = AdaptivePolicy()
    maps = _empty_maps(1)
    # a blank region already felt: the left half of the map is covered (coverage channel) with no signal
    maps[0, -1, :, : MAP_PIXELS // 2] = 1.0
    lookahead = _slope(1, -1.0, 0.0)  # the lookahead alone would go left
    chosen = policy.choose(_sensor_pos(0.0, 0.0), maps, lookahead).numpy()[0]
    assert chosen[0] > -0.01  # at the edge of the covered half at most: its footprint adds new ground
    assert float(new_area(maps[:, -1:], torch.tensor([[chosen]], dtype=torch.float32))[0, 0]) >= policy.min_new_area
    # the same lookahead on an empty map goes left: the covered ground is what changed the choice
    assert policy.choose(_sensor_pos(0.0, 0.0), _empty_maps(1), lookahead).numpy()[0, 0] < -0.02


def test_lookahead_is_read_where_the_touch_would_be():
    lookahead = torch.zeros(1, 1, 8, 8)
    lookahead[0, 0, 1, 6] = 1.0  # row 1 from +y, column 6 along +x
    cell = 2 * MAP_HALF_M / 8
    x, y = -MAP_HALF_M + 6.5 * cell, MAP_HALF_M - 1.5 * cell
    values = lookahead_at(lookahead, torch.tensor([[[x, y], [-x, -y]]], dtype=torch.float32))
    assert float(values[0, 0]) == pytest.approx(1.0) and float(values[0, 1]) == pytest.approx(0.0)


def test_subset_maps_equal_the_agents_running_maps_and_histories_leave_a_touch_out():
    env = gym.make_vec("gauntlet/TactileMNIST-v0", num_envs=2, objects_per_split=SMOKE_OBJECTS)
    background = gel_background((64, 64))
    observation, _ = env.reset(seed=3)
    rng = np.random.default_rng(0)
    features, positions = [], []
    running = TouchMap(2, background)
    for _ in range(4):
        last = running.add(observation["sensor_img"], observation["sensor_pos"])
        features.append(touch_features(torch.from_numpy(observation["sensor_img"]), background))
        positions.append(torch.from_numpy(observation["sensor_pos"].copy()))
        observation, *_ = env.step({"action": rng.uniform(-1, 1, (2, 2)).astype(np.float32),
                                    "prediction": np.zeros((2, 10), np.float32)})
    stacked_f, stacked_p = torch.stack(features, 1), torch.stack(positions, 1)
    pasted, covered = paste(stacked_f.reshape(8, *stacked_f.shape[2:]), stacked_p.reshape(8, 3))
    pasted, covered = pasted.reshape(2, 4, *pasted.shape[1:]), covered.reshape(2, 4, *covered.shape[1:])
    torch.testing.assert_close(subset_maps(pasted, covered, torch.ones(2, 1, 4)), last, atol=1e-5, rtol=1e-5)
    prefix = torch.tensor([[[1.0, 1.0, 0.0, 0.0]]] * 2)
    expected = episode_maps(stacked_f, stacked_p, None, torch.full((2, 1), 1))
    torch.testing.assert_close(subset_maps(pasted, covered, prefix), expected, atol=1e-5, rtol=1e-5)
    masks, extra = draw_histories(50, 16, 4, torch.Generator().manual_seed(0))
    sizes = masks.sum(-1)
    assert (sizes >= 1).all() and (sizes <= 15).all()
    assert (masks.gather(-1, extra[..., None]) == 0).all()  # the extra touch is never in its history


def test_adaptive_experiment_smoke_run_and_the_registered_agent(tmp_path, capsys):
    experiment = load_experiment("tactile")
    result = experiment.main(["--adaptive", "--smoke", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "TactileMNIST-adaptive-seed0.json").read_text())
    for policy in ("scan", "adaptive", "random"):
        curve = saved["accuracy_by_touches"][policy]
        assert len(curve["mean"]) == 16 and all(lo <= m <= hi for lo, m, hi in
                                                zip(curve["low"], curve["mean"], curve["high"]))
    assert saved["scan_final"] == result["scan_final"] and saved["eval_episodes"] == 6
    summary = json.loads((tmp_path / "TactileMNIST-adaptive.json").read_text())
    assert summary["seeds"] == [0] and (tmp_path / "TactileMNIST-adaptive.png").stat().st_size > 0

    env = gym.make("gauntlet/TactileMNIST-test-v0", objects_per_split=SMOKE_OBJECTS)
    agent = gauntlet.make_agent("tactile-adaptive", checkpoint=str(tmp_path / "TactileMNIST-adaptive-seed0.pt"))
    episode = rollout(env, agent, seed=1)
    assert len(episode.steps) == 16
    checkpoint = str(tmp_path / "TactileMNIST-adaptive-seed0.pt")
    evaluated = experiment.main(["--adaptive", "--smoke", "--checkpoint", checkpoint, "--reach", "any",
                                 "--out", str(tmp_path)])
    covered = evaluated["region_covered_by_touches"]["adaptive"]["mean"]
    assert evaluated["eval_episodes"] == 8 and all(0 < a <= b <= 1 for a, b in zip(covered, covered[1:]))
    with pytest.raises(SystemExit) as stop:
        experiment.main(["--adaptive", "--smoke", "--family", "Toolbox", "--out", str(tmp_path)])
    assert stop.value.code == 2 and "classification family" in capsys.readouterr().err
