"""``gauntlet data``: list the registered data builders and build one into the cache."""

from __future__ import annotations

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


def register(app: typer.Typer) -> None:
    """Mount ``gauntlet data`` on ``app``."""
    app.add_typer(data_app, name="data")
