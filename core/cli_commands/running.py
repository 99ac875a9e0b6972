"""Commands that put agents to work: ``run`` (many episodes), ``serve`` (an env or tool server over
MCP) and ``eval`` (a task suite)."""

from __future__ import annotations

import json
import time
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import gymnasium as gym
import typer
from rich.table import Table

from gauntlet.cli_commands.common import (AgentConfigOption, EnvKwargsOption, build_agent, console,
                                          parse_json_object)
from gauntlet.errors import UserError
from gauntlet.registry import registry

if TYPE_CHECKING:
    from gauntlet.batch import RunResult


class Backend(str, Enum):
    local = "local"
    ray = "ray"


class Transport(str, Enum):
    stdio = "stdio"
    http = "http"


def _check_env(env_id: str, env_kwargs: dict[str, Any]) -> None:
    """Make the env once in this process, so a bad id or kwarg fails here and not in every worker."""
    gym.spec(env_id)
    try:
        env = gym.make(env_id, **env_kwargs)
    except TypeError as exc:
        raise UserError(f"{env_id} does not accept --env-kwargs {json.dumps(env_kwargs)} ({exc}); "
                        "fix --env-kwargs") from None
    env.close()


def _default_run_folder(env_id: str, agent: str) -> Path:
    return Path("runs") / f"{env_id.replace('/', '_')}-{agent}-{time.strftime('%Y%m%d-%H%M%S')}"


def run(
    env_id: Annotated[str, typer.Argument(help="Gymnasium env id: gauntlet/... or any other (e.g. CartPole-v1).")],
    agent: Annotated[str, typer.Option("--agent", "-a", help="Registered agent (see `gauntlet list`).")] = "random",
    agent_config: AgentConfigOption = None,
    env_kwargs: EnvKwargsOption = None,
    episodes: Annotated[int, typer.Option("--episodes", "-n", min=1, help="Number of episodes.")] = 10,
    seed: Annotated[int, typer.Option(help="Base seed; episode i gets its own seed derived from it.")] = 0,
    max_steps: Annotated[int | None, typer.Option(min=1, help="Cut episodes off after this many steps.")] = None,
    out: Annotated[Path | None, typer.Option(help="Run folder (default: runs/<env>-<agent>-<time>). "
                                                  "Re-running into it resumes the run.")] = None,
    backend: Annotated[Backend, typer.Option(help="Where episodes run.")] = Backend.local,
    workers: Annotated[int | None, typer.Option(min=1, help="Worker processes (default: one per CPU).")] = None,
    ray_address: Annotated[str | None, typer.Option(help="Address of a Ray cluster (with --backend ray).")] = None,
) -> None:
    """Run an agent for many episodes and record every one of them in a run folder."""
    from gauntlet.batch import RunSpec, run_many
    from gauntlet.episode import AgentSpec

    agent_kwargs = parse_json_object("--agent-config", agent_config)
    make_kwargs = parse_json_object("--env-kwargs", env_kwargs)
    _check_env(env_id, make_kwargs)
    build_agent(agent, agent_kwargs)
    spec = RunSpec(env_id=env_id, env_kwargs=make_kwargs, agent=AgentSpec(name=agent, config=agent_kwargs),
                   seed=seed, max_steps=max_steps)
    folder = out if out is not None else _default_run_folder(env_id, agent)
    result = run_many(spec, episodes, folder, backend=backend.value, workers=workers, ray_address=ray_address)
    console.print(_run_summary(result))
    console.print(f"run folder: [bold]{result.out_dir}[/bold]  (ran {result.ran}, "
                  f"resumed {result.skipped} already complete)")
    console.print(f"next: gauntlet report {result.out_dir}   |   gauntlet replay {result.out_dir}")


def _run_summary(result: RunResult) -> Table:
    from gauntlet.report import return_stats

    scores = [summary.score for summary in result.episodes if summary.score is not None]
    lengths = [summary.length for summary in result.episodes]
    successes = [summary.success for summary in result.episodes if summary.success is not None]
    table = Table(title=f"run {result.run_id}")
    table.add_column("statistic")
    table.add_column("value", justify="right")
    table.add_row("episodes", str(len(result.episodes)))
    stats = return_stats(scores)
    if stats is not None:
        table.add_row("mean return", f"{stats.mean:.3f}")
        table.add_row("std return", f"{stats.std:.3f}")
        table.add_row("95% CI of mean (bootstrap)", f"[{stats.ci_low:.3f}, {stats.ci_high:.3f}]")
        table.add_row("min / max return", f"{stats.min:.3f} / {stats.max:.3f}")
    if lengths:
        table.add_row("mean length", f"{sum(lengths) / len(lengths):.3f}")
    if successes:
        table.add_row("success rate", f"{sum(successes) / len(successes):.3f}")
    return table


