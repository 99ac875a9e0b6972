"""Package and data versions, recorded in every Episode header."""

from __future__ import annotations

import functools
import platform
from importlib.metadata import PackageNotFoundError, version

_PACKAGES = ("gauntlet", "gymnasium", "numpy", "mcp", "mujoco", "torch")


@functools.cache
def versions() -> dict[str, str]:
    """Versions of Python, the packages an episode's behaviour depends on, and the data builders."""
    found = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    from gauntlet.registry import registry

    for entry in registry.entries("data"):
        found[f"data:{entry.name}"] = str(entry.metadata.get("version", "unversioned"))
    return found
