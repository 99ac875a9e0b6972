"""Packages: ``gauntlet/`` is the ``gauntlet`` package, and inside it ``envs``, ``mcp_servers``, ``agents``,
``controllers`` and ``data`` are links to the top-level folders of the same names.

The links make every ``gauntlet.*`` import a path on disk that any static tool can follow (IDE, mypy,
import-linter); a wheel holds real files, because building one copies through them. docs/architecture.md
says why this mechanism was chosen. Everything else lives in pyproject.toml.
"""

from setuptools import find_namespace_packages, find_packages, setup

# find_packages follows the links, so the families are found as gauntlet.envs etc.; only gauntlet/ is
# searched, so no top-level folder is ever a package of its own. gauntlet/data holds curated text
# files, not modules: listed as (namespace) packages so that their files ship as package data.
packages = ["gauntlet", *(f"gauntlet.{name}" for name in find_packages("gauntlet"))]
data = ["gauntlet.data", *(f"gauntlet.data.{name}" for name in find_namespace_packages("gauntlet/data"))]
setup(packages=packages + data)
