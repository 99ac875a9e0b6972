"""`make test`'s schedule (``-n 2 --dist loadgroup``, hooks in tests/conftest.py): the tests of one
``xdist_group`` run on one worker, and ``starts_early`` tests are handed out before the other tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SUITE = {
    "conftest.py": "from tests.conftest import pytest_collection_modifyitems, pytest_configure  # noqa: F401\n",
    "test_a_short.py": "import pytest\n\n@pytest.mark.parametrize('i', range(6))\ndef test_short(i):\n    pass\n",
    "test_b_grouped.py": ("import pytest\n\n@pytest.mark.xdist_group('shared')\n"
                          "@pytest.mark.parametrize('i', range(4))\ndef test_grouped(i):\n    pass\n"),
    "test_c_long.py": "import pytest\n\n@pytest.mark.starts_early\ndef test_long():\n    pass\n",
}


def test_grouped_tests_share_one_worker_and_early_tests_start_before_the_short_ones(tmp_path):
    for name, text in SUITE.items():
        (tmp_path / name).write_text(text)
    # Only xdist among the installed plugins: the others' start-up is most of this test's time.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "xdist.plugin", "-n", "2", "--dist", "loadgroup",
                           "-v", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    ran = re.findall(r"^\[(gw\d)\] \[ *\d+%\] PASSED (\S+)", done.stdout, re.M)
    assert len(ran) == 11
    grouped = {worker for worker, nodeid in ran if "test_grouped" in nodeid}
    assert len(grouped) == 1 and all(nodeid.endswith("@shared") for _, nodeid in ran if "test_grouped" in nodeid)
    # Handed out first is checked on the worker's own sequence (its results arrive in the order it ran them):
    # the order in which the two workers' starts reach the controller is a race, and under a loaded machine
    # the grouped worker could finish all four before the other one reported its first start.
    long_worker = next(worker for worker, nodeid in ran if nodeid == "test_c_long.py::test_long")
    on_long_worker = [nodeid for worker, nodeid in ran if worker == long_worker]
    assert on_long_worker[0] == "test_c_long.py::test_long", ran
