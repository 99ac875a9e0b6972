"""Commands that put agents to work: ``run`` (many episodes), ``serve`` (an env or tool server over
MCP) and ``eval`` (a task suite). ``run`` and ``eval`` share the runner's machinery (``gauntlet.batch``):
worker processes or Ray, and run folders that a re-run resumes."""

from __future__ import annotations

import json
import time
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import gymnasium as gym
import typer
from rich.table import Table

from gauntlet.cli_commands.common import (AgentConfigOption, Backend, ControllerConfigOption, ControllerOption,
                                          EnvKwargsOption, HookTarget, MonitorConfigOption, MonitorOption,
                                          build_agent, console, hook_specs, parse_json_object)
from gauntlet.errors import UserError
from gauntlet.registry import env_spec, registry

if TYPE_CHECKING:
    from gauntlet.batch import RunResult
    from gauntlet.evaluation import Evaluation


# Options ``run`` and ``eval`` share, spelled once.
BackendOption = Annotated[Backend, typer.Option(help="Where episodes run: local processes, or a Ray cluster.")]
WorkersOption = Annotated[int | None, typer.Option(min=1, help=(
    "Worker processes (default: one per CPU; 1 runs the episodes in this process)."))]
RayAddressOption = Annotated[str | None, typer.Option(help="Address of a Ray cluster (with --backend ray).")]
# ``run`` and ``eval`` take the same agent by default: the baseline every env (and every task suite) supports.
DEFAULT_AGENT = "random"
AgentOption = Annotated[str, typer.Option("--agent", "-a", help=(
    f"Registered agent (default: {DEFAULT_AGENT}, uniform samples from the action space; `gauntlet list agents` "
    "shows the others)."))]
# An eval's table lists every attempt up to this many; beyond, only those that scored below 1.
TABLE_ROWS = 40


class Transport(StrEnum):
    stdio = "stdio"
    http = "http"


def _check_env(env_id: str, env_kwargs: dict[str, Any]) -> None:
    """Make the env once in this process, so a bad id or kwarg fails here and not in every worker."""
    spec = env_spec(env_id)
    try:
        env = gym.make(spec, **env_kwargs)
    except TypeError as exc:
        raise UserError(f"{env_id} does not accept --env-kwargs {json.dumps(env_kwargs)} ({exc}); "
                        "fix --env-kwargs") from None
    except ValueError as exc:
        if not env_kwargs:
            raise
        raise UserError(f"{env_id} rejects --env-kwargs {json.dumps(env_kwargs)} ({exc}); fix --env-kwargs") from None
    env.close()


def _check_backend(backend: Backend, ray_address: str | None) -> None:
    if ray_address is not None and backend is not Backend.ray:
        raise UserError("--ray-address goes with --backend ray; add --backend ray or drop --ray-address")


def _default_run_folder(name: str, agent: str) -> Path:
    return Path("runs") / f"{name.replace('/', '_')}-{agent}-{time.strftime('%Y%m%d-%H%M%S')}"


