"""Curated inputs: the small, hand-checked files of the top-level ``data/`` folder that builders read.

``data/`` holds what a person checked and a builder cannot generate: the real-event catalogue, alias
and salt tables, object dimensions, glyph lists, and ``data/LICENSES.md`` naming the source and licence
of each. Nothing generated goes there (that lives in the data cache). The package sees the folder as
``gauntlet/data`` (a link in a source checkout, package data in a wheel), so builders read it the
same way in both. A builder names the files it reads in ``ensure_built(..., inputs=...)``; their
digest is part of the cache key, so editing a curated file rebuilds what was built from it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

DATA_ROOT = Path(__file__).parent / "data"


class CuratedDataError(FileNotFoundError):
    """A curated input a builder needs is not in ``data/``."""


def curated_path(relative: str) -> Path:
    """The path of the curated file ``relative`` (e.g. ``"disaster/events.csv"``) under ``data/``."""
    path = DATA_ROOT / relative
    if not path.is_file():
        raise CuratedDataError(f"curated input data/{relative} is missing; restore it from the repository")
    return path


def curated_digest(relatives: Iterable[str]) -> str:
    """A short sha256 over the names and bytes of the curated files ``relatives`` (order-independent)."""
    digest = hashlib.sha256()
    for relative in sorted(set(relatives)):
        digest.update(relative.encode() + b"\0" + curated_path(relative).read_bytes() + b"\0")
    return digest.hexdigest()[:12]
