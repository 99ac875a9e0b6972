"""T4 temporal tasks: gold plans over the five dates replay to 1.0 through MCP; hand-worked answer checks."""

from __future__ import annotations

import functools
from datetime import date

import pytest

from gauntlet.mcp_servers.disaster import reporting
from gauntlet.mcp_servers.disaster.scoring import DoraScorer, grade_answer, truth_vs_gold
from gauntlet.mcp_servers.disaster.tasks_temporal import _first_cut_and_reopening, _truth_span
from gauntlet.tasks import load_suite, save_suite

T4_CATEGORIES = {"t4_peak_extent", "t4_peak_date", "t4_trend", "t4_growth_rate", "t4_recession_rate",
                 "t4_extent_change", "t4_buildings_affected_any_time", "t4_road_cut", "t4_facility_cut_off",
                 "t4_recovery_share"}


@pytest.fixture(scope="module")
def t4_suite(flood_suite, tmp_path_factory):
    """The T4 tasks of the flood event's suite, saved as a suite of their own."""
    tasks = [t for t in load_suite(flood_suite) if t.metadata["dimension"] == "T4"]
    path = tmp_path_factory.mktemp("t4") / "tasks.jsonl"
    save_suite(tasks, path)
    return path


def test_flood_event_gets_every_t4_template_with_truth_from_the_generator(t4_suite):
    tasks = load_suite(t4_suite)
    assert {t.metadata["category"] for t in tasks} == T4_CATEGORIES
    for task in tasks:
        assert task.metadata["truth_answer"] is not None
        assert any(name.startswith("t3_") for name in task.inputs["layers"])  # the dated layers, with dates
        assert all("date" in layer for name, layer in task.inputs["layers"].items() if name[:1] == "t")
    calls = {step.call for t in tasks for step in t.gold_trajectory}
    assert "report_extract_evidence" in calls and "seg_water_sar" in calls  # SAR on the clouded dates


def test_no_gold_plan_makes_the_same_call_on_the_same_data_twice(flood_suite):
    """A repeated call would count against the trajectory metrics of an agent that does not repeat it. (Calls
    on workspace files may repeat: two dates whose results are equal share one content-named file.)"""
    import json

    for task in load_suite(flood_suite):
        calls = [(step.call, json.dumps(step.args, sort_keys=True)) for step in task.gold_trajectory]
        repeated = {call for call in calls if calls.count(call) > 1 and '"ws/' not in call[1]}
        assert not repeated, (task.id, repeated)


def test_t4_gold_replays_through_an_mcp_session_to_1(t4_suite, scenes_root):
    import gymnasium as gym

    import gauntlet
    from gauntlet.agents.tool import GoldAgent
    from gauntlet.mcp_servers.disaster.server import build_server
    from gauntlet.mcp_servers.disaster.tasks import MAX_TEXT_LENGTH

    tasks = load_suite(t4_suite)
    env = gym.make("gauntlet/ToolTask-v0", tasks=str(t4_suite), server=functools.partial(
        build_server, scenes_root / "scenes"), scorer=DoraScorer(), max_text_length=MAX_TEXT_LENGTH)
    agent = GoldAgent(suite=str(t4_suite))
    try:
        for index, task in enumerate(tasks):
            episode = gauntlet.rollout(env, agent, seed=index, record="memory")
            assert episode.steps[-1].info["score"] == pytest.approx(1.0), task.id
    finally:
        env.close()


def test_truth_vs_gold_is_reported_for_t4(t4_suite):
    row = truth_vs_gold(load_suite(t4_suite))["T4"]
    assert row["with_truth"] == len(T4_CATEGORIES) and 0 <= row["share"] <= 1


def test_a_right_t4_answer_without_the_tool_plan_scores_only_the_answer_part(t4_suite):
    task = next(t for t in load_suite(t4_suite) if t.metadata["category"] == "t4_peak_date")
    scorer = DoraScorer()
    assert scorer.score(task, task.answer, []).score == pytest.approx(0.7)
    calls = task.gold_trajectory
    assert scorer.score(task, task.answer, calls).score == pytest.approx(1.0)
    assert scorer.score(task, "2000-01-01", calls).score == pytest.approx(0.3)


@pytest.mark.parametrize("states, expected", [
    ([("07-15", False), ("07-18", True), ("07-25", True), ("08-29", False)], "cut 07-18, reopened 08-29"),
    ([("07-15", True), ("07-18", True), ("07-25", True), ("08-29", True)], "cut 07-15, reopened never"),
    ([("07-15", False), ("07-18", False), ("07-25", False), ("08-29", False)], "never cut"),
    ([("07-15", True), ("07-18", False), ("07-25", True), ("08-29", True)], "cut 07-15, reopened 07-18"),
])
def test_first_cut_and_reopening_by_hand(states, expected):
    assert _first_cut_and_reopening(states) == expected


def test_truth_spans_read_as_the_gold_answers_do():
    assert _truth_span({"cut": "2021-07-15", "reopened": None}) == "cut 2021-07-15, reopened never"
    assert _truth_span({"cut": "2021-07-15", "reopened": "2021-07-25"}) == "cut 2021-07-15, reopened 2021-07-25"
    assert _truth_span(None) == "never cut"


@pytest.mark.parametrize("spec, expected, answer, correct", [
    ({"type": "exact"}, "cut 2021-07-15, reopened never", "Cut 2021-07-15,  reopened NEVER", True),
    ({"type": "exact"}, "cut 2021-07-15, reopened never", "cut 2021-07-15, reopened 2021-07-25", False),
    ({"type": "exact"}, "expand-then-recede", "expanding", False),
    ({"type": "exact"}, "2021-07-18", " 2021-07-18 ", True),
    ({"type": "numeric"}, 25246.67, 23466.67, True),      # growth rate within 20 %
    ({"type": "numeric"}, 25246.67, 15000.0, False),
    ({"type": "numeric"}, -33900.0, -55900.0, False),     # a signed change: 65 % off
    ({"type": "numeric"}, 72.22, "60.0", True),            # recovery share (percent)
])
def test_t4_answers_by_hand(spec, expected, answer, correct):
    assert grade_answer(spec, expected, answer)[1] is correct


def test_hand_worked_evidence_gives_the_t4_truths():
    # areas over a flood's five dates: rise, peak, recession; the peak date is the first of the maximum
    days = [date(2021, 7, 3), date(2021, 7, 15), date(2021, 7, 18), date(2021, 7, 25), date(2021, 8, 29)]
    evidence = reporting.area_evidence(days, [0.0, 2000.0, 3000.0, 1500.0, 300.0])
    assert evidence.trend == "expand-then-recede" and evidence.dates[evidence.peak_index] == days[2]
    assert evidence.growth_rate_m2_per_day == pytest.approx(3000.0 / 15)
    assert evidence.recession_rate_m2_per_day == pytest.approx(2700.0 / 42)
    flat = reporting.area_evidence(days, [0.0, 500.0, 500.0, 500.0, 500.0])  # shaking: all damage at the onset
    assert flat.trend == "expanding" and flat.dates[flat.peak_index] == days[1]
