"""The synthetic supplier market: suppliers, pack ladders, grades and the price model.

Price model (documented in docs/chem.md). Each chemical has a reference price per gram at a
100 g pack, ``base_usd_per_g = tier_median(category) x size_factor x lognormal(0, 0.6)``, where the
tier median separates commodity chemicals and solvents (cents per gram) from fine chemicals (dollars)
and ligands and palladium catalysts (tens to hundreds of dollars), and the size factor grows with
the number of heavy atoms for fine chemicals. A supplier sells a pack of ``m`` grams for

    price_usd = pack_fee_usd(supplier) + markup(supplier) x grade_factor x base_usd_per_g x 100 x (m / 100) ** alpha

with ``alpha < 1`` (economies of scale: the price per gram falls as packs grow; 0.45 for commodities,
0.6 for fine chemicals, 0.75 for catalysts and ligands). Liquids are sold by volume (mL, L); their pack
mass is volume x density. Besides the standard grade (97-99 %), some suppliers list a high-purity grade
(dearer), a technical grade (< 95 %, cheaper, not acceptable for synthesis), and the market lists
isotope-labelled and reference-standard rows (tiny, very dear packs, never the right thing to buy).
Everything is drawn from ``random.Random`` streams keyed by the seed and the chemical's InChIKey and
id, so with the same suppliers a chemical's quotes do not depend on the other chemicals catalogued.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import NamedTuple

VALID_MIN_PURITY_PCT = 95.0
INVALID_GRADES = frozenset({"isotope-labelled", "reference standard"})

TIER_MEDIAN_USD_PER_G = {"solvent": 0.04, "commodity": 0.12, "acid": 0.08, "inorganic": 0.25, "base": 0.6,
                         "reductant": 1.2, "oxidant": 0.8, "reagent": 1.5, "coupling_reagent": 2.5, "fine": 4.0,
                         "ligand": 45.0, "catalyst": 120.0}
SCALE_EXPONENT = {"solvent": 0.45, "commodity": 0.45, "acid": 0.45, "inorganic": 0.45, "base": 0.5,
                  "ligand": 0.75, "catalyst": 0.75}
DEFAULT_SCALE_EXPONENT = 0.6
MASS_LADDERS_G = {"bulk": (5, 25, 100, 250, 500, 1000, 2500, 5000),
                  "fine": (0.25, 1, 5, 10, 25, 100, 250, 1000),
                  "precious": (0.05, 0.1, 0.25, 0.5, 1, 5, 10, 25)}
VOLUME_LADDERS_ML = {"bulk": (25, 100, 250, 500, 1000, 2500, 4000), "fine": (1, 5, 25, 100, 250, 500),
                     "precious": (1, 5, 25)}
BULK = frozenset({"solvent", "commodity", "acid", "inorganic", "base"})
PRECIOUS = frozenset({"ligand", "catalyst"})

_SUPPLIER_FIRST = ("Northbridge", "Alder", "Cobalt", "Meridian", "Halcyon", "Keystone", "Sable", "Orion", "Vantage",
                   "Bluewater", "Granite", "Summit", "Lumen", "Aster", "Pioneer", "Crescent", "Harbor", "Evergreen",
                   "Falcon", "Juniper", "Redwood", "Sterling", "Tidewell", "Zenith")
_SUPPLIER_SECOND = ("Chemicals", "Scientific", "Fine Chemicals", "Reagents", "Labs")


@dataclass(frozen=True)
class Supplier:
    supplier_id: int
    name: str
    prefix: str
    markup: float
    pack_fee_usd: float


class Quote(NamedTuple):
    """One catalogue row: a pack of a chemical a supplier sells, and its price (a tuple: cheap to build)."""

    quote_id: int
    chemical_id: int
    supplier_id: int
    catalog_number: str
    pack_amount: float
    pack_unit: str
    pack_mass_g: float
    pack_volume_ml: float | None
    price_usd: float
    purity_pct: float
    grade: str
    lead_time_days: int

    @property
    def is_valid(self) -> bool:
        """Acceptable for synthesis: not labelled, not a reference standard, purity >= 95 %."""
        return self.grade not in INVALID_GRADES and self.purity_pct >= VALID_MIN_PURITY_PCT


def make_suppliers(n_suppliers: int, seed: int) -> list[Supplier]:
    rng = random.Random(f"{seed}|suppliers")
    suppliers = []
    for index in range(n_suppliers):
        first = _SUPPLIER_FIRST[index % len(_SUPPLIER_FIRST)]
        second = _SUPPLIER_SECOND[(index // len(_SUPPLIER_FIRST)) % len(_SUPPLIER_SECOND)]
        cycle = index // (len(_SUPPLIER_FIRST) * len(_SUPPLIER_SECOND))
        name = f"{first} {second}" + (f" {cycle + 1}" if cycle else "")
        prefix = "".join(rng.choice("ABCDEFGHJKLMNPRSTVWXYZ") for _ in range(2)) + f"{index:03d}"
        suppliers.append(Supplier(supplier_id=index + 1, name=name, prefix=prefix,
                                  markup=round(rng.lognormvariate(0.0, 0.25), 4),
                                  pack_fee_usd=round(rng.uniform(2.0, 25.0), 2)))
    return suppliers


def pack_label(mass_g: float, volume_ml: float | None) -> tuple[float, str]:
    """How a catalogue writes a pack size: (amount, unit) in mg, g, kg, mL or L."""
    if volume_ml is not None:
        return (volume_ml / 1000, "L") if volume_ml >= 1000 else (volume_ml, "mL")
    if mass_g < 1:
        return round(mass_g * 1000, 6), "mg"
    return (mass_g / 1000, "kg") if mass_g >= 1000 else (mass_g, "g")


def base_price_usd_per_g(category: str, heavy_atoms: int, rng: random.Random) -> float:
    size_factor = max(0.5, heavy_atoms / 12.0) ** 1.3 if category == "fine" else 1.0
    return TIER_MEDIAN_USD_PER_G.get(category, 4.0) * size_factor * rng.lognormvariate(0.0, 0.6)


def quotes_for(chemical_id: int, inchikey: str, category: str, heavy_atoms: int, density_g_ml: float | None,
               suppliers: list[Supplier], seed: int, first_quote_id: int) -> list[Quote]:
    """Every quote of one chemical (see the module docstring for the model)."""
    rng = random.Random(f"{seed}|{inchikey}|{chemical_id}")
    ladder_kind = "bulk" if category in BULK else "precious" if category in PRECIOUS else "fine"
    liquid = density_g_ml is not None
    ladder = VOLUME_LADDERS_ML[ladder_kind] if liquid else MASS_LADDERS_G[ladder_kind]
    base = base_price_usd_per_g(category, heavy_atoms, rng)
    alpha = SCALE_EXPONENT.get(category, DEFAULT_SCALE_EXPONENT)
    n_sellers = min(len(suppliers), rng.randint(14, 24))
    quotes: list[Quote] = []

    def add(supplier: Supplier, size: float, grade: str, purity: float, grade_factor: float) -> None:
        mass_g = size * density_g_ml if density_g_ml is not None else size
        volume_ml = size if liquid else None
        price = supplier.pack_fee_usd + supplier.markup * grade_factor * base * 100.0 * (mass_g / 100.0) ** alpha
        amount, unit = pack_label(mass_g, volume_ml)
        quotes.append(Quote(quote_id=first_quote_id + len(quotes), chemical_id=chemical_id,
                            supplier_id=supplier.supplier_id,
                            catalog_number=f"{supplier.prefix}-{chemical_id:05d}-{len(quotes) % 100:02d}",
                            pack_amount=round(amount, 6), pack_unit=unit, pack_mass_g=round(mass_g, 6),
                            pack_volume_ml=volume_ml, price_usd=round(price, 2), purity_pct=purity, grade=grade,
                            lead_time_days=rng.choice((1, 2, 3, 5, 7, 14, 21))))

    for supplier in rng.sample(suppliers, n_sellers):
        width = rng.randint(3, min(6, len(ladder)))
        start = rng.randint(0, len(ladder) - width)
        window = ladder[start:start + width]
        for size in window:
            add(supplier, size, "reagent", rng.choice((97.0, 98.0, 99.0)), 1.0)
        if rng.random() < 0.35:
            grade = "anhydrous" if liquid else "high purity"
            for size in window[:rng.randint(2, len(window))]:
                add(supplier, size, grade, rng.choice((99.5, 99.8, 99.9)), rng.uniform(1.2, 1.6))
        if rng.random() < 0.15:
            for size in window[-2:]:
                add(supplier, size, "technical", rng.choice((85.0, 90.0, 92.0, 94.0)), rng.uniform(0.45, 0.7))
    specialty = rng.sample(suppliers, 2)
    # specialty packs are sized by mass: grams in the unit of the ladder (mL for a liquid)
    units_per_g = 1 / density_g_ml if density_g_ml is not None else 1
    if rng.random() < 0.6:
        for size in (0.01, 0.05)[:rng.randint(1, 2)]:
            add(specialty[0], size * units_per_g, "isotope-labelled", 98.0, rng.uniform(30.0, 80.0))
    if rng.random() < 0.5:
        add(specialty[1], 0.1 * units_per_g, "reference standard", 99.9, rng.uniform(10.0, 25.0))
    return quotes
