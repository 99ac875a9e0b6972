"""The gold pricing rule, computed directly from the catalogue (the scorer's ground truth).

Basis: 1 mmol of the limiting reagent. Every component that is not a solvent needs
``equiv x molar mass (g/mol) x 1 mmol / 1000`` grams (mol% counts as equiv / 100; a catalyst sold by
loading, Pd/C, uses grams of material per mole of metal). Its cost is the gold pack choice
(``procurement.select_pack``: the cheapest valid pack covering the need, else whole multiples of the
largest). The label is the total cost divided by the grams of product at the stated yield,
``yield / 100 x 1 mmol x product molar mass / 1000``, in USD per gram.

The ``solvents`` view also buys each solvent by volume: ``mL per mmol x 1 mmol`` of liquid, i.e.
``volume x density`` grams, through the same pack rule.

Routes (``price_route``) cascade intermediates, which are made, not bought. Step 1 runs on 1 mmol of
its limiting reagent; every later step runs on all of the intermediate the step before gave, so its
scale is ``s_k = s_(k-1) x yield_(k-1) / 100`` mmol (the intermediate is its limiting reagent,
1.0 equiv). Each bought component of step k needs ``equiv x molar mass x s_k`` and is bought for that
step by the pack rule (a chemical used in two steps is bought twice: each step is its own purchase).
The label is the cost of every step's purchases divided by the grams of final product,
``s_n x yield_n / 100 x molar mass / 1000``. Solvents are not priced.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from gauntlet.mcp_servers.chem.procurement import select_pack
from gauntlet.mcp_servers.chem.reactions import Component, Reaction
from gauntlet.mcp_servers.chem.routes import Route
from gauntlet.mcp_servers.chem.store import CatalogueStore

BASIS_MMOL = 1.0
PRICING_VIEWS = ("clean", "solvents")


@dataclass(frozen=True)
class ComponentCost:
    chemical_id: int
    name: str
    need_g: float
    quote_id: int
    n_packs: int
    cost_usd: float
    step: int = 1  # the route step that buys it (1 for single-step reactions)


@dataclass(frozen=True)
class GoldPrice:
    components: list[ComponentCost]
    total_usd: float
    product_g: float
    cost_per_g_usd: float

    def to_json(self) -> dict:
        return asdict(self)


def need_g(catalogue: CatalogueStore, chemical_id: int, equiv: float, scale_mmol: float = BASIS_MMOL) -> float:
    """Grams of a component at ``equiv`` equivalents on a ``scale_mmol`` basis (default 1 mmol)."""
    return equiv * catalogue.chemical(chemical_id).molar_mass_g_mol * scale_mmol / 1000.0


def product_g(reaction: Reaction) -> float:
    return reaction.yield_pct / 100.0 * BASIS_MMOL * reaction.product_molar_mass_g_mol / 1000.0


def catalogue_id(component: Component) -> int:
    """The catalogue id of a component that is bought (only a route's intermediates, made, have none)."""
    if component.chemical_id is None:
        raise ValueError(f"{component.name!r} has no catalogue id: intermediates are made, not bought")
    return component.chemical_id


def equivalents(component: Component) -> float:
    """The equivalents of a component bought by amount (solvents state a volume instead)."""
    if component.equiv is None:
        raise ValueError(f"{component.name!r} states no equivalents")
    return component.equiv


def price_reaction(reaction: Reaction, catalogue: CatalogueStore, include_solvents: bool = False) -> GoldPrice:
    """The gold price of ``reaction`` (see the module docstring)."""
    costs = []
    for component in reaction.components:
        if component.is_solvent and not include_solvents:
            continue
        chemical_id = catalogue_id(component)
        if component.volume_ml_per_mmol is not None:  # a solvent, bought by volume
            density = catalogue.chemical(chemical_id).density_g_ml
            if density is None:
                raise ValueError(f"{component.name!r} is bought by volume, but the catalogue has no density for it")
            need = component.volume_ml_per_mmol * BASIS_MMOL * density
        else:
            need = need_g(catalogue, chemical_id, equivalents(component))
        choice = select_pack(catalogue.quotes(chemical_id), need)
        costs.append(ComponentCost(chemical_id, component.name, need, choice.quote.quote_id,
                                   choice.n_packs, choice.total_usd))
    total = sum(cost.cost_usd for cost in costs)
    grams = product_g(reaction)
    return GoldPrice(costs, round(total, 2), grams, total / grams)


def route_scales_mmol(route: Route) -> list[float]:
    """The scale of each step (mmol of its limiting reagent), then the mmol of final product."""
    scales = [BASIS_MMOL]
    for step in route.steps:
        scales.append(scales[-1] * step.yield_pct / 100)
    return scales


def price_route(route: Route, catalogue: CatalogueStore) -> GoldPrice:
    """The gold price of a multi-step route (see the module docstring)."""
    scales = route_scales_mmol(route)
    costs = []
    for number, (step, scale) in enumerate(zip(route.steps, scales), start=1):
        for component in step.components:
            if component.is_solvent or component.is_intermediate:
                continue
            chemical_id = catalogue_id(component)
            need = need_g(catalogue, chemical_id, equivalents(component), scale)
            choice = select_pack(catalogue.quotes(chemical_id), need)
            costs.append(ComponentCost(chemical_id, component.name, need, choice.quote.quote_id,
                                       choice.n_packs, choice.total_usd, step=number))
    total = sum(cost.cost_usd for cost in costs)
    grams = scales[-1] * route.product_molar_mass_g_mol / 1000.0
    return GoldPrice(costs, round(total, 2), grams, total / grams)
