"""gym.make of the tool-task env without its arguments says what it needs."""

import gymnasium as gym
import pytest

import gauntlet  # noqa: F401  (registers the gauntlet/ envs)


def test_make_without_tasks_names_the_missing_arguments():
    with pytest.raises(ValueError, match=r"tasks=.*server="):
        gym.make("gauntlet/ToolTask-v0")
