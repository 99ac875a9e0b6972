"""The oversight experiment at its smoke size: every section written, the same seed gives the same rows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

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
    overseen = load_episodes(tmp_path / "online" / "action_conditioned-100000.jsonl")[0]
    assert any(event.kind == "decision" for step in overseen.steps for event in step.events)
