"""`gauntlet bench agents --backends` runs end to end at the quick size and writes its figures (no timing is
asserted): the llama.cpp backend on the offline default model, which the run's shared data cache holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.xdist_group("offline-model")
@pytest.mark.timeout(600)
def test_the_backends_section_runs_at_the_quick_size_and_writes_every_figure(tmp_path, offline_home):
    out = tmp_path / "backends.json"
    command = [sys.executable, str(ROOT / "bench" / "agents.py"), "--backends", "--quick", "--out", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=540,
                            env={**os.environ, "GAUNTLET_HOME": str(offline_home)})
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"wrote {out}" in result.stdout
    report = json.loads(out.read_text())["backends"]
    assert report["memory"]["bandwidth_gb_s"] > 0
    (row,) = report["results"].values()
    for figure in ("prefill_tok_s", "decode_tok_s", "decode_limit_tok_s", "step_ms", "step_grammar_ms",
                   "first_episode_ms", "later_episode_ms"):
        assert row[figure] > 0, figure
    assert row["decode_tokens"] > 0 and row["step_read_tokens"] > 0 and row["step_reply_tokens"] > 0
    # The later episode starts from the system prompt and tools the first one read.
    assert 0 < row["later_episode_cached_tokens"] < row["prompt_tokens"]
    # Without the transformers baseline (not in the quick size) no ratio is taken and no target judged.
    assert report["ratios"] == {}
    assert report["targets"] and all(target["met"] is None for target in report["targets"])
