"""An env's own metrics (``info["metrics"]`` at the last step) reach the run's summaries and its table."""

from __future__ import annotations

import io

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from rich.console import Console

from gauntlet.batch import RunSpec, run_many
from gauntlet.cli_commands.running import _run_summary
from gauntlet.info_keys import METRICS, metrics_of

GUESS = "test/GuessTheBit-v0"
STEPS = 3


class GuessTheBit(gym.Env):
    """Guess a hidden bit drawn at reset; every step reports the latest guess's accuracy and error.

    Earlier steps report other values than the last, so a summary that read any step but the last
    would show a different mean.
    """

    observation_space = spaces.Discrete(1)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.bit = int(self.np_random.integers(2))
        self.t = 0
        return 0, {}

    def step(self, action):
        self.t += 1
        correct = float(int(action) == self.bit)
        last = self.t == STEPS
        metrics = {"accuracy": correct, "error": 1.0 - correct} if last else {"accuracy": 0.5, "error": 7.0}
        return 0, correct, last, False, {METRICS: metrics}


class Blank(GuessTheBit):
    def step(self, action):
        observation, reward, terminated, truncated, _ = super().step(action)
        return observation, reward, terminated, truncated, {}


@pytest.fixture(autouse=True)
def registered():
    gym.register(GUESS, entry_point=GuessTheBit)
    gym.register("test/Blank-v0", entry_point=Blank)
    yield
    del gym.registry[GUESS], gym.registry["test/Blank-v0"]


def table_rows(result) -> dict[str, str]:
    """The run table as printed: statistic -> value."""
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(_run_summary(result))
    cells = [line.strip("│").split("│") for line in console.export_text().splitlines() if line.startswith("│")]
    return {name.strip(): value.strip() for name, value in cells}


def last_step_metrics(index: int, folder) -> dict[str, float]:
    from gauntlet import load_episodes

    episode = next(e for e in load_episodes(folder) if e.episode_id.endswith(f"-{index:06d}"))
    return episode.steps[-1].info[METRICS]


def test_each_summary_carries_its_episodes_last_step_metrics_and_the_table_shows_their_means(tmp_path):
    spec = RunSpec(env_id=GUESS, seed=3)
    result = run_many(spec, 8, tmp_path, workers=1, progress=False)
    for summary in result.episodes:
        assert summary.metrics == last_step_metrics(summary.index, tmp_path)
        assert summary.metrics["accuracy"] in (0.0, 1.0) and summary.metrics["error"] != 7.0
    accuracy = np.mean([summary.metrics["accuracy"] for summary in result.episodes])
    rows = table_rows(result)
    assert rows["mean accuracy"] == f"{accuracy:.3f}" and rows["mean error"] == f"{1 - accuracy:.3f}"
    assert list(rows).index("mean accuracy") == list(rows).index("min / max return") + 1  # beside the return


def test_a_resumed_run_reads_the_metrics_of_its_earlier_episodes_back_from_their_files(tmp_path):
    spec = RunSpec(env_id=GUESS, seed=5)
    first = run_many(spec, 4, tmp_path, workers=1, progress=False)
    resumed = run_many(spec, 6, tmp_path, workers=1, progress=False)
    assert resumed.skipped == 4
    assert [s.metrics for s in resumed.episodes[:4]] == [s.metrics for s in first.episodes]
    assert all(s.metrics for s in resumed.episodes)


def test_an_env_without_metrics_gets_no_metric_rows(tmp_path):
    result = run_many(RunSpec(env_id="test/Blank-v0"), 2, tmp_path, workers=1, progress=False)
    assert all(summary.metrics == {} for summary in result.episodes)
    rows = table_rows(result)
    assert "mean return" in rows and "mean accuracy" not in rows and "mean error" not in rows


def test_metrics_of_keeps_numbers_only():
    info = {METRICS: {"accuracy": np.float32(0.5), "count": 3, "flag": True, "label": "a", "curve": [1, 2]}}
    assert metrics_of(info) == {"accuracy": 0.5, "count": 3.0}
    assert metrics_of({}) == {} and metrics_of({METRICS: 0.3}) == {}
