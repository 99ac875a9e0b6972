"""Controllers and monitors on `gauntlet run` / `gauntlet eval`: named on the command line, built in every
worker, their decisions recorded in every episode file, and bad names or configs refused in one line."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

from gauntlet import load_episodes
from gauntlet.basic_agents import RandomAgent
from gauntlet.basic_hooks import BudgetController
from gauntlet.batch import HookSpec, RunSpec, run_many
from gauntlet.episode import AgentSpec
from gauntlet.registry import make_hook
from gauntlet.runner import rollout
from tests.test_cli import assert_one_line_error, gauntlet


def test_budget_controller_halts_at_the_step_limit_in_memory() -> None:
    episode = rollout(gym.make("CartPole-v1"), RandomAgent(), seed=3, hooks=[BudgetController(max_steps=4)])
    assert len(episode.steps) == 4
    assert episode.steps[-1].truncated
    kinds = [event.kind for event in episode.steps[-1].events]
    assert kinds == ["decision", "decision", "intervention"]  # its own step's decision, then the halt's
    assert episode.steps[-1].events[-1].data["intervention"] == "halt"


def test_budget_controller_rejects_an_empty_budget() -> None:
    with pytest.raises(ValueError, match="max_steps or max_cost"):
        BudgetController()
    with pytest.raises(TypeError, match="no `name`"):
        from gauntlet.registry import registry

        registry.add("controller", "not-a-controller", "gauntlet.basic_agents:RandomAgent")
        try:
            make_hook("controller", "not-a-controller")
        finally:
            registry._entries["controller"].pop("not-a-controller")


@pytest.mark.parametrize("workers", [1, 2])
def test_run_many_builds_the_hooks_in_every_worker_and_records_them(tmp_path: Path, workers: int) -> None:
    spec = RunSpec(env_id="CartPole-v1", agent=AgentSpec(name="random"), seed=5,
                   hooks=[HookSpec(kind="controller", name="budget", config={"max_steps": 3})])
    result = run_many(spec, 4, tmp_path / "run", workers=workers)
    assert [summary.length for summary in result.episodes] == [3, 3, 3, 3]
    for path in sorted((tmp_path / "run" / "episodes").glob("*.jsonl")):
        (episode,) = load_episodes(path)
        assert episode.config["hooks"] == [{"kind": "controller", "name": "budget", "config": {"max_steps": 3}}]
        assert episode.steps[-1].truncated
        assert [e.data.get("intervention") for e in episode.steps[-1].events if e.kind == "intervention"] == ["halt"]


def test_a_run_folder_with_other_hooks_is_not_resumed(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_many(RunSpec(env_id="CartPole-v1", seed=1), 1, out, workers=1)
    with pytest.raises(ValueError, match="hooks"):
        run_many(RunSpec(env_id="CartPole-v1", seed=1, hooks=[HookSpec(kind="controller", name="budget",
                                                                          config={"max_steps": 2})]), 1, out, workers=1)


def test_cli_run_with_a_controller(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = gauntlet("run", "CartPole-v1", "-n", "2", "--workers", "1", "--out", str(out),
                      "--controller", "budget", "--controller-config", '{"max_steps": 5}')
    assert result.returncode == 0, result.stderr
    lengths = [len(episode.steps) for path in sorted((out / "episodes").glob("*.jsonl"))
               for episode in load_episodes(path)]
    assert lengths == [5, 5]


@pytest.mark.parametrize(("args", "words"), [
    (["--controller", "nope"], ["unknown controller 'nope'"]),
    (["--controller", "budget"], ["max_steps or max_cost", "--controller-config"]),
    (["--controller", "budget", "--controller-config", '{"max_step": 5}'], ["max_step", "--controller-config"]),
    (["--controller", "budget", "--controller-config", "[1]"], ["JSON object"]),
    (["--controller-config", '{"max_steps": 5}'], ["add --controller NAME"]),
    (["--monitor", "nope"], ["unknown monitor 'nope'"]),
])
def test_cli_refuses_bad_hooks_in_one_line(tmp_path: Path, args: list[str], words: list[str]) -> None:
    result = gauntlet("run", "CartPole-v1", "-n", "1", "--workers", "1", "--out", str(tmp_path / "run"), *args)
    assert_one_line_error(result, *words)
    assert not (tmp_path / "run").exists()
