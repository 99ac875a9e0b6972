"""Process pools whose workers never outlive their driver (Linux).

A ``ProcessPoolExecutor`` worker is an ordinary child process: when its driver is killed, it runs on
until its job ends, holding CPUs, memory, a forked copy of the run folder's lock and the processes it
started. ``worker_pool`` ties the workers' lives to the driver's:

- **Any death of the driver** (SIGKILL, the OOM killer, a crash): each worker, as it starts, asks
  the kernel to SIGKILL it when its parent dies (``PR_SET_PDEATHSIG``), then checks that its parent
  is still the driver, since a driver that died before the request would never send the signal.
- **SIGTERM to the driver**, while the pool is open on the main thread and nothing else handles
  SIGTERM: the driver stops its workers (SIGTERM, then SIGKILL for any still alive after
  ``STOP_GRACE_S``) and raises ``Stopped``, a ``SystemExit`` with the shell's status for the signal
  (143). ``finally`` blocks run on the way out, so the driver's records end as a kill leaves them:
  the run and collection folders are append-only and resume from exactly that state.
- **Leaving the ``with`` block by an exception** (``Stopped``, Ctrl-C, a failed job, a consumer
  that stopped early): the queued jobs are cancelled and the workers stopped at once, not waited for.

The kernel sends the parent-death signal when the *thread* that started the worker ends, not the
process. The executor starts workers from the thread that calls ``submit`` (and from its management
thread, which outlives them, to replace a worker retired by ``max_tasks_per_child``), so the pool
accepts jobs only from the thread that opened it: that thread is inside the ``with`` block for the
pool's whole life, and the block's exit shuts the pool down.

A worker's own children (MCP stdio tool servers, a JVM) read their stdin from the worker: when the
worker dies their stdin ends, and they exit.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing.connection import wait as wait_for_exits
from multiprocessing.context import BaseContext
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import Any

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
STOP_GRACE_S = 5.0
"""How long stopped workers get to exit after SIGTERM before they are killed."""


class Stopped(SystemExit):
    """The driver was sent ``signal`` while a pool was open; its workers are stopped. Exit status 128 + signal."""

    def __init__(self, signum: int):
        self.signal = signal.Signals(signum)
        self.exit_status = 128 + int(self.signal)  # the shell's status for a process the signal ended
        super().__init__(self.exit_status)

    def __str__(self) -> str:
        return f"stopped by {self.signal.name}"


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel SIGKILL this process when the thread of ``parent_pid`` that started it ends (Linux);
    exit now if that parent has already gone (this process was reparented before it could ask)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(errno)}")
    if os.getppid() != parent_pid:
        os._exit(1)


def _start_worker(driver_pid: int, initializer: Callable[..., object] | None, initargs: tuple[Any, ...]) -> None:
    # A forked worker inherits the driver's SIGTERM handler: a worker stopped by the driver just ends.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent(driver_pid)
    if initializer is not None:
        initializer(*initargs)


class _OwnedPool(ProcessPoolExecutor):
    """A process pool that takes jobs only from the thread that made it (see the module docstring)."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._owner = threading.get_ident()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if threading.get_ident() != self._owner:
            raise RuntimeError("submit jobs to a worker_pool from the thread that opened it: the kernel stops a "
                               "worker when the thread that started it ends")
        return super().submit(fn, *args, **kwargs)

    def workers(self) -> list[BaseProcess]:
        # The executor's own table of its workers (Python 3.14 adds terminate_workers() for this); None after shutdown.
        return list((self._processes or {}).values())


def _stop(workers: list[BaseProcess]) -> None:
    """SIGTERM each worker, wait up to ``STOP_GRACE_S`` for them all to exit, then SIGKILL the rest.
    Their exits are seen through their sentinels, so the executor's own thread may reap them meanwhile."""
    for worker in workers:
        worker.terminate()
    running = {worker.sentinel: worker for worker in workers}
    end = time.monotonic() + STOP_GRACE_S
    while running and (left := end - time.monotonic()) > 0:
        for sentinel in wait_for_exits(list(running), timeout=left):
            del running[sentinel]  # type: ignore[arg-type]
    for worker in running.values():
        worker.kill()


@contextlib.contextmanager
def _stopped_by_sigterm(pool: _OwnedPool) -> Iterator[None]:
    """While open: SIGTERM stops the pool's workers and raises ``Stopped`` (main thread only, and only when
    SIGTERM has its default action: an application with its own handler keeps it)."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    driver_pid = os.getpid()

    def stop(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != driver_pid:  # a worker forked before its initializer reset the handler
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        # The workers alone, no pool.shutdown(): the signal may have come while this thread held the
        # pool's lock. Leaving the with block shuts the pool down.
        _stop(pool.workers())
        raise Stopped(signum)

    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextlib.contextmanager
def worker_pool(workers: int, context: BaseContext, initializer: Callable[..., object] | None = None,
                initargs: tuple[Any, ...] = ()) -> Iterator[ProcessPoolExecutor]:
    """A ``ProcessPoolExecutor`` of ``workers`` processes started by ``context``, each running
    ``initializer(*initargs)`` first, whose workers die with this process (see the module docstring).

    Submit jobs from the thread that opened the pool. A normal exit from the block waits for the queued
    jobs; an exception cancels them and stops the workers at once.
    """
    pool = _OwnedPool(max_workers=workers, mp_context=context, initializer=_start_worker,
                      initargs=(os.getpid(), initializer, initargs))
    try:
        with _stopped_by_sigterm(pool):
            yield pool
    except BaseException:
        running = pool.workers()
        pool.shutdown(wait=False, cancel_futures=True)
        _stop(running)
        raise
    pool.shutdown(wait=True)


__all__ = ["STOP_GRACE_S", "Stopped", "die_with_parent", "worker_pool"]
