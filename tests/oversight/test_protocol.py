"""The branching protocol on the corridor, where every action's expected utility is known in closed form."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import orjson
import pytest

from gauntlet.controllers.oversight.benchmarks.basic import CorridorBenchmark, CorridorEnv, corridor_expected_utilities
from gauntlet.controllers.oversight.benchmarks import BENCHMARKS, Benchmark, get_benchmark
from gauntlet.controllers.oversight.protocol import CollectStats, collect_episode
from gauntlet.controllers.oversight.utility import LADDER, UtilityConfig, recompute

ROW_KEYS = {"benchmark", "episode", "seed", "t", "draw", "features", "branches", "prefix_match", "base_success",
            "base_length", "expert_strength", "benchmark_meta"}


def test_get_benchmark_knows_all_nine_and_refuses_others():
    assert set(BENCHMARKS) == {"corridor", "taxi", "textworld", "scienceworld", "chem", "disaster", "llm-chem",
                               "llm-disaster", "llm-textworld"}
    benchmark = get_benchmark("corridor", length=5)
    assert isinstance(benchmark, Benchmark) and benchmark.length == 5
    with pytest.raises(ValueError, match="corridor"):
        get_benchmark("atlantis")


def test_every_row_replays_its_prefix_and_quit_is_worth_u_quit():
    benchmark, config = CorridorBenchmark(), UtilityConfig()
    stats = CollectStats()
    rows = [row for episode in range(6) for row in collect_episode(benchmark, episode, draws=2, stats=stats)]
    assert stats.replays > 0 and stats.match_rate == 1.0
    assert stats.rows == len(rows) and stats.rows_per_s > 0
    # The wall time is split by part: the base episodes and each action's branches, within the total.
    assert set(stats.action_s) == {"base", *LADDER} and all(seconds >= 0 for seconds in stats.action_s.values())
    assert sum(stats.action_s.values()) <= stats.seconds
    for row in rows:
        assert set(row) == ROW_KEYS and set(row["branches"]) == set(LADDER)  # no revise: no hint or confirm
        assert row["prefix_match"] is True
        assert row["branches"]["quit"] == {"success": False, "steps": 0, "utility": 0.0}
        assert 0 <= row["t"] < row["base_length"] <= benchmark.max_steps
        for action, branch in row["branches"].items():
            assert branch["steps"] <= benchmark.max_steps - row["t"], "a branch overran the episode budget"
            assert branch["utility"] == config.utility(action, branch["success"], branch["steps"])
        if row["draw"] == 0:  # the agent's own draw is the original episode's suffix
            original = row["branches"]["continue"]
            assert original["steps"] == row["base_length"] - row["t"]
            assert original["success"] == row["base_success"]
    orjson.dumps(rows)  # rows are plain JSON


def test_mean_utilities_converge_to_the_closed_form():
    """Every draw d >= 1 is an independent sample of each action's utility at its prefix, so the mean
    residual (realised minus expected) of each action is zero within a few standard errors."""
    benchmark, config, draws = CorridorBenchmark(), UtilityConfig(), 6
    residuals = defaultdict(list)
    for episode in range(8):
        rows = collect_episode(benchmark, episode, draws=draws, config=config)
        position = {row["t"]: row["features"]["position"] for row in rows}
        for row in rows:
            if row["draw"] == 0:
                continue
            t = row["t"]
            expected = corridor_expected_utilities(
                position=int(position[t]), back_position=int(position[max(0, t - config.r)]), t=t,
                lapse_rate=row["features"]["lapse_rate"], length=benchmark.length, max_steps=benchmark.max_steps,
                config=config)
            for action, branch in row["branches"].items():
                residuals[action].append(branch["utility"] - expected[action])
    for action, values in residuals.items():
        values_array = np.asarray(values)
        standard_error = values_array.std(ddof=1) / math.sqrt(len(values_array))
        assert abs(values_array.mean()) <= 4 * standard_error + 1e-9, (action, values_array.mean(), standard_error)
    assert len(residuals["continue"]) > 500


def test_a_weaker_expert_is_priced_by_the_same_closed_form():
    benchmark, config, strength = CorridorBenchmark(lapse_range=(0.2, 0.2)), UtilityConfig(), 0.6
    realised = []
    for episode in range(30):
        row = collect_episode(benchmark, episode, actions=("expert",), prefixes=[0], draws=8,
                              strength_expert=strength)
        realised += [r["branches"]["expert"]["utility"] for r in row]
        assert {r["expert_strength"] for r in row} == {strength}
    expected = corridor_expected_utilities(position=0, back_position=0, t=0, lapse_rate=0.2, length=benchmark.length,
                                           max_steps=benchmark.max_steps, config=config,
                                           expert_strength=strength)["expert"]
    standard_error = np.std(realised, ddof=1) / math.sqrt(len(realised))
    assert abs(np.mean(realised) - expected) <= 4 * standard_error
    full = corridor_expected_utilities(position=0, back_position=0, t=0, lapse_rate=0.2, length=benchmark.length,
                                       max_steps=benchmark.max_steps, config=config)["expert"]
    assert expected < full


def test_the_optimal_action_varies_across_corridor_prefixes():
    benchmark, config = CorridorBenchmark(), UtilityConfig()
    best = set()
    for lapse_rate in (0.0, 0.3, 0.6):
        for position, t in ((0, 0), (5, 6), (2, 14), (9, 10), (8, 18)):
            expected = corridor_expected_utilities(position=position, back_position=max(0, position - 1), t=t,
                                                   lapse_rate=lapse_rate, length=benchmark.length,
                                                   max_steps=benchmark.max_steps, config=config)
            best.add(max(expected, key=expected.__getitem__))
    assert {"continue", "expert", "quit"} <= best


class Counting(CorridorBenchmark):
    """The corridor, counting its envs' restores and steps."""

    def __init__(self, counts: dict[str, int]):
        super().__init__(length=60, max_steps=80, lapse_range=(0.0, 0.1))
        self.counts = counts

    def make_env(self, episode: int):
        env = super().make_env(episode)
        base: CorridorEnv = env.unwrapped
        counts, restore, step = self.counts, base.restore, base.step

        def counted_restore(snapshot):
            counts["restore"] += 1
            return restore(snapshot)

        def counted_step(action):
            counts["step"] += 1
            return step(action)

        base.restore, base.step = counted_restore, counted_step
        return env


