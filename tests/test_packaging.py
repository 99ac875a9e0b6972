"""Packaging: the top-level folders are mounted as gauntlet sub-packages, in editable installs and wheels."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import gauntlet

ROOT = Path(__file__).resolve().parents[1]
SUBPACKAGES = ("envs", "mcp_servers", "agents", "controllers")


def test_import_gauntlet_mounts_every_family_as_a_subpackage():
    import importlib

    for name in SUBPACKAGES:
        module = importlib.import_module(f"gauntlet.{name}")
        assert Path(module.__file__).resolve().parent == ROOT / name


def test_family_folders_are_not_importable_under_a_bare_name():
    result = subprocess.run([sys.executable, "-c", "import agents"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode != 0 and "import gauntlet.agents" in result.stderr


def test_import_gauntlet_registers_plugins_without_importing_heavy_families():
    code = ("import sys, gauntlet; "
            "print('gauntlet/ToolTask-v0' in gauntlet.registry.env_ids(), "
            "'random' in gauntlet.registry.names('agent'), "
            "any(m in sys.modules for m in ('torch', 'mujoco', 'ray', 'mcp')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["True", "True", "False"]


@pytest.mark.timeout(300)
def test_built_wheel_contains_every_subpackage_and_imports(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".venv", ".git", "build", "dist", "*.egg-info",
                                                                 "__pycache__", "runs"))
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path / "dist")],
                   cwd=source, check=True, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("gauntlet-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for package in ("gauntlet", *(f"gauntlet/{name}" for name in SUBPACKAGES), "gauntlet/bridges"):
        assert f"{package}/__init__.py" in names, f"{package} missing from the wheel"
    assert not any(name.startswith(("envs/", "agents/", "core/", "tests/")) for name in names)
    # Data the code reads at run time ships as package data: baselines, the curious policy's weights.
    curated = [f"gauntlet/data/{path.relative_to(ROOT / 'data').as_posix()}"
               for path in (ROOT / "data").rglob("*") if path.is_file()]
    for data in ("gauntlet/envs/calspi/baselines_data/Swimmer.json", "gauntlet/agents/curiosity/belief_default.json",
                 *curated):
        assert data in names, f"{data} missing from the wheel (new data/ folders go in pyproject's package-data)"

    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(target),
                    str(wheel)], check=True)
    code = ("import gauntlet, gauntlet.envs, gauntlet.agents, gauntlet.mcp_servers, gauntlet.controllers; "
            "print(gauntlet.__file__); print(gauntlet.make_agent('random').name)")
    env = {**os.environ, "PYTHONPATH": str(target)}
    result = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True,
                            text=True, check=True)
    location, agent = result.stdout.split()
    assert Path(location).is_relative_to(target) and agent == "random"


def test_version_is_the_installed_distribution_version():
    from importlib.metadata import version

    assert gauntlet.__version__ == version("gauntlet")
