"""Small scenes and one event's task suite shared by the disaster tests (built once per test session,
outside the data cache)."""

from __future__ import annotations

import pytest

def pytest_configure(config):
    # rasterio's own window and transform helpers use an affine operator affine now deprecates.
    config.addinivalue_line("filterwarnings", "ignore:Use `@` matmul:PendingDeprecationWarning:rasterio.*")


EVENTS = ["ahr-2021-flood", "turkiye-2023-earthquake", "lahaina-2023-wildfire", "la-palma-2021-eruption",
          "wayanad-2024-landslide", "haiyan-2013-cyclone"]


@pytest.fixture(scope="session")
def scenes_root(tmp_path_factory):
    """The folder holding scenes/ and truth/ for EVENTS at 128 x 128 cells."""
    from gauntlet.mcp_servers.disaster.scenes import build_scenes

    folder = tmp_path_factory.mktemp("disaster-scenes")
    build_scenes(folder, events=EVENTS, size_px=128, seed=0)
    return folder


@pytest.fixture
def workspace(scenes_root, tmp_path):
    from gauntlet.mcp_servers.disaster.workspace import Workspace

    return Workspace(scenes_root / "scenes", tmp_path / "ws")


@pytest.fixture(scope="session")
def flood_suite(scenes_root, tmp_path_factory):
    """The task suite of one event (``ahr-2021-flood``), with gold trajectories through the real server."""
    from gauntlet.mcp_servers.disaster.tasks import SUITE_FILE, build_tasks

    folder = tmp_path_factory.mktemp("disaster-suite")
    build_tasks(folder, scene_root=scenes_root / "scenes", events=["ahr-2021-flood"])
    return folder / SUITE_FILE
