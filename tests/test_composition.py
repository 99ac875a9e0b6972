"""Every registered controller and monitor composes with every run: under `gauntlet eval` (the LLM agent with a
scripted model, on one task of the chem suite) and under `gauntlet run` (the random agent on CartPole),
each controller x monitor pair, none included, either finishes with its hooks' events on record, or is
refused in one line, before any episode file is written, naming what the hook needs and the command that
provides it.

The hooks run for real. The latent hooks read replies with a two-layer model of random weights behind a
byte-level tokenizer (``tests.latent.tiny_reader``: the 0.5B reader would take minutes to load), with a
threshold no reply crosses; the oversight controllers deploy a corridor model trained by `gauntlet
oversight collect` and `train` on a few episodes. The chem suite is the clean view built small (the same
builder, server, scorer and modes as the registered `chem`, on the small catalogue the chem tests use).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from gauntlet import load_episodes
from gauntlet.cli import main
from gauntlet.registry import Entry, registry
from tests.latent.tiny_reader import build_tiny_reader, tiny_score_file
from tests.llm.helpers import answer_turn, text_call
from tests.shared import SMALL_CATALOGUE, SMALL_REACTIONS

CONTROLLERS = [None, *registry.names("controller")]
MONITORS = [None, *registry.names("monitor")]
DEPLOY = "gauntlet oversight deploy"
# What a hook needs that a command lacks: words of its refusal, by command and hook (absent: it runs there).
REFUSALS = {
    ("eval", "oversight"): (DEPLOY, "expert_action"),
    ("eval", "oversight-scalar"): (DEPLOY, "expert_action"),
    ("run", "oversight"): (f"{DEPLOY} corridor", "expert_action", "CartPole-v1"),
    ("run", "oversight-scalar"): (f"{DEPLOY} corridor", "expert_action", "CartPole-v1"),
    ("run", "latent-correct"): ("agent 'random'", "--agent llm"),
    ("run", "latent"): ("agent 'random'", "--agent llm"),
}
CORRIDOR_ID = "CompositionCorridor-v0"


def cli(*args: str) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    return int(exit_info.value.code or 0)


@pytest.fixture(scope="module")
def latent_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("latent")
    reader = build_tiny_reader(folder / "tiny-reader")
    return {"model": str(tiny_score_file(folder / "chaos.npz", reader, threshold=1e9)), "reader": str(reader)}


@pytest.fixture(scope="module")
def corridor_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An action-conditioned corridor model, and beside it (``.scalar.joblib``) its scalar router."""
    folder = tmp_path_factory.mktemp("oversight")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GAUNTLET_HOME", str(folder / "home"))
        assert cli("oversight", "collect", "corridor", "--episodes", "12", "--out", str(folder / "rows")) == 0
        assert cli("oversight", "train", str(folder / "rows"), "--out", str(folder / "corridor.joblib"),
                   "--trees", "4", "--dispersion", "0.5") == 0
    return folder / "corridor.joblib"


@pytest.fixture
def hook_configs(latent_files: dict[str, str], corridor_model: Path) -> dict[str, dict[str, Any]]:
    return {"budget": {"max_steps": 3}, "oversight": {"model": str(corridor_model)},
            "oversight-scalar": {"model": str(corridor_model.with_name("corridor.scalar.joblib"))},
            "latent-correct": latent_files, "latent": latent_files}


@pytest.fixture(scope="module")
def small_chem(shared_data_home: Path) -> dict[str, Any]:
    """The chem suite's clean view on the small catalogue: its suite file and the server's options."""
    from gauntlet.mcp_servers.chem.build import catalogue_path
    from gauntlet.mcp_servers.chem.reaction_data import reactions_dir
    from gauntlet.mcp_servers.chem.suite import suite_path

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GAUNTLET_HOME", str(shared_data_home))
        return {"suite": suite_path("clean", **SMALL_REACTIONS),
                "server_options": {"db_path": str(catalogue_path(**SMALL_CATALOGUE)),
                                   "reactions_dir": str(reactions_dir(**SMALL_REACTIONS))}}


