"""The data cache: built once, verified by checksum, rebuilt when corrupted, never half-built."""

from __future__ import annotations

import pytest

from gauntlet.datacache import MANIFEST, ensure_built, entry_dir, verify


def _builder(calls):
    def build(folder, size=3):
        calls.append(size)
        (folder / "values.txt").write_text(",".join(map(str, range(size))))
        (folder / "nested").mkdir()
        (folder / "nested" / "more.bin").write_bytes(bytes(range(size)))
    return build


def test_data_is_built_once_and_reused(isolated_home):
    calls = []
    first = ensure_built("toy", "1", _builder(calls), params={"size": 4})
    second = ensure_built("toy", "1", _builder(calls), params={"size": 4})
    assert first == second == entry_dir("toy", "1", {"size": 4}) and calls == [4]
    assert (first / "values.txt").read_text() == "0,1,2,3" and verify(first)
    assert first.is_relative_to(isolated_home)


def test_different_parameters_or_versions_get_their_own_entries(isolated_home):
    calls = []
    a = ensure_built("toy", "1", _builder(calls), params={"size": 2})
    b = ensure_built("toy", "1", _builder(calls), params={"size": 3})
    c = ensure_built("toy", "2", _builder(calls), params={"size": 2})
    assert len({a, b, c}) == 3 and calls == [2, 3, 2]


def test_a_corrupted_file_is_detected_and_the_entry_rebuilt(isolated_home):
    import gauntlet.datacache as datacache

    calls = []
    folder = ensure_built("toy", "1", _builder(calls))
    (folder / "nested" / "more.bin").write_bytes(b"\x09\x09\x09")
    datacache._verified.clear()  # a new process would verify from scratch
    assert not verify(folder)
    with pytest.warns(UserWarning, match="failed its checksum"):
        again = ensure_built("toy", "1", _builder(calls))
    assert calls == [3, 3] and verify(again) and (again / "nested" / "more.bin").read_bytes() == bytes(range(3))


def test_a_failing_builder_leaves_no_entry_behind(isolated_home):
    def broken(folder):
        (folder / "partial.txt").write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        ensure_built("toy", "1", broken)
    parent = entry_dir("toy", "1").parent
    assert not any(parent.iterdir())
    assert not (entry_dir("toy", "1") / MANIFEST).exists()


def test_a_builder_may_ensure_the_data_it_builds_on(isolated_home):
    calls = []

    def build_tasks(folder):
        scenes = ensure_built("toy-scenes", "1", _builder(calls))
        (folder / "tasks.txt").write_text((scenes / "values.txt").read_text() + " -> tasks")

    tasks = ensure_built("toy-tasks", "1", build_tasks)
    assert (tasks / "tasks.txt").read_text() == "0,1,2 -> tasks" and calls == [3]
