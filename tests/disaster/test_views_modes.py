"""The disaster suite's views (clean, hard) and modes (AP, IF), and the DORA run summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gauntlet.agents.tool import GoldAgent
from gauntlet.cli import main
from gauntlet.errors import UserError
from gauntlet.evaluation import evaluate_suite, resolve_mode, resolve_view
from gauntlet.registry import Entry, registry

SCORING = "gauntlet.mcp_servers.disaster.scoring"


def eval_cli(*args: str) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", *args])
    return int(exit_info.value.code or 0)


# CLI boundary -------------------------------------------------------------------------------------
def test_an_unknown_mode_is_one_line_naming_the_modes_and_exits_2(capsys):
    assert eval_cli("disaster", "--agent", "gold", "--mode", "plan") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "no mode 'plan'" in err and "its modes are ap, if" in err


def test_a_mode_on_a_suite_without_modes_is_refused_in_one_line(capsys):
    assert eval_cli("disaster", "--view", "attack", "--agent", "gold", "--mode", "if") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "has no modes" in err


def test_the_hard_view_is_its_own_suite_served_by_the_hard_server_with_both_modes():
    assert resolve_view("disaster", None) == "disaster"
    assert resolve_view("disaster", "hard") == "disaster-hard"
    hard = registry.get("suite", "disaster-hard")
    assert hard.metadata["server"] == "disaster-hard" and registry.get("server", "disaster-hard")
    assert hard.metadata["env_kwargs"]["max_text_length"] == registry.get("suite", "disaster").metadata[
        "env_kwargs"]["max_text_length"]
    for suite in ("disaster", "disaster-hard"):
        assert resolve_mode(suite, "ap")["agent_config"] == {"mode": "autonomous"}
        assert resolve_mode(suite, "if")["agent_config"] == {"mode": "instruction"}
    assert resolve_mode("disaster", None) == {}


def test_the_if_scorer_labels_its_reports_if():
    from gauntlet.mcp_servers.disaster.scoring import DoraScorer, instruction_following_scorer

    assert instruction_following_scorer().mode == "IF" and DoraScorer().mode == "AP"


# Cache versions -----------------------------------------------------------------------------------
def test_a_hard_renderer_change_gives_new_hard_scenes_and_tasks_and_keeps_the_clean_ones(monkeypatch):
    from gauntlet.mcp_servers.disaster import data, realism
    from gauntlet.mcp_servers.disaster.registration import HARD_DATA_VERSION
    from gauntlet.mcp_servers.disaster.scenes import BUILDER_VERSION
    from gauntlet.mcp_servers.disaster.tasks import tasks_version

    assert data.scene_entry("clean") == ("disaster", BUILDER_VERSION)
    assert data.scene_entry("hard")[1] == HARD_DATA_VERSION == registry.get("data", "disaster-hard").metadata["version"]
    before = {level: data.scene_entry(level) for level in ("clean", "hard")}
    monkeypatch.setattr(realism, "RENDER_VERSION", str(int(realism.RENDER_VERSION) + 1))
    assert data.scene_entry("clean") == before["clean"]
    assert data.scene_entry("hard") != before["hard"]
    assert tasks_version(data.scene_entry("hard")[1]) != tasks_version(before["hard"][1])


# Modes through gauntlet eval ----------------------------------------------------------------------
class ModeGoldAgent(GoldAgent):
    """The gold agent with a ``mode`` option, as the LLM agent has: what --mode gives an agent."""

    def __init__(self, suite, mode: str = "autonomous"):
        super().__init__(suite)
        self.mode = mode


def dora_toy_tasks() -> list[dict]:
    """DORA-format tasks on the CartPole env server: two T1 tasks and one T2 task (one at the hard level)."""
    tasks = []
    for k, (dimension, level) in enumerate([("T1", None), ("T1", None), ("T2", None), ("T2", "hard")]):
        metadata = {"dimension": dimension, "category": "size", "eval_spec": {"type": "numeric"}}
        if level:
            metadata["realism"] = level
        tasks.append({"id": f"t-{k}", "server": "env:CartPole-v1", "answer": 4, "eval_spec": {"kind": "numeric"},
                      "question": f"Reset with seed {k}. How many numbers are in the observation?",
                      "gold_trajectory": [{"call": "reset", "args": {"seed": k}, "obs": None}], "metadata": metadata})
    return tasks


@pytest.fixture
def dora_toy_suite(tmp_path, monkeypatch) -> str:
    path = tmp_path / "dora-toy.jsonl"
    path.write_text("".join(json.dumps(task) + "\n" for task in dora_toy_tasks()))
    (tmp_path / "dora_toy_module.py").write_text(f"SUITE = {str(path)!r}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    modes = registry.get("suite", "disaster").metadata["modes"]
    monkeypatch.setitem(registry._entries["suite"], "dora-toy", Entry(
        "suite", "dora-toy", "dora_toy_module:SUITE", metadata={"env_kwargs": {"scorer": f"{SCORING}:DoraScorer"},
                                                                "modes": modes}))
    monkeypatch.setitem(registry._entries["agent"], "mode-gold",
                        Entry("agent", "mode-gold", f"{__name__}:ModeGoldAgent"))
    return "dora-toy"


def test_mode_if_gives_the_agent_instruction_mode_scores_if_and_is_recorded(dora_toy_suite, tmp_path):
    evaluation = evaluate_suite(dora_toy_suite, "mode-gold", tmp_path / "run", mode="if", workers=1)
    scores = json.loads((Path(evaluation.out_dir) / "scores.json").read_text())
    assert scores["mode"] == "if"
    assert scores["agent"]["config"]["mode"] == "instruction"
    assert scores["report"]["mode"] == "IF"
    assert scores["report"]["levels"]["clean"]["dora_score"] == 1.0
    assert set(scores["report"]["levels"]) == {"clean", "hard"}


def test_an_agent_config_that_contradicts_the_mode_is_refused(dora_toy_suite, tmp_path):
    with pytest.raises(UserError, match="--mode if means mode 'instruction'"):
        evaluate_suite(dora_toy_suite, "mode-gold", tmp_path / "run", mode="if",
                       agent_config={"mode": "autonomous"}, workers=1)


def test_an_agent_without_a_mode_option_runs_as_it_is(dora_toy_suite, tmp_path):
    evaluation = evaluate_suite(dora_toy_suite, "gold", tmp_path / "run", mode="ap", workers=1)
    scores = json.loads((Path(evaluation.out_dir) / "scores.json").read_text())
    assert "mode" not in scores["agent"]["config"] and scores["report"]["mode"] == "AP"
    assert evaluation.mean_score == 1.0


def test_eval_prints_the_dora_table_by_level_and_dimension(dora_toy_suite, tmp_path, capsys):
    assert eval_cli(dora_toy_suite, "--agent", "gold", "--mode", "IF", "--out", str(tmp_path / "run"),
                    "--workers", "1") == 0
    out = capsys.readouterr().out
    assert "DORA scores by level and dimension (mode IF)" in out
    table = out[out.index("DORA scores by level and dimension"):out.index("scorer report")]
    assert all(word in table for word in ("clean", "hard", "T1", "T2", "1.000"))


# The DORA summary, worked by hand -----------------------------------------------------------------
def _report(dimension: str, answer: float, in_order: float, level: str = "clean") -> dict:
    trajectory = {"tool_any_order": 1.0, "tool_in_order": in_order, "exact_match": float(in_order == 1.0),
                  "parameter_accuracy": 0.5, "efficiency": 1.0}
    return {"details": {"dora": {"task_id": "x", "mode": "AP", "dimension": dimension, "level": level,
                                 "answer_score": answer, "answer_correct": answer == 1.0, "answer_check": "",
                                 "trajectory": trajectory}}}


def test_the_dora_score_is_the_macro_average_of_the_dimensions_mean_answer_scores():
    from gauntlet.mcp_servers.disaster.scoring import DoraScorer

    summary = DoraScorer.summarize([_report("T1", 1.0, 1.0), _report("T1", 0.0, 0.5), _report("T1", 1.0, 1.0),
                                    _report("T2", 0.5, 0.0), _report("T3", 1.0, 1.0, level="hard")])
    clean = summary["levels"]["clean"]
    # T1: (1 + 0 + 1) / 3; T2: 0.5; the macro average weighs each dimension once, not each task
    assert clean["dimensions"]["T1"]["answer_score"] == pytest.approx(2 / 3)
    assert clean["dora_score"] == pytest.approx((2 / 3 + 0.5) / 2)
    assert clean["dimensions"]["T1"]["answer_accuracy"] == pytest.approx(2 / 3)
    assert clean["dimensions"]["T1"]["tool_in_order"] == pytest.approx(2.5 / 3)
    assert clean["dimensions"]["T2"]["exact_match"] == 0.0
    assert summary["levels"]["hard"] == {"dora_score": 1.0, "dimensions": {"T3": {
        "tasks": 1, "answer_score": 1.0, "answer_accuracy": 1.0, "tool_any_order": 1.0, "tool_in_order": 1.0,
        "exact_match": 1.0, "parameter_accuracy": 0.5, "efficiency": 1.0}}}
    rows = summary["tables"][0]["rows"]
    assert ["clean", "DORA score", "4", f"{(2 / 3 + 0.5) / 2:.3f}"] == rows[2][:4]


def test_the_clean_data_builder_refuses_the_hard_level_which_has_its_own_entry(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["data", "build", "disaster", "--config", '{"realism": "hard"}'])
    assert exit_info.value.code == 2
    assert "fix --config" in capsys.readouterr().err


def test_every_disaster_suite_gives_the_steps_and_text_its_longest_gold_trajectories_need():
    from gauntlet.mcp_servers.disaster.tasks import MAX_STEPS, MAX_TEXT_LENGTH

    for suite in ("disaster", "disaster-hard", "disaster-attack"):
        kwargs = registry.get("suite", suite).metadata["env_kwargs"]
        assert (kwargs["max_steps"], kwargs["max_text_length"]) == (MAX_STEPS, MAX_TEXT_LENGTH)


@pytest.mark.parametrize(("agent", "agent_config", "mode", "given"), [
    ("mode-gold", {}, "if", "instruction"),  # a run naming no mode runs the suite's default one
    ("mode-gold", {"mode": "autonomous"}, None, "autonomous"),  # the user's own mode stands
    ("gold", {}, None, None),  # an agent without the option runs as it is
])
def test_a_suites_default_mode_is_the_mode_of_a_run_that_names_none(dora_toy_suite, monkeypatch, tmp_path, agent,
                                                                    agent_config, mode, given):
    entry = registry._entries["suite"][dora_toy_suite]
    monkeypatch.setitem(registry._entries["suite"], dora_toy_suite,
                        Entry("suite", dora_toy_suite, entry.target, metadata={**entry.metadata, "default_mode": "if"}))
    evaluation = evaluate_suite(dora_toy_suite, agent, tmp_path / "run", agent_config=agent_config, workers=1)
    scores = json.loads((Path(evaluation.out_dir) / "scores.json").read_text())
    assert scores["mode"] == mode and scores["agent"]["config"].get("mode") == given


def test_the_chem_suites_put_tasks_to_the_llm_agent_as_chemcost_does():
    from gauntlet.agents.llm.modes import answer_spec, get_mode

    for name in ("chem", "chem-routes", "chem-attack"):
        metadata = registry.get("suite", name).metadata
        assert metadata["modes"][metadata["default_mode"]]["agent_config"] == {"mode": "chemcost"}
    assert answer_spec(get_mode("chemcost"), "submit_answer").input_schema["properties"]["answer"]["type"] == "number"
