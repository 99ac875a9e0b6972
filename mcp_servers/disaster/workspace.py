"""Path confinement and artefacts: what a tool may read, and where (and how) it writes.

Tools name files by *virtual paths*: ``data/<event>/<layer>`` under the data root (read-only) and
``ws/<file>`` under the session workspace. An absolute path is accepted only when it lies under
one of the two roots once symlinks are resolved; anything else (``..`` escapes, other absolute
paths, symlinks pointing out) is refused with ``PathNotAllowed``. Artefacts are written atomically
(temporary file, then ``os.replace``) under content-hashed names, so the same result always has the
same path and a reader never sees half a file. A figure's PNG gets a JSON sidecar of the same name
describing it, written first (``write_bytes``).
"""

from __future__ import annotations

from collections.abc import Callable
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

DATA_PREFIX = "data/"
WORKSPACE_PREFIX = "ws/"


class PathNotAllowed(ValueError):
    """A path outside the data root and the workspace, or one that does not exist."""


class Workspace:
    """The data root a session reads and the workspace folder it writes."""

    def __init__(self, data_root: str | os.PathLike[str], workspace_dir: str | os.PathLike[str]):
        self.data_root = Path(data_root).resolve()
        self.workspace_dir = Path(workspace_dir).resolve()
        self.workspace_dir.mkdir(parents=True, exist_ok=True)
        self.tools: dict[str, Any] = {}  # the serving session's tools, for tool_loop
        # The client session of the call being served (the server sets it), for tools that ask the client's model.
        self.client_session: Callable[[], Any] = lambda: None

    # Reading -------------------------------------------------------------------------------------
    def resolve(self, path: str, *, suffixes: tuple[str, ...] = ()) -> Path:
        """The real file behind ``path`` (virtual or absolute), which must exist under a root."""
        if not isinstance(path, str) or not path.strip():
            raise PathNotAllowed("a path must be a non-empty string such as 'data/<event>/post_optical.tif'")
        path = path.strip()
        if path.startswith(DATA_PREFIX):
            candidate = self.data_root / path[len(DATA_PREFIX):]
        elif path.startswith(WORKSPACE_PREFIX):
            candidate = self.workspace_dir / path[len(WORKSPACE_PREFIX):]
        elif os.path.isabs(path):
            candidate = Path(path)
        else:
            raise PathNotAllowed(f"{_shown(path)} is neither under 'data/' (the scenes) nor 'ws/' (your workspace)")
        shown = _shown(path)
        try:
            real = candidate.resolve()
            inside = real.is_relative_to(self.data_root) or real.is_relative_to(self.workspace_dir)
            exists = inside and real.is_file()
        except (OSError, ValueError):
            # Over-long names, NUL bytes: the OS's message would name the real folder, which is not the agent's.
            raise PathNotAllowed(f"{shown} is not a usable file name; use a path such as "
                                 "'data/<event>/post_optical.tif' or one a tool returned") from None
        if not inside:
            raise PathNotAllowed(f"{shown} points outside the data root and the workspace; only 'data/...' and "
                                 "'ws/...' files may be used")
        if not exists:
            raise PathNotAllowed(f"{shown} does not exist; list an event's layers with its manifest "
                                 "('data/<event>/manifest.json') or use a path a tool returned")
        if suffixes and real.suffix.lower() not in suffixes:
            raise PathNotAllowed(f"{shown} is not a {' or '.join(suffixes)} file")
        return real

    def virtual(self, real: Path) -> str:
        """The virtual path of a file under one of the roots."""
        real = Path(real).resolve()
        if real.is_relative_to(self.workspace_dir):
            return WORKSPACE_PREFIX + real.relative_to(self.workspace_dir).as_posix()
        return DATA_PREFIX + real.relative_to(self.data_root).as_posix()

    # Writing -------------------------------------------------------------------------------------
    def _publish(self, scratch: Path, stem: str, suffix: str) -> str:
        final = self.workspace_dir / f"{stem}-{_digest(scratch.read_bytes())}{suffix}"
        os.replace(scratch, final)
        return self.virtual(final)

    def _scratch(self, suffix: str) -> Path:
        handle, name = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=self.workspace_dir)
        os.close(handle)
        return Path(name)

    def write_raster(self, stem: str, data: Any, profile: dict[str, Any], band_names: list[str] | None = None) -> str:
        """Write a (bands, rows, cols) array as a tiled GeoTIFF; returns its ``ws/`` path."""
        import rasterio

        scratch = self._scratch(".tif")
        try:
            bands, height, width = data.shape
            out = {"driver": "GTiff", "width": width, "height": height, "count": bands, "dtype": data.dtype.name,
                   "crs": profile.get("crs"), "transform": profile["transform"], "compress": "deflate",
                   "nodata": profile.get("nodata")}
            if min(height, width) >= 256:
                out.update(tiled=True, blockxsize=256, blockysize=256)
            with rasterio.open(scratch, "w", **out) as dst:
                dst.write(data)
                for index, name in enumerate(band_names or [], start=1):
                    dst.set_band_description(index, name)
            return self._publish(scratch, stem, ".tif")
        except BaseException:
            scratch.unlink(missing_ok=True)
            raise

    def write_json(self, stem: str, data: Any, suffix: str = ".geojson") -> str:
        """Write JSON (sorted keys, so equal content gives an equal name); returns its ``ws/`` path."""
        return self.write_bytes(stem, json.dumps(data, sort_keys=True, separators=(",", ":")).encode(), suffix)

    def write_bytes(self, stem: str, data: bytes, suffix: str, sidecar: dict[str, Any] | None = None) -> str:
        """Write ``data`` (a PNG) under a content-hashed name; returns its ``ws/`` path.

        ``sidecar`` is JSON describing the file, written beside it (the same name with suffix ``.json``,
        its ``path`` key set to the file's ``ws/`` path) *before* the file, so whoever finds the file
        finds its description."""
        final = self.workspace_dir / f"{stem}-{_digest(data)}{suffix}"
        if sidecar is not None:
            described = json.dumps({**sidecar, "path": self.virtual(final)}, sort_keys=True, separators=(",", ":"))
            self._replace(final.with_suffix(".json"), described.encode())
        self._replace(final, data)
        return self.virtual(final)

    def _replace(self, final: Path, data: bytes) -> None:
        scratch = self._scratch(final.suffix)
        try:
            scratch.write_bytes(data)
            os.replace(scratch, final)
        except BaseException:
            scratch.unlink(missing_ok=True)
            raise

    def write_gpkg(self, stem: str, features: list[Any], crs: str | None, layer: str = "layer") -> str:
        """Write features as a one-layer GeoPackage (fixed timestamp: equal content, equal name); its ``ws/`` path."""
        from gauntlet.mcp_servers.disaster.vectors import write_gpkg

        scratch = self._scratch(".gpkg")
        scratch.unlink()  # the GeoPackage driver creates the file itself
        try:
            write_gpkg(scratch, features, crs, layer)
            return self._publish(scratch, stem, ".gpkg")
        except BaseException:
            scratch.unlink(missing_ok=True)
            raise


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _shown(path: str, limit: int = 80) -> str:
    """The agent's own path, quoted and clipped so a long one does not flood the message."""
    return repr(path) if len(path) <= limit else repr(path[:limit]) + f"... ({len(path)} characters)"
