"""Commands on recorded episodes: ``replay`` (check they reproduce), ``branch`` (take another course
from a step) and ``report`` (one HTML file)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.progress import track
from rich.table import Table

from gauntlet.cli_commands.common import AgentConfigOption, build_agent, console, parse_json, parse_json_object
from gauntlet.episode import Episode, load_episodes
from gauntlet.errors import UserError

if TYPE_CHECKING:
    from gauntlet.replay import ReplayCheck

# Above this many episodes, replay lists only the ones that did not match.
REPLAY_TABLE_MAX_ROWS = 50


def _load(path: Path, index: int | None) -> list[Episode]:
    """The episodes at ``path`` (a file or run folder), or only the one at position ``index``."""
    episodes = load_episodes(path)
    if not episodes:
        raise UserError(f"{path} holds no episodes; give an episode .jsonl file or a run folder")
    if index is None:
        return episodes
    if not 0 <= index < len(episodes):
        raise UserError(f"--index {index} is out of range: {path} holds {len(episodes)} episodes "
                        f"(0 to {len(episodes) - 1})")
    return [episodes[index]]


def replay(
    source: Annotated[Path, typer.Argument(help="An episode .jsonl file or a run folder.")],
    index: Annotated[int | None, typer.Option(help="Replay only the episode at this position.")] = None,
) -> None:
    """Re-execute recorded episodes and check that each reproduces its recording step by step.

    Exits with status 1 if any episode does not match.
    """
    from gauntlet.replay import replay_episodes

    episodes = _load(source, index)
    checks = list(track(replay_episodes(episodes), total=len(episodes), description="replaying",
                        console=console, transient=True, disable=len(episodes) < 10))
    table = Table(title=f"replay of {source}")
    table.add_column("#", justify="right")
    table.add_column("episode", overflow="fold")
    for column in ("steps", "recorded return", "replayed return"):
        table.add_column(column, justify="right")
    table.add_column("result")
    positions = range(len(episodes)) if index is None else [index]
    show_all = len(checks) <= REPLAY_TABLE_MAX_ROWS
    for position, check in zip(positions, checks, strict=True):
        if show_all or not check.matches:
            table.add_row(str(position), check.episode_id, f"{check.replayed_steps}/{check.recorded_steps}",
                          f"{check.recorded_return:.3f}", f"{check.replayed_return:.3f}", _verdict(check))
    if table.rows:
        console.print(table)
    mismatches = sum(check.divergence is not None for check in checks)
    unreplayable = sum(check.not_replayable is not None for check in checks)
    reproduced = len(checks) - mismatches - unreplayable
    if unreplayable:
        console.print(f"[yellow]{unreplayable} of {len(checks)} episodes cannot be re-executed from their "
                      "record (see the table)[/yellow]")
    if mismatches:
        console.print(f"[red]{mismatches} of {len(checks)} episodes did not reproduce[/red]")
        raise typer.Exit(1)
    if reproduced == len(checks):
        everything = ("the episode reproduces its recording" if reproduced == 1
                      else f"all {reproduced} episodes reproduce their recordings")
        console.print(f"[green]{everything} exactly[/green]")
    elif reproduced:
        console.print(f"[green]{reproduced} of {len(checks)} episodes reproduce their recordings exactly[/green]")


def _verdict(check: ReplayCheck) -> str:
    if check.not_replayable is not None:
        return f"[yellow]not replayable: {check.not_replayable}[/yellow]"
    if check.divergence is not None:
        return f"[red]MISMATCH at {check.divergence}[/red]"
    return "[green]match[/green]"


def branch(
    source: Annotated[Path, typer.Argument(help="An episode .jsonl file (or a run folder, with --index).")],
    at: Annotated[int, typer.Option("--at", min=0, help="Step where the branch leaves the recording.")],
    index: Annotated[int, typer.Option(min=0, help="Which episode of the file to branch.")] = 0,
    action: Annotated[str | None, typer.Option(help="JSON action to take at step --at (e.g. 1 or [0.5, -1]).")] = None,
    agent: Annotated[str | None, typer.Option("--agent", "-a", help=(
        "Agent that carries the branch on (default: the episode's own, else random)."))] = None,
    agent_config: AgentConfigOption = None,
    out: Annotated[Path | None, typer.Option(help="File for the branched episode "
                                                  "(default: branch-<episode id>-at<K>.jsonl here).")] = None,
    max_steps: Annotated[int | None, typer.Option(min=1, help="Cap on the branch's length, prefix included.")] = None,
) -> None:
    """Replay an episode's first K steps, then take another course: an action, then an agent."""
    from gauntlet.replay import branch_episode

    original = _load(source, index)[0]
    chosen_action = parse_json("--action", action) if action is not None else None
    if agent is None and agent_config is not None:
        raise UserError("--agent-config needs --agent")
    carrier = build_agent(agent, parse_json_object("--agent-config", agent_config)) if agent else None
    target = out if out is not None else Path(f"branch-{original.episode_id}-at{at}.jsonl")
    if source.is_file() and target.exists() and target.resolve() == source.resolve():
        raise UserError(f"--out {target} is the episode file being branched; choose another file")
    branched = branch_episode(original, at, action=chosen_action, agent=carrier, max_steps=max_steps,
                              record=target)
    console.print(_comparison(original, branched, at))
    console.print(f"branched episode written to [bold]{target}[/bold]")
    console.print(f"check it reproduces: gauntlet replay {target}")


def _comparison(original: Episode, branched: Episode, at: int) -> Table:
    table = Table(title=f"branch of {original.episode_id} at step {at}")
    columns: tuple[tuple[str, Literal["left", "right"]], ...] = (
        ("", "left"), ("agent", "left"), (f"action at {at}", "left"), ("steps", "right"), ("return", "right"),
        ("success", "left"))
    for column, justify in columns:
        table.add_column(column, justify=justify)
    for label, episode in (("original", original), ("branch", branched)):
        success = episode.outcome.success if episode.outcome is not None else None
        table.add_row(label, episode.agent.name, _short(episode.steps[at].action), str(len(episode.steps)),
                      f"{episode.total_reward:.3f}", "" if success is None else str(success).lower())
    return table


def _short(value: object, limit: int = 40) -> str:
    text = str(value.tolist() if hasattr(value, "tolist") else value)
    return text if len(text) <= limit else text[:limit] + "..."


def report(
    sources: Annotated[list[Path], typer.Argument(help=(
        "A run folder or episode .jsonl file; several are reported together (a recording and its branches "
        "link to each other)."))],
    out: Annotated[Path | None, typer.Option(help="HTML file to write (default: report.html in the first run "
                                                  "folder, or <first episode file>.html beside it).")] = None,
) -> None:
    """Write one self-contained HTML report of a run: summary, plots, and every episode's trace
    (conversation, tool calls, monitor timeline, controller decisions, branch links)."""
    from gauntlet.report import write_report

    for source in sources:
        if not source.exists():
            raise FileNotFoundError(f"no run folder or episode file at {source}")
    first = sources[0]
    target = out if out is not None else (first / "report.html" if first.is_dir() else first.with_suffix(".html"))
    with console.status("writing the report"):
        written = write_report(sources, target)
    console.print(f"report written to [bold]{written}[/bold]")


def register(app: typer.Typer) -> None:
    """Mount this module's commands on ``app``."""
    app.command("replay")(replay)
    app.command("branch")(branch)
    app.command("report")(report)
