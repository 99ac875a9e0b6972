"""Shared fixtures: every test gets its own GAUNTLET_HOME so nothing touches the user's cache."""

from __future__ import annotations

import warnings

import pytest

# MuJoCo's model compiler prints a deprecation note for gymnasium's bundled XML; it is not ours.
warnings.filterwarnings("ignore", message=".*settotalmass.*")


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("gauntlet-home")
    monkeypatch.setenv("GAUNTLET_HOME", str(home))
    return home
