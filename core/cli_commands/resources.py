"""Commands around the platform itself: ``data`` (build generated data into the cache), ``bench``
(performance suites of a source checkout) and ``demo`` (a tour of the platform)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from gauntlet.cli_commands.common import console, parse_json_object
from gauntlet.datacache import MANIFEST, cache_root, ensure_built, entry_dir
from gauntlet.errors import UserError, check_arguments
from gauntlet.registry import registry

data_app = typer.Typer(help="Generated data: list the builders, build one into the cache.", no_args_is_help=True)


def _version(name: str) -> str:
    return str(registry.get("data", name).metadata.get("version", "unversioned"))


def _inputs(name: str) -> tuple[str, ...]:
    """The curated files (under ``data/``) the builder reads: part of its cache key."""
    return tuple(registry.get("data", name).metadata.get("inputs", ()))


@data_app.command("list")
def data_list() -> None:
    """Show the registered data builders and whether each is built."""
    entries = registry.entries("data")
    if not entries:
        console.print("No data builders are registered yet. Env and tool families register theirs when "
                      "installed; `gauntlet data build NAME` then builds one into "
                      f"{cache_root()}.")
        return
    table = Table(title=f"data builders (cache: {cache_root()})")
    for column in ("name", "version", "built", "description"):
        table.add_column(column)
    for entry in entries:
        folder = entry_dir(entry.name, _version(entry.name), inputs=_inputs(entry.name))
        built = "yes" if (folder / MANIFEST).is_file() else "no"
        table.add_row(entry.name, _version(entry.name), built, entry.description)
    console.print(table)


@data_app.command("build")
def data_build(
    name: Annotated[str, typer.Argument(help="Registered data builder (see `gauntlet data list`).")],
    config: Annotated[str | None, typer.Option(help="Builder keyword arguments as a JSON object.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if a verified copy is cached.")] = False,
) -> None:
    """Build a family's generated data into the cache (deterministic; rebuilding gives the same files)."""
    if not registry.names("data"):
        raise UserError(f"no data builders are registered, so there is no {name!r} to build; "
                        "install the family that provides it")
    entry = registry.get("data", name)
    kwargs = parse_json_object("--config", config)
    builder = entry.load()
    check_arguments(builder, cache_root(), what=f"data builder {name!r}", fix="fix --config", **kwargs)
    with console.status(f"building {name}"):
        built = ensure_built(name, _version(name), builder, params=kwargs, inputs=_inputs(name), rebuild=force)
    console.print(f"built [bold]{name}[/bold] into {built} (files checksummed in {MANIFEST})")


def _bench_folders() -> list[Path]:
    import gauntlet

    checkout = Path(gauntlet.__file__).resolve().parents[1]
    return list(dict.fromkeys([Path.cwd() / "bench", checkout / "bench"]))


def bench(
    ctx: typer.Context,
    suite: Annotated[str, typer.Argument(help="Suite name: runs bench/<SUITE>.py; further arguments go to it.")],
) -> None:
    """Run a performance suite of the source checkout (bench/<SUITE>.py), passing on extra arguments."""
    if not re.fullmatch(r"[A-Za-z0-9_\-]+", suite):
        raise UserError(f"bench suite names are plain names like 'core', not {suite!r}")
    folders = _bench_folders()
    for folder in folders:
        script = folder / f"{suite}.py"
        if script.is_file():
            completed = subprocess.run([sys.executable, str(script), *ctx.args], check=False)
            raise typer.Exit(completed.returncode)
    available = sorted({path.stem for folder in folders if folder.is_dir() for path in folder.glob("*.py")
                        if not path.name.startswith("_")})
    where = " or ".join(str(folder) for folder in folders)
    known = f" (available: {', '.join(available)})" if available else ""
    raise UserError(f"bench suites run from a source checkout; no bench/{suite}.py under {where}{known}")


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
    """Mount this module's commands on ``app``."""
    app.add_typer(data_app, name="data")
    app.command("bench", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(bench)
    app.command("demo")(demo)
