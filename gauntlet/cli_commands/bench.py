"""``gauntlet bench``: run a performance suite of the source checkout (``bench/<SUITE>.py``)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from gauntlet.errors import UserError


def package_parent() -> Path:
    """The folder the ``gauntlet`` package sits in: the source checkout (whose ``bench/`` holds the suites), or
    for an installed wheel ``site-packages``, where there is none."""
    import gauntlet

    return Path(gauntlet.__file__).resolve().parents[1]


def _bench_folders() -> list[Path]:
    """Where suites are looked for: ``bench/`` here, then ``bench/`` of the checkout the package runs from."""
    return list(dict.fromkeys([Path.cwd() / "bench", package_parent() / "bench"]))


def bench(
    ctx: typer.Context,
    suite: Annotated[str, typer.Argument(help="Suite name: runs bench/<SUITE>.py; further arguments go to it.")],
) -> None:
    """Run a performance suite of the source checkout (bench/<SUITE>.py), passing on extra arguments."""
    if not re.fullmatch(r"[A-Za-z0-9_\-]+", suite):
        raise UserError(f"bench suite names are plain names like 'core', not {suite!r}")
    folders = [folder for folder in _bench_folders() if folder.is_dir()]
    if not folders:  # an installed wheel, run outside a checkout: the suites are not installed with it
        raise UserError("gauntlet bench runs bench/<suite>.py of a source checkout; none found next to the "
                        "installed package")
    for folder in folders:
        script = folder / f"{suite}.py"
        if script.is_file():
            completed = subprocess.run([sys.executable, str(script), *ctx.args], check=False)
            raise typer.Exit(completed.returncode)
    available = sorted({path.stem for folder in folders for path in folder.glob("*.py")
                        if not path.name.startswith("_")})
    where = " or ".join(str(folder) for folder in folders)
    known = f" (available: {', '.join(available)})" if available else ""
    raise UserError(f"bench suites run from a source checkout; no bench/{suite}.py under {where}{known}")


def register(app: typer.Typer) -> None:
    """Mount ``gauntlet bench`` on ``app``; arguments after the suite name go to the suite."""
    app.command("bench", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(bench)
