"""The gold-replay and truth-vs-gold experiment on both realism levels (experiments/disaster_levels.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXPERIMENT = Path(__file__).resolve().parents[2] / "experiments" / "disaster_levels.py"


@pytest.mark.starts_early
def test_the_smoke_size_replays_gold_at_both_levels_and_the_hard_tasks_name_the_hard_server(tmp_path):
    done = subprocess.run([sys.executable, str(EXPERIMENT), "--size", "smoke", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((tmp_path / "disaster_levels.json").read_text())
    for level in ("clean", "hard"):
        row = results["levels"][level]
        gold = row["gold"]  # one task of every dimension replayed
        assert gold["mean_score"] == 1.0 and gold["perfect"] == gold["tasks"] == len(row["by_dimension"])
        assert row["gold"]["summary"]["levels"][level]["dora_score"] == 1.0
        assert set(row["truth_vs_gold"]) <= set(row["by_dimension"])
    assert "| hard | all |" in (tmp_path / "disaster_levels.md").read_text()

    from gauntlet.mcp_servers.disaster.tasks import suite_path
    from gauntlet.tasks import load_suite

    params = {"events": results["events"], "size_px": results["size_px"]}
    hard = load_suite(suite_path({**params, "realism": "hard"}))  # cached by the experiment's run
    clean = load_suite(suite_path(params))
    assert {t.server for t in hard} == {"disaster-hard"} and {t.metadata["realism"] for t in hard} == {"hard"}
    assert {t.server for t in clean} == {"disaster"} and all("realism" not in t.metadata for t in clean)
