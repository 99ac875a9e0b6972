"""`gauntlet bench http_load` runs end to end at a tiny size and writes its figures (no timing is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.shared import SMALL_CATALOGUE, in_shared_home

ROOT = Path(__file__).resolve().parents[1]
SERVERS = ("echo", "chem", "disaster", "env:CartPole-v1")


@pytest.mark.xdist_group("http-sessions")
@pytest.mark.timeout(600)
def test_the_http_load_bench_runs_at_a_tiny_size_and_compares_every_server_with_echo(tmp_path, shared_data_home):
    from gauntlet.mcp_servers.chem.build import catalogue_path
    from gauntlet.mcp_servers.disaster.scenes import build_scenes

    # The bench reads catalogue ids 1-40: the chem tests' small catalogue has them, built once per run.
    with in_shared_home(shared_data_home):
        database = catalogue_path(**SMALL_CATALOGUE)
    build_scenes(tmp_path / "scenes", events=["ahr-2021-flood"], size_px=64, seed=0)
    options = {"chem": {"db_path": str(database)}, "disaster": {"data_root": str(tmp_path / "scenes" / "scenes")}}
    out = tmp_path / "http_load.json"
    command = [sys.executable, str(ROOT / "bench" / "http_load.py"), "--quick", "--sessions", "4",
               "--server-kwargs", json.dumps(options), "--out", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=540)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["sessions"] == 4 and report["calls_per_session"] == 5
    assert tuple(report["servers"]) == SERVERS
    for name, row in report["servers"].items():
        assert row["calls"] == 4 * 5 and row["wrong"] == 0, name
        assert 0 < row["p50_ms"] <= row["p99_ms"] and row["calls_per_s"] > 0 and row["throughput_ratio"] > 0
    assert report["servers"]["echo"]["throughput_ratio"] == 1.0
    assert f"wrote {out}" in result.stdout
