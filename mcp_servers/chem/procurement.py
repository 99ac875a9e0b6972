"""Pack selection: the cheapest valid way to buy at least a required amount of one chemical.

Rule (the benchmark's gold rule): among valid quotes (``Quote.is_valid``), the cheapest single pack
whose content covers the need; when no pack is big enough, whole multiples of the largest valid
pack size, from the supplier that sells that size cheapest. Ties go to the lower quote id.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gauntlet.mcp_servers.chem.pricing import Quote

if TYPE_CHECKING:
    from gauntlet.mcp_servers.chem.store import CatalogueStore


class ProcurementError(ValueError):
    """No valid pack can be bought, or the need is not a positive amount."""


@dataclass(frozen=True)
class PackChoice:
    quote: Quote
    n_packs: int
    total_usd: float
    covers_g: float


NO_VALID_PACK = "no valid pack is on offer (only labelled, reference-standard or low-purity rows)"


def _check_need(required_g: float) -> None:
    if not (required_g > 0 and math.isfinite(required_g)):
        raise ProcurementError(f"the required amount must be a positive number of grams, got {required_g}")


def _covering_threshold_g(required_g: float) -> float:
    # Pack masses are stored to 1e-6 g; a need equal to a pack's content is covered by it.
    return required_g * (1 - 1e-9)


def _multiples(largest: Quote, required_g: float) -> PackChoice:
    n_packs = math.ceil(required_g / largest.pack_mass_g - 1e-9)
    return PackChoice(largest, n_packs, round(n_packs * largest.price_usd, 2), n_packs * largest.pack_mass_g)


def select_pack(quotes: Sequence[Quote], required_g: float) -> PackChoice:
    """The cheapest valid purchase of at least ``required_g`` grams (see the module docstring)."""
    _check_need(required_g)
    valid = [quote for quote in quotes if quote.is_valid]
    if not valid:
        raise ProcurementError(NO_VALID_PACK)
    covering = [quote for quote in valid if quote.pack_mass_g >= _covering_threshold_g(required_g)]
    if covering:
        best = min(covering, key=lambda q: (q.price_usd, q.quote_id))
        return PackChoice(best, 1, best.price_usd, best.pack_mass_g)
    largest = max(quote.pack_mass_g for quote in valid)
    return _multiples(min((q for q in valid if q.pack_mass_g == largest), key=lambda q: (q.price_usd, q.quote_id)),
                      required_g)


def select_pack_in_store(catalogue: CatalogueStore, chemical_id: int, required_g: float) -> PackChoice:
    """``select_pack`` over the chemical's quotes, answered by the database's index (one or two queries
    that return one row each) instead of reading every quote: the server's path. Same rule, same
    choice (tested against ``select_pack`` on every chemical)."""
    _check_need(required_g)
    best = catalogue.cheapest_valid_covering(chemical_id, _covering_threshold_g(required_g))
    if best is not None:
        return PackChoice(best, 1, best.price_usd, best.pack_mass_g)
    largest = catalogue.cheapest_largest_valid(chemical_id)
    if largest is None:
        raise ProcurementError(NO_VALID_PACK)
    return _multiples(largest, required_g)
