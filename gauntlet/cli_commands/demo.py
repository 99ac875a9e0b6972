"""``gauntlet demo``: a short tour of the platform, then each family's demo."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gauntlet.cli_commands.common import console
from gauntlet.errors import UserError
from gauntlet.registry import registry


def demo(
    out: Annotated[Path, typer.Option(help="Folder for the demo's run, branch and report.")] = Path("runs/demo"),
    only: Annotated[str | None, typer.Option(help="Run only this part: 'core' or a family's demo name.")] = None,
) -> None:
    """A short tour: the platform (record, replay, branch, serve over MCP, report), then each family's demo."""
    from gauntlet.demo import run_demo

    families = registry.entries("demo")
    known = ["core", *(entry.name for entry in families)]
    if only is not None and only not in known:
        raise UserError(f"no demo named {only!r}; choose one of {', '.join(known)}")
    report = run_demo(out, console=console) if only in (None, "core") else None
    failed = []
    for entry in families:
        if only not in (None, entry.name):
            continue
        console.rule(f"[bold]{entry.name}[/bold]: {entry.description}")
        try:
            entry.load()(out / entry.name)
        except Exception as exc:  # one family's failure must not hide the others' demos
            failed.append(entry.name)
            console.print(f"[red]the {entry.name} demo failed: {type(exc).__name__}: {exc}[/red]")
    if report is not None:
        console.print(f"report of the platform demo: {report}")
    if failed:
        raise UserError(f"demo parts failed: {', '.join(failed)} (rerun one with --only NAME and GAUNTLET_DEBUG=1)")


def register(app: typer.Typer) -> None:
    """Mount ``gauntlet demo`` on ``app``."""
    app.command("demo")(demo)
