"""Packages: ``src/gauntlet`` is the ``gauntlet`` package (a link to ``core/``), and inside it
``envs``, ``mcp_servers``, ``agents`` and ``controllers`` link to the top-level family folders.

The links make every ``gauntlet.*`` import a path on disk that any static tool can follow (IDE,
mypy, import-linter); docs/architecture.md says why this mechanism was chosen. Everything else
lives in pyproject.toml.
"""

from setuptools import find_packages, setup

setup(packages=find_packages("src"), package_dir={"": "src"})
