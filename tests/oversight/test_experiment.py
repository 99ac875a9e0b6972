"""The oversight experiment at its smoke size: every section written, the same seed gives the same rows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.shared import load_experiment

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "oversight.py"


@pytest.mark.xdist_group("oversight-experiment")
def test_smoke_experiment_writes_every_section(tmp_path: Path) -> None:
    out = tmp_path / "smoke"
    done = subprocess.run([sys.executable, str(SCRIPT), "--size", "smoke", "--out", str(out)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((out / "oversight.json").read_text())
    assert set(results["benchmarks"]) == {"corridor", "taxi"}
    for name, result in results["benchmarks"].items():
        assert result["replay_match_rate"] == 1.0, name
        methods = result["offline"]["methods"]
        assert methods["oracle"]["regret"] == 0.0
        # Nothing beats the oracle; every method's regret is a mean of non-negative gaps.
        assert all(method["regret"] >= 0.0 for method in methods.values())
        assert {"no_oversight", "action_conditioned", "scalar"} == set(result["online"]["methods"])
    assert "ablation" in results["benchmarks"]["corridor"]
    assert results["benchmarks"]["taxi"]["branch_cost"]["ratio"] > 0
    assert "## taxi" in (out / "oversight.md").read_text()
    # Re-running resumes the rows (no job is redone) and reproduces the tables.
    again = subprocess.run([sys.executable, str(SCRIPT), "--size", "smoke", "--out", str(out), "--only", "taxi"],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    rerun = json.loads((out / "oversight.json").read_text())["benchmarks"]["taxi"]
    assert rerun["collection"]["jobs_run"] == 0
    assert rerun["offline"]["methods"] == results["benchmarks"]["taxi"]["offline"]["methods"]


def test_an_unknown_benchmark_is_refused_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--size", "smoke", "--out", str(tmp_path), "--only", "nope"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith("error: nope not in the smoke plan")


@pytest.mark.xdist_group("oversight-experiment")
def test_the_demo_collects_evaluates_and_records_overseen_episodes(tmp_path: Path, capsys) -> None:
    from gauntlet import load_episodes
    from gauntlet.controllers.oversight.demo import run_demo

    run_demo(tmp_path, episodes=10, online_episodes=2)
    printed = capsys.readouterr().out
    assert "replay match 1.000" in printed and "| action_conditioned_rf |" in printed
    assert "action_conditioned_rf vs best_scalar (scalar_" in printed and "regret difference" in printed
    overseen = load_episodes(tmp_path / "online" / "action_conditioned-100000.jsonl")[0]
    assert any(event.kind == "decision" for step in overseen.steps for event in step.events)


def _play(command: str) -> dict:
    return {"text": json.dumps({"name": "play", "arguments": {"command": command}})}


@pytest.mark.xdist_group("oversight-experiment")
def test_the_llm_smoke_plan_branches_every_intervention_and_resumes(tmp_path: Path, monkeypatch) -> None:
    """The LLM plan's machinery with scripted models in the place of the offline ones (the real models make it
    minutes a row): every prefix branched with each non-oracle intervention and the expert, the scalar routers
    escalating to the stronger model, and a re-run that resumes every row."""
    from gauntlet.controllers.oversight.benchmarks.llm import llm_textworld
    from gauntlet.controllers.oversight.collect import load_rows
    from gauntlet.info_keys import PRIVILEGED

    experiment = load_experiment("oversight")
    plan, actions = experiment.PLANS["llm-smoke"]["llm-textworld"], experiment.LLM_ACTIONS
    knobs = {key: plan["options"][key] for key in ("nb_rooms", "nb_objects", "quest_length", "max_steps")}
    monkeypatch.setenv("GAUNTLET_HOME", str(tmp_path / "home"))
    bench = llm_textworld(model="scripted:none", strong_model=None, **knobs)
    plans = []
    for episode in range(plan["episodes"]):
        env = bench.make_env(episode)
        try:
            plans.append(list(env.reset(seed=bench.episode_seed(episode))[1][PRIVILEGED]["expert_plan"]))
        finally:
            env.close()
    # The base plays the first game's winning commands (so it wins some games and loses others); the stronger
    # model the first two games'. Both then look about until the budget ends the game.
    base = [_play(command) for command in plans[0]] + [_play("look")] * 20
    strong = [_play(command) for command in plans[0] + plans[1]] + [_play("look")] * 20
    (tmp_path / "base.json").write_text(json.dumps(base))
    (tmp_path / "strong.json").write_text(json.dumps(strong))
    options = {"model": f"scripted:{tmp_path / 'base.json'}", "strong_model": f"scripted:{tmp_path / 'strong.json'}",
               "latent": None, "confidence": False, "agent_config": {"check_numbers": False}}
    out = tmp_path / "out"
    command = [sys.executable, str(SCRIPT), "--size", "llm-smoke", "--out", str(out), "--options", json.dumps(options)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((out / "oversight.json").read_text())["benchmarks"]["llm-textworld"]
    assert result["replay_match_rate"] == 1.0
    rows = load_rows(out / "rows" / "llm-textworld")
    assert len(rows) == result["rows"] > 0
    assert all(set(row["branches"]) == set(actions) for row in rows)
    # The base wins game 0 and loses another; the expert wins from every prefix.
    continued = {row["episode"]: row["branches"]["continue"]["success"] for row in rows if row["t"] == 0}
    assert continued[0] and not all(continued.values()), continued
    assert all(row["branches"]["expert"]["success"] for row in rows)
    offline = result["offline"]
    assert offline["methods"]["oracle"]["regret"] == 0.0
    assert "scalar_raw" in offline["methods"] and "always_stronger" in offline["methods"]
    assert offline["config"]["intervention"] == "stronger"  # the scalar routers escalate to the stronger model
    # Offline too, the privileged expert is a reference: reported, never an overseer's choice nor the oracle's.
    assert "always_expert" not in offline["methods"] and "reference_expert" in offline["methods"]
    # Cross-fitted: every collected game is a test game once.
    assert offline["folds"] == offline["n_test_episodes"] == len({row["episode"] for row in rows})
    assert not any("expert" in method["action_share"] for name, method in offline["methods"].items()
                   if name != "reference_expert")
    assert result["branch_cost"]["episode"] is None and "model calls" in result["branch_cost"]["reason"]
    assert "wall s by part" in (out / "oversight.md").read_text()
    assert "action_conditioned_rf vs best_fixed (always_" in (out / "oversight.md").read_text()
    # Online, on a held-out game: the deployed controllers never had the privileged expert to choose.
    online = result["online"]["methods"]
    assert set(online) == {"no_oversight", "action_conditioned", "scalar"}
    assert all(method["episodes"] == 1 for method in online.values())
    chosen = {action for method in ("action_conditioned", "scalar") for action in online[method]["decisions"]}
    assert chosen and chosen <= {"continue", "quit", "stronger", "hint", "confirm"}, chosen
    again = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    rerun = json.loads((out / "oversight.json").read_text())["benchmarks"]["llm-textworld"]
    assert rerun["collection"]["jobs_run"] == 0


def test_llm_plan_options_that_are_not_an_object_or_refused_fail_in_one_line(tmp_path: Path) -> None:
    for options, says in (("[1]", "must be a JSON object"), ("{", "is not JSON"),
                          ('{"p_lapse": [0, 1]}', "has no lapse rates")):
        done = subprocess.run([sys.executable, str(SCRIPT), "--size", "llm-smoke", "--out", str(tmp_path),
                               "--options", options], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert not (tmp_path / "oversight.json").exists()
