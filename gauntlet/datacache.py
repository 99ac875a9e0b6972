"""The data cache: where deterministic builders put generated data, keyed by version and parameters.

    path = ensure_built("tactile-mnist", version="1", build=build_meshes, params={"seed": 0})

The first call runs ``build(folder, **params)`` into a scratch folder, writes ``MANIFEST.json``
(sha256 and size of every file) and moves the folder into place atomically, so a crash never leaves
a half-built entry that looks complete. Later calls verify the files against the manifest (once per
process) and rebuild an entry whose files were corrupted or removed. The cache lives in
``$GAUNTLET_HOME`` (default ``~/.cache/gauntlet``): ``<name>/<version>/<params hash>/``.

Building is locked per entry, across threads and processes: ``<params hash>.lock`` beside the entry
is held (``flock``) while the entry is checked and built, so when several processes ask for one
entry at once, one builds it and the others wait and then use it. The lock is re-entrant within a
thread, and a builder may itself ensure other entries it builds on (tasks built from scenes). A
build killed half-way leaves a scratch folder that the next build of the entry removes.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gauntlet.curated import curated_digest

MANIFEST = "MANIFEST.json"
_verified: set[Path] = set()
_thread_locks: dict[Path, threading.RLock] = {}
_thread_locks_guard = threading.Lock()
# Lock files this process holds (flock is per open file, so it is taken once, by the outermost holder).
_held: dict[Path, tuple[int, int]] = {}


class DataCacheError(RuntimeError):
    """A builder failed or produced nothing usable."""


def cache_root() -> Path:
    """Where generated data live: ``$GAUNTLET_HOME``, default ``~/.cache/gauntlet``."""
    home = os.environ.get("GAUNTLET_HOME")
    return Path(home).expanduser() if home else Path.home() / ".cache" / "gauntlet"


def params_key(params: dict[str, Any]) -> str:
    """A short stable hash of builder parameters (JSON with sorted keys)."""
    text = json.dumps(params, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def entry_dir(name: str, version: str, params: dict[str, Any] | None = None, inputs: Sequence[str] = ()) -> Path:
    """The cache folder of one entry: ``<name>/<version>/<hash of params and curated inputs>``."""
    key = dict(params or {})
    if inputs:
        key["curated inputs"] = curated_digest(inputs)
    return cache_root() / name / str(version) / params_key(key)


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file's bytes, read in blocks (model files are hundreds of MB)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _manifest(folder: Path) -> dict[str, Any]:
    files = {str(p.relative_to(folder)): {"sha256": sha256_of(p), "bytes": p.stat().st_size}
             for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MANIFEST}
    return {"files": files}


def verify(folder: Path) -> bool:
    """Whether every file listed in the folder's manifest is present with its recorded checksum."""
    manifest_path = folder / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text())
        files = manifest["files"]
    except (OSError, ValueError, KeyError):
        return False
    for relative, expected in files.items():
        path = folder / relative
        if not path.is_file() or path.stat().st_size != expected["bytes"] or sha256_of(path) != expected["sha256"]:
            return False
    return True


def lock_path(folder: Path) -> Path:
    """The lock file of the entry at ``folder``: beside it, so removing the entry never removes its lock."""
    return folder.with_name(folder.name + ".lock")


@contextmanager
def entry_lock(folder: Path) -> Iterator[None]:
    """Hold the entry's lock: one holder at a time among this process's threads (an RLock) and among
    processes (``flock`` on ``lock_path(folder)``, released by the OS if the holder dies)."""
    with _thread_locks_guard:
        thread_lock = _thread_locks.setdefault(folder, threading.RLock())
    with thread_lock:  # from here on only this thread touches _held[folder]
        if folder in _held:
            descriptor, depth = _held[folder]
        else:
            folder.parent.mkdir(parents=True, exist_ok=True)
            descriptor, depth = os.open(lock_path(folder), os.O_RDWR | os.O_CREAT, 0o644), 0
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX)
            except BaseException:
                os.close(descriptor)
                raise
        _held[folder] = (descriptor, depth + 1)
        try:
            yield
        finally:
            if depth == 0:
                del _held[folder]
                os.close(descriptor)  # releases the flock
            else:
                _held[folder] = (descriptor, depth)


def ensure_built(name: str, version: str, build: Callable[..., Any], *, params: dict[str, Any] | None = None,
                 inputs: Sequence[str] = (), rebuild: bool = False) -> Path:
    """The cache folder of ``name`` at ``version`` with ``params``, built first if needed (see module doc).

    ``inputs`` names the curated files under ``data/`` the builder reads (``gauntlet.curated``); their
    digest is part of the key, so a changed curated file gives a new entry.
    """
    params = params or {}
    folder = entry_dir(name, version, params, inputs)
    if not rebuild and folder in _verified and (folder / MANIFEST).exists():
        return folder
    with entry_lock(folder):
        if not rebuild and folder.is_dir():
            if verify(folder):
                _verified.add(folder)
                return folder
            warnings.warn(f"cached data {name} v{version} at {folder} failed its checksum; rebuilding",
                          stacklevel=2)
        # Under the lock no one else builds this entry, so scratch folders left here are from killed builds.
        for stale in folder.parent.glob(f".{folder.name}-*"):
            shutil.rmtree(stale, ignore_errors=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        try:
            build(scratch, **params)
            if not any(p.is_file() for p in scratch.rglob("*")):
                raise DataCacheError(f"data builder {name!r} wrote no files")
            manifest = {"name": name, "version": str(version), "params": params, "curated_inputs": sorted(inputs),
                        **_manifest(scratch)}
            (scratch / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
            if folder.exists():
                shutil.rmtree(folder)
            os.replace(scratch, folder)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        _verified.add(folder)
        return folder
