"""Shared fixtures: every test gets its own GAUNTLET_HOME so nothing touches the user's cache."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

# MuJoCo's model compiler prints a deprecation note for gymnasium's bundled XML; it is not ours.
warnings.filterwarnings("ignore", message=".*settotalmass.*")


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
