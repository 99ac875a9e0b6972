"""Atomic file writes: a reader (or a crash) sees the old file or the new one, never half of one."""

from __future__ import annotations

import os
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


__all__ = ["write_atomically"]
