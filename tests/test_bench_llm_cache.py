"""`bench/llm_cache.py` runs end to end at the quick size on the offline model and writes its figures (no timing
is asserted): the exact mode matches the whole read on every call (the bench itself fails otherwise) while
reading fewer tokens."""

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
def test_the_cache_bench_runs_at_the_quick_size_and_the_exact_mode_matches_every_whole_read(tmp_path, offline_home):
    out = tmp_path / "llm-cache.json"
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "llm_cache.py"), "--quick", "--out", str(out)],
                            capture_output=True, text=True, timeout=540,
                            env={**os.environ, "GAUNTLET_HOME": str(offline_home)})
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"wrote {out}" in result.stdout
    report = json.loads(out.read_text())
    rows = report["results"]
    assert list(rows) == ["whole", "exact", "reused"]
    calls = len(report["prompt_tokens"])
    assert calls == 2 and all(row["calls"] == calls and row["seconds"] > 0 for row in rows.values())
    assert rows["whole"]["same_as_whole"] == rows["exact"]["same_as_whole"] == rows["exact"]["same_tokens_as_whole"] \
        == calls
    assert rows["whole"]["tokens_read"] == sum(report["prompt_tokens"])
    # The second episode's call starts from the first one's whole batches (the system prompt and tools).
    assert rows["exact"]["tokens_read"] < rows["whole"]["tokens_read"]
    assert rows["reused"]["tokens_read"] <= rows["exact"]["tokens_read"]
