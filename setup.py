"""Packages: ``gauntlet/`` is the ``gauntlet`` package, and inside it ``envs``, ``mcp_servers``, ``agents``,
``controllers`` and ``data`` are links to the top-level folders of the same names.

The links make every ``gauntlet.*`` import a path on disk that any static tool can follow (IDE, mypy,
import-linter); a wheel holds real files, because building one copies through them. docs/architecture.md
says why this mechanism was chosen. Everything else lives in pyproject.toml.

A checkout made without symbolic links (git with ``core.symlinks`` off) has plain text files where the
links belong, which would install a package without its families; setup stops first, naming the fix.
"""

from __future__ import annotations

import sys
from pathlib import Path

# gauntlet/<name> -> ../<name>: the family folders and the curated data, as sub-packages of gauntlet.
LINKED_FOLDERS = ("envs", "mcp_servers", "agents", "controllers", "data")


def unlinked_folder(root: Path) -> str | None:
    """One line naming a ``gauntlet/<name>`` link that is not a folder under ``root``, with the fix; None if all are."""
    for name in LINKED_FOLDERS:
        link = root / "gauntlet" / name
        if link.is_dir():
            continue
        if link.is_file():
            return (f"error: gauntlet/{name} is a plain file, not a link to ../{name} (the checkout was made without "
                    "symbolic links): run `git config core.symlinks true`, then `git checkout -- gauntlet` and set up "
                    "again")
        return f"error: gauntlet/{name} is missing, not a link to ../{name}: run `git checkout -- gauntlet`"
    return None


if __name__ == "__main__":
    if problem := unlinked_folder(Path(__file__).resolve().parent):
        sys.exit(problem)
    # `make setup` runs only the check above, before it installs anything.
    if sys.argv[1:] != ["check-links"]:
        from setuptools import find_namespace_packages, find_packages, setup

        # find_packages follows the links, so the families are found as gauntlet.envs etc.; only gauntlet/ is
        # searched, so no top-level folder is ever a package of its own. gauntlet/data holds curated text
        # files, not modules: listed as (namespace) packages so that their files ship as package data.
        packages = ["gauntlet", *(f"gauntlet.{name}" for name in find_packages("gauntlet"))]
        data = ["gauntlet.data", *(f"gauntlet.data.{name}" for name in find_namespace_packages("gauntlet/data"))]
        setup(packages=packages + data)
