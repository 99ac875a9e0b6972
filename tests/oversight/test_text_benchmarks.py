"""The TextWorld and ScienceWorld oversight benchmarks: rows whose replay check holds, experts that win,
lapses that are what they say."""

from __future__ import annotations

import numpy as np
import pytest

from gauntlet.controllers.oversight.benchmarks import Benchmark, get_benchmark
from gauntlet.controllers.oversight.protocol import CollectStats, collect_episode
from gauntlet.controllers.oversight.benchmarks.text import (LAPSE_TEMPLATES, PLAN_ACTION, ROLLBACK, InfoExpert,
                                                            on_path_length, plan_position, scienceworld, textworld)
from gauntlet.controllers.oversight.utility import LADDER, UtilityConfig
from gauntlet.info_keys import PRIVILEGED

SMALL_TEXTWORLD = {"nb_rooms": 3, "nb_objects": 6, "quest_length": 4, "max_steps": 16}
"""Games of four-command quests that generate in about a second each."""
SHORT_TASK = ("find-non-living-thing",)
"""A ScienceWorld task whose gold sequence is five commands."""


@pytest.fixture(scope="module")
def textworld_home(tmp_path_factory):
    """A cache holding the small games of episodes 0 and 1, built once for the module."""
    home = tmp_path_factory.mktemp("textworld-benchmark-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GAUNTLET_HOME", str(home))
        benchmark = textworld(**SMALL_TEXTWORLD)
        for episode in range(2):
            benchmark.make_env(episode).close()
    return home


@pytest.fixture
def small_textworld(textworld_home, monkeypatch):
    monkeypatch.setenv("GAUNTLET_HOME", str(textworld_home))
    return get_benchmark("textworld", **SMALL_TEXTWORLD)


def test_textworld_rows_replay_every_prefix_exactly(small_textworld):
    """Done-when of the oversight issue: the replay-match rate is 100 % on TextWorld."""
    assert isinstance(small_textworld, Benchmark)
    config, stats = UtilityConfig(), CollectStats()
    rows = [row for episode in range(2) for row in collect_episode(small_textworld, episode, stats=stats)]
    assert stats.replays == len(rows) > 0 and stats.match_rate == 1.0
    assert all(row["prefix_match"] for row in rows)
    for row in rows:
        assert set(row["branches"]) == set(LADDER)  # no revise: no hint or confirm
        assert {"tw_score", "tw_admissible", "tw_rooms_seen", "tw_refused"} <= set(row["features"])
        assert row["benchmark_meta"]["game"] == row["episode"]
        for action, branch in row["branches"].items():
            assert branch["steps"] <= small_textworld.max_steps - row["t"]
            assert branch["utility"] == config.utility(action, branch["success"], branch["steps"])
    # The expert plays TextWorld's winning policy from the current state: it wins from every prefix
    # these short quests leave it the budget for.
    expert_wins = [row["branches"]["expert"]["success"] for row in rows]
    assert sum(expert_wins) >= sum(row["branches"]["continue"]["success"] for row in rows)
    assert all(expert_wins[:3])


def test_textworld_lapses_are_other_admissible_commands_and_premature_is_the_final_command(small_textworld):
    env = small_textworld.make_env(0)
    observation, info = env.reset(seed=small_textworld.episode_seed(0))
    rng = np.random.default_rng(0)
    expert = info[PRIVILEGED]["expert_action"]
    lapses = {small_textworld.lapse_action(observation, info, rng) for _ in range(40)}
    assert lapses <= set(info["admissible_commands"]) - {expert} and len(lapses) > 3
    assert small_textworld.premature_action(observation, info, rng) == info[PRIVILEGED]["expert_plan"][-1]
    env.close()


def test_experts_idle_where_the_env_names_no_command():
    expert = InfoExpert("expert_action", "look")
    assert expert.act(None, {PRIVILEGED: {"expert_action": None}}) == "look"
    assert expert.act(None, {PRIVILEGED: {"expert_action": "go east"}}) == "go east"


def test_gold_path_positions():
    gold = ["a", "b", "c", "d"]
    assert on_path_length(["a", "b", "x", "c"], gold) == 2 and on_path_length([], gold) == 0
    assert plan_position(["a", "x", "b", "b", "y", "c"], gold) == 3
    assert plan_position(["a", "b", "c", "d", "e"], gold) == 4


def test_scienceworld_lapses_never_focus_and_premature_actions_do():
    benchmark = scienceworld(tasks=SHORT_TASK)
    info = {"objects": ["air", "apple", "door to kitchen", "table"], PRIVILEGED: {}}
    rng = np.random.default_rng(1)
    lapses = [benchmark.lapse_action({}, info, rng) for _ in range(200)]
    assert not any(lapse.startswith("focus") for lapse in lapses)
    assert {lapse.split(" ")[0] for lapse in lapses} == {template.split(" ")[0] for template in LAPSE_TEMPLATES}
    assert benchmark.premature_action({}, info, rng).removeprefix("focus on ") in info["objects"]
    assert benchmark.task(0) == (SHORT_TASK[0], 0) and benchmark.task(3) == (SHORT_TASK[0], 3)


@pytest.mark.xdist_group("scienceworld")
def test_scienceworld_expert_rolls_back_to_the_gold_path_then_completes_the_task():
    benchmark = scienceworld(tasks=SHORT_TASK)
    env = benchmark.make_env(0)
    try:
        _, info = env.reset(seed=benchmark.episode_seed(0))
        gold = info[PRIVILEGED]["gold_actions"]
        for command in (gold[0], "look at picture", gold[1]):
            _, _, _, _, info = env.step(command)
        assert info[PRIVILEGED]["expert_action"] == ROLLBACK and info[PRIVILEGED][PLAN_ACTION] == gold[2]
        expert = benchmark.make_expert()
        commands, terminated = [], False
        while not terminated and len(commands) < 10:
            commands.append(expert.act(None, info))
            _, _, terminated, _, info = env.step(commands[-1])
        assert commands == [ROLLBACK, *gold[1:]] and info["success"]
    finally:
        env.close()


@pytest.mark.xdist_group("scienceworld")
def test_scienceworld_rows_replay_their_prefixes():
    benchmark = scienceworld(tasks=SHORT_TASK, max_steps=12)
    stats = CollectStats()
    rows = collect_episode(benchmark, 0, prefixes=[2], actions=("continue", "quit", "expert", "rollback"),
                           stats=stats)
    assert [row["t"] for row in rows] == [2] and stats.match_rate == 1.0
    assert all(row["branches"]["expert"]["success"] for row in rows)
    assert rows[0]["benchmark_meta"]["task"] == SHORT_TASK[0]