def run(
    env_id: Annotated[str, typer.Argument(help="Gymnasium env id: gauntlet/... or any other (e.g. CartPole-v1).")],
    agent: AgentOption = DEFAULT_AGENT,
    agent_config: AgentConfigOption = None,
    env_kwargs: EnvKwargsOption = None,
    episodes: Annotated[int, typer.Option("--episodes", "-n", min=1, help="Number of episodes.")] = 10,
    seed: Annotated[int, typer.Option(help="Base seed; episode i gets its own seed derived from it.")] = 0,
    max_steps: Annotated[int | None, typer.Option(min=1, help="Cut episodes off after this many steps.")] = None,
    out: Annotated[Path | None, typer.Option(help="Run folder (default: runs/<env>-<agent>-<time>). "
                                                  "Re-running into it resumes the run.")] = None,
    backend: BackendOption = Backend.local,
    workers: WorkersOption = None,
    ray_address: RayAddressOption = None,
    controller: ControllerOption = None,
    controller_config: ControllerConfigOption = None,
    monitor: MonitorOption = None,
    monitor_config: MonitorConfigOption = None,
) -> None:
    """Run an agent for many episodes and record every one of them in a run folder."""
    from gauntlet.batch import RunSpec, run_many
    from gauntlet.episode import AgentSpec

    _check_backend(backend, ray_address)
    agent_kwargs = parse_json_object("--agent-config", agent_config)
    make_kwargs = parse_json_object("--env-kwargs", env_kwargs)
    _check_env(env_id, make_kwargs)
    build_agent(agent, agent_kwargs)
    hooks = hook_specs(controller, controller_config, monitor, monitor_config,
                       HookTarget("run", env_id, agent, agent_config=agent_kwargs, env_kwargs=make_kwargs, seed=seed))
    spec = RunSpec(env_id=env_id, env_kwargs=make_kwargs, agent=AgentSpec(name=agent, config=agent_kwargs),
                   seed=seed, max_steps=max_steps, hooks=hooks)
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
    # Beside the return, the family's own figures (a classifier's accuracy, a regression's error),
    # each averaged over the episodes that report it.
    reported: dict[str, list[float]] = {}
    for summary in result.episodes:
        for name, value in summary.metrics.items():
            reported.setdefault(name, []).append(value)
    for name, values in reported.items():
        table.add_row(f"mean {name}", f"{sum(values) / len(values):.3f}")
    if lengths:
        table.add_row("mean length", f"{sum(lengths) / len(lengths):.3f}")
    if successes:
        table.add_row("success rate", f"{sum(successes) / len(successes):.3f}")
    return table


