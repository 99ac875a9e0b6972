"""Packaging: the top-level folders are mounted as gauntlet sub-packages, in editable installs and wheels, and
setup stops on a checkout whose links were written as plain files."""

from __future__ import annotations

import importlib.util
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import gauntlet

ROOT = Path(__file__).resolve().parents[1]
SUBPACKAGES = ("envs", "mcp_servers", "agents", "controllers")


def load_setup_script():
    """setup.py as a module: its checks, without running setup() (that runs only as ``__main__``)."""
    spec = importlib.util.spec_from_file_location("gauntlet_setup_script", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SETUP = load_setup_script()

# What a wheel is built from: the build reads nothing else, so the test copies only these (not runs/, .git, ...).
BUILD_INPUTS = ("setup.py", "pyproject.toml", "README.md", "LICENSE", "gauntlet", *SETUP.LINKED_FOLDERS)


def gauntlet_list(command: Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    return subprocess.run([str(command), "list"], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout


def checkout_with_links_as_files(root: Path, *as_files: str) -> Path:
    """A checkout's top as git writes it with ``core.symlinks`` off for ``as_files``: each link a text file."""
    (root / "gauntlet").mkdir(parents=True)
    shutil.copy(ROOT / "setup.py", root / "setup.py")
    for name in SETUP.LINKED_FOLDERS:
        (root / name).mkdir()
        if name in as_files:
            (root / "gauntlet" / name).write_text(f"../{name}")
        else:
            (root / "gauntlet" / name).symlink_to(f"../{name}")
    return root


def test_import_gauntlet_mounts_every_family_as_a_subpackage():
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


def test_setup_check_passes_on_this_checkout_whose_links_are_folders():
    assert SETUP.unlinked_folder(ROOT) is None
    assert all((ROOT / "gauntlet" / name).is_symlink() for name in SETUP.LINKED_FOLDERS)


def test_setup_check_names_a_link_checked_out_as_a_plain_file_and_the_fix(tmp_path):
    root = checkout_with_links_as_files(tmp_path, "controllers")
    problem = SETUP.unlinked_folder(root)
    assert problem is not None and "gauntlet/controllers is a plain file" in problem
    assert "git config core.symlinks true" in problem and "\n" not in problem


def test_setup_stops_with_one_line_before_installing_from_a_checkout_without_links(tmp_path):
    root = checkout_with_links_as_files(tmp_path, "envs", "data")
    for arguments in (["check-links"], ["--version"]):
        result = subprocess.run([sys.executable, "setup.py", *arguments], cwd=root, capture_output=True, text=True)
        assert result.returncode == 1 and result.stdout == ""
        assert result.stderr.splitlines() == [SETUP.unlinked_folder(root)]
        assert result.stderr.startswith("error: gauntlet/envs is a plain file")
    (root / "gauntlet" / "envs").unlink()
    (root / "gauntlet" / "data").unlink()
    assert "gauntlet/envs is missing" in SETUP.unlinked_folder(root)


def test_editable_install_imports_gauntlet_from_the_checkout_and_runs_the_cli(tmp_path):
    code = "import gauntlet, gauntlet.envs.tactile; print(gauntlet.__file__); print(gauntlet.envs.tactile.__file__)"
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    package, tactile = map(Path, result.stdout.split())
    assert package == ROOT / "gauntlet" / "__init__.py"
    # Through the link gauntlet/envs -> ../envs, one copy on disk.
    assert tactile == ROOT / "gauntlet" / "envs" / "tactile" / "__init__.py"
    assert tactile.resolve() == ROOT / "envs" / "tactile" / "__init__.py"
    listing = gauntlet_list(Path(sys.executable).parent / "gauntlet", tmp_path)
    assert "│ envs " in listing and "│ agents " in listing


@pytest.mark.timeout(60)  # about 5 s: a wheel built without isolation, installed into a folder
def test_built_wheel_holds_every_subpackage_as_files_and_runs_without_the_checkout(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    for name in BUILD_INPUTS:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                    "--wheel-dir", str(tmp_path / "dist"), str(source)], check=True, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("gauntlet-*.whl")
    entries = zipfile.ZipFile(wheel).infolist()
    names = [entry.filename for entry in entries]
    for package in ("gauntlet", *(f"gauntlet/{name}" for name in SUBPACKAGES), "gauntlet/bridges"):
        assert f"{package}/__init__.py" in names, f"{package} missing from the wheel"
    # Only the package: no top-level folder (envs/, data/, tests/ ...) ships under its own name.
    assert {name.split("/")[0] for name in names} == {"gauntlet", f"{wheel.name.split('-py3')[0]}.dist-info"}
    links = [entry.filename for entry in entries if stat.S_ISLNK(entry.external_attr >> 16)]
    assert links == [], f"the wheel holds links, not files: {links}"
    # Data the code reads at run time ships as package data: baselines, the curious policy's weights.
    curated = [f"gauntlet/data/{path.relative_to(ROOT / 'data').as_posix()}"
               for path in (ROOT / "data").rglob("*") if path.is_file()]
    for data in ("gauntlet/envs/calspi/baselines_data/Swimmer.json", "gauntlet/agents/curiosity/belief_default.json",
                 *curated):
        assert data in names, f"{data} missing from the wheel (new data/ folders go in pyproject's package-data)"

    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(target),
                    str(wheel)], check=True, capture_output=True)
    assert not (target / "gauntlet" / "envs").is_symlink()
    # The wheel's folder first on the path and the checkout off it: the project's editable install stays
    # in site-packages (for the dependencies) but comes after it, and the commands run outside the checkout.
    env = {**os.environ, "PYTHONPATH": str(target)}
    code = "import gauntlet, gauntlet.envs.tactile; print(gauntlet.__file__); print(gauntlet.envs.tactile.__file__)"
    result = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                            check=True)
    for location in map(Path, result.stdout.split()):
        assert location.is_relative_to(target) and location.resolve().is_relative_to(target), location
    # The families register from the wheel as from the checkout: the same kinds, with the same counts.
    assert gauntlet_list(target / "bin" / "gauntlet", tmp_path, env) == gauntlet_list(
        Path(sys.executable).parent / "gauntlet", tmp_path)


def test_version_is_the_installed_distribution_version():
    from importlib.metadata import version

    assert gauntlet.__version__ == version("gauntlet")
