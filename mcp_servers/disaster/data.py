"""The cached scene data: ``gauntlet data build disaster`` and the server's default data root share
one cache entry (name ``disaster``, builder version, default parameters)."""

from __future__ import annotations

from pathlib import Path

DATA_NAME = "disaster"


def build_default() -> Path:
    """The full scene set (every catalogue event, 256 x 256 cells of 10 m), built on first use."""
    from gauntlet.datacache import ensure_built
    from gauntlet.mcp_servers.disaster.scenes import BUILDER_VERSION, CURATED_INPUTS, build_scenes

    return ensure_built(DATA_NAME, BUILDER_VERSION, build_scenes, params={}, inputs=CURATED_INPUTS)


def build_subset(events: list[str], size_px: int = 128, seed: int = 0) -> Path:
    """A smaller scene set (some events, smaller scenes), cached under its own parameters."""
    from gauntlet.datacache import ensure_built
    from gauntlet.mcp_servers.disaster.scenes import BUILDER_VERSION, CURATED_INPUTS, build_scenes

    return ensure_built(DATA_NAME, BUILDER_VERSION, build_scenes,
                        params={"events": list(events), "size_px": size_px, "seed": seed}, inputs=CURATED_INPUTS)
