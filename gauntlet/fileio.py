"""Atomic file writes: a reader (or a crash) sees the old file or the new one, never half of one."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path


def write_atomically(path: str | os.PathLike[str], content: bytes | str) -> Path:
    """Write ``content`` (text is UTF-8 encoded) to ``path`` through a sibling scratch file and a rename.

    The rename is atomic on POSIX and Windows when both names are on one filesystem, which a sibling
    guarantees. Returns ``path`` as a ``Path``.
    """
    path = Path(path)
    scratch = path.with_name(path.name + ".tmp")
    scratch.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    os.replace(scratch, path)
    return path



@contextlib.contextmanager
def exclusive_folder(folder: str | os.PathLike[str], lock_name: str, busy: Callable[[], Exception]) -> Iterator[None]:
    """Hold ``folder`` for one writer at a time: an ``flock`` on ``folder/lock_name``, released by the OS
    if the holder dies (a killed writer never leaves the folder locked). If another process holds it,
    raise ``busy()`` at once instead of waiting."""
    descriptor = os.open(Path(folder) / lock_name, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise busy() from None
        yield
    finally:
        os.close(descriptor)


__all__ = ["exclusive_folder", "write_atomically"]
