"""experiments/llm_offline.py at its smoke size, on small registered suites and a scripted model: the
evaluation runs, and pass^k, DORA accuracy per dimension and the malformed-call share are what the
episodes say."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from gauntlet import registry
from gauntlet.agents.llm.models import SAMPLING
from gauntlet.registry import Entry
from tests.shared import load_experiment

def _task(task_id: str, **metadata) -> dict:
    return {"id": task_id, "server": "env:CartPole-v1", "answer": 4, "eval_spec": {"kind": "numeric"},
            "question": "How many numbers are in the observation?", "metadata": metadata,
            "gold_trajectory": [{"call": "reset", "args": {"seed": 0}, "obs": None}]}


@pytest.fixture
def small_suites(tmp_path, monkeypatch):
    chem = tmp_path / "chem.jsonl"
    chem.write_text("".join(json.dumps(_task(f"c-{k}")) + "\n" for k in range(2)))
    disaster = tmp_path / "disaster.jsonl"
    disaster.write_text("".join(json.dumps(_task(f"d-{dim}-{k}", dimension=dim, eval_spec={"type": "numeric"},
                                                  tool_plan=[{"call": "reset", "args": {"seed": 0}}]))
                                + "\n" for dim in ("T1", "T2", "T3") for k in range(2)))
    (tmp_path / "small_suites_module.py").write_text(f"CHEM = {str(chem)!r}\nDISASTER = {str(disaster)!r}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    scorer = {"env_kwargs": {"scorer": "gauntlet.mcp_servers.disaster.scoring:DoraScorer"}}
    monkeypatch.setitem(registry._entries["suite"], "small-chem",
                        Entry("suite", "small-chem", "small_suites_module:CHEM"))
    monkeypatch.setitem(registry._entries["suite"], "small-disaster",
                        Entry("suite", "small-disaster", "small_suites_module:DISASTER", metadata=scorer))


def test_the_smoke_size_scores_pass_k_dora_accuracy_ablations_and_what_the_harness_caught(tmp_path, small_suites,
                                                                                         capsys):
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": 'Let me check. {"name": "no_such_tool", "arguments": {}}'},
                                  {"text": 'Done. {"name": "submit_answer", "arguments": {"answer": 4}}'}]))
    experiment = load_experiment("llm_offline")
    results = experiment.main(["--size", "smoke", "--model", f"scripted:{script}", "--out", str(tmp_path / "out"),
                               "--chem-suite", "small-chem", "--disaster-suite", "small-disaster", "--workers", "1"])
    # The chem part's default harness is the agent's chemcost defaults, written out: a worked example and the checklist.
    chem = results["chem-demonstrations-checklist"]
    assert (chem["config"]["demonstrations"], chem["config"]["checklist"]) == (True, True)
    assert (chem["tasks"], chem["repeats"], chem["episodes"]) == (1, 2, 2)
    assert [(row["k"], row["pass_hat_k"]) for row in chem["pass_k"]] == [(1, 1.0), (2, 1.0)]
    assert (chem["malformed_calls"], chem["calls_proposed"], chem["malformed_share"]) == (2, 2, 1.0)
    assert (chem["repeated_calls"], chem["replies_without_call"]) == (0, 0)
    assert chem["model_calls_per_episode"] == 2.0 and chem["peak_rss_gb"] > 0
    assert chem["config"]["model_options"] == {}  # a scripted model takes no sampling options
    disaster = results["disaster"]
    assert [task.split("-")[1] for task in disaster["tasks"]] == ["T1", "T2", "T3"]
    for mode in ("autonomous", "instruction"):
        assert disaster[mode]["accuracy"] == {"T1": 1.0, "T2": 1.0, "T3": 1.0}
        assert disaster[mode]["dora_score"] == 1.0 and disaster[mode]["trajectory"]["tool_in_order"] == 0.0
    ablations = results["ablations"]
    # A scripted model has no other pinned model to compare with and no grammar to turn off; the rest ran.
    assert sorted(ablations["chem"]) == ["answer review", "bare", "checklist", "demonstrations",
                                         "demonstrations + checklist", "demonstrations + checklist + numbers unchecked",
                                         "demonstrations + review", "demonstrations + thoughts", "numbers unchecked",
                                         "tasks", "thoughts"]
    assert ablations["chem"]["checklist"]["config"]["checklist"] is True
    assert ablations["chem"]["thoughts"]["config"]["thoughts"] is True
    assert ablations["chem"]["demonstrations"]["config"]["demonstrations"] is True
    both = ablations["chem"]["demonstrations + review"]["config"]
    assert both["demonstrations"] is True and both["review_answer"] is True
    assert "review_answer" not in ablations["chem"]["bare"]["config"]  # the agent's own default
    # A setting turns on what it names and nothing else, whatever the agent's mode would turn on when unset.
    bare, checklist = ablations["chem"]["bare"]["config"], ablations["chem"]["checklist"]["config"]
    assert (bare["demonstrations"], bare["checklist"], checklist["demonstrations"]) == (False, False, False)
    against_default = ablations["chem"]["demonstrations + checklist + numbers unchecked"]["config"]
    assert (against_default["demonstrations"], against_default["checklist"], against_default["check_numbers"]) == \
        (True, True, False)
    assert ablations["chem"]["numbers unchecked"]["config"]["check_numbers"] is False
    # the chem scorer's diagnosis (components acted on) rides along only where that scorer ran: not on this suite
    assert "component_recall" not in ablations["chem"]["bare"]
    assert [ablations["disaster"][f"scope {k}"]["config"]["tool_scope"] for k in ("8", "16", "32", "all")] == \
        [8, 16, 32, "all"]
    assert ablations["disaster"]["scope 8"]["config"]["mode"] == "autonomous"
    planned = ablations["disaster"]["instruction without checklist"]["config"]
    assert (planned["mode"], planned["checklist"]) == ("instruction", False)
    # The disaster part runs each mode's defaults, written out: the instruction mode's checklist.
    assert disaster["instruction"]["config"]["checklist"] is True
    assert "checklist" not in disaster["autonomous"]["config"]
    shown = ablations["disaster"]["autonomous + demonstrations"]["config"]
    assert (shown["mode"], shown["demonstrations"]) == ("autonomous", True)
    # Each setting against the part it changes, task by task, on the tasks both ran (here all scores tie).
    same = {"tasks": 3, "better": 0, "worse": 0, "equal": 3, "sign_test_p": 1.0}
    assert ablations["disaster"]["scope 16"]["paired"] == {"against": "disaster-autonomous", **same}
    planned_vs_part = ablations["disaster"]["instruction without checklist"]["paired"]
    assert planned_vs_part == {"against": "disaster-instruction", **same}
    assert ablations["chem"]["bare"]["paired"] == {"against": "chem-demonstrations-checklist", "tasks": 1, "better": 0,
                                                   "worse": 0, "equal": 1, "sign_test_p": 1.0}
    assert "paired" not in ablations["chem"]["demonstrations + checklist"]  # the default itself
    written = json.loads((tmp_path / "out" / "smoke" / "llm_offline.json").read_text())
    assert written["chem-demonstrations-checklist"]["pass_k"] == json.loads(json.dumps(chem["pass_k"]))
    printed = capsys.readouterr().out
    # Every score is 1: the interval of the DORA score over tasks is [1, 1].
    assert "| autonomous | 1.00 | 1.00 | 1.00 | 1.00 [1.00, 1.00] |" in printed
    assert "| scope all | 3 | 1.00 |" in printed
    assert "same on 3 of 3 (sign test p = 1.00; disaster-autonomous) |" in printed


def test_the_dora_scores_interval_resamples_tasks_within_each_dimension():
    experiment = load_experiment("llm_offline")
    reports = [{"dimension": dimension, "answer_score": score, "trajectory": {}}
               for dimension, scores in (("T1", [1.0, 1.0]), ("T2", [0.0, 0.0, 0.0]), ("T3", [0.0, 1.0]))
               for score in scores]
    # T1 always 1 and T2 always 0 in every resample: only T3's two tasks move the macro mean, 1/3 + {0, .5, 1}/3.
    assert experiment.dora_summary(reports)["dora_score_ci"] == [pytest.approx(1 / 3), pytest.approx(2 / 3)]
    assert experiment.dora_summary([])["dora_score_ci"] is None


def test_a_rerun_that_ran_no_episode_keeps_the_memory_its_folder_measured():
    experiment = load_experiment("llm_offline")
    old = {"autonomous": {"peak_rss_gb": 4.1, "episodes": 15}, "instruction": {"peak_rss_gb": 3.9}}
    new = {"autonomous": {"peak_rss_gb": None, "episodes": 30}, "instruction": {"peak_rss_gb": 2.5}, "tasks": []}
    experiment.keep_measured_memory(old, new)
    assert new["autonomous"] == {"peak_rss_gb": 4.1, "episodes": 30}  # not measured now: the earlier figure
    assert new["instruction"]["peak_rss_gb"] == 2.5  # measured now: the new figure


def test_a_setting_is_compared_with_its_part_on_the_tasks_both_ran():
    experiment = load_experiment("llm_offline")
    compared = experiment.paired({"a": 1.0, "b": 0.0, "c": 0.5, "x": 1.0}, {"a": 0.0, "b": 1.0, "c": 1.0, "d": 1.0},
                                 "disaster-autonomous")
    assert compared == {"against": "disaster-autonomous", "tasks": 3, "better": 2, "worse": 1, "equal": 0,
                        "sign_test_p": 1.0}


def test_the_chem_part_runs_with_another_harness_in_its_own_folder(tmp_path, small_suites, capsys):
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": '{"name": "submit_answer", "arguments": {"answer": 4}}'}]))
    results = load_experiment("llm_offline").main([
        "--size", "smoke", "--only", "chem", "--chem-setting", "thoughts", "--chem-tasks", "2", "--repeats", "1",
        "--model", f"scripted:{script}", "--out", str(tmp_path / "out"), "--chem-suite", "small-chem",
        "--workers", "1"])
    chem = results["chem-thoughts"]
    assert "chem" not in results and (chem["setting"], chem["tasks"], chem["repeats"], chem["episodes"]) == \
        ("thoughts", 2, 1, 2)
    assert chem["config"]["thoughts"] is True
    assert (tmp_path / "out" / "smoke" / "chem-thoughts" / "scores.json").exists()
    assert "harness thoughts: 2 tasks of the evaluation split x 1 attempts" in capsys.readouterr().out


@pytest.mark.parametrize("setting", ["other model", "nope"])
def test_a_chem_harness_the_experiment_does_not_have_is_one_line(setting, capsys):
    with pytest.raises(SystemExit) as stop:
        load_experiment("llm_offline").main(["--size", "smoke", "--only", "chem", "--chem-setting", setting])
    assert stop.value.code == 2 and f"unknown setting {setting!r}" in capsys.readouterr().err


def test_a_part_the_experiment_does_not_have_is_one_line(capsys):
    with pytest.raises(SystemExit) as stop:
        load_experiment("llm_offline").main(["--size", "smoke", "--only", "chem,nope"])
    assert stop.value.code == 2 and "unknown part 'nope'" in capsys.readouterr().err


def test_a_local_model_samples_only_for_repeated_attempts_and_an_api_model_keeps_its_defaults():
    module = load_experiment("llm_offline")
    assert module.model_options("offline", sample=True, device=None) == {"max_new_tokens": 256, **SAMPLING}
    assert module.model_options("offline", sample=False, device="cuda:0") == {"max_new_tokens": 256}
    assert module.model_options("hf:/models/qwen", sample=False, device="cuda:0") == {"max_new_tokens": 256,
                                                                                       "device": "cuda:0"}
    assert module.model_options("openai:gpt-4o-mini", sample=True, device=None) == {}


def test_a_smaller_dora_sample_is_the_start_of_a_larger_one_so_a_run_grows_by_resuming(monkeypatch):
    experiment = load_experiment("llm_offline")
    tasks = [SimpleNamespace(id=f"{dimension}-{k:02d}", metadata={"dimension": dimension})
             for dimension in ("T1", "T2", "T3", "T4") for k in range(20)]
    monkeypatch.setattr(experiment, "eval_split", lambda suite: tasks)
    small, large = experiment.disaster_sample(2), experiment.disaster_sample(5)
    assert len(small) == 6 and len(set(large)) == 15 and large != sorted(large)  # a seeded draw, not the first ids
    assert large[:6] == small  # the folder's first episodes keep their tasks (prepare_run_folder reopens it)
    assert [task_id[:2] for task_id in large] == ["T1", "T2", "T3"] * 5  # one of each dimension in turn


@pytest.mark.parametrize("option", ["--per-dimension", "--slice", "--workers", "--chem-tasks", "--repeats"])
def test_a_size_below_one_is_one_line(option, capsys):
    with pytest.raises(SystemExit) as stop:
        load_experiment("llm_offline").main(["--size", "smoke", option, "0"])
    assert stop.value.code == 2
    assert f"{option} 0" in capsys.readouterr().err


def test_the_chem_table_says_how_many_successes_priced_nothing():
    module = load_experiment("llm_offline")
    usage = {"episodes": 3, "malformed_calls": 0, "calls_proposed": 6, "repeated_calls": 0, "replies_without_call": 0,
             "model_calls_per_episode": 2.0, "tokens_per_episode": 100.0, "seconds_per_step": 1.0,
             "seconds_per_episode": 2.0, "peak_rss_gb": 1.0}
    chem = {**usage, "tasks": 1, "repeats": 3, "component_recall": 0.25, "component_precision": 0.5,
            "correct_unpriced": 1, "cta@25_priced": 0.0,
            "pass_k": [{"k": 1, "pass_at_k": 0.333, "pass_at_k_ci": [0.0, 1.0], "pass_hat_k": 0.333,
                        "pass_hat_k_ci": [0.0, 1.0]}]}
    text = module.tables({"model": "offline", "size": "full", "chem-bare": {**chem, "setting": "bare"}})
    assert "1 of the attempts within 25 % did not act on every component" in text
    assert "CTA@25 over attempts that did: 0.000" in text


def test_ablation_settings_run_apart_on_different_slices_keep_each_suites_own_task_list(tmp_path, small_suites):
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": '{"name": "submit_answer", "arguments": {"answer": 4}}'}]))
    common = ["--size", "slice", "--only", "ablations", "--model", f"scripted:{script}", "--out",
              str(tmp_path / "out"), "--chem-suite", "small-chem", "--disaster-suite", "small-disaster",
              "--workers", "1"]
    experiment = load_experiment("llm_offline")
    experiment.main([*common, "--slice", "1", "--settings", "bare"])
    # A later run of a disaster setting on a larger slice neither drops the chem row nor writes its own
    # (2-task) chem list over the 1 task that row was run on.
    results = experiment.main([*common, "--slice", "3", "--settings", "scope 8"])
    chem, disaster = results["ablations"]["chem"], results["ablations"]["disaster"]
    assert chem["tasks"] == ["c-0"] and chem["bare"]["episodes"] == 1
    assert len(disaster["tasks"]) == 3 and disaster["scope 8"]["episodes"] == 3
    written = (tmp_path / "out" / "slice" / "llm_offline.md").read_text()
    assert "chem ChemCost, 1 tasks" in written and "| scope 8 | 3 | 1.00 |" in written  # its tasks column


def test_an_offline_spec_is_recorded_by_the_pinned_model_it_names_and_a_folder_keeps_one_model(tmp_path, capsys):
    experiment = load_experiment("llm_offline")
    assert experiment.recorded_spec("offline") == "offline:qwen2.5-coder-1.5b-instruct"
    assert experiment.recorded_spec("offline:small") == "offline:qwen2.5-coder-0.5b-instruct"
    assert experiment.recorded_spec("openai:gpt-4o-mini") == "openai:gpt-4o-mini"
    out = tmp_path / "out"
    out.mkdir()
    held = {"model": "offline:qwen2.5-coder-0.5b-instruct", "chem-bare": {"kept": True}}
    (out / "llm_offline.json").write_text(json.dumps(held))
    # The default model's run into the 0.5B's folder is refused before it runs, and the folder keeps its results.
    with pytest.raises(SystemExit) as stop:
        experiment.main(["--only", "chem", "--out", str(out)])
    assert stop.value.code == 2
    assert "holds results of offline:qwen2.5-coder-0.5b-instruct, not offline:qwen2.5-coder-1.5b-instruct" in \
        capsys.readouterr().err
    assert json.loads((out / "llm_offline.json").read_text()) == held


def test_the_chem_parts_default_setting_is_the_harness_the_chemcost_mode_runs_by_default():
    from gauntlet.agents.llm.agent import MODE_DEFAULTS

    experiment = load_experiment("llm_offline")
    setting = {**experiment.CHEM_HARNESS, **experiment.CHEM_ABLATIONS[experiment.DEFAULT_CHEM_SETTING]}
    assert setting == {**experiment.CHEM_HARNESS, **MODE_DEFAULTS["chemcost"]}
    # Each pinned model's other is pinned too, named as ``recorded_spec`` names a run's model.
    for model, other in experiment.OTHER_MODEL.items():
        assert experiment.recorded_spec(model) == model and experiment.recorded_spec(other) == other
