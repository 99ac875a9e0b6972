"""Worker processes die with the command that started them, whatever stopped it.

The real ``gauntlet run``, ``gauntlet eval`` and ``gauntlet oversight collect`` start in a session of
their own with two workers (``run``'s forked, ``collect``'s spawned, ``eval``'s each driving a stdio
tool server of its own); once the workers are busy, the command's own process, and only it, is sent
SIGTERM or SIGKILL. Every process the command started, workers and their tool servers alike, must be
gone soon after (a liveness wait, not a speed requirement), whichever signal it was:

- SIGTERM is a stop: the command stops its workers, says so in one line and exits with status 143,
  leaving its folder to resume (nothing holds its lock);
- SIGKILL gives the command no say: each worker has asked the kernel to kill it when its parent dies.

Each command's environment carries a marker of its own, which every process it starts inherits
(``gauntlet`` hands its ``GAUNTLET_*`` variables to the stdio servers it starts), so the processes
left behind are found even after they were reparented.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from gauntlet.bridges.server_process import serve_command
from gauntlet.fileio import exclusive_folder
from gauntlet.worker_pool import worker_pool
from tests.shared import cartpole_tasks, command_environment, gauntlet_command, write_plugin

MARKER = "GAUNTLET_ORPHAN_PROBE"
# Hang guards (liveness), not speed requirements.
BUSY_TIMEOUT_S = 120
GONE_TIMEOUT_S = 10
WORKERS = 2


def marked(tag: str) -> list[psutil.Process]:
    """The live processes whose environment carries ``MARKER=tag`` (zombies are dead: only their exit
    status is left for a parent to collect)."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(MARKER) == tag and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def describe(processes: list[psutil.Process]) -> str:
    def line(process: psutil.Process) -> str:
        try:
            return f"{process.pid}: {' '.join(process.cmdline())[:160]}"
        except psutil.Error:
            return f"{process.pid}: (gone)"

    return "; ".join(line(process) for process in processes)


def stop_when_busy(command: list[str], busy: Callable[[psutil.Process], bool], signum: int, tmp_path: Path,
                   **extra_env: str) -> tuple[int, str]:
    """Run ``command`` in its own session; once ``busy(its process)``, send ``signum`` to that process
    alone. Wait for every process it started to be gone; return its exit status and its stderr."""
    tag = uuid.uuid4().hex
    stderr_path = tmp_path / "stderr.txt"
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(command, env=command_environment(**{MARKER: tag}, **extra_env),
                                   start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=stderr)
    try:
        driver = psutil.Process(process.pid)
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while not busy(driver):
            if process.poll() is not None:
                pytest.fail(f"the command ended ({process.returncode}) before it was busy: {stderr_path.read_text()}")
            assert time.monotonic() < deadline, f"gave up waiting for the command to be busy: {stderr_path.read_text()}"
            time.sleep(0.05)
        started = marked(tag)
        assert len(started) > WORKERS, f"expected the command and its workers, found {describe(started)}"
        os.kill(process.pid, signum)
        status = process.wait(BUSY_TIMEOUT_S)
        deadline = time.monotonic() + GONE_TIMEOUT_S
        while (left := marked(tag)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not left, f"still running {GONE_TIMEOUT_S} s after the command's end: {describe(left)}"
    finally:
        if process.poll() is None:
            process.kill()
        for leftover in marked(tag):
            leftover.kill()
        process.wait()
    return status, stderr_path.read_text()


def workers_of(driver: psutil.Process) -> list[psutil.Process]:
    try:
        return [child for child in driver.children()
                if "resource_tracker" not in " ".join(child.cmdline())]  # spawn's helper, not a worker
    except psutil.Error:
        return []


def assert_ended_as_signalled(signum: int, status: int, stderr: str) -> None:
    if signum == signal.SIGTERM:
        assert status == 128 + signal.SIGTERM, stderr
        assert "error: stopped by SIGTERM; run the same command again to resume" in stderr
    else:
        assert status == -signal.SIGKILL


def assert_folder_free(folder: Path, lock_name: str) -> None:
    """No process left holds the folder's writer lock (a forked worker would hold the driver's).

    Waits up to ``GONE_TIMEOUT_S`` for it: a killed worker drops its memory (so ``marked`` no longer reads
    its environment and counts it gone) a moment before the kernel closes its files, while an orphan that
    lives on holds the lock for good."""
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while True:
        try:
            with exclusive_folder(folder, lock_name, lambda: AssertionError(f"{folder} is still locked")):
                return
        except AssertionError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


SIGNALS = pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])


