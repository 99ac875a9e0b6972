"""`gauntlet eval SUITE --view VIEW` picks the suite a family registered for that view, a scorer's
``summarize`` writes the run report into scores.json, and the metrics a scorer reports beside the score
are averaged into it."""

from __future__ import annotations

import json
import textwrap

import pytest

from gauntlet.cli import main
from gauntlet.registry import Entry, registry

EASY = [{"id": "easy-size", "server": "env:CartPole-v1", "answer": 4, "eval_spec": {"kind": "numeric"},
         "question": "Reset the environment with seed 0. How many numbers are in the observation?",
         "gold_trajectory": [{"call": "reset", "args": {"seed": 0}, "obs": None}]}]
HARD = [{"id": "hard-push", "server": "env:CartPole-v1", "answer": "no", "eval_spec": {"kind": "exact"},
         "question": "Reset with seed 1 and push the cart right once. Did the episode end?",
         "gold_trajectory": [{"call": "reset", "args": {"seed": 1}, "obs": None},
                             {"call": "step", "args": {"action": 1}, "obs": None}]},
        {"id": "hard-size", "server": "env:CartPole-v1", "answer": 4, "eval_spec": {"kind": "numeric"},
         "question": "Reset the environment with seed 2. How many numbers are in the observation?",
         "gold_trajectory": [{"call": "reset", "args": {"seed": 2}, "obs": None}]}]


# A module file, not an in-memory module: worker processes load the scorer by name too.
FAMILY = textwrap.dedent("""
    from pathlib import Path

    from gauntlet.tasks import Scorer

    EASY = str(Path(__file__).with_name("easy.jsonl"))
    HARD = str(Path(__file__).with_name("hard.jsonl"))


    class CountingScorer(Scorer):
        \"\"\"The default grades, plus a run report: how many tasks were scored and how many were right.\"\"\"

        @staticmethod
        def summarize(reports):
            return {"n_scored": len(reports), "n_correct": sum(bool(report["answer_correct"]) for report in reports)}


    class MeteredScorer(Scorer):
        \"\"\"The default grades, plus two figures per attempt: its score, and whether its task is the push.\"\"\"

        def score(self, task, answer, calls=()):
            report = super().score(task, answer, calls)
            report.metrics.update(utility=report.score, pushed=float(task.id.endswith("-push")))
            return report
""")


@pytest.fixture
def viewed_family(tmp_path, monkeypatch) -> None:
    """Two registered suites, "toy" (view easy) and "toy-hard" (view hard), each listing both views."""
    for name, tasks in (("easy", EASY), ("hard", HARD)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(task) + "\n" for task in tasks))
    (tmp_path / "gauntlet_toy_views.py").write_text(FAMILY)
    monkeypatch.syspath_prepend(str(tmp_path))
    views = {"easy": "toy", "hard": "toy-hard"}
    env_kwargs = {"scorer": "gauntlet_toy_views:CountingScorer"}
    for name, target in (("toy", "EASY"), ("toy-hard", "HARD")):
        monkeypatch.setitem(registry._entries["suite"], name, Entry(
            "suite", name, f"gauntlet_toy_views:{target}", "", {"views": views, "env_kwargs": env_kwargs}))


def test_eval_with_a_view_runs_the_suite_registered_for_that_view(viewed_family, tmp_path, capsys):
    out = tmp_path / "eval"
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "toy", "--view", "hard", "--agent", "gold", "--out", str(out)])
    assert exit_info.value.code == 0, capsys.readouterr().err
    scores = json.loads((out / "scores.json").read_text())
    assert scores["suite"] == "toy-hard" and scores["view"] == "hard"
    assert [task["task_id"] for task in scores["tasks"]] == ["hard-push", "hard-size"]
    assert scores["report"] == {"n_scored": 2, "n_correct": 2}


def test_a_scorer_with_summarize_writes_its_run_report_into_scores_json(viewed_family, tmp_path, capsys):
    out = tmp_path / "eval"
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "toy", "--agent", "gold", "--out", str(out)])
    assert exit_info.value.code == 0, capsys.readouterr().err
    scores = json.loads((out / "scores.json").read_text())
    assert scores["suite"] == "toy" and scores["view"] is None
    assert scores["report"] == {"n_scored": 1, "n_correct": 1}


def test_an_unknown_view_is_a_one_line_error_naming_the_views(viewed_family, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "toy", "--view", "medium", "--agent", "gold", "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1
    assert "medium" in err and "easy" in err and "hard" in err


def test_a_view_of_a_suite_without_views_is_refused(viewed_family, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(registry._entries["suite"], "plain", Entry("suite", "plain", "gauntlet_toy_views:EASY"))
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "plain", "--view", "hard", "--agent", "gold", "--out", str(tmp_path / "x")])
    assert exit_info.value.code == 2 and "has no views" in capsys.readouterr().err


def test_the_metrics_a_scorer_reports_are_kept_per_attempt_averaged_into_scores_json_and_printed(
        viewed_family, tmp_path, capsys, monkeypatch):
    env_kwargs = {"scorer": "gauntlet_toy_views:MeteredScorer"}
    monkeypatch.setitem(registry._entries["suite"], "toy-metered", Entry(
        "suite", "toy-metered", "gauntlet_toy_views:HARD", "", {"env_kwargs": env_kwargs}))
    out = tmp_path / "eval"
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "toy-metered", "--agent", "gold", "--out", str(out)])
    printed = capsys.readouterr()
    assert exit_info.value.code == 0, printed.err
    scores = json.loads((out / "scores.json").read_text())
    assert [task["metrics"] for task in scores["tasks"]] == [{"utility": 1.0, "pushed": 1.0},
                                                             {"utility": 1.0, "pushed": 0.0}]
    assert scores["metrics"] == {"utility": 1.0, "pushed": 0.5}
    assert "mean utility 1.000, pushed 0.500" in " ".join(printed.out.split())


def test_an_evaluation_whose_scorer_reports_no_metrics_writes_none(viewed_family, tmp_path, capsys):
    out = tmp_path / "eval"
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "toy", "--agent", "gold", "--out", str(out)])
    assert exit_info.value.code == 0, capsys.readouterr().err
    scores = json.loads((out / "scores.json").read_text())
    assert "metrics" not in scores and all(task["metrics"] == {} for task in scores["tasks"])
