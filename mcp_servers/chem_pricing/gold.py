"""The gold pricing rule, computed directly from the catalogue (the scorer's ground truth).

Basis: 1 mmol of the limiting reagent. Every component that is not a solvent needs
``equiv x molar mass (g/mol) x 1 mmol / 1000`` grams (mol% counts as equiv / 100; a catalyst sold by
loading, Pd/C, uses grams of material per mole of metal). Its cost is the gold pack choice
(``procurement.select_pack``: the cheapest valid pack covering the need, else whole multiples of the
largest). The label is the total cost divided by the grams of product at the stated yield,
``yield / 100 x 1 mmol x product molar mass / 1000``, in USD per gram.

The ``solvents`` view also buys each solvent by volume: ``mL per mmol x 1 mmol`` of liquid, i.e.
``volume x density`` grams, through the same pack rule.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from gauntlet.mcp_servers.chem_pricing.procurement import select_pack
from gauntlet.mcp_servers.chem_pricing.reactions import Reaction
from gauntlet.mcp_servers.chem_pricing.store import CatalogueStore

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


@dataclass(frozen=True)
class GoldPrice:
    components: list[ComponentCost]
    total_usd: float
    product_g: float
    cost_per_g_usd: float

    def to_json(self) -> dict:
        return asdict(self)


def need_g(catalogue: CatalogueStore, chemical_id: int, equiv: float) -> float:
    """Grams of a component at ``equiv`` equivalents on the 1 mmol basis."""
    return equiv * catalogue.chemical(chemical_id).molar_mass_g_mol * BASIS_MMOL / 1000.0


def product_g(reaction: Reaction) -> float:
    return reaction.yield_pct / 100.0 * BASIS_MMOL * reaction.product_molar_mass_g_mol / 1000.0


def price_reaction(reaction: Reaction, catalogue: CatalogueStore, include_solvents: bool = False) -> GoldPrice:
    """The gold price of ``reaction`` (see the module docstring)."""
    costs = []
    for component in reaction.components:
        if component.is_solvent:
            if not include_solvents:
                continue
            density = catalogue.chemical(component.chemical_id).density_g_ml
            need = component.volume_ml_per_mmol * BASIS_MMOL * density
        else:
            need = need_g(catalogue, component.chemical_id, component.equiv)
        choice = select_pack(catalogue.quotes(component.chemical_id), need)
        costs.append(ComponentCost(component.chemical_id, component.name, need, choice.quote.quote_id,
                                   choice.n_packs, choice.total_usd))
    total = sum(cost.cost_usd for cost in costs)
    grams = product_g(reaction)
    return GoldPrice(costs, round(total, 2), grams, total / grams)
