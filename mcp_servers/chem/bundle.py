"""``gauntlet data build chem``: the catalogue, the reactions and routes with their views, and every suite.

Each part stays its own data-cache entry (``chem-catalogue``, ``chem-reactions``, ``chem-suite``: a
server or suite loads only the part it needs); the bundle builds them in order and records in
``bundle.json`` where each is and what it holds. The cache lock is re-entrant, so a builder may
build what it depends on.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from gauntlet.mcp_servers.chem.build import catalogue_path
from gauntlet.mcp_servers.chem.reaction_data import ReactionSet, reactions_dir
from gauntlet.mcp_servers.chem.suite import SUITE_VIEWS, suite_path

BUNDLE_FILE = "bundle.json"


def build_everything(folder: Path, *, n_chemicals: int | None = None, n_suppliers: int | None = None,
                     n_reactions: int | None = None, n_routes: int | None = None, seed: int | None = None) -> None:
    """Build every part (see the module docstring); a keyword left unset keeps the part's default, so the
    default bundle is exactly the data the registered suites and the server use."""
    catalogue = {key: value for key, value in (("n_chemicals", n_chemicals), ("n_suppliers", n_suppliers))
                 if value is not None}
    reactions: dict[str, Any] = {key: value for key, value in (("n_reactions", n_reactions), ("n_routes", n_routes),
                                                               ("seed", seed)) if value is not None}
    if catalogue:
        reactions["catalogue"] = catalogue
    database = catalogue_path(**catalogue)
    folder_of_reactions = reactions_dir(**reactions)
    reaction_set = ReactionSet(folder_of_reactions)
    suites = {view: str(suite_path(view, **reactions)) for view in SUITE_VIEWS}
    snapshot = json.loads((database.parent / "snapshot.json").read_text())
    bundle = {"catalogue": str(database), "catalogue_sha256": snapshot["content_sha256"],
              "n_chemicals": snapshot["n_chemicals"], "n_quotes": snapshot["n_quotes"],
              "reactions": str(folder_of_reactions), "n_reactions": len(reaction_set.records),
              "n_routes": len(reaction_set.routes), "suites": suites}
    path = Path(folder) / BUNDLE_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(bundle, indent=1, sort_keys=True))
    os.replace(tmp, path)
