"""`gauntlet bench agents` runs end to end at a tiny size and writes its figures (no timing is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.shared import SMALL_CATALOGUE, in_shared_home

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.starts_early
@pytest.mark.timeout(600)
def test_the_agents_bench_runs_at_a_tiny_size_and_writes_its_figures(tmp_path, shared_data_home):
    from gauntlet.mcp_servers.chem.build import catalogue_path

    # The bench reads catalogue ids 1-40: the chem tests' small catalogue has them, built once per run.
    with in_shared_home(shared_data_home):
        database = catalogue_path(**SMALL_CATALOGUE)
    out = tmp_path / "agents.json"
    command = [sys.executable, str(ROOT / "bench" / "agents.py"), "--quick", "--concurrent", "3",
               "--server-kwargs", json.dumps({"db_path": str(database)}), "--out", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=540)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    overhead, concurrency = report["overhead"], report["concurrency"]
    assert overhead["tool_calls_per_episode"] > 0 and overhead["loop_ratio"] > 0 and overhead["episode_ratio"] > 0
    assert concurrency["episodes"] == 3
    for label in ("alone", "concurrent"):
        assert (concurrency[label]["leaks"], concurrency[label]["unanswered"]) == (0, 0)
        assert concurrency[label]["steps"] > 0
    assert f"wrote {out}" in result.stdout
