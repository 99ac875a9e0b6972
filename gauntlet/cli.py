"""The ``gauntlet`` command line: list, run, serve, eval, replay, branch, report, bench, data, demo.

Every command's errors go through ``main``: a problem the user can fix is printed as one line on
stderr, ``error: <what> <how to fix it>``, with exit status 2 and no traceback. Those are the errors
``user_error_message`` knows: ``UserError`` (raised at a boundary: bad option, action outside the
space, unknown view...), an unknown registry name or Gymnasium env id, a malformed episode or suite
file, a run folder that cannot hold the run, and the operating system's own complaints about a path
or port. Anything else is a bug, however ordinary its type (a ``ValueError`` or ``KeyError`` from
inside a command is not the user's to fix): ``error: internal error ...``, one line too, exit status
1, and ``GAUNTLET_DEBUG=1`` shows the traceback. A command stopped by SIGTERM while its worker processes
ran (``gauntlet.worker_pool.Stopped``) says so in one line and exits with the signal's status, 143.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Sequence
from typing import Annotated, Any, NoReturn

import typer
from rich.table import Table

from gauntlet.cli_commands import bench, data, demo, episodes, running
from gauntlet.cli_commands.common import console
from gauntlet.errors import UserError
from gauntlet.worker_pool import Stopped

# Recent typer carries its own copy of click; older releases raise click's exceptions.
try:
    from typer._click.exceptions import ClickException, NoArgsIsHelpError
except ImportError:  # the same classes under click's own name; mypy sees typer's copy as the type
    from click.exceptions import ClickException, NoArgsIsHelpError  # type: ignore[assignment]

EXIT_USER_ERROR = 2
EXIT_BUG = 1
DEBUG_VARIABLE = "GAUNTLET_DEBUG"

app = typer.Typer(name="gauntlet", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Gymnasium environments and MCP tool servers where AI agents are put through real trials.")


# ``gauntlet list`` names a kind in the plural (``gauntlet list agents``); the singular works too.
# Envs are Gymnasium's registry's, not a kind of ours: ``env`` stands for them here.
ENV_DESCRIPTION = ("Gymnasium environments under gauntlet/ (gauntlet run ENV); any other Gymnasium id works too, "
                   "e.g. CartPole-v1")
LIST_NAMES = {"env": "envs", "suite": "suites", "agent": "agents", "controller": "controllers", "monitor": "monitors",
              "server": "servers", "data": "data", "demo": "demos", "command": "commands"}


def list_name(kind: str) -> str:
    """How ``gauntlet list`` names a registry kind: ``agents`` for ``agent``."""
    return LIST_NAMES.get(kind, kind)


def _listed_kind(name: str) -> str:
    """The registry kind (``env`` for envs) a ``gauntlet list`` argument names, singular or plural."""
    from gauntlet.registry import KIND_DESCRIPTIONS

    kinds = ("env", *KIND_DESCRIPTIONS)
    wanted = name.strip().lower()
    for kind in kinds:
        if wanted in (kind, list_name(kind)):
            return kind
    known = ", ".join(list_name(kind) for kind in kinds)
    raise UserError(f"there is no kind {name!r} to list; the kinds are {known} (e.g. gauntlet list agents)")


@app.command("list")
def list_entries(
    kind: Annotated[str | None, typer.Argument(help=(
        f"A kind whose entries to show: {', '.join(LIST_NAMES.values())} (default: every kind with its "
        "count)."))] = None,
) -> None:
    """Show what is registered: each kind with its count, or one kind's entries (gauntlet list agents)."""
    from gauntlet.registry import KIND_DESCRIPTIONS, registry

    if kind is None:
        table = Table(title="registered", caption="gauntlet list KIND shows one kind's entries, e.g. gauntlet list "
                                                  "agents")
        table.add_column("kind")
        table.add_column("count", justify="right")
        table.add_column("what it holds")
        table.add_row(list_name("env"), str(len(registry.env_ids())), ENV_DESCRIPTION)
        for registry_kind, description in KIND_DESCRIPTIONS.items():
            table.add_row(list_name(registry_kind), str(len(registry.entries(registry_kind))), description)
        console.print(table)
        return
    chosen = _listed_kind(kind)
    console.print(_env_table() if chosen == "env" else _entry_table(chosen))


def _env_table() -> Table:
    import gymnasium as gym

    from gauntlet.registry import registry

    table = Table(title="envs", caption="Any other Gymnasium id works too, e.g. CartPole-v1.")
    table.add_column("id")
    table.add_column("entry point")
    for env_id in registry.env_ids():
        table.add_row(env_id, str(gym.registry[env_id].entry_point))
    return table


def _entry_table(kind: str) -> Table | str:
    """The entries of registry kind ``kind``: name, description, implementation (and a suite's modes)."""
    from gauntlet.registry import KIND_DESCRIPTIONS, registry

    entries = registry.entries(kind)
    if not entries:
        return f"{list_name(kind)}: none registered ({KIND_DESCRIPTIONS[kind]})"
    table = Table(title=list_name(kind), caption=KIND_DESCRIPTIONS[kind])
    columns = ["name", "description", *(["modes (--mode)"] if kind == "suite" else []), "implementation"]
    for column in columns:
        table.add_column(column)
    for entry in entries:
        bound = ", ".join(f"{key}={value!r}" for key, value in entry.params.items())
        modes = [_suite_modes(entry.metadata)] if kind == "suite" else []
        table.add_row(entry.name, entry.description, *modes, f"{entry.target}({bound})" if bound else entry.target)
    return table