@pytest.mark.parametrize("t", [5, 40])
def test_branching_at_any_step_costs_one_restore_per_branch_and_no_replay(t):
    counts = {"restore": 0, "step": 0}
    rows = collect_episode(Counting(counts), 0, prefixes=[t])
    assert [row["t"] for row in rows] == [t]
    branches = rows[0]["branches"]
    run = [action for action in branches if action != "quit"]
    assert counts["restore"] == len(run)
    # The base episode once, then each branch's own steps: no step re-runs the prefix.
    assert counts["step"] == rows[0]["base_length"] + sum(branches[a]["steps"] for a in run)


def test_rollback_returns_r_steps_back_clamped_at_the_first_step():
    # An agent that never lapses walks one cell per step: a branch's steps tell where it started.
    rows = collect_episode(CorridorBenchmark(lapse_range=(0.0, 0.0)), 0, prefixes=[1, 5],
                           actions=("continue", "rollback"))
    steps = {row["t"]: {a: b["steps"] for a, b in row["branches"].items()} for row in rows}
    assert steps[1] == {"continue": 9, "rollback": 10}   # back to step 0, not step -1
    assert steps[5] == {"continue": 5, "rollback": 7}    # back to step 3


def test_rollback_draws_afresh_even_at_draw_zero():
    benchmark = CorridorBenchmark(lapse_range=(0.5, 0.5))
    outcomes = [collect_episode(benchmark, episode, prefixes=[0], actions=("continue", "rollback"))[0]["branches"]
                for episode in range(10)]
    # From step 0, rollback restores the same state as continue: only a fresh draw can make them differ.
    assert any(o["continue"]["steps"] != o["rollback"]["steps"] for o in outcomes)


def test_prefixes_can_be_a_stride_or_a_list_and_actions_a_subset():
    benchmark = CorridorBenchmark()
    rows = collect_episode(benchmark, 1, prefixes=3, actions=("quit", "expert"))
    assert [row["t"] for row in rows] == list(range(0, rows[0]["base_length"], 3))
    assert all(set(row["branches"]) == {"quit", "expert"} and row["prefix_match"] for row in rows)
    rows = collect_episode(benchmark, 1, prefixes=[2, 4, 999])
    assert [row["t"] for row in rows] == [2, 4]
    for bad in ({"prefixes": 0}, {"prefixes": "some"}, {"actions": ("continue", "pray")}, {"draws": 0}):
        with pytest.raises(ValueError):
            collect_episode(benchmark, 1, **bad)


def test_stronger_is_branched_only_where_the_benchmark_has_one():
    class NoStronger(CorridorBenchmark):
        has_stronger = False

    rows = collect_episode(NoStronger(), 0, prefixes=[0])
    assert "stronger" not in rows[0]["branches"] and "rollback" in rows[0]["branches"]


def test_recompute_prices_collected_rows_as_collecting_under_that_config_would():
    benchmark, other = CorridorBenchmark(), UtilityConfig(w=2.0, c_intervene=0.2, s=0.05, u_quit=-0.1)
    rows = collect_episode(benchmark, 2, draws=2)
    assert recompute(rows, other) == collect_episode(benchmark, 2, draws=2, config=other)


def test_every_benchmark_lives_in_the_benchmarks_package():
    import importlib

    from gauntlet.controllers.oversight.benchmarks import basic
    from gauntlet.registry import registry

    for target in BENCHMARKS.values():
        module, _, factory = target.partition(":")
        assert module.rsplit(".", 1)[0] == "gauntlet.controllers.oversight.benchmarks"
        assert callable(getattr(importlib.import_module(module), factory))
    assert registry.get("data", "oversight-taxi-expert").load() is basic.build_taxi_expert
