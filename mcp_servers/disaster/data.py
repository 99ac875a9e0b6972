"""The cached scene data: ``gauntlet data build disaster`` and the server's default data root share
one cache entry (name ``disaster``, builder version, default parameters).

The realism level (``realism.py``) is part of an entry's parameters only when it is not the default
``clean``, so the clean entries keep the keys they always had; the ``hard`` level is built only when
asked for (``build_default(realism="hard")``, ``gauntlet data build disaster --config '{"realism": "hard"}'``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

DATA_NAME = "disaster"


def realism_params(realism: str) -> dict[str, Any]:
    """The cache parameters that name a realism level: none for ``clean``, ``{"realism": ...}`` otherwise."""
    return {} if realism == "clean" else {"realism": realism}


def build_default(realism: str = "clean") -> Path:
    """The full scene set (every catalogue event, 256 x 256 cells of 10 m), built on first use."""
    from gauntlet.datacache import ensure_built
    from gauntlet.mcp_servers.disaster.scenes import BUILDER_VERSION, CURATED_INPUTS, build_scenes

    return ensure_built(DATA_NAME, BUILDER_VERSION, build_scenes, params=realism_params(realism),
                        inputs=CURATED_INPUTS)


def build_subset(events: list[str], size_px: int = 128, seed: int = 0, realism: str = "clean") -> Path:
    """A smaller scene set (some events, smaller scenes), cached under its own parameters."""
    from gauntlet.datacache import ensure_built
    from gauntlet.mcp_servers.disaster.scenes import BUILDER_VERSION, CURATED_INPUTS, build_scenes

    return ensure_built(DATA_NAME, BUILDER_VERSION, build_scenes,
                        params={"events": list(events), "size_px": size_px, "seed": seed, **realism_params(realism)},
                        inputs=CURATED_INPUTS)
