"""Pack selection: the cheapest valid way to buy at least a required amount of one chemical.

Rule (the benchmark's gold rule): among valid quotes (``Quote.is_valid``), the cheapest single pack
whose content covers the need; when no pack is big enough, whole multiples of the largest valid
pack size, from the supplier that sells that size cheapest. Ties go to the lower quote id.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gauntlet.mcp_servers.chem_pricing.pricing import Quote


class ProcurementError(ValueError):
    """No valid pack can be bought, or the need is not a positive amount."""


@dataclass(frozen=True)
class PackChoice:
    quote: Quote
    n_packs: int
    total_usd: float
    covers_g: float


def select_pack(quotes: Sequence[Quote], required_g: float) -> PackChoice:
    """The cheapest valid purchase of at least ``required_g`` grams (see the module docstring)."""
    if not (required_g > 0 and math.isfinite(required_g)):
        raise ProcurementError(f"the required amount must be a positive number of grams, got {required_g}")
    valid = [quote for quote in quotes if quote.is_valid]
    if not valid:
        raise ProcurementError("no valid pack is on offer (only labelled, reference-standard or low-purity rows)")
    # Pack masses are stored to 1e-6 g; a need equal to a pack's content is covered by it.
    covering = [quote for quote in valid if quote.pack_mass_g >= required_g * (1 - 1e-9)]
    if covering:
        best = min(covering, key=lambda q: (q.price_usd, q.quote_id))
        return PackChoice(best, 1, best.price_usd, best.pack_mass_g)
    largest = max(quote.pack_mass_g for quote in valid)
    best = min((q for q in valid if q.pack_mass_g == largest), key=lambda q: (q.price_usd, q.quote_id))
    n_packs = math.ceil(required_g / largest - 1e-9)
    return PackChoice(best, n_packs, round(n_packs * best.price_usd, 2), n_packs * largest)
