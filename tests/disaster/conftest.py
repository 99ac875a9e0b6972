"""Small scenes and one event's task suite shared by the disaster tests: built once per run, into the
run's shared data cache (``shared_data_home``), so the test processes of a run share one build."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.shared import shared_build


def pytest_configure(config):
    # rasterio's own window and transform helpers use an affine operator affine now deprecates.
    config.addinivalue_line("filterwarnings", "ignore:Use `@` matmul:PendingDeprecationWarning:rasterio.*")


EVENTS = ["ahr-2021-flood", "turkiye-2023-earthquake", "lahaina-2023-wildfire", "la-palma-2021-eruption",
          "wayanad-2024-landslide", "haiyan-2013-cyclone"]


def build_flood_suite(folder: Path, scene_root: str) -> None:
    from gauntlet.mcp_servers.disaster.tasks import build_tasks

    build_tasks(folder, scene_root=Path(scene_root), events=["ahr-2021-flood"])


@pytest.fixture(scope="session")
def scenes_root(shared_data_home):
    """The folder holding scenes/ and truth/ for EVENTS at 128 x 128 cells."""
    from gauntlet.mcp_servers.disaster.scenes import build_scenes

    return shared_build(shared_data_home, "test-disaster-scenes", build_scenes,
                        {"events": EVENTS, "size_px": 128, "seed": 0})


@pytest.fixture
def workspace(scenes_root, tmp_path):
    from gauntlet.mcp_servers.disaster.workspace import Workspace

    return Workspace(scenes_root / "scenes", tmp_path / "ws")


@pytest.fixture(scope="session")
def flood_suite(scenes_root, shared_data_home):
    """The task suite of one event (``ahr-2021-flood``), with gold trajectories through the real server."""
    from gauntlet.mcp_servers.disaster.tasks import SUITE_FILE

    folder = shared_build(shared_data_home, "test-disaster-flood-suite", build_flood_suite,
                          {"scene_root": str(scenes_root / "scenes")})
    return folder / SUITE_FILE
