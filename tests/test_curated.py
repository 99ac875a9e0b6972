"""Curated inputs (top-level ``data/``): every file states its source and is in the licence manifest,
editing one gives the builders that read it a new cache entry, and ``import gauntlet`` reads none."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import gauntlet.curated as curated
from gauntlet.datacache import ensure_built, entry_dir
from gauntlet.registry import registry

DATA = Path(__file__).resolve().parents[1] / "data"
MANIFEST = DATA / "LICENSES.md"


def _curated_files() -> list[str]:
    return sorted(str(path.relative_to(DATA)) for path in DATA.rglob("*") if path.is_file() and path != MANIFEST)


def test_the_package_sees_the_top_level_data_folder():
    assert curated.DATA_ROOT.resolve() == DATA.resolve()


def test_the_licence_manifest_names_every_curated_file():
    manifest = MANIFEST.read_text(encoding="utf-8")
    files = _curated_files()
    assert files, "data/ holds no curated file"
    unnamed = [name for name in files if f"`{name}`" not in manifest]
    assert not unnamed, f"data/LICENSES.md has no row for {unnamed}: add one naming the file's source and licence"


def test_every_curated_file_states_its_source():
    for name in _curated_files():
        path = DATA / name
        if path.suffix == ".json":
            assert json.loads(path.read_text(encoding="utf-8")).get("source"), f"{name} has no 'source' field"
        elif path.suffix == ".csv":
            comments = [line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("#")]
            assert any(line.startswith("# source:") for line in comments), f"{name} has no '# source:' line"
        else:
            pytest.fail(f"{name}: curated files are CSV or JSON text")


def test_every_registered_curated_input_exists():
    for entry in registry.entries("data"):
        for name in entry.metadata.get("inputs", ()):
            assert curated.curated_path(name).is_file(), f"{entry.name} names data/{name}, which is missing"


def _copy_of_data(tmp_path, monkeypatch) -> Path:
    copy = tmp_path / "data"
    shutil.copytree(DATA, copy)
    monkeypatch.setattr(curated, "DATA_ROOT", copy)
    return copy


@pytest.mark.parametrize("name", [entry.name for entry in registry.entries("data") if entry.metadata.get("inputs")])
def test_editing_a_curated_input_changes_the_cache_key_of_its_builder(name, tmp_path, monkeypatch):
    entry = registry.get("data", name)
    version, inputs = str(entry.metadata["version"]), tuple(entry.metadata["inputs"])
    copy = _copy_of_data(tmp_path, monkeypatch)
    keys = {entry_dir(name, version, {}, inputs)}
    for relative in inputs:
        edited = copy / relative
        edited.write_bytes(edited.read_bytes() + b"\n")
        keys.add(entry_dir(name, version, {}, inputs))
    assert len(keys) == len(inputs) + 1


def test_a_builder_whose_curated_input_changed_builds_a_new_entry(tmp_path, monkeypatch):
    copy = _copy_of_data(tmp_path, monkeypatch)
    (copy / "toy.csv").write_text("# source: a test\nvalue\n1\n")
    calls = []

    def build(folder):
        calls.append(curated.curated_path("toy.csv").read_text())
        (folder / "copy.txt").write_text(calls[-1])

    first = ensure_built("toy-curated", "1", build, inputs=["toy.csv"])
    assert ensure_built("toy-curated", "1", build, inputs=["toy.csv"]) == first and len(calls) == 1
    (copy / "toy.csv").write_text("# source: a test\nvalue\n2\n")
    second = ensure_built("toy-curated", "1", build, inputs=["toy.csv"])
    assert second != first and (second / "copy.txt").read_text().endswith("2\n") and len(calls) == 2
    assert json.loads((second / "MANIFEST.json").read_text())["curated_inputs"] == ["toy.csv"]


def test_a_missing_curated_input_names_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(curated, "DATA_ROOT", tmp_path)
    with pytest.raises(curated.CuratedDataError, match=r"data/disaster/events\.csv is missing"):
        curated.curated_digest(["disaster/events.csv"])


def test_import_gauntlet_reads_no_curated_file():
    readers = ("gauntlet.mcp_servers.disaster.events", "gauntlet.mcp_servers.disaster.realworld",
               "gauntlet.mcp_servers.chem.aliases", "gauntlet.mcp_servers.chem.views",
               "gauntlet.envs.tactile.glyphs", "gauntlet.envs.tactile.wrench")
    code = (f"import sys, gauntlet; gauntlet.registry.names('data'); "
            f"print([m for m in {readers!r} if m in sys.modules])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
