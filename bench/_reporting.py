"""What every bench suite does at the end: a rich table of figures, and the JSON written atomically.

Bench scripts run as ``python bench/<suite>.py`` (``gauntlet bench <suite>``), so this folder is on
``sys.path`` and they import this module as ``_reporting``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from gauntlet.fileio import write_atomically


RESULTS = Path(__file__).resolve().parent / "results"


def bench_parser(suite: str, doc: str, quick_help: str = "small sizes, for a smoke run") -> argparse.ArgumentParser:
    """The arguments every suite takes: ``--quick`` and ``--out`` (default ``bench/results/<suite>.json``)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--out", default=str(RESULTS / f"{suite}.json"))
    return parser


def figures_table(title: str, columns: tuple[str, ...]) -> Table:
    """An empty table of figures with the given columns."""
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    return table


def show(table: Table) -> None:
    Console().print(table)


def _plain(value: Any) -> Any:
    """numpy scalars (and anything else with ``item()``) as plain numbers."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def save_report(report: dict[str, Any], out: str | os.PathLike[str]) -> Path:
    """Write ``report`` as JSON to ``out`` atomically (a crash never leaves half a file) and say where."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(report, indent=2, default=_plain))
    print(f"wrote {path}")
    return path
