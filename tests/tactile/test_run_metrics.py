"""Each tactile family reports its own metric (accuracy, or error) at every step, and ``gauntlet run``
prints its mean beside the return."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import gauntlet  # noqa: F401 - registers the gauntlet/ envs
from gauntlet import load_episodes
from gauntlet.info_keys import METRICS

from .conftest import SMOKE_OBJECTS

MOVE = np.zeros(2, np.float32)


def test_a_classification_step_reports_whether_its_prediction_is_right_as_accuracy():
    env = gym.make("gauntlet/TactileMNIST-test-v0", objects_per_split=SMOKE_OBJECTS)
    _, info = env.reset(seed=2)
    right = np.full(10, -5.0, np.float32)
    right[info["target"]] = 5.0
    wrong = np.roll(right, 1)
    assert env.step({"action": MOVE, "prediction": right})[4][METRICS] == {"accuracy": 1.0}
    assert env.step({"action": MOVE, "prediction": wrong})[4][METRICS] == {"accuracy": 0.0}


def test_a_regression_step_reports_the_distance_of_its_prediction_to_the_target_as_error():
    env = gym.make("gauntlet/TactileMNISTVolume-test-v0", objects_per_split=SMOKE_OBJECTS)
    _, info = env.reset(seed=2)
    target = np.asarray(info["target"], np.float32)
    assert env.step({"action": MOVE, "prediction": target})[4][METRICS] == {"error": 0.0}
    metrics = env.step({"action": MOVE, "prediction": target + np.float32(3.0)})[4][METRICS]
    assert list(metrics) == ["error"] and metrics["error"] == pytest.approx(3.0)


def run_table(env_id: str, out: Path) -> dict[str, str]:
    """``gauntlet run`` on a smoke-sized family: its summary table as statistic -> value."""
    command = [sys.executable, "-m", "gauntlet.cli", "run", env_id, "-n", "3", "--workers", "1", "--out", str(out),
               "--env-kwargs", json.dumps({"objects_per_split": SMOKE_OBJECTS})]
    result = subprocess.run(command, capture_output=True, text=True, timeout=180,
                            env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 0, result.stderr[-2000:]
    cells = [line.strip("│").split("│") for line in result.stdout.splitlines() if line.startswith("│")]
    return {name.strip(): value.strip() for name, value in cells}


@pytest.mark.parametrize(("family", "metric"), [("TactileMNIST", "accuracy"), ("TactileMNISTVolume", "error")])
def test_gauntlet_run_prints_the_familys_metric_beside_the_return(tmp_path, family, metric):
    rows = run_table(f"gauntlet/{family}-test-v0", tmp_path)
    final = [episode.steps[-1].info[METRICS][metric] for episode in load_episodes(tmp_path)]
    assert len(final) == 3
    assert "mean return" in rows and rows[f"mean {metric}"] == f"{np.mean(final):.3f}"
