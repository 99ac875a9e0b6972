"""Mounts the top-level folders as the ``gauntlet`` package and its family sub-packages.

The repository's top level is the design card (see docs/architecture.md): ``core/`` is the
``gauntlet`` package and ``envs/``, ``mcp_servers/``, ``agents/``, ``controllers/`` become
``gauntlet.envs`` and so on. Everything else lives in pyproject.toml.
"""

from setuptools import find_packages, setup

MOUNTS = {
    "gauntlet": "core",
    "gauntlet.envs": "envs",
    "gauntlet.mcp_servers": "mcp_servers",
    "gauntlet.agents": "agents",
    "gauntlet.controllers": "controllers",
}

packages = []
for package, folder in MOUNTS.items():
    packages.append(package)
    packages.extend(f"{package}.{sub}" for sub in find_packages(folder))

setup(packages=packages, package_dir=MOUNTS)
