"""Task suites: the JSONL format, and the scorer's grading of answers and trajectories."""

from __future__ import annotations

import pytest

from gauntlet.episode import ToolCall
from gauntlet.tasks import (
    NO_ANSWER,
    EvalSpec,
    GoldCall,
    Scorer,
    SuiteFormatError,
    ToolTask,
    load_suite,
    save_suite,
)

GOLD = [GoldCall(call="put", args={"key": "a", "value": 1}), GoldCall(call="put", args={"key": "b", "value": 2}),
        GoldCall(call="keys")]


def task(answer, **spec) -> ToolTask:
    return ToolTask(id="t", question="q", gold_trajectory=GOLD, answer=answer, eval_spec=EvalSpec(**spec))


def grade(answer_expected, answer_given, **spec) -> float:
    return Scorer().score(task(answer_expected, **spec), answer_given).answer_score


def test_suite_round_trips_through_jsonl(tmp_path):
    tasks = [task(7, kind="numeric", rel_tol=0.01),
             ToolTask(id="u", server="env:CartPole-v1", question="Q?", inputs={"map": "data/map.tif"}, answer="x")]
    path = save_suite(tasks, tmp_path / "suite.jsonl")
    assert load_suite(path) == tasks
    assert not list(tmp_path.glob("*.tmp"))  # written atomically, nothing left behind


def test_save_suite_refuses_repeated_ids(tmp_path):
    with pytest.raises(ValueError, match="repeated: t"):
        save_suite([task(1), task(2)], tmp_path / "suite.jsonl")


def test_load_suite_names_the_bad_line(tmp_path):
    good = ToolTask(id="ok", question="q", answer=1).model_dump_json()
    path = tmp_path / "suite.jsonl"
    path.write_text(f"{good}\n\n{{\"id\": \"x\", \"question\": \"q\"}}\n")
    with pytest.raises(SuiteFormatError, match=r"suite.jsonl:3: not a task \(answer: Field required\)"):
        load_suite(path)
    path.write_text(f"{good}\n{good}\n")
    with pytest.raises(SuiteFormatError, match="suite.jsonl:2: task id 'ok' already used on line 1"):
        load_suite(path)
    path.write_text("{not json\n")
    with pytest.raises(SuiteFormatError, match="suite.jsonl:1: not JSON"):
        load_suite(path)


def test_answer_must_fit_the_eval_kind():
    with pytest.raises(ValueError, match="numeric eval needs a number"):
        task("seven", kind="numeric")
    with pytest.raises(ValueError, match="set eval needs a list"):
        task("a", kind="set")


def test_exact_answers_ignore_case_and_spacing_unless_case_sensitive():
    assert grade("Paris", "  paris ") == 1.0
    assert grade("Paris", "paris", case_sensitive=True) == 0.0
    assert grade({"a": [1, "X"]}, {"a": [1.0, "x"]}) == 1.0
    assert grade("Paris", "Lyon") == 0.0


def test_numeric_answers_within_tolerance_score_one():
    assert grade(100.0, "100.5", kind="numeric", rel_tol=0.01) == 1.0
    assert grade(100.0, 102, kind="numeric", rel_tol=0.01) == 0.0
    assert grade(0.0, 1e-7, kind="numeric", abs_tol=1e-6) == 1.0
    assert grade(2.5, 2.5, kind="numeric") == 1.0
    assert grade([1.0, 2.0], [1.0, 3.0], kind="numeric", partial_credit=True) == 0.5
    assert grade(1.0, "one", kind="numeric") == 0.0
    # The tolerance is relative to the expected value: 30 % above is outside 25 % (math.isclose, dividing by
    # the larger number, would pass it), 20 % either way is inside.
    assert grade(100.0, 130.0, kind="numeric", rel_tol=0.25) == 0.0
    assert grade(100.0, 80.0, kind="numeric", rel_tol=0.25) == grade(100.0, 120.0, kind="numeric", rel_tol=0.25) == 1.0


def test_set_and_list_answers():
    assert grade(["a", "b"], ["B", "a"], kind="set") == 1.0
    assert grade(["a", "b"], ["a", "c"], kind="set") == 0.0
    assert grade(["a", "b"], ["a", "c"], kind="set", partial_credit=True) == pytest.approx(1 / 3)
    assert grade(["a", "b"], ["a", "b"], kind="list") == 1.0
    assert grade(["a", "b"], ["b", "a"], kind="list") == 0.0
    assert grade(["a", "b", "c"], ["a", "x", "c"], kind="list", partial_credit=True) == pytest.approx(2 / 3)
    assert grade([{"k": 1}], [{"k": 1}], kind="set") == 1.0


def test_contains_answers():
    assert grade("world", "Hello, World!", kind="contains") == 1.0
    assert grade(["hello", "moon"], "hello world", kind="contains") == 0.0
    assert grade(["hello", "moon"], "hello world", kind="contains", partial_credit=True) == 0.5


def test_no_answer_scores_zero_even_when_null_is_the_answer():
    report = Scorer().score(ToolTask(id="n", question="q", answer=None), NO_ANSWER)
    assert report.score == 0.0 and not report.submitted
    assert Scorer().score(ToolTask(id="n", question="q", answer=None), None).score == 1.0


def test_gold_calls_count_when_made_with_their_arguments_and_without_errors():
    calls = [ToolCall(server="kv", name="put", arguments={"key": "b", "value": 2, "ttl": 5}),
             ToolCall(server="kv", name="put", arguments={"key": "a", "value": 1}, is_error=True),
             ToolCall(server="kv", name="keys")]
    report = Scorer().score(task(["a", "b"], kind="list"), ["a", "b"], calls)
    assert report.gold_calls_made == [False, True, True]
    assert report.trajectory_score == pytest.approx(2 / 3)
    assert report.score == 1.0  # the trajectory weighs nothing by default


def test_ordered_trajectories_count_the_longest_run_in_gold_order():
    out_of_order = [{"name": "keys"}, {"name": "put", "arguments": {"key": "b", "value": 2}},
                    {"name": "put", "arguments": {"key": "a", "value": 1}}]
    report = Scorer().score(task(["a", "b"], kind="list", trajectory="ordered", trajectory_weight=0.5),
                            ["a", "b"], out_of_order)
    assert report.gold_calls_made == [True, True, True] and report.gold_calls_in_order == 1
    assert report.trajectory_score == pytest.approx(1 / 3)
    assert report.score == pytest.approx(0.5 * 1.0 + 0.5 / 3)


def test_replaying_the_gold_trajectory_with_the_gold_answer_scores_one_under_every_spec():
    specs = [dict(kind="exact"), dict(kind="list", trajectory="ordered", trajectory_weight=1.0),
             dict(kind="set", trajectory_weight=0.3)]
    for spec in specs:
        gold_task = task(["a", "b"], **spec)
        report = Scorer().score(gold_task, gold_task.answer, gold_task.gold_trajectory)
        assert report.score == 1.0 and report.answer_correct
