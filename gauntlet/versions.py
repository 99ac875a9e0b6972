"""Package and data versions, recorded in every Episode header."""

from __future__ import annotations

import functools
import platform
from importlib.metadata import PackageNotFoundError, version

# The packages an episode's behaviour depends on: the core, the tool servers' numerics (raster, vector and
# image libraries compute the disaster tools' results and its suites' gold answers), the model runtimes and
# the agent framework. Bounded below, not pinned: two setups' episodes are comparable when these agree.
_PACKAGES = ("gauntlet", "gymnasium", "numpy", "mcp", "mujoco", "torch", "scipy", "shapely", "rasterio", "pyproj",
             "scikit-image", "scikit-learn", "networkx", "llama_cpp_python", "transformers", "langgraph",
             "langchain-core")
# The vector extensions numpy and the model runtimes choose kernels by: float results can differ in their last
# bits between a machine that has them and one that does not.
_CPU_FEATURES = ("AVX", "FMA3", "AVX2", "AVX512F", "AVX512_SKX", "AVX512_ICL", "ASIMD", "SVE")


def cpu() -> str:
    """The machine's architecture and the vector extensions numpy found on it, e.g. ``x86_64 AVX FMA3 AVX2``."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__  # type: ignore[import-not-found]  # private, untyped
    except ImportError:  # numpy moved its private module: the architecture alone
        return platform.machine()
    return " ".join([platform.machine(), *(name for name in _CPU_FEATURES if __cpu_features__.get(name))])


@functools.cache
def versions() -> dict[str, str]:
    """Versions of Python, the packages an episode's behaviour depends on, the data builders, and the CPU's
    vector extensions (``cpu``)."""
    found = {"python": platform.python_version(), "cpu": cpu()}
    for name in _PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    from gauntlet.registry import registry

    for entry in registry.entries("data"):
        found[f"data:{entry.name}"] = str(entry.metadata.get("version", "unversioned"))
    return found
