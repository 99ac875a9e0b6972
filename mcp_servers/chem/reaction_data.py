"""The reaction set through the data cache: records, gold prices, and every view an agent can read.

``reactions.jsonl`` holds one line per reaction: the full record (chemical ids included: for scorers
only), and its gold price in the ``clean`` and ``solvents`` pricing views. ``views/<view>.jsonl``
holds what an agent reads in each view. ``routes.jsonl`` and ``views/routes*.jsonl`` hold the
multi-step routes the same way (gold by ``gold.price_route``; one gold for every route view). The set
is built from a catalogue (same parameters as
``build.catalogue_path``), so its cache key includes the catalogue's.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from gauntlet.mcp_servers.chem.build import CURATED_INPUTS as CATALOGUE_INPUTS
from gauntlet.mcp_servers.chem.build import built_catalogue_path, catalogue_path
from gauntlet.mcp_servers.chem.gold import GoldPrice, price_reaction, price_route
from gauntlet.mcp_servers.chem.reactions import Reaction, StepFactory, generate_reactions
from gauntlet.mcp_servers.chem.routes import Route, generate_routes
from gauntlet.mcp_servers.chem.store import CatalogueStore
from gauntlet.mcp_servers.chem.views import (ROUTE_VIEW, ROUTE_VIEWS, SALT_FORMULAS_FILE, VIEWS, agent_view, check_view,
                                             route_view)

DATA_NAME = "chem-reactions"
# 3: longer routes, Suzuki partners without an aryl halide, noisy route views; 4: built on the 25,000-identity
# catalogue (catalogue builder 4: its chemical ids differ from builder 3's)
BUILDER_VERSION = "4"
DEFAULT_N_REACTIONS = 1440
DEFAULT_N_ROUTES = 150
RECORDS_FILE = "reactions.jsonl"
ROUTES_FILE = "routes.jsonl"
# The catalogue's curated files and the salt formulas of the noisy views: part of the set's cache key.
CURATED_INPUTS = (*CATALOGUE_INPUTS, SALT_FORMULAS_FILE)


def build_reactions(folder: Path, *, n_reactions: int = DEFAULT_N_REACTIONS, n_routes: int = DEFAULT_N_ROUTES,
                    seed: int = 0, catalogue: dict | None = None) -> None:
    """Generate, price and render the reaction set and routes into ``folder`` (see the module docstring)."""
    catalogue_params = dict(catalogue or {})
    store = CatalogueStore(built_catalogue_path(**catalogue_params))
    try:
        factory = StepFactory(store)
        reactions = generate_reactions(store, n_reactions, seed, factory)
        routes = generate_routes(store, n_routes, seed, factory)
        _write(Path(folder) / ROUTES_FILE, [json.dumps({"route": route.to_json(),
                                                        "gold": {ROUTE_VIEW: price_route(route, store).to_json()}},
                                                       sort_keys=True) for route in routes])
        for view in ROUTE_VIEWS:
            _write(Path(folder) / "views" / f"{view}.jsonl",
                   [json.dumps(route_view(route, store, view, seed), sort_keys=True) for route in routes])
        lines = []
        for reaction in reactions:
            gold = {"clean": price_reaction(reaction, store).to_json(),
                    "solvents": price_reaction(reaction, store, include_solvents=True).to_json()}
            lines.append(json.dumps({"reaction": reaction.to_json(), "gold": gold}, sort_keys=True))
        _write(Path(folder) / RECORDS_FILE, lines)
        for view in VIEWS:
            _write(Path(folder) / "views" / f"{view}.jsonl",
                   [json.dumps(agent_view(reaction, view, store, seed), sort_keys=True) for reaction in reactions])
        meta = {"n_reactions": len(reactions), "n_routes": len(routes), "seed": seed, "catalogue": catalogue_params,
                "catalogue_snapshot": store.snapshot.get("content_sha256"), "views": list(VIEWS),
                "route_views": list(ROUTE_VIEWS)}
        _write(Path(folder) / "meta.json", [json.dumps(meta, sort_keys=True)])
    finally:
        store.close()


def _write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(line + "\n" for line in lines))
    os.replace(tmp, path)


def reactions_dir(**params) -> Path:
    """The reaction set's cache folder, built on first use (``params``: ``build_reactions``'s keywords)."""
    from gauntlet.datacache import ensure_built

    catalogue_path(**params.get("catalogue", {}))
    return ensure_built(DATA_NAME, BUILDER_VERSION, build_reactions, params=params, inputs=CURATED_INPUTS)


def built_reactions_dir(**params) -> Path:
    """The folder of a reaction set already built, without taking the data cache's lock (for builders
    of dependent data; see ``build.built_catalogue_path``)."""
    from gauntlet.datacache import MANIFEST, entry_dir

    folder = entry_dir(DATA_NAME, BUILDER_VERSION, params, CURATED_INPUTS)
    if not (folder / MANIFEST).is_file():
        raise FileNotFoundError(f"the reaction set {params or 'default'} is not built; call reactions_dir first")
    return folder


@dataclass(frozen=True)
class GoldRecord:
    reaction: Reaction
    gold: dict[str, GoldPrice]


@dataclass(frozen=True)
class GoldRoute:
    route: Route
    gold: dict[str, GoldPrice]


class ReactionSet:
    """A built reaction set, read lazily: agent views by id, and (for scorers) records with gold."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        if not (self.folder / RECORDS_FILE).is_file():
            raise FileNotFoundError(f"no reaction set in {self.folder}; build it with `gauntlet data build chem`")
        self._views: dict[str, dict[str, dict]] = {}

    @cached_property
    def records(self) -> dict[str, GoldRecord]:
        records = {}
        for line in (self.folder / RECORDS_FILE).read_text().splitlines():
            data = json.loads(line)
            reaction = Reaction.from_json(data["reaction"])
            records[reaction.reaction_id] = GoldRecord(reaction, _gold(data["gold"]))
        return records

    @cached_property
    def routes(self) -> dict[str, GoldRoute]:
        routes = {}
        for line in (self.folder / ROUTES_FILE).read_text().splitlines():
            data = json.loads(line)
            route = Route.from_json(data["route"])
            routes[route.route_id] = GoldRoute(route, _gold(data["gold"]))
        return routes

    def view(self, view: str) -> dict[str, dict]:
        """What an agent reads in ``view``, by id (reaction ids; route ids for the route views)."""
        if view not in ROUTE_VIEWS:
            check_view(view)
        if view not in self._views:
            key = "route_id" if view in ROUTE_VIEWS else "reaction_id"
            lines = (self.folder / "views" / f"{view}.jsonl").read_text().splitlines()
            self._views[view] = {record[key]: record for record in map(json.loads, lines)}
        return self._views[view]

    def ids(self) -> list[str]:
        return list(self.view("clean"))


def _gold(prices: dict[str, dict]) -> dict[str, GoldPrice]:
    return {view: GoldPrice(**{**price, "components": [_component(c) for c in price["components"]]})
            for view, price in prices.items()}


def _component(data: dict):
    from gauntlet.mcp_servers.chem.gold import ComponentCost

    return ComponentCost(**data)
