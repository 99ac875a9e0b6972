"""The glyph list and the wrench's dimensions, read from ``data/tactile``: the values the object sets
were built from before they moved out of the code, and the cache keys they feed."""

from __future__ import annotations

import json
import shutil
import string

import pytest

from gauntlet.envs.tactile import glyphs, wrench
from gauntlet.registry import registry


def test_glyph_list_is_the_62_characters_in_four_dejavu_faces():
    assert glyphs.CHARACTERS == string.ascii_uppercase + string.ascii_lowercase + string.digits
    assert glyphs.FACES == ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf")
    names = glyphs.class_names()
    assert len(names) == 248 and names[0] == "A (DejaVuSans)" and names[-1] == "9 (DejaVuSerif-Bold)"
    assert all(glyphs.font_path(face).is_file() for face in glyphs.FACES)


def test_wrench_dimensions_read_back_in_metres():
    assert (wrench.LENGTH_M, wrench.HANDLE_WIDTH_M, wrench.OPEN_END_RADIUS_M, wrench.JAW_WIDTH_M, wrench.JAW_DEPTH_M,
            wrench.RING_END_RADIUS_M, wrench.RING_HOLE_RADIUS_M) == (0.080, 0.010, 0.012, 0.011, 0.014, 0.010, 0.0055)


def test_the_dimensions_are_read_from_the_curated_file(tmp_path, monkeypatch):
    import gauntlet.curated as curated

    copy = tmp_path / "data"
    shutil.copytree(curated.DATA_ROOT, copy)
    monkeypatch.setattr(curated, "DATA_ROOT", copy)
    table = json.loads((copy / wrench.DIMENSIONS_FILE).read_text(encoding="utf-8"))
    table["length_mm"] = 90
    (copy / wrench.DIMENSIONS_FILE).write_text(json.dumps(table), encoding="utf-8")
    assert wrench.load_dimensions_m()["length"] == 0.09


def test_the_object_sets_are_keyed_by_their_curated_files_in_the_loader_and_the_registry(tmp_path, monkeypatch):
    import gauntlet.datacache as datacache

    asked = []

    def record(name, version, build, *, params=None, inputs=(), rebuild=False):
        asked.append((name, tuple(inputs)))
        raise LookupError("recorded")

    monkeypatch.setattr(datacache, "ensure_built", record)
    for load in (glyphs.load.__wrapped__, wrench.load.__wrapped__):
        with pytest.raises(LookupError, match="recorded"):
            load(resolution=32)
    assert asked == [("tactile-glyphs", (glyphs.GLYPHS_FILE,)), ("tactile-wrench", (wrench.DIMENSIONS_FILE,))]
    for name, inputs in asked:
        assert tuple(registry.get("data", name).metadata["inputs"]) == inputs
