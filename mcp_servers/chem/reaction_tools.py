"""The task-access tools of the pricing server: ``list_reactions``, ``get_reaction`` (single steps) and
``list_routes``, ``get_route`` (multi-step routes), declared for any state that has the reactions
(the server's ``Chem`` state has)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, Protocol

from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from gauntlet.bridges.tool_errors import ToolInputError
from gauntlet.bridges.tool_server import ToolSet

if TYPE_CHECKING:
    from gauntlet.mcp_servers.chem.reaction_data import ReactionSet

# Every tool of the server only reads: the catalogue and the reactions are frozen, and nothing is kept per call.
READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
View = Literal["clean", "solvents", "noisy-low", "noisy-medium", "noisy-high"]
ROUTE_VIEW = "routes"
RouteView = Literal["routes", "routes-noisy-low", "routes-noisy-medium", "routes-noisy-high"]


class ReactionComponent(BaseModel):
    name: str = Field(description="the chemical as written; ground it with search_chemical")
    role: str | None = Field(description="limiting reagent, coupling partner, catalyst, base, solvent, ... "
                                         "(null when not stated)")
    equiv: float | None = Field(description="equivalents relative to the limiting reagent (mol% / 100); null "
                                            "when the amount is only given as text")
    volume_ml_per_mmol: float | None = Field(description="solvent volume in mL per mmol of limiting reagent")
    amount_text: str = Field(description="the amount as written: '1.2 equiv', '5 mol%', '25.3 mg', '40 uL', ...")


class ReactionRecord(BaseModel):
    reaction_id: str
    reaction_class: str
    basis: str = Field(description="the scale to price: 1 mmol of the limiting reagent")
    components: list[ReactionComponent]
    product_smiles: str
    product_molar_mass_g_mol: float | None = Field(description="average molar mass of the product (null when not "
                                                               "stated: compute it from the SMILES)")
    yield_pct: float | None = Field(description="isolated yield in percent")
    procedure: str


class RouteStep(ReactionRecord):
    step: int = Field(description="1 for the first step; a later step's 'intermediate' is the product of the step "
                                  "before (made, not bought)")


class RouteRecord(BaseModel):
    route_id: str
    n_steps: int
    basis: str = Field(description="step 1 runs on 1 mmol of its limiting reagent; each later step on all of the "
                                   "intermediate the step before gave")
    steps: list[RouteStep]
    product_smiles: str = Field(description="the final product")
    product_molar_mass_g_mol: float | None = Field(description="average molar mass of the final product (null when "
                                                               "not stated: compute it from the SMILES)")


class RouteSummary(BaseModel):
    route_id: str
    n_steps: int
    reaction_classes: list[str]
    product_smiles: str


class RouteList(BaseModel):
    total: int
    routes: list[RouteSummary]


class ReactionSummary(BaseModel):
    reaction_id: str
    reaction_class: str
    product_smiles: str


class ReactionList(BaseModel):
    view: str
    total: int
    reactions: list[ReactionSummary]


@functools.lru_cache(maxsize=4)
def open_reaction_set(folder: Path) -> ReactionSet:
    """The reaction set in ``folder``, shared by every server built in this process (it is read-only)."""
    from gauntlet.mcp_servers.chem.reaction_data import ReactionSet

    return ReactionSet(folder)


class HasReactions(Protocol):
    """The state the reaction tools read: the reaction set, loaded on first use."""

    def reactions(self) -> ReactionSet: ...


TOOLS = ToolSet[HasReactions]()
ReactionView = Annotated[View, Field(description="which rendering of the reactions")]


@TOOLS.tool(READ_ONLY)
def list_reactions(source: HasReactions, view: ReactionView = "clean",
                   offset: Annotated[int, Field(ge=0, description="index of the first reaction")] = 0,
                   limit: Annotated[int, Field(ge=1, le=200, description="most reactions to list")] = 50
                   ) -> ReactionList:
    """List the reactions available for pricing (id, class, product SMILES), in id order."""
    records = source.reactions().view(view)
    ids = list(records)[offset:offset + limit]
    return ReactionList(view=view, total=len(records), reactions=[
        ReactionSummary(reaction_id=i, reaction_class=records[i]["reaction_class"],
                        product_smiles=records[i]["product_smiles"]) for i in ids])


@TOOLS.tool(READ_ONLY)
def get_reaction(source: HasReactions,
                 reaction_id: Annotated[str, Field(description="e.g. RXN-0001", max_length=40,
                                                   examples=["RXN-0001"])],
                 view: ReactionView = "clean") -> ReactionRecord:
    """One reaction to price: its components (name as written, role, equivalents or amount text,
    solvent volume per mmol), product SMILES and molar mass, stated yield and procedure text. Price
    it on a 1 mmol basis of the limiting reagent: buy each non-solvent component's need with
    select_pack and divide the total by the grams of product at the stated yield."""
    records = source.reactions().view(view)
    if reaction_id not in records:
        ids = list(records)
        raise ToolInputError(f"no reaction {reaction_id!r}; ids run from {ids[0]} to {ids[-1]} (see list_reactions)")
    return ReactionRecord(**records[reaction_id])


@TOOLS.tool(READ_ONLY)
def list_routes(source: HasReactions,
                offset: Annotated[int, Field(ge=0, description="index of the first route")] = 0,
                limit: Annotated[int, Field(ge=1, le=200, description="most routes to list")] = 50) -> RouteList:
    """List the multi-step routes available for pricing (id, number of steps, classes, final product)."""
    routes = source.reactions().view(ROUTE_VIEW)
    ids = list(routes)[offset:offset + limit]
    return RouteList(total=len(routes), routes=[
        RouteSummary(route_id=i, n_steps=routes[i]["n_steps"], product_smiles=routes[i]["product_smiles"],
                     reaction_classes=[step["reaction_class"] for step in routes[i]["steps"]]) for i in ids])


@TOOLS.tool(READ_ONLY)
def get_route(source: HasReactions,
              route_id: Annotated[str, Field(description="e.g. ROUTE-0001", max_length=40, examples=["ROUTE-0001"])],
              view: Annotated[RouteView, Field(description="'routes' (clean) or a noisy view of the routes: "
                                                           "names, amounts and fields perturbed, same price")]
              = "routes") -> RouteRecord:
    """One multi-step route to price: its steps in order, each a reaction record whose 'intermediate'
    component is the product of the step before (made, not bought: never price it). Step 1 runs on
    1 mmol of its limiting reagent; step k runs on scale_k = scale_(k-1) x yield_(k-1) / 100 mmol.
    Buy each bought component of step k for equiv x scale_k mmol with select_pack, add every step's
    costs, and divide by the grams of final product: scale_n x yield_n / 100 x molar mass / 1000.
    In a noisy view an amount written as mg, uL or mmol is already the step's own amount."""
    try:
        routes = source.reactions().view(view)
    except FileNotFoundError:
        raise ToolInputError(f"this reaction set has no {view!r} view of the routes; use view='routes'") from None
    if route_id not in routes:
        ids = list(routes)
        span = f"ids run from {ids[0]} to {ids[-1]}" if ids else "there are no routes"
        raise ToolInputError(f"no route {route_id!r}; {span} (see list_routes)")
    return RouteRecord(**routes[route_id])