@pytest.fixture
def chem_suite(small_chem: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """`chem` registered as its small build for this test; the script of an LLM agent that makes the first
    task's first gold call, then answers."""
    from gauntlet.tasks import load_suite

    # The suite's entry gives the small suite's path (``str(object=path)``), with the registered suite's
    # metadata; the server's builds the chem server on the small data.
    suite, server = registry.get("suite", "chem"), registry.get("server", "chem")
    monkeypatch.setitem(registry._entries["suite"], "chem", Entry(
        "suite", "chem", "builtins:str", suite.description, suite.metadata, {"object": str(small_chem["suite"])}))
    monkeypatch.setitem(registry._entries["server"], "chem", Entry(
        "server", "chem", server.target, server.description, server.metadata, small_chem["server_options"]))
    task = load_suite(small_chem["suite"])[0]
    first = task.gold_trajectory[0]
    script = tmp_path / "script.json"
    script.write_text(json.dumps([text_call(first.call, first.args), answer_turn(task.answer)]))
    return script


def hook_options(controller: str | None, monitor: str | None, configs: dict[str, dict[str, Any]]) -> list[str]:
    options = []
    for kind, name in (("controller", controller), ("monitor", monitor)):
        if name is not None:
            options += [f"--{kind}", name, f"--{kind}-config", json.dumps(configs[name])]
    return options


def check(command: str, code: int, err: str, out: Path, controller: str | None, monitor: str | None) -> None:
    """A refusal where ``REFUSALS`` says a hook needs what the command lacks (the controller's first), else a
    finished run whose episode records each hook's events."""
    needs = [REFUSALS[(command, hook)] for hook in (controller, monitor) if (command, hook) in REFUSALS]
    if needs:
        assert code == 2, err
        assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
        assert all(word in err for word in needs[0]), err
        assert not out.exists()  # refused before any episode file (or the run folder) was written
        return
    assert code == 0, err
    [episode] = load_episodes(out / "episodes")
    events = [event for step in episode.steps for event in step.events] + list(episode.outcome.events)
    if controller is not None:
        assert any(event.kind == "decision" and event.source == controller for event in events)
    if monitor is not None:
        scores = [event.data for event in events if event.kind == "monitor" and event.source == monitor]
        assert scores and any("chaos" in data for data in scores)
        shared = [data["shared"] for data in scores if "chaos" in data]
        assert shared == [1.0 if controller == "latent-correct" else 0.0] * len(shared)


def test_every_registered_hook_has_a_config_here(hook_configs):
    assert set(CONTROLLERS[1:]) | set(MONITORS[1:]) == set(hook_configs)


@pytest.mark.parametrize("monitor", MONITORS)
@pytest.mark.parametrize("controller", CONTROLLERS)
def test_an_llm_agent_eval_of_chem_finishes_or_is_refused_before_its_first_episode(
        controller, monitor, hook_configs, chem_suite, tmp_path, capsys):
    out = tmp_path / "eval"
    agent = {"model": f"scripted:{chem_suite}", "max_steps": 4, "check_numbers": False}
    code = cli("eval", "chem", "--agent", "llm", "--agent-config", json.dumps(agent), "--limit", "1",
               "--workers", "1", "--out", str(out), *hook_options(controller, monitor, hook_configs))
    check("eval", code, capsys.readouterr().err, out, controller, monitor)


@pytest.mark.parametrize("monitor", MONITORS)
@pytest.mark.parametrize("controller", CONTROLLERS)
def test_a_gym_run_finishes_or_is_refused_before_its_first_episode(controller, monitor, hook_configs, tmp_path,
                                                                   capsys):
    out = tmp_path / "run"
    code = cli("run", "CartPole-v1", "-n", "1", "--max-steps", "5", "--workers", "1", "--out", str(out),
               *hook_options(controller, monitor, hook_configs))
    check("run", code, capsys.readouterr().err, out, controller, monitor)


@pytest.fixture
def corridor_id():
    gym.register(id=CORRIDOR_ID, entry_point="gauntlet.controllers.oversight.benchmarks.basic:CorridorEnv")
    yield CORRIDOR_ID
    del gym.registry[CORRIDOR_ID]


def test_an_oversight_controller_runs_on_an_env_that_names_its_experts_input(corridor_id, corridor_model, tmp_path,
                                                                             capsys):
    out = tmp_path / "run"
    assert cli("run", corridor_id, "-n", "2", "--workers", "1", "--out", str(out), "--controller", "oversight",
               "--controller-config", json.dumps({"model": str(corridor_model)})) == 0, capsys.readouterr().err
    for episode in load_episodes(out / "episodes"):
        first = episode.steps[0].events if episode.steps else episode.outcome.events
        assert any(event.kind == "decision" and event.source == "oversight" for event in first)


def test_an_oversight_controller_in_code_refuses_at_t0_an_env_without_its_experts_input(corridor_model):
    from gauntlet.controllers.oversight.controller import OversightController
    from gauntlet.errors import UserError
    from gauntlet.registry import make_agent
    from gauntlet.runner import rollout

    with pytest.raises(UserError, match=r"expert_action.*gauntlet oversight deploy corridor"):
        rollout(gym.make("CartPole-v1"), make_agent("random"), seed=0, hooks=[OversightController(corridor_model)])


def test_a_scalar_router_escalating_to_the_stronger_agent_is_refused_by_run_before_any_episode(
        corridor_id, corridor_model, tmp_path, capsys):
    from gauntlet.controllers.oversight.models import ScalarRouter, load_model, save_model

    trained = load_model(corridor_model.with_name("corridor.scalar.joblib"))
    router = ScalarRouter(trained.model.risk, threshold=0.5, intervention="stronger")
    path = save_model(tmp_path / "stronger.joblib", router, utility=trained.utility, benchmark="corridor")
    out = tmp_path / "run"
    code = cli("run", corridor_id, "-n", "1", "--workers", "1", "--out", str(out), "--controller", "oversight-scalar",
               "--controller-config", json.dumps({"model": str(path)}))
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "gauntlet oversight deploy corridor" in err, err
    assert not (out / "episodes").exists() or not any((out / "episodes").iterdir())