def serve(
    target: Annotated[str, typer.Argument(help="env:<ENV_ID> to serve an env, or a registered server name.")],
    transport: Annotated[Transport, typer.Option(
        help="stdio (for a client that launches the server) or http.")] = Transport.stdio,
    host: Annotated[str, typer.Option(help="Interface for --transport http.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port for --transport http (0: any free one).")] = 8000,
    env_kwargs: EnvKwargsOption = None,
    expose_reward: Annotated[bool, typer.Option(
        "--expose-reward", help="Show the reward to the agent (hidden by default).")] = False,
    expose_privileged: Annotated[bool, typer.Option(
        "--expose-privileged", help="Show info['privileged'] to the agent (hidden by default).")] = False,
    record: Annotated[Path | None, typer.Option(
        help="Folder that receives every client session's episodes as JSONL.")] = None,
    control_port: Annotated[int | None, typer.Option(min=0, max=65535, help=(
        "env:... targets: also serve the operator's control server (rewards, sessions) over HTTP "
        "on this port."))] = None,
) -> None:
    """Serve an env (env:<ENV_ID>) or a registered tool server over MCP."""
    try:
        from gauntlet.bridges import serving
    except ModuleNotFoundError as exc:
        raise UserError(f"serving over MCP needs {exc.name}, which is not installed; reinstall gauntlet") from None
    # Options left at their defaults are not passed, so a named tool server never sees env-only ones.
    options = {"env_kwargs": parse_json_object("--env-kwargs", env_kwargs) or None, "expose_reward": expose_reward,
               "expose_privileged": expose_privileged, "record": str(record) if record is not None else None}
    serving.run_target(target, transport=transport.value, host=host, port=port, control_port=control_port,
                       **{key: value for key, value in options.items() if value})


def eval_suite(
    suite: Annotated[str, typer.Argument(help="Registered task suite (see `gauntlet list`).")],
    agent: Annotated[str, typer.Option("--agent", "-a", help="Registered agent name.")],
    out: Annotated[Path, typer.Option(help="Folder for the episodes and scores.json.")],
    agent_config: AgentConfigOption = None,
    view: Annotated[str | None, typer.Option("--view", help=(
        "A view of the suite's family, e.g. `gauntlet eval chem --view noisy-high` (the suite's metadata "
        "lists its views)."))] = None,
) -> None:
    """Run an agent once on every task of a registered task suite, score it and record it."""
    from rich.progress import Progress

    from gauntlet.evaluation import evaluate_suite, resolve_view

    if not registry.names("suite"):
        raise UserError("no task suites registered; install a family that ships one "
                        "(`gauntlet list` shows the registered suites)")
    registry.get("suite", suite)
    resolved = resolve_view(suite, view)
    registry.get("agent", agent)
    config = parse_json_object("--agent-config", agent_config)
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task(f"{resolved} with {agent}", total=None)
        evaluation = evaluate_suite(suite, agent, out, agent_config=config,
                                    progress=lambda result: bar.advance(task), view=view)
    table = Table(title=f"{resolved}: agent {agent}")
    for column, justify in (("#", "right"), ("task", "left"), ("score", "right"), ("success", "left"),
                            ("steps", "right")):
        table.add_column(column, justify=justify)
    for result in evaluation.results:
        table.add_row(str(result.index), result.task_id, f"{result.score:.3f}",
                      "" if result.success is None else str(result.success).lower(), str(result.steps))
    console.print(table)
    rate = evaluation.success_rate
    console.print(f"mean score {evaluation.mean_score:.3f} over {len(evaluation.results)} tasks"
                  + ("" if rate is None else f", success rate {rate:.3f}"))
    if evaluation.report is not None:
        console.print(f"scorer report (also in scores.json): {json.dumps(evaluation.report, default=str)}")
    console.print(f"episodes and scores.json in [bold]{evaluation.out_dir}[/bold]; "
                  f"next: gauntlet report {evaluation.out_dir}")


def register(app: typer.Typer) -> None:
    """Mount this module's commands on ``app``."""
    app.command("run")(run)
    app.command("serve")(serve)
    app.command("eval")(eval_suite)
