"""The curated alias table: reagents the PubChem tables of ``chemicals`` lack, name badly, or map wrongly.

The rows are the curated file ``data/chem/aliases.json`` (read once, on import of this module).

Each row is one purchasable identity: a preferred name, a SMILES (salts and complexes written as
disconnected fragments), the abbreviations chemists write, a category that drives the price model,
and a density for liquids (g/mL at 20-25 °C). Where ``chemicals`` already holds the structure, the
row only adds abbreviations to it (the catalogue merges rows by canonical SMILES). ``EDC`` is here
because the package maps it to 1,2-dichloroethane; in synthesis it means the carbodiimide, bought
as its hydrochloride. ``molar_mass_g_mol`` overrides the structure's mass only for supported
catalysts sold by loading (Pd/C: grams of material per mole of palladium).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from gauntlet.curated import curated_path


@dataclass(frozen=True)
class Alias:
    name: str
    smiles: str
    abbreviations: tuple[str, ...] = ()
    category: str = "reagent"
    cas: str | None = None
    density_g_ml: float | None = None
    molar_mass_g_mol: float | None = None
    note: str = ""
    synonyms: tuple[str, ...] = ()


ALIASES_FILE = "chem/aliases.json"  # curated input: the catalogue builder names it in its cache key


def load_aliases(path: Path | None = None) -> tuple[Alias, ...]:
    """The alias rows (``data/chem/aliases.json`` unless ``path``), in file order."""
    rows = json.loads((path or curated_path(ALIASES_FILE)).read_text(encoding="utf-8"))["aliases"]
    return tuple(Alias(name=row["name"], smiles=row["smiles"], abbreviations=tuple(row["abbreviations"]),
                       category=row["category"], cas=row.get("cas"), density_g_ml=row.get("density_g_ml"),
                       molar_mass_g_mol=row.get("molar_mass_g_mol"), note=row.get("note", ""),
                       synonyms=tuple(row.get("synonyms", ()))) for row in rows)


ALIASES: tuple[Alias, ...] = load_aliases()