@SIGNALS
def test_a_stopped_run_leaves_no_forked_worker_behind(signum, tmp_path):
    out = tmp_path / "run"
    command = gauntlet_command("run", "Pendulum-v1", "--agent", "random", "-n", "4000", "--workers", str(WORKERS),
                               "--out", str(out))
    episodes = out / "episodes"
    busy = lambda driver: len(workers_of(driver)) == WORKERS and episodes.is_dir() and any(episodes.iterdir())
    status, stderr = stop_when_busy(command, busy, signum, tmp_path)
    assert_ended_as_signalled(signum, status, stderr)
    assert_folder_free(out, ".running.lock")


TOY_PLUGIN = textwrap.dedent('''
    """A suite whose tasks each run on a stdio env server of their own (a process per session)."""
    import json
    from pathlib import Path

    SUITE = str(Path(__file__).with_name("toy.jsonl"))


    def register():
        from gauntlet.registry import registry

        server = json.loads(Path(__file__).with_name("server.json").read_text())
        registry.add("suite", "toy-orphans", "toy_orphans_family:SUITE", "CartPole tasks over stdio",
                     env_kwargs={"server": server})
''')


@pytest.fixture(scope="module")
def stdio_suite_plugin(tmp_path_factory) -> Path:
    """A plugin folder (for PYTHONPATH) registering ``toy-orphans``: 200 one-step CartPole tasks, each
    served over stdio by a ``gauntlet serve`` process its worker starts."""
    folder = tmp_path_factory.mktemp("orphans-plugin")
    write_plugin(folder, "toy_orphans_family", TOY_PLUGIN)
    (folder / "server.json").write_text(json.dumps(serve_command("env:CartPole-v1")))
    (folder / "toy.jsonl").write_text("".join(json.dumps(task) + "\n" for task in cartpole_tasks(200)))
    return folder


@SIGNALS
def test_a_stopped_eval_leaves_no_worker_or_tool_server_behind(signum, stdio_suite_plugin, tmp_path):
    out = tmp_path / "eval"
    command = gauntlet_command("eval", "toy-orphans", "--agent", "gold", "--agent-config",
                               json.dumps({"suite": str(stdio_suite_plugin / "toy.jsonl")}),
                               "--workers", str(WORKERS), "--out", str(out))

    def busy(driver: psutil.Process) -> bool:  # every worker has a tool server running
        return sum(bool(worker.children()) for worker in workers_of(driver)) == WORKERS

    status, stderr = stop_when_busy(command, busy, signum, tmp_path, PYTHONPATH=str(stdio_suite_plugin))
    assert_ended_as_signalled(signum, status, stderr)
    assert_folder_free(out, ".running.lock")


@SIGNALS
def test_a_stopped_collection_leaves_no_spawned_worker_behind(signum, tmp_path):
    out = tmp_path / "rows"
    # Long corridors: a job lasts many seconds, so a worker left behind would outlive the wait.
    command = gauntlet_command("oversight", "collect", "corridor", "-n", "40", "--options",
                               '{"length": 400, "max_steps": 800}', "--workers", str(WORKERS), "--out", str(out))
    busy = lambda driver: len(workers_of(driver)) == WORKERS
    status, stderr = stop_when_busy(command, busy, signum, tmp_path)
    assert_ended_as_signalled(signum, status, stderr)
    assert_folder_free(out, ".collecting.lock")
    rows = out / "rows.jsonl"
    if rows.exists():  # whole jobs only: the driver appends each job in one write
        assert rows.read_bytes().rsplit(b"\n", 2)[-2].startswith(b'{"done"')


def test_a_worker_whose_parent_is_already_gone_exits_at_once():
    """The race a worker's start can lose: its parent died before it asked to die with it. Here the
    parent it was meant to have (pid 1) is not the parent it has, as for a worker already reparented."""
    script = "from gauntlet.worker_pool import die_with_parent; die_with_parent(1); print('ran on')"
    finished = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=BUSY_TIMEOUT_S)
    assert (finished.returncode, finished.stdout) == (1, ""), finished.stderr


def test_a_worker_pool_takes_jobs_only_from_the_thread_that_opened_it():
    """A worker dies when the thread that started it ends, so no other thread may start one."""
    with worker_pool(1, multiprocessing.get_context("spawn")) as pool, ThreadPoolExecutor(1) as other:
        with pytest.raises(RuntimeError, match="from the thread that opened it"):
            other.submit(pool.submit, os.getpid).result()