def _suite_modes(metadata: dict[str, Any]) -> str:
    """A suite's modes, its default marked: ``ap, if`` or ``chemcost (default)``."""
    default = metadata.get("default_mode")
    return ", ".join(f"{mode} (default)" if mode == default else str(mode) for mode in metadata.get("modes") or {})


running.register(app)
episodes.register(app)
data.register(app)
bench.register(app)
demo.register(app)


def help_line(text: str) -> str:
    """``text`` as a command's help line: a sentence, capitalised and ending in a full stop, as every built-in
    command's docstring is (registry descriptions are phrases in lower case)."""
    text = " ".join(text.split())
    if not text:
        return text
    return text[0].upper() + text[1:] + ("" if text.endswith((".", "!", "?")) else ".")


def mount_family_commands(app: typer.Typer) -> None:
    """Mount the commands families add: registry kind ``command``, a string target naming a ``typer.Typer``
    (its module must import lightly: it loads on every start of the command line). A family's command shows
    its own help, as a built-in command shows its docstring; the entry's description, as a sentence, stands
    in for a command without one. A family whose optional dependencies are missing still gets its command,
    which says what to install."""
    from gauntlet.registry import registry

    taken = {command.name for command in app.registered_commands} | {group.name for group in app.registered_groups}
    for entry in registry.entries("command"):
        if entry.name in taken:
            continue
        try:
            group = entry.load()
        except ImportError as exc:
            group = typer.Typer()
            missing = exc.name or str(exc)

            @group.callback(invoke_without_command=True)
            def unavailable(name: str = entry.name, missing: str = missing) -> None:
                raise UserError(f"`gauntlet {name}` needs {missing}, which is not installed; "
                                "install the project with its extras: pip install -e '.[all]'")

        own = group.info.help
        app.add_typer(group, name=entry.name,
                      help=own if isinstance(own, str) and own.strip() else help_line(entry.description))


mount_family_commands(app)


# Errors ------------------------------------------------------------------------------------------
def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def user_error_message(exc: BaseException) -> str | None:
    """The one-line message for an error the user can fix, or None if ``exc`` is a bug."""
    import gymnasium.error

    from gauntlet.batch import RunFolderError
    from gauntlet.episode import EpisodeFormatError
    from gauntlet.registry import UnknownEntryError
    from gauntlet.tasks import SuiteFormatError

    if isinstance(exc, (UserError, EpisodeFormatError, SuiteFormatError, RunFolderError)):
        return str(exc)
    if isinstance(exc, UnknownEntryError):
        listing = "gauntlet list" if exc.kind is None else f"gauntlet list {list_name(exc.kind)}"
        return f"{exc}; `{listing}` shows what is registered"
    if isinstance(exc, (gymnasium.error.NameNotFound, gymnasium.error.VersionNotFound,
                        gymnasium.error.NamespaceNotFound, gymnasium.error.DeprecatedEnv)):
        return f"{exc} Check the env id: `gauntlet list envs` shows Gauntlet's envs, and any Gymnasium id works."
    if isinstance(exc, gymnasium.error.DependencyNotInstalled):
        return str(exc)
    if isinstance(exc, OSError):
        # The OS's own message names the path; ours (FileNotFoundError("no episode file ...")) is whole.
        if exc.strerror and exc.filename:
            return f"{exc.strerror}: {exc.filename}; check the path and its permissions"
        return str(exc)
    return None


def _fail(message: str, code: int) -> NoReturn:
    sys.stderr.write(f"error: {_one_line(message)}\n")
    sys.stderr.flush()
    sys.exit(code)


def _show_warning(message: Any, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    # A warning (a torn last line in an episode file, say) is news for the user, not a code location.
    sys.stderr.write(f"warning: {_one_line(str(message))}\n")


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``gauntlet`` console script."""
    debug = bool(os.environ.get(DEBUG_VARIABLE))
    command = typer.main.get_command(app)
    try:
        with warnings.catch_warnings():
            if not debug:
                warnings.showwarning = _show_warning
            code = command.main(args=list(argv) if argv is not None else None, prog_name="gauntlet",
                                standalone_mode=False)
    except NoArgsIsHelpError as exc:
        console.print(exc.format_message(), markup=False)
        code = 0
    except ClickException as exc:  # usage errors: unknown option, missing argument, bad value
        context = getattr(exc, "ctx", None)
        where = f"; see `{context.command_path} --help`" if context is not None else ""
        _fail(f"{exc.format_message().rstrip('.')}{where}", EXIT_USER_ERROR)
    except Stopped as exc:  # SIGTERM while workers ran: they are stopped, and the folder resumes
        _fail(f"{exc}; run the same command again to resume", exc.exit_status)
    except Exception as exc:
        if debug:
            raise
        message = user_error_message(exc)
        if message is not None:
            _fail(message, EXIT_USER_ERROR)
        _fail(f"internal error: {type(exc).__name__}: {exc} (a bug, not your input; run with {DEBUG_VARIABLE}=1 "
              "for the traceback and report it)", EXIT_BUG)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
