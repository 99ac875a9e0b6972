"""The gauntlet command line, run as users run it: the console script in a subprocess."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import types
from pathlib import Path

import anyio
import pytest
import typer
from pydantic import BaseModel, Field

from gauntlet import load_episodes
from gauntlet.cli import main
from gauntlet.registry import Entry, registry
from tests.module_registered_envs import IMPORT_ROOT, MODULE_IDS

EPISODES = 6


def gauntlet(*args: str, cwd: Path | None = None, extra_env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    """Run the ``gauntlet`` console script, with ``extra_env`` added to the environment; wide columns so
    tables print whole."""
    script = Path(sys.executable).with_name("gauntlet")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "gauntlet.cli"]
    env = {key: value for key, value in os.environ.items() if key != "GAUNTLET_DEBUG"}
    env["COLUMNS"] = "300"
    env.update(extra_env or {})
    return subprocess.run([*command, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def assert_one_line_error(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    for word in words:
        assert word in result.stderr


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    # max_steps 15 cuts most random CartPole episodes short, so replay meets the runner's truncation too.
    out = tmp_path_factory.mktemp("cli") / "run"
    result = gauntlet("run", "CartPole-v1", "-n", str(EPISODES), "--seed", "3", "--max-steps", "15",
                      "--workers", "2", "--out", str(out))
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture
def episode_file(run_dir, tmp_path) -> Path:
    """A private copy of one recorded episode, free to edit."""
    copy = tmp_path / "episode.jsonl"
    shutil.copy(run_dir / "episodes" / "ep-000001.jsonl", copy)
    return copy


# Round trip -------------------------------------------------------------------------------------
def test_run_records_every_episode_and_prints_a_summary(run_dir):
    episodes = load_episodes(run_dir)
    assert len(episodes) == EPISODES and all(episode.complete for episode in episodes)
    result = gauntlet("run", "CartPole-v1", "-n", str(EPISODES), "--seed", "3", "--max-steps", "15",
                      "--out", str(run_dir))
    assert result.returncode == 0, result.stderr
    mean = sum(episode.total_reward for episode in episodes) / EPISODES
    assert f"{mean:.3f}" in result.stdout
    assert str(run_dir) in result.stdout and f"resumed {EPISODES} already complete" in result.stdout


def test_replay_of_a_recorded_run_reports_every_episode_matches(run_dir):
    result = gauntlet("replay", str(run_dir))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("match") >= EPISODES and "MISMATCH" not in result.stdout
    assert f"all {EPISODES} episodes reproduce their recordings exactly" in result.stdout


def test_replay_of_an_edited_episode_names_the_first_differing_step_and_exits_1(episode_file):
    lines = episode_file.read_text().splitlines()
    step = json.loads(lines[2])  # header, step 0, step 1
    step["observation"][0] += 1e-3
    lines[2] = json.dumps(step)
    episode_file.write_text("\n".join(lines) + "\n")
    result = gauntlet("replay", str(episode_file))
    assert result.returncode == 1
    assert "MISMATCH at step 1: observation" in result.stdout


def test_branch_with_another_action_writes_an_episode_that_replays_exactly(episode_file, tmp_path):
    original = load_episodes(episode_file)[0]
    at = 3
    other = 1 - original.steps[at].action
    out = tmp_path / "branch.jsonl"
    result = gauntlet("branch", str(episode_file), "--at", str(at), "--action", str(other), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "original" in result.stdout and "branch" in result.stdout
    branched = load_episodes(out)[0]
    assert branched.actions[:at] == original.actions[:at]
    assert branched.steps[:at] == original.steps[:at]
    assert branched.actions[at] == other
    assert f"{branched.total_reward:.3f}" in result.stdout and f"{original.total_reward:.3f}" in result.stdout
    replayed = gauntlet("replay", str(out))
    assert replayed.returncode == 0 and "reproduces its recording exactly" in replayed.stdout


def test_branch_with_an_agent_and_a_step_cap_stops_at_the_cap(episode_file, tmp_path):
    out = tmp_path / "branch.jsonl"
    result = gauntlet("branch", str(episode_file), "--at", "2", "--agent", "random", "--max-steps", "5",
                      "--out", str(out))
    assert result.returncode == 0, result.stderr
    branched = load_episodes(out)[0]
    assert len(branched.steps) <= 5
    assert branched.steps[-1].terminated or branched.steps[-1].truncated


def test_report_of_a_run_writes_one_html_file_in_the_run_folder(run_dir):
    result = gauntlet("report", str(run_dir))
    assert result.returncode == 0, result.stderr
    page = (run_dir / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "CartPole-v1" in page


def test_list_shows_every_kind_with_its_count_and_no_entries():
    from gauntlet.registry import KIND_DESCRIPTIONS

    result = gauntlet("list")
    assert result.returncode == 0, result.stderr
    cells = [[cell.strip() for cell in re.split("[│┃|]", line) if cell.strip()] for line in result.stdout.splitlines()]
    rows = {row[0]: row[1] for row in cells if len(row) > 2 and row[1].isdigit()}
    assert rows["envs"] == str(len(registry.env_ids())) and rows["agents"] == str(len(registry.names("agent")))
    assert len(rows) == 1 + len(KIND_DESCRIPTIONS)
    assert list(rows)[:5] == ["envs", "suites", "agents", "controllers", "monitors"]
    assert "gauntlet/ToolTask-v0" not in result.stdout and "gauntlet list agents" in result.stdout


def test_list_of_a_kind_shows_its_entries_singular_or_plural():
    envs = gauntlet("list", "envs")
    assert envs.returncode == 0, envs.stderr
    assert "gauntlet/ToolTask-v0" in envs.stdout and "Any other Gymnasium id works" in envs.stdout
    for kind in ("agents", "agent", "AGENTS"):
        agents = gauntlet("list", kind)
        assert agents.returncode == 0, agents.stderr
        assert "random" in agents.stdout and "replay" in agents.stdout and "gauntlet/ToolTask-v0" not in agents.stdout


def test_list_of_suites_shows_the_params_an_entry_binds_and_its_modes():
    result = gauntlet("list", "suites")
    assert result.returncode == 0, result.stderr
    assert "suite_path(view='routes')" in result.stdout and "chemcost (default)" in result.stdout


def test_list_of_an_unknown_kind_names_the_kinds():
    assert_one_line_error(gauntlet("list", "widgets"), "'widgets'", "envs, suites, agents, controllers, monitors")


def test_data_list_shows_every_registered_builder():
    result = gauntlet("data", "list")
    assert result.returncode == 0
    for name in registry.names("data"):
        assert name in result.stdout


def test_data_list_without_builders_says_so_and_succeeds(monkeypatch, capsys):
    monkeypatch.setitem(registry._entries, "data", {})
    with pytest.raises(SystemExit) as exit_info:
        main(["data", "list"])
    assert exit_info.value.code == 0 and "No data builders are registered" in capsys.readouterr().out


def test_bench_outside_a_source_checkout_says_it_needs_one_in_one_line(tmp_path, monkeypatch, capsys):
    from gauntlet.cli_commands import bench

    monkeypatch.setattr(bench, "package_parent", lambda: tmp_path / "site-packages")  # an installed wheel
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "core"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == ("error: gauntlet bench runs bench/<suite>.py of a source checkout; none found "
                                       "next to the installed package\n")


def test_bench_runs_the_suite_script_with_the_extra_arguments_and_its_exit_status(tmp_path):
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "probe.py").write_text(
        "import json, sys\nprint(json.dumps(sys.argv[1:]))\nsys.exit(3)\n")
    result = gauntlet("bench", "probe", "--quick", "--out", "x.json", cwd=tmp_path)
    assert result.returncode == 3
    assert json.loads(result.stdout) == ["--quick", "--out", "x.json"]


def test_serve_over_stdio_lets_a_client_reset_and_step_the_env():
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    script = Path(sys.executable).with_name("gauntlet")
    params = StdioServerParameters(command=str(script), args=["serve", "env:CartPole-v1"])

    async def session() -> tuple[dict, dict]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            start = await client.call_tool("reset", {"seed": 0})
            stepped = await client.call_tool("step", {"action": 1})
            return start.structuredContent, stepped.structuredContent

    start, stepped = anyio.run(session)
    assert len(start["observation"]) == 4 and stepped["step"] == 1
    assert "reward" not in stepped


def test_demo_runs_end_to_end_and_writes_its_report(tmp_path):
    # The platform part; each family's demo has a test of its own (the LLM one loads a model).
    result = gauntlet("demo", "--only", "core", "--out", str(tmp_path / "demo"))
    assert result.returncode == 0, result.stderr
    assert "every step matches" in result.stdout
    assert "the same observation, bit for bit" in result.stdout
    assert (tmp_path / "demo" / "report.html").is_file()
    assert load_episodes(tmp_path / "demo" / "branch.jsonl")[0].complete


TOY_TASKS = [
    {"id": "cartpole-observation-size", "server": "env:CartPole-v1", "answer": 4, "eval_spec": {"kind": "numeric"},
     "question": "Reset the environment with seed 0. How many numbers are in the observation?",
     "gold_trajectory": [{"call": "reset", "args": {"seed": 0}, "obs": None}]},
    {"id": "cartpole-one-push", "server": "env:CartPole-v1", "answer": "no", "eval_spec": {"kind": "exact"},
     "question": "Reset with seed 1 and push the cart right once. Did the episode end?",
     "gold_trajectory": [{"call": "reset", "args": {"seed": 1}, "obs": None},
                         {"call": "step", "args": {"action": 1}, "obs": None}]},
]


@pytest.fixture
def toy_suite(tmp_path, monkeypatch) -> str:
    """A registered two-task suite on the CartPole env server, for this test only."""
    path = tmp_path / "toy.jsonl"
    path.write_text("".join(json.dumps(task) + "\n" for task in TOY_TASKS))
    module = types.ModuleType("gauntlet_toy_suite")
    module.SUITE = str(path)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(registry._entries["suite"], "toy", Entry("suite", "toy", "gauntlet_toy_suite:SUITE"))
    return "toy"


def test_eval_with_the_gold_agent_scores_every_task_1_and_records_replayable_episodes(toy_suite, tmp_path, capsys):
    out = tmp_path / "eval"
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", toy_suite, "--agent", "gold", "--out", str(out)])
    assert exit_info.value.code == 0, capsys.readouterr().err
    scores = json.loads((out / "scores.json").read_text())
    assert scores["mean_score"] == 1.0
    assert [task["task_id"] for task in scores["tasks"]] == [task["id"] for task in TOY_TASKS]
    assert len(load_episodes(out)) == len(TOY_TASKS)
    with pytest.raises(SystemExit) as exit_info:
        main(["replay", str(out)])
    assert exit_info.value.code == 0
    assert "all 2 episodes reproduce" in capsys.readouterr().out


def test_eval_and_run_take_the_same_default_agent(toy_suite, tmp_path, capsys):
    from gauntlet.cli_commands.running import DEFAULT_AGENT

    out = tmp_path / "eval"
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", toy_suite, "--limit", "1", "--workers", "1", "--out", str(out)])
    assert exit_info.value.code == 0, capsys.readouterr().err
    assert json.loads((out / "scores.json").read_text())["agent"]["name"] == DEFAULT_AGENT
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "CartPole-v1", "-n", "1", "--workers", "1", "--out", str(tmp_path / "run")])
    assert exit_info.value.code == 0, capsys.readouterr().err
    assert load_episodes(tmp_path / "run")[0].agent.name == DEFAULT_AGENT


@pytest.fixture
def toy_suite_with_modes(toy_suite, monkeypatch) -> str:
    """The toy suite with a DORA-like mode that implies the agent's mode."""
    modes = {"ap": {"agent_config": {"mode": "autonomous"}}, "if": {"agent_config": {"mode": "instruction"}}}
    monkeypatch.setitem(registry._entries["suite"], toy_suite,
                        Entry("suite", toy_suite, "gauntlet_toy_suite:SUITE", metadata={"modes": modes}))
    return toy_suite


