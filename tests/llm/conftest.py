"""Small chem and disaster data for the LLM agent's tests (built once per test session), and scripts."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.shared import SMALL_CATALOGUE, SMALL_REACTIONS

DISASTER_EVENT = "ahr-2021-flood"


def pytest_configure(config):
    # rasterio's own window and transform helpers use an affine operator affine now deprecates.
    config.addinivalue_line("filterwarnings", "ignore:Use `@` matmul:PendingDeprecationWarning:rasterio.*")


@pytest.fixture(scope="session")
def offline_gguf(offline_home) -> Path:
    from gauntlet.agents.llm.offline_model import model_path

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GAUNTLET_HOME", str(offline_home))
        return model_path("small")


@pytest.fixture(scope="session")
def local_model(offline_gguf, offline_home) -> Any:
    """The small offline model on transformers (the reference runtime), its GGUF dequantised once per run."""
    from gauntlet.agents.llm.local_chat import LocalChatModel

    model = LocalChatModel(model_path=str(offline_gguf), max_new_tokens=64)
    with pytest.MonkeyPatch.context() as patch:
        # Loading converts the GGUF into the data cache once: into the run's shared cache, where the demo
        # and conversion tests find it, not into the user's (a second two-minute conversion in CI).
        patch.setenv("GAUNTLET_HOME", str(offline_home))
        model.weights  # noqa: B018 - load once here, so the tests time only themselves
    return model


@dataclass(frozen=True)
class ChemData:
    database: Path
    reactions: Path
    suite: Path

    def server_kwargs(self) -> str:
        return json.dumps({"db_path": str(self.database), "reactions_dir": str(self.reactions)})

    def server_factory(self) -> Callable[[], Any]:
        from gauntlet.mcp_servers.chem.server import build_server

        return functools.partial(build_server, self.database, self.reactions)


@dataclass(frozen=True)
class DisasterData:
    scenes: Path
    suite: Path

    def server_kwargs(self) -> str:
        return json.dumps({"data_root": str(self.scenes)})


@pytest.fixture(scope="session")
def chem_data(shared_data_home) -> ChemData:
    home = shared_data_home
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GAUNTLET_HOME", str(home))
        from gauntlet.mcp_servers.chem.build import catalogue_path
        from gauntlet.mcp_servers.chem.reaction_data import reactions_dir
        from gauntlet.mcp_servers.chem.suite import suite_path

        return ChemData(catalogue_path(**SMALL_CATALOGUE), reactions_dir(**SMALL_REACTIONS),
                        suite_path("clean", **SMALL_REACTIONS))


@pytest.fixture(scope="session")
def disaster_data(tmp_path_factory) -> DisasterData:
    from gauntlet.mcp_servers.disaster.scenes import build_scenes
    from gauntlet.mcp_servers.disaster.tasks import SUITE_FILE, build_tasks

    scenes = tmp_path_factory.mktemp("disaster-scenes")
    build_scenes(scenes, events=[DISASTER_EVENT], size_px=64, seed=0)
    folder = tmp_path_factory.mktemp("disaster-suite")
    build_tasks(folder, scene_root=scenes / "scenes", events=[DISASTER_EVENT])
    return DisasterData(scenes / "scenes", folder / SUITE_FILE)


@pytest.fixture(scope="module")
def chem_env(chem_data):
    """The small chem suite's env on a real chem server over stdio, shared by a module's tests."""
    from gauntlet.bridges.server_process import serve_command
    from gauntlet.bridges.tool_task_env import ToolTaskEnv

    env = ToolTaskEnv(chem_data.suite, server=serve_command("chem", "--server-kwargs", chem_data.server_kwargs()),
                      scorer="gauntlet.mcp_servers.chem.scoring:ChemScorer")
    yield env
    env.close()


@pytest.fixture
def write_script(tmp_path) -> Callable[[list[dict[str, Any]]], Path]:
    """``write_script(turns)``: the path of a script file holding ``turns``."""

    def write(turns: list[dict[str, Any]]) -> Path:
        path = tmp_path / f"script-{len(list(tmp_path.glob('script-*.json')))}.json"
        path.write_text(json.dumps(turns))
        return path

    return write

