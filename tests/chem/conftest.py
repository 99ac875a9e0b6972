"""A small catalogue, reaction set with routes, and the clean and routes suites, built once per test
session in the run's shared data cache."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.shared import SMALL_CATALOGUE, SMALL_REACTIONS


@dataclass(frozen=True)
class SmallData:
    home: Path
    database: Path
    reactions: Path
    clean_suite: Path
    routes_suite: Path

    def server_factory(self):
        from gauntlet.mcp_servers.chem.server import build_server

        return functools.partial(build_server, self.database, self.reactions)


@pytest.fixture(scope="session")
def small_data(shared_data_home) -> SmallData:
    home = shared_data_home
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GAUNTLET_HOME", str(home))
        from gauntlet.mcp_servers.chem.build import catalogue_path
        from gauntlet.mcp_servers.chem.reaction_data import reactions_dir
        from gauntlet.mcp_servers.chem.suite import suite_path

        database = catalogue_path(**SMALL_CATALOGUE)
        reactions = reactions_dir(**SMALL_REACTIONS)
        clean = suite_path("clean", **SMALL_REACTIONS)
        routes = suite_path("routes", **SMALL_REACTIONS)
    return SmallData(home, database, reactions, clean, routes)


@pytest.fixture(scope="session")
def catalogue(small_data):
    from gauntlet.mcp_servers.chem.store import CatalogueStore

    store = CatalogueStore(small_data.database)
    yield store
    store.close()


@pytest.fixture(scope="session")
def grounder(catalogue):
    from gauntlet.mcp_servers.chem.grounding import Grounder

    return Grounder(catalogue, use_opsin=False)


@pytest.fixture(scope="session")
def client(small_data):
    """A real MCP client session on the small-data server (in memory)."""
    from gauntlet.bridges.mcp_client import BlockingMCPClient, ServerTarget

    client = BlockingMCPClient(ServerTarget(factory=small_data.server_factory()))
    client.open()
    yield client
    client.close()


@pytest.fixture(scope="session")
def small_suite(small_data):
    """``small_suite(view)``: the small reaction set's suite of ``view``, built on first use."""

    def build(view: str) -> Path:
        from gauntlet.mcp_servers.chem.suite import suite_path

        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("GAUNTLET_HOME", str(small_data.home))
            return suite_path(view, **SMALL_REACTIONS)

    return build
