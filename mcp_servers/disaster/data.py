"""The cached scene data: ``gauntlet data build disaster`` and the server's default data root share
one cache entry (name ``disaster``, builder version, default parameters).

The ``hard`` realism level (``realism.py``) has cache entries of its own (name ``disaster-hard``),
versioned by the scene builder's version and the hard renderer's (``realism.RENDER_VERSION``), so a
change to the hard rendering rebuilds hard scenes only; the clean entries keep the keys they always
had. The hard level is built only when asked for: ``gauntlet data build disaster-hard``,
``build_default(realism="hard")``, or on first use by ``gauntlet eval disaster --view hard``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

DATA_NAME = "disaster"
HARD_DATA_NAME = "disaster-hard"


def scene_entry(realism: str = "clean") -> tuple[str, str]:
    """(cache name, cache version) of the scenes at realism level ``realism``; an entry's parameters
    (events, size, seed) are the same at both levels."""
    from gauntlet.mcp_servers.disaster.realism import RENDER_VERSION
    from gauntlet.mcp_servers.disaster.scenes import BUILDER_VERSION

    return (DATA_NAME, BUILDER_VERSION) if realism == "clean" else (
        HARD_DATA_NAME, f"{BUILDER_VERSION}-hard{RENDER_VERSION}")


def build_clean_scenes(folder: Path, *, events: list[str] | None = None, size_px: int = 256, seed: int = 0) -> None:
    """The ``disaster`` data builder: ``scenes.build_scenes`` at the ``clean`` level (the hard level is the
    ``disaster-hard`` entry's, so that its renderer has a cache version of its own)."""
    from gauntlet.mcp_servers.disaster.scenes import build_scenes

    build_scenes(folder, events=events, size_px=size_px, seed=seed)


def build_hard_scenes(folder: Path, *, events: list[str] | None = None, size_px: int = 256, seed: int = 0) -> None:
    """The ``disaster-hard`` data builder: ``scenes.build_scenes`` at the ``hard`` level (the entry's name
    says the level, so its parameters are the clean entry's)."""
    from gauntlet.mcp_servers.disaster.scenes import build_scenes

    build_scenes(folder, events=events, size_px=size_px, seed=seed, realism="hard")


def _builder(realism: str) -> Callable[..., None]:
    from gauntlet.errors import UserError
    from gauntlet.mcp_servers.disaster.realism import REALISM_LEVELS

    if realism not in REALISM_LEVELS:
        raise UserError(f"realism must be one of {', '.join(REALISM_LEVELS)}, got {realism!r}")
    return build_clean_scenes if realism == "clean" else build_hard_scenes


def build_default(realism: str = "clean") -> Path:
    """The full scene set (every catalogue event, 256 x 256 cells of 10 m), built on first use."""
    from gauntlet.datacache import ensure_built
    from gauntlet.mcp_servers.disaster.scenes import CURATED_INPUTS

    return ensure_built(*scene_entry(realism), _builder(realism), inputs=CURATED_INPUTS)


def build_subset(events: list[str], size_px: int = 128, seed: int = 0, realism: str = "clean") -> Path:
    """A smaller scene set (some events, smaller scenes), cached under its own parameters."""
    from gauntlet.datacache import ensure_built
    from gauntlet.mcp_servers.disaster.scenes import CURATED_INPUTS

    return ensure_built(*scene_entry(realism), _builder(realism),
                        params={"events": list(events), "size_px": size_px, "seed": seed},
                        inputs=CURATED_INPUTS)
