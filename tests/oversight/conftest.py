"""Small chem and disaster data for the tool-suite oversight benchmarks, built once for this folder's modules
(read only: the options point the benchmarks at them)."""

from __future__ import annotations

import pytest

from tests.shared import SMALL_CATALOGUE, SMALL_REACTIONS

DISASTER_EVENT = "ahr-2021-flood"


@pytest.fixture(scope="session")
def small_chem(shared_data_home) -> dict:
    """A small catalogue and reaction set, and their clean suite: the ``chem`` options that use them."""
    from gauntlet.mcp_servers.chem.build import catalogue_path
    from gauntlet.mcp_servers.chem.reaction_data import reactions_dir
    from gauntlet.mcp_servers.chem.suite import suite_path

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GAUNTLET_HOME", str(shared_data_home))
        server = {"db_path": str(catalogue_path(**SMALL_CATALOGUE)),
                  "reactions_dir": str(reactions_dir(**SMALL_REACTIONS))}
        return {"tasks": str(suite_path("clean", **SMALL_REACTIONS)), "server_options": server}


@pytest.fixture(scope="session")
def small_disaster(tmp_path_factory) -> dict:
    """Small scenes of one event and its suite: the ``disaster`` options that use them."""
    from gauntlet.mcp_servers.disaster.scenes import build_scenes
    from gauntlet.mcp_servers.disaster.tasks import SUITE_FILE, build_tasks

    folder = tmp_path_factory.mktemp("disaster-data")
    build_scenes(folder, events=[DISASTER_EVENT], size_px=128, seed=0)
    build_tasks(folder / "suite", scene_root=folder / "scenes", events=[DISASTER_EVENT])
    return {"tasks": str(folder / "suite" / SUITE_FILE), "server_options": {"data_root": str(folder / "scenes")}}
