"""Packages: ``src/gauntlet`` is the ``gauntlet`` package (a link to ``core/``), and inside it
``envs``, ``mcp_servers``, ``agents`` and ``controllers`` link to the top-level family folders.

The links make every ``gauntlet.*`` import a path on disk that any static tool can follow (IDE,
mypy, import-linter); docs/architecture.md says why this mechanism was chosen. Everything else
lives in pyproject.toml.
"""

from setuptools import find_namespace_packages, find_packages, setup

# gauntlet/data holds curated text files, not modules: listed as (namespace) packages so that their
# files ship as package data.
DATA = find_namespace_packages("src", include=["gauntlet.data", "gauntlet.data.*"])

setup(packages=find_packages("src") + DATA, package_dir={"": "src"})
