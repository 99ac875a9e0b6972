"""The data cache: built once (even when several processes ask at once), verified by checksum,
rebuilt when corrupted, never half-built."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import pytest

from gauntlet.datacache import MANIFEST, ensure_built, entry_dir, lock_path, verify


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
    folder = entry_dir("toy", "1")
    assert [path.name for path in folder.parent.iterdir()] == [lock_path(folder).name]
    assert not (folder / MANIFEST).exists()


def test_a_build_killed_half_way_leaves_scratch_that_the_next_build_removes(isolated_home):
    folder = entry_dir("toy", "1")
    killed = folder.parent / f".{folder.name}-killed"
    (killed / "nested").mkdir(parents=True)
    (killed / "nested" / "half.bin").write_bytes(b"half")
    ensure_built("toy", "1", _builder([]))
    assert sorted(path.name for path in folder.parent.iterdir()) == sorted([folder.name, lock_path(folder).name])


def test_a_builder_may_ensure_the_data_it_builds_on(isolated_home):
    calls = []

    def build_tasks(folder):
        scenes = ensure_built("toy-scenes", "1", _builder(calls))
        (folder / "tasks.txt").write_text((scenes / "values.txt").read_text() + " -> tasks")

    tasks = ensure_built("toy-tasks", "1", build_tasks)
    assert (tasks / "tasks.txt").read_text() == "0,1,2 -> tasks" and calls == [3]


# One process per caller: each waits for the start file, then asks for the same entry. The builder
# sleeps so that the second caller arrives while the first is still building.
CALLER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from gauntlet.datacache import ensure_built

    log, start = Path(sys.argv[1]), Path(sys.argv[2])
    while not start.exists():
        time.sleep(0.01)

    def build(folder, size):
        with open(log, "a") as handle:
            handle.write(f"{os.getpid()}\\n")
        time.sleep(0.5)
        (folder / "values.txt").write_text(",".join(map(str, range(size))))

    folder = ensure_built("shared", "1", build, params={"size": 5})
    print(folder, (folder / "values.txt").read_text())
""")


def test_two_processes_asking_for_one_entry_build_it_once_and_both_get_it(isolated_home, tmp_path):
    log, start = tmp_path / "builds.log", tmp_path / "start"
    env = {**os.environ, "GAUNTLET_HOME": str(isolated_home)}
    callers = [subprocess.Popen([sys.executable, "-c", CALLER, str(log), str(start)], env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    start.touch()
    results = [caller.communicate(timeout=120) for caller in callers]
    assert [caller.returncode for caller in callers] == [0, 0], [err for _, err in results]
    folder = entry_dir("shared", "1", {"size": 5})
    assert [out.strip() for out, _ in results] == [f"{folder} 0,1,2,3,4"] * 2
    assert len(log.read_text().splitlines()) == 1 and verify(folder)


def test_threads_asking_for_one_entry_build_it_once(isolated_home):
    calls: list[int] = []
    folders: list = []
    threads = [threading.Thread(target=lambda: folders.append(ensure_built("toy", "1", _builder(calls))))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [3] and len(set(folders)) == 1 and len(folders) == 4
