"""`gauntlet bench oversight` runs end to end at a tiny size and writes its figures (no timing is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(600)
def test_the_oversight_bench_collects_the_same_rows_with_one_and_two_workers(tmp_path):
    out = tmp_path / "oversight.json"
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "oversight.py"), "--quick", "--out", str(out)],
                            capture_output=True, text=True, timeout=540)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    figures = {(figure["benchmark"], figure["workers"]): figure for figure in report["results"]}
    assert set(figures) == {("corridor", 1), ("corridor", 2), ("taxi", 1), ("taxi", 2)}
    for (benchmark, _workers), figure in figures.items():
        assert figure["rows"] == figures[(benchmark, 1)]["rows"] > 0
        assert figure["replay_match"] == 1.0 and figure["rows_per_s"] > 0 and figure["busy_s"] > 0
    assert figures[("taxi", 1)]["speedup"] == 1.0
    assert f"wrote {out}" in result.stdout
