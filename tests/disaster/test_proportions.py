"""The suite's tasks per dimension hold DORA's proportions at the size the issue asks for (>= 1,500 tasks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gauntlet.mcp_servers.disaster.tasks import DORA_TASKS, MIN_SUITE_TASKS, proportion_check

BENCH_RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "disaster.json"


def test_dora_has_515_tasks_of_which_61_t4_and_114_t5():
    assert sum(DORA_TASKS.values()) == 515
    assert (DORA_TASKS["T4"], DORA_TASKS["T5"]) == (61, 114)


def test_the_minima_are_doras_counts_scaled_to_1500_and_add_up_to_at_least_1500():
    minima = {dim: row["minimum"] for dim, row in proportion_check({}).items()}
    # 132 x 1500 / 515 = 384.5 -> 385, 108 -> 314.6 -> 315, 100 -> 291.3 -> 292, 61 -> 177.7 -> 178, 114 -> 332.0 -> 333
    assert minima == {"T1": 385, "T2": 315, "T3": 292, "T4": 178, "T5": 333}
    assert sum(minima.values()) >= MIN_SUITE_TASKS


def test_part_one_suite_with_150_t4_and_200_t5_tasks_falls_behind_in_every_dimension_but_t1():
    check = proportion_check({"T1": 550, "T2": 270, "T3": 262, "T4": 150, "T5": 200})
    assert {dim: row["shortfall"] for dim, row in check.items()} == {"T1": 0, "T2": 45, "T3": 30, "T4": 28,
                                                                     "T5": 133}
    assert check["T5"]["share"] == pytest.approx(200 / 1432)


def test_a_suite_of_doras_proportions_three_times_over_holds():
    assert all(row["shortfall"] == 0 for row in proportion_check({d: 3 * n for d, n in DORA_TASKS.items()}).values())


def test_a_missing_dimension_falls_behind_by_its_whole_minimum():
    counts = {d: 3 * n for d, n in DORA_TASKS.items() if d != "T4"}
    assert proportion_check(counts)["T4"]["shortfall"] == 178


def test_the_built_suite_holds_doras_proportions():
    """The full suite's counts as ``gauntlet bench disaster --accuracy-only`` recorded them (building the
    suite takes tens of minutes, so a unit test reads the record of the current suite version)."""
    from gauntlet.mcp_servers.disaster.data import scene_entry
    from gauntlet.mcp_servers.disaster.tasks import tasks_version

    suite = json.loads(BENCH_RESULTS.read_text()).get("suite", {})
    current = tasks_version(scene_entry("clean")[1])
    if suite.get("tasks_version") != current:
        pytest.skip(f"bench/results/disaster.json records no counts of suite version {current}; run "
                    "`gauntlet bench disaster --accuracy-only`")
    short = {dim: row["shortfall"] for dim, row in proportion_check(suite["by_dimension"]).items() if row["shortfall"]}
    assert not short, f"dimensions short of DORA's proportions at 1,500 tasks: {short}"