class LogLevel(StrEnum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


def serve(
    target: Annotated[str, typer.Argument(help="env:<ENV_ID> to serve an env, or a registered server name.")],
    transport: Annotated[Transport, typer.Option(
        help="stdio (for a client that launches the server) or http.")] = Transport.stdio,
    host: Annotated[str, typer.Option(help=(
        "Interface for --transport http; any but a loopback one needs --auth-token-file."))] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port for --transport http (0: any free one).")] = 8000,
    auth_token_file: Annotated[Path | None, typer.Option(help=(
        "File holding the bearer token HTTP clients must send (Authorization: Bearer <token>)."))] = None,
    allowed_host: Annotated[list[str] | None, typer.Option(help=(
        "A Host header value HTTP clients may send besides the loopback names, e.g. myhost:8000 or "
        "myhost:* (repeatable)."))] = None,
    allowed_origin: Annotated[list[str] | None, typer.Option(help=(
        "An Origin header value browser clients may send, e.g. https://app.example (repeatable)."))] = None,
    env_kwargs: EnvKwargsOption = None,
    server_kwargs: Annotated[str | None, typer.Option(help=(
        "A registered server's options as a JSON object, e.g. '{\"families\": [\"calc\"]}' for disaster or "
        "'{\"db_path\": \"catalogue.sqlite\"}' for chem."))] = None,
    expose_reward: Annotated[bool, typer.Option(
        "--expose-reward", help="Show the reward to the agent (hidden by default).")] = False,
    expose_privileged: Annotated[bool, typer.Option(
        "--expose-privileged", help="Show info['privileged'] to the agent (hidden by default).")] = False,
    record: Annotated[Path | None, typer.Option(
        help="Folder that receives every client session's episodes as JSONL.")] = None,
    control_port: Annotated[int | None, typer.Option(min=0, max=65535, help=(
        "env:... targets: also serve the operator's control server (rewards, sessions) over HTTP "
        "on this port."))] = None,
    log_level: Annotated[LogLevel, typer.Option(help=(
        "Least severe records logged: refused tool calls are info, bugs (with traceback and the incident "
        "id the agent saw) error."))] = LogLevel.warning,
    log_file: Annotated[Path | None, typer.Option(help=(
        "Append the log to this file instead of stderr (never stdout: over stdio it carries the protocol)."))] = None,
    list_tools: Annotated[bool, typer.Option(
        "--list-tools", help="Print the server's tools as a Markdown table and exit.")] = False,
) -> None:
    """Serve an env (env:<ENV_ID>) or a registered tool server over MCP."""
    try:
        from gauntlet.bridges import server_logging, serving, targets
    except ModuleNotFoundError as exc:
        raise UserError(f"serving over MCP needs {exc.name}, which is not installed; reinstall gauntlet") from None
    # Env-bridge flags left at their defaults are not passed, so a named tool server never sees them;
    # --server-kwargs are passed as written (false, 0 and [] included).
    flags = {"env_kwargs": parse_json_object("--env-kwargs", env_kwargs) or None, "expose_reward": expose_reward,
             "expose_privileged": expose_privileged, "record": str(record) if record is not None else None}
    options = {**{key: value for key, value in flags.items() if value},
               **parse_json_object("--server-kwargs", server_kwargs)}
    server_logging.configure_server_logging(log_level.value, log_file)
    if list_tools:
        print(_tools_table(targets.resolve_server(target, **options)))
        return
    serving.run_target(target, transport=transport.value, host=host, port=port, control_port=control_port,
                       auth_token_file=auth_token_file, allowed_hosts=allowed_host or (),
                       allowed_origins=allowed_origin or (),
                       **{key: value for key, value in options.items() if value})


def _tools_table(server: Any) -> str:
    """The server's tools as Markdown: name, whether it only reads, the first paragraph of its description."""
    import anyio

    lines = ["| tool | read-only | what it does |", "|---|---|---|"]
    for tool in anyio.run(server.list_tools):
        first = (tool.description or "").split("\n\n")[0].replace("\n", " ").replace("|", "\\|")
        read_only = tool.annotations is not None and tool.annotations.readOnlyHint
        lines.append(f"| `{tool.name}` | {'yes' if read_only else 'no'} | {first} |")
    return "\n".join(lines)


def eval_suite(
    suite: Annotated[str, typer.Argument(help="Registered task suite (`gauntlet list suites` shows them).")],
    agent: AgentOption = DEFAULT_AGENT,
    agent_config: AgentConfigOption = None,
    view: Annotated[str | None, typer.Option("--view", help=(
        "A view of the suite's family, e.g. `gauntlet eval chem --view noisy-high` (the suite's metadata "
        "lists its views)."))] = None,
    mode: Annotated[str | None, typer.Option("--mode", help=(
        "The suite's mode, for suites that define modes (`gauntlet list suites` shows them; default: the "
        "suite's default mode): how its tasks are put to the agent and scored, e.g. `gauntlet eval disaster "
        "--mode if` (DORA: ap autonomous planning, if instruction following). Not the agent's own `mode` "
        "(that is --agent-config '{\"mode\": ...}'): a suite mode that implies one (disaster: ap -> autonomous, "
        "if -> instruction) sets it unless --agent-config does, and a different one there is refused. "
        "Recorded in scores.json."))] = None,
    tasks: Annotated[str | None, typer.Option("--tasks", help=(
        "Only these tasks, by id, comma-separated (in this order)."))] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N tasks (of --tasks, if given).")] = None,
    repeats: Annotated[int, typer.Option(min=1, help=(
        "Attempts at each task, each with its own recorded seed (for pass@k)."))] = 1,
    seed: Annotated[int, typer.Option(help=(
        "Base seed: attempt r at task t is reset with seed t + (seed + r) * suite size."))] = 0,
    out: Annotated[Path | None, typer.Option(help=(
        "Run folder (default: runs/<suite>-<agent>-<time>). Re-running into it resumes the evaluation."))] = None,
    backend: BackendOption = Backend.local,
    workers: WorkersOption = None,
    ray_address: RayAddressOption = None,
    controller: ControllerOption = None,
    controller_config: ControllerConfigOption = None,
    monitor: MonitorOption = None,
    monitor_config: MonitorConfigOption = None,
) -> None:
    """Run an agent on the tasks of a registered task suite, score every attempt and record it."""
    from gauntlet.evaluation import evaluate_suite, resolve_mode, resolve_view

    if not registry.names("suite"):
        raise UserError("no task suites registered; install a family that ships one "
                        "(`gauntlet list` shows the registered suites)")
    _check_backend(backend, ray_address)
    registry.get("suite", suite)
    resolved = resolve_view(suite, view)
    mode = mode.lower() if mode is not None else None
    resolve_mode(resolved, mode)
    registry.get("agent", agent)
    config = parse_json_object("--agent-config", agent_config)
    hooks = hook_specs(controller, controller_config, monitor, monitor_config,
                       HookTarget("eval", resolved, agent, agent_config=config))
    task_ids = [task_id.strip() for task_id in tasks.split(",") if task_id.strip()] if tasks is not None else None
    if task_ids == []:
        raise UserError("--tasks names no task; give task ids separated by commas, e.g. --tasks a-1,a-2")
    folder = out if out is not None else _default_run_folder(resolved, agent)
    evaluation = evaluate_suite(suite, agent, folder, agent_config=config, view=view, mode=mode, task_ids=task_ids,
                                limit=limit, repeats=repeats, seed=seed, backend=backend.value, workers=workers,
                                ray_address=ray_address, progress=True, hooks=hooks)
    title = f"{resolved}: agent {agent}"
    # With several attempts per task, what matters is each task's c of n and the suite's pass@k / pass^k.
    tables = [_evaluation_table(evaluation, title)] if evaluation.repeats == 1 else [
        _tally_table(evaluation, title), _pass_k_table(evaluation)]
    for table in tables:
        if table.row_count:
            console.print(table)
    rate = evaluation.success_rate
    tasks_run = len(evaluation.attempts())
    attempts = f" ({len(evaluation.results)} attempts)" if evaluation.repeats > 1 else ""
    console.print(f"mean score {evaluation.mean_score:.3f} over {tasks_run} tasks{attempts}"
                  + ("" if rate is None else f", success rate {rate:.3f}"))
    if evaluation.mean_metrics:
        console.print("mean " + ", ".join(f"{name} {value:.3f}" for name, value in evaluation.mean_metrics.items()))
    console.print(_cost_line(evaluation))
    if evaluation.report is not None:
        for table in _report_tables(evaluation.report):
            console.print(table)
        console.print(f"scorer report (also in scores.json): {json.dumps(evaluation.report, default=str)}")
    console.print(f"run folder: [bold]{evaluation.out_dir}[/bold]  (ran {evaluation.ran}, "
                  f"resumed {evaluation.resumed} already complete); scores in scores.json")
    console.print(f"next: gauntlet report {evaluation.out_dir}")


def _report_tables(report: dict[str, Any]) -> list[Table]:
    """The tables a scorer's run report carries (``tables``: title, columns, rows of strings)."""
    tables = []
    for spec in report.get("tables", []):
        table = Table(title=spec["title"])
        for column in spec["columns"]:
            table.add_column(column)
        for row in spec["rows"]:
            table.add_row(*row)
        tables.append(table)
    return tables


def _evaluation_table(evaluation: Evaluation, title: str) -> Table:
    """Every attempt, or when there are many, those that scored below 1 (the first ``TABLE_ROWS``)."""
    results = evaluation.results
    shown = results if len(results) <= TABLE_ROWS else [result for result in results if result.score < 1.0]
    if len(shown) < len(results):
        title += f" ({len(shown)} of {len(results)} attempts scored below 1"
        title += f"; the first {TABLE_ROWS} shown)" if len(shown) > TABLE_ROWS else ")"
    table = Table(title=title)
    metrics = list(evaluation.mean_metrics)
    columns = ["#", "task", *(["attempt", "seed"] if evaluation.repeats > 1 else []), "score", "success", "steps",
               *metrics]
    for column in columns:
        table.add_column(column, justify="left" if column in ("task", "success") else "right")
    for result in shown[:TABLE_ROWS]:
        attempt = [str(result.repeat), str(result.seed)] if evaluation.repeats > 1 else []
        table.add_row(str(result.index), result.task_id, *attempt, f"{result.score:.3f}",
                      "" if result.success is None else str(result.success).lower(), str(result.steps),
                      *("" if name not in result.metrics else f"{result.metrics[name]:.3f}" for name in metrics))
    return table


def _tally_table(evaluation: Evaluation, title: str) -> Table:
    """Each task's successes c of its n attempts, mean score, tokens and seconds per attempt; when there are
    many tasks, those that did not succeed every time (the first ``TABLE_ROWS``)."""
    tallies = evaluation.tallies()
    shown = tallies if len(tallies) <= TABLE_ROWS else [t for t in tallies if t.successes < t.attempts]
    if len(shown) < len(tallies):
        title += f" ({len(shown)} of {len(tallies)} tasks failed at least once"
        title += f"; the first {TABLE_ROWS} shown)" if len(shown) > TABLE_ROWS else ")"
    table = Table(title=title)
    for column in ("#", "task", "c / n", "mean score", "tokens / attempt", "s / attempt"):
        table.add_column(column, justify="left" if column == "task" else "right")
    for tally in shown[:TABLE_ROWS]:
        table.add_row(str(tally.index), tally.task_id, f"{tally.successes} / {tally.attempts}",
                      f"{tally.mean_score:.3f}", f"{tally.mean_tokens:.0f}",
                      "" if tally.mean_seconds is None else f"{tally.mean_seconds:.2f}")
    return table


def _pass_k_table(evaluation: Evaluation) -> Table:
    """pass@k (at least one of k attempts succeeds) and pass^k (all k do) with their bootstrap CIs."""
    table = Table(title=f"pass@k and pass^k, {len(evaluation.attempts())} tasks (95% CI: bootstrap over tasks)")
    for column in ("k", "pass@k", "95% CI", "pass^k", "95% CI"):
        table.add_column(column, justify="right")
    for row in evaluation.pass_k():
        table.add_row(str(row.k), f"{row.pass_at_k:.3f}", f"[{row.pass_at_k_ci[0]:.3f}, {row.pass_at_k_ci[1]:.3f}]",
                      f"{row.pass_hat_k:.3f}", f"[{row.pass_hat_k_ci[0]:.3f}, {row.pass_hat_k_ci[1]:.3f}]")
    return table


def _cost_line(evaluation: Evaluation) -> str:
    """Mean seconds per attempt, and the model's tokens (and dollars) when the agent recorded model calls."""
    results = evaluation.results
    seconds = [result.wall_s for result in results if result.wall_s is not None]
    parts = [f"{sum(seconds) / len(seconds):.2f} s per attempt" if seconds else "no wall time recorded"]
    if any(result.model_calls for result in results):
        calls = sum(result.model_calls for result in results) / len(results)
        tokens_in = sum(result.input_tokens for result in results) / len(results)
        tokens_out = sum(result.output_tokens for result in results) / len(results)
        parts.append(f"{calls:.1f} model calls, {tokens_in:.0f} input + {tokens_out:.0f} output tokens per attempt")
        costs = [result.cost_usd for result in results if result.cost_usd is not None]
        if costs:
            parts.append(f"${sum(costs):.4f} in all")
    return "; ".join(parts)


def register(app: typer.Typer) -> None:
    """Mount this module's commands on ``app``."""
    app.command("run")(run)
    app.command("serve")(serve)
    app.command("eval")(eval_suite)
