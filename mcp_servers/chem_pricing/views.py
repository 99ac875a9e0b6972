"""What an agent sees of a reaction, per view: clean, or with seeded noise at three levels.

``clean`` (and ``solvents``, which shows the same record but asks for solvents to be priced too)
gives every component by an unambiguous spelling with its equivalents. The noisy views perturb each
component with probability 0.15 / 0.35 / 0.6 (``noisy-low`` / ``noisy-medium`` / ``noisy-high``):

* name variants: another of the chemical's catalogue names (abbreviation <-> full name <-> IUPAC
  name <-> CAS number), which may be ambiguous;
* stereo/isomer prefix loss ("(R)-", "L-", "cis-" dropped);
* quantity expressions: equivalents rewritten as a mass (mg), an amount (mmol), a volume (uL, for
  liquids) or mol%, sometimes prefixed "ca."; solvents as "excess" or "as solvent";
* missing fields: the product's molar mass and components' roles dropped;
* formatting: OCR-like character confusions (l/1, O/0, rn/m) in names and in the procedure text.

The noise never changes the reaction: its gold price is the clean view's.
"""

from __future__ import annotations

import random
import re

from gauntlet.mcp_servers.chem_pricing.gold import BASIS_MMOL
from gauntlet.mcp_servers.chem_pricing.reactions import Reaction
from gauntlet.mcp_servers.chem_pricing.store import CatalogueStore

NOISE_LEVELS = {"noisy-low": 0.15, "noisy-medium": 0.35, "noisy-high": 0.6}
VIEWS = ("clean", "solvents", *NOISE_LEVELS)
STEREO_PREFIX = re.compile(r"^(\((?:[RSrs]|[RSEZ],[RSEZ]|\+|-|±|[EZ])\)-|(?:DL|dl|D|L|d|l|cis|trans|rac)-)")
OCR_CONFUSIONS = (("l", "1"), ("O", "0"), ("rn", "m"), ("I", "l"), ("S", "5"))


class UnknownViewError(ValueError):
    """A view name that does not exist."""


def check_view(view: str) -> None:
    if view not in VIEWS:
        raise UnknownViewError(f"unknown view {view!r}; the views are {', '.join(VIEWS)}")


def _ocr(text: str, rng: random.Random) -> str:
    wrong, right = rng.choice(OCR_CONFUSIONS)
    return text.replace(wrong, right, 1) if wrong in text else text


def _quantity_text(component, catalogue: CatalogueStore, rng: random.Random) -> str:
    record = catalogue.chemical(component.chemical_id)
    mmol = component.equiv * BASIS_MMOL
    choices = ["mass", "mmol"] + (["volume"] if record.density_g_ml else []) + (["mol%"] if component.equiv < 0.5
                                                                                 else [])
    kind = rng.choice(choices)
    about = "ca. " if rng.random() < 0.3 else ""
    if kind == "mass":
        return f"{about}{mmol * record.molar_mass_g_mol:.1f} mg"
    if kind == "mmol":
        return f"{about}{mmol:.3g} mmol"
    if kind == "volume":
        return f"{about}{mmol * record.molar_mass_g_mol / record.density_g_ml:.1f} uL"
    return f"{component.equiv * 100:g} mol%"


def agent_view(reaction: Reaction, view: str, catalogue: CatalogueStore, seed: int = 0) -> dict:
    """The reaction record an agent reads in ``view`` (chemical ids never included)."""
    check_view(view)
    components = [{"name": c.name, "role": c.role, "equiv": c.equiv, "volume_ml_per_mmol": c.volume_ml_per_mmol,
                   "amount_text": (f"{c.volume_ml_per_mmol:g} mL per mmol" if c.is_solvent else f"{c.equiv:g} equiv")}
                  for c in reaction.components]
    record = {"reaction_id": reaction.reaction_id, "reaction_class": reaction.reaction_class,
              "basis": f"{BASIS_MMOL:g} mmol of the limiting reagent", "components": components,
              "product_smiles": reaction.product_smiles,
              "product_molar_mass_g_mol": reaction.product_molar_mass_g_mol, "yield_pct": reaction.yield_pct,
              "procedure": reaction.procedure}
    if view not in NOISE_LEVELS:
        return record
    rate = NOISE_LEVELS[view]
    rng = random.Random(f"{seed}|{view}|{reaction.reaction_id}")
    for shown, component in zip(components, reaction.components):
        if rng.random() < rate:
            spellings = [name for name, kind in catalogue.names_of(component.chemical_id)
                         if kind in ("abbreviation", "iupac", "cas", "synonym", "name") and name != shown["name"]]
            if spellings:
                shown["name"] = rng.choice(spellings[:8])
        if STEREO_PREFIX.match(shown["name"]) and rng.random() < rate:
            shown["name"] = STEREO_PREFIX.sub("", shown["name"], count=1)
        if rng.random() < rate:
            if component.is_solvent:
                shown["amount_text"] = rng.choice(("excess", "as solvent"))
                shown["volume_ml_per_mmol"] = None
            else:
                shown["amount_text"] = _quantity_text(component, catalogue, rng)
                shown["equiv"] = None
        if rng.random() < rate / 2:
            shown["role"] = None
        if rng.random() < rate / 3:
            shown["name"] = _ocr(shown["name"], rng)
    if rng.random() < rate:
        record["product_molar_mass_g_mol"] = None
    if rng.random() < rate:
        record["procedure"] = _ocr(_ocr(record["procedure"], rng), rng)
    return record