def test_eval_mode_given_the_agent_mode_it_implies_names_the_suite_mode_to_write(toy_suite_with_modes, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", toy_suite_with_modes, "--agent", "gold", "--mode", "instruction", "--out", "unused"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1
    assert "not a mode of suite 'toy'" in err and "write --mode if" in err


def test_every_command_has_a_help_line_written_as_a_sentence():
    from gauntlet.cli import app

    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    assert "oversight" in commands  # a family's command, mounted through the registry
    for name, command in commands.items():
        first_paragraph = " ".join((command.help or "").split("\n\n")[0].split())
        assert first_paragraph[:1].isupper() and first_paragraph.endswith("."), f"gauntlet {name}: {first_paragraph!r}"


def test_a_family_command_without_its_dependencies_has_its_description_as_a_sentence(monkeypatch):
    from gauntlet.cli import mount_family_commands

    monkeypatch.setitem(registry._entries, "command", {"widgets": Entry(
        "command", "widgets", "gauntlet_no_such_module:app", "widgets: make and break them")})
    app = typer.Typer()
    app.command("list")(lambda: None)
    mount_family_commands(app)
    command = typer.main.get_command(app).commands["widgets"]  # type: ignore[attr-defined]
    assert command.help == "Widgets: make and break them."


def test_data_build_runs_the_builder_into_its_versioned_cache_folder(isolated_home, monkeypatch, capsys):
    def build(cache_dir: Path, size: int = 1) -> Path:
        target = cache_dir / "numbers.txt"
        target.write_text(" ".join(map(str, range(size))))
        return target

    module = types.ModuleType("gauntlet_toy_data")
    module.build = build
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(registry._entries["data"], "numbers",
                        Entry("data", "numbers", "gauntlet_toy_data:build", "counting", {"version": "v2"}))
    with pytest.raises(SystemExit) as exit_info:
        main(["data", "build", "numbers", "--config", '{"size": 3}'])
    assert exit_info.value.code == 0, capsys.readouterr().err
    from gauntlet.datacache import entry_dir, verify

    folder = entry_dir("numbers", "v2", {"size": 3})
    assert folder.is_relative_to(isolated_home) and (folder / "numbers.txt").read_text() == "0 1 2"
    assert verify(folder)
    with pytest.raises(SystemExit):
        main(["data", "list"])
    assert "numbers" in capsys.readouterr().out


# Bad input: one line on stderr, exit status 2, no traceback ------------------------------------
def test_an_unknown_env_id_is_named_with_where_to_look():
    assert_one_line_error(gauntlet("run", "NoSuchEnv-v0", "-n", "1"), "NoSuchEnv", "gauntlet list")


@pytest.mark.parametrize("env_id", MODULE_IDS)
def test_run_takes_a_module_prefixed_env_id_and_its_workers_import_the_module(env_id, tmp_path):
    out = tmp_path / "run"
    result = gauntlet("run", env_id, "-n", "2", "--max-steps", "5", "--workers", "2", "--out", str(out),
                      extra_env={"PYTHONPATH": IMPORT_ROOT})
    assert result.returncode == 0, result.stderr
    episodes = load_episodes(out)
    assert len(episodes) == 2 and all(episode.complete and len(episode.steps) == 5 for episode in episodes)
    assert json.loads((out / "run.json").read_text())["spec"]["env_id"] == env_id
    # The header keeps the module, so the run replays in a fresh process that imports nothing itself.
    replayed = gauntlet("replay", str(out), extra_env={"PYTHONPATH": IMPORT_ROOT})
    assert replayed.returncode == 0, replayed.stderr


def test_a_module_prefixed_env_id_whose_module_is_missing_is_named_in_one_line():
    assert_one_line_error(gauntlet("run", "no_such_env_module:Thing-v0", "-n", "1"),
                          "no module named 'no_such_env_module'", "PYTHONPATH")


def test_an_unknown_env_version_is_named():
    assert_one_line_error(gauntlet("run", "CartPole-v9", "-n", "1"), "v9")


def test_an_unknown_agent_is_named_with_the_known_ones_and_where_to_list_them():
    assert_one_line_error(gauntlet("run", "CartPole-v1", "--agent", "nobody"), "nobody", "random",
                          "`gauntlet list agents`")


def test_bad_json_in_an_option_names_the_option():
    assert_one_line_error(gauntlet("run", "CartPole-v1", "--env-kwargs", "{oops"), "--env-kwargs", "JSON")


def test_env_kwargs_the_env_does_not_take_are_named():
    assert_one_line_error(gauntlet("run", "CartPole-v1", "--env-kwargs", '{"gravity": 1}'), "gravity")


def test_an_unwritable_output_folder_is_named(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert_one_line_error(gauntlet("run", "CartPole-v1", "-n", "1", "--out", str(blocker / "run")), "--out")


def test_a_report_that_cannot_be_written_is_named(run_dir, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert_one_line_error(gauntlet("report", str(run_dir), "--out", str(blocker / "report.html")), "a-file")


def test_a_malformed_episode_file_is_named(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("this is not json\nnor is this\n")
    assert_one_line_error(gauntlet("replay", str(bad)), "bad.jsonl", "line 1")


def test_a_missing_episode_file_is_named(tmp_path):
    assert_one_line_error(gauntlet("replay", str(tmp_path / "nowhere.jsonl")), "nowhere.jsonl")


def test_an_action_outside_the_space_names_the_space(episode_file, tmp_path):
    result = gauntlet("branch", str(episode_file), "--at", "1", "--action", "7", "--out", str(tmp_path / "b.jsonl"))
    assert_one_line_error(result, "7", "Discrete(2)")


def test_a_branch_step_beyond_the_episode_gives_the_valid_range(episode_file):
    assert_one_line_error(gauntlet("branch", str(episode_file), "--at", "999"), "999", "steps 0 to")


def test_an_unknown_option_points_to_help():
    assert_one_line_error(gauntlet("run", "CartPole-v1", "--no-such-option"), "--no-such-option", "--help")


def test_a_port_in_use_is_named_with_the_option_to_change():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = gauntlet("serve", "env:CartPole-v1", "--transport", "http", "--port", str(port))
    assert_one_line_error(result, str(port), "--port")


def test_an_unknown_server_is_named():
    assert_one_line_error(gauntlet("serve", "no-such-server"), "no-such-server")


def test_a_missing_bench_suite_says_where_it_looked(tmp_path):
    assert_one_line_error(gauntlet("bench", "no_such_suite", cwd=tmp_path),
                          "bench suites run from a source checkout", "no_such_suite")


def test_eval_of_an_unknown_suite_names_the_registered_ones():
    assert_one_line_error(gauntlet("eval", "no-such-suite", "--agent", "random", "--out", "x"),
                          "no-such-suite", *registry.names("suite")[:1])


def test_eval_without_registered_suites_says_so(monkeypatch, capsys):
    monkeypatch.setitem(registry._entries, "suite", {})
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "anything", "--agent", "random", "--out", "x"])
    assert exit_info.value.code == 2 and "no task suites registered" in capsys.readouterr().err


def test_data_build_of_an_unknown_builder_names_the_registered_ones():
    assert_one_line_error(gauntlet("data", "build", "nothing"), "nothing", *registry.names("data")[:1])


# Unexpected errors -------------------------------------------------------------------------------
def test_an_unexpected_error_is_one_line_with_a_debug_hint(monkeypatch, capsys):
    from gauntlet.registry import registry

    def broken(kind):
        raise RuntimeError("the registry is broken")

    monkeypatch.delenv("GAUNTLET_DEBUG", raising=False)
    monkeypatch.setattr(registry, "entries", broken)
    with pytest.raises(SystemExit) as exit_info:
        main(["list"])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the registry is broken" in err and "GAUNTLET_DEBUG=1" in err


class BuggyAgent:
    """An agent whose constructor has a bug that raises ``exception``."""

    exception: Exception = ValueError("a list index went wrong")

    def __init__(self) -> None:
        raise self.exception


class TemperatureConfig(BaseModel):
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)


class ConfiguredAgent:
    """An agent whose config is a pydantic model, as an LLM agent's is."""

    def __init__(self, temperature: float = 0.0) -> None:
        TemperatureConfig(temperature=temperature)


@pytest.fixture
def toy_agents(monkeypatch) -> None:
    module = types.ModuleType("gauntlet_toy_agents")
    module.BuggyAgent, module.ConfiguredAgent = BuggyAgent, ConfiguredAgent
    monkeypatch.setitem(sys.modules, module.__name__, module)
    for name, target in (("buggy", "BuggyAgent"), ("configured", "ConfiguredAgent")):
        monkeypatch.setitem(registry._entries["agent"], name, Entry("agent", name, f"gauntlet_toy_agents:{target}"))
    monkeypatch.delenv("GAUNTLET_DEBUG", raising=False)


@pytest.mark.parametrize("exception", [ValueError("a list index went wrong"), KeyError("observation"),
                                       TypeError("unsupported operand")], ids=lambda exc: type(exc).__name__)
def test_a_value_key_or_type_error_inside_a_command_is_an_internal_error_not_the_users(
        toy_agents, monkeypatch, capsys, exception):
    monkeypatch.setattr(BuggyAgent, "exception", exception)
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "CartPole-v1", "--agent", "buggy", "-n", "1", "--workers", "1", "--out", "unused"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 1 and err.count("\n") == 1
    assert err.startswith("error: internal error") and type(exception).__name__ in err and "GAUNTLET_DEBUG=1" in err


def test_an_agent_config_its_pydantic_model_rejects_is_the_users_to_fix(toy_agents, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "CartPole-v1", "--agent", "configured", "--agent-config", '{"temperature": 9}', "-n", "1",
              "--workers", "1", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1
    assert "temperature" in err and "--agent-config" in err and "internal error" not in err


def test_a_run_folder_holding_another_run_is_the_users_to_fix(run_dir):
    result = gauntlet("run", "Pendulum-v1", "-n", "1", "--out", str(run_dir))
    assert_one_line_error(result, "env_id", "--out")


def test_ray_address_without_the_ray_backend_is_named():
    assert_one_line_error(gauntlet("run", "CartPole-v1", "--ray-address", "127.0.0.1:6379"),
                          "--ray-address", "--backend ray")


def test_with_gauntlet_debug_set_an_unexpected_error_raises(monkeypatch):
    from gauntlet.registry import registry

    def broken(kind):
        raise RuntimeError("the registry is broken")

    monkeypatch.setenv("GAUNTLET_DEBUG", "1")
    monkeypatch.setattr(registry, "entries", broken)
    with pytest.raises(RuntimeError, match="the registry is broken"):
        main(["list"])


def test_demo_runs_every_family_demo_and_fails_loudly_when_one_breaks(tmp_path, monkeypatch, capsys):
    ran = []
    module = types.ModuleType("gauntlet_toy_demos")
    module.good = lambda out: ran.append(out)

    def broken(out):
        raise RuntimeError("renderer exploded")

    module.broken = broken
    monkeypatch.setitem(sys.modules, module.__name__, module)
    # Only the toy demos beside core's: each family's own demo is tested in its family's tests (the LLM's
    # and the oversight demo alone take minutes on a busy 2-core machine).
    monkeypatch.setitem(registry._entries, "demo", {})
    for name, target in (("aaa-broken", "broken"), ("zzz-good", "good")):
        monkeypatch.setitem(registry._entries["demo"], name, Entry("demo", name, f"gauntlet_toy_demos:{target}", name))
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--out", str(tmp_path), "--only", "zzz-good"])
    assert exit_info.value.code == 0 and ran == [tmp_path / "zzz-good"]
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--out", str(tmp_path)])
    captured = capsys.readouterr()
    assert exit_info.value.code == 2 and "aaa-broken" in captured.err and "renderer exploded" in captured.out
    assert len(ran) == 2  # the good demo still ran after the broken one
    assert (tmp_path / "report.html").exists()
