"""What an agent sees of a reaction, per view: clean, or with seeded noise at three levels.

``clean`` (and ``solvents``, which shows the same record but asks for solvents to be priced too)
gives every component by an unambiguous spelling with its equivalents. The noisy views perturb each
component with probability 0.15 / 0.35 / 0.6 (``noisy-low`` / ``noisy-medium`` / ``noisy-high``):

* name variants: another of the chemical's catalogue names (abbreviation <-> full name <-> IUPAC
  name <-> CAS number), which may be ambiguous; and, for the reagents chemists write as formulas,
  salt-formula variants ("triethylamine" <-> "Et3N", "potassium carbonate" <-> "K2CO3",
  "EDC hydrochloride" <-> "EDC·HCl", ``SALT_FORMULA_NAMES``, the curated ``data/chem/salt_formulas.json``);
* structure variants: the chemical written as a SMILES string in a non-canonical atom order (seeded
  RDKit random SMILES), which no name table holds: the grounder must parse and canonicalise it (only
  for chemicals whose structure is theirs alone in the catalogue: not Pd/C, which shares palladium's);
* stereo/isomer prefix loss ("(R)-", "L-", "cis-" dropped);
* quantity expressions: equivalents rewritten as a mass (mg), an amount (mmol), a volume (uL, for
  liquids) or mol%, sometimes prefixed "ca."; solvents as "excess" or "as solvent";
* missing fields: the product's molar mass and components' roles dropped;
* formatting: the procedure as mixed text + table (a sentence, then a table of the components as
  shown), and OCR-like character confusions (l/1, O/0, rn/m) in names and in the procedure text.

The noise never changes the reaction: its gold price is the clean view's.

Routes have the same noise at the same three levels (``routes-noisy-low`` / ``-medium`` / ``-high``):
every step's bought components are perturbed as above, except that a quantity rewritten as a mass,
amount or volume is the step's own (at its scale ``s_k`` mmol, not per 1 mmol), and the final
product's molar mass may be missing. Intermediates ("product of step k") are never perturbed.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

from gauntlet.curated import curated_path
from gauntlet.mcp_servers.chem.gold import BASIS_MMOL
from gauntlet.mcp_servers.chem.reactions import REACTION_CLASSES, Reaction
from gauntlet.mcp_servers.chem.routes import Route
from gauntlet.mcp_servers.chem.store import CatalogueStore

NOISE_LEVELS = {"noisy-low": 0.15, "noisy-medium": 0.35, "noisy-high": 0.6}
VIEWS = ("clean", "solvents", *NOISE_LEVELS)
ROUTE_VIEW = "routes"  # the multi-step routes, clean; a view of its own in suites and `gauntlet eval --view`
ROUTE_NOISE_LEVELS = {f"routes-{view}": rate for view, rate in NOISE_LEVELS.items()}
ROUTE_VIEWS = (ROUTE_VIEW, *ROUTE_NOISE_LEVELS)
STEREO_PREFIX = re.compile(r"^(\((?:[RSrs]|[RSEZ],[RSEZ]|\+|-|±|[EZ])\)-|(?:DL|dl|D|L|d|l|cis|trans|rac)-)")
SMILES_SHARE = 0.25  # of a component's name-noise rate: how often it is written as a random SMILES
OCR_CONFUSIONS = (("l", "1"), ("O", "0"), ("rn", "m"), ("I", "l"), ("S", "5"))
# Curated input: catalogue name -> how chemists write it as a formula or salt (each spelling is a catalogue
# name, so a good grounder resolves it; tested). The reaction builder names the file in its cache key.
SALT_FORMULAS_FILE = "chem/salt_formulas.json"


def load_salt_formulas(path: Path | None = None) -> dict[str, tuple[str, ...]]:
    """The salt-formula table (``data/chem/salt_formulas.json`` unless ``path``)."""
    table = json.loads((path or curated_path(SALT_FORMULAS_FILE)).read_text(encoding="utf-8"))["formulas"]
    return {name: tuple(spellings) for name, spellings in table.items()}


SALT_FORMULA_NAMES = load_salt_formulas()


class UnknownViewError(ValueError):
    """A view name that does not exist."""


def check_view(view: str) -> None:
    if view not in VIEWS:
        raise UnknownViewError(f"unknown view {view!r}; the views are {', '.join(VIEWS)}")


def check_route_view(view: str) -> None:
    if view not in ROUTE_VIEWS:
        raise UnknownViewError(f"unknown route view {view!r}; the route views are {', '.join(ROUTE_VIEWS)}")


def smiles_variant(catalogue: CatalogueStore, chemical_id: int, seed: int) -> str | None:
    """A non-canonical SMILES of the chemical (RDKit random atom order, seeded), or None when its structure
    is not the chemical's alone in the catalogue or RDKit gives back the canonical string."""
    from rdkit import Chem

    record = catalogue.chemical(chemical_id)
    if catalogue.ids_by("smiles", record.smiles) != [chemical_id]:
        return None
    mol = Chem.MolFromSmiles(record.smiles)
    if mol is None:
        return None
    variants = [s for s in Chem.MolToRandomSmilesVect(mol, 3, randomSeed=seed) if s != record.smiles]
    return variants[0] if variants else None


def _ocr(text: str, rng: random.Random) -> str:
    wrong, right = rng.choice(OCR_CONFUSIONS)
    return text.replace(wrong, right, 1) if wrong in text else text


def _quantity_text(component, catalogue: CatalogueStore, rng: random.Random, scale_mmol: float = BASIS_MMOL) -> str:
    record = catalogue.chemical(component.chemical_id)
    mmol = component.equiv * scale_mmol
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


def _clean_amount(component) -> str:
    if component.is_solvent:
        return f"{component.volume_ml_per_mmol:g} mL per mmol"
    if component.is_intermediate:
        return f"{component.equiv:g} equiv (all of it: made in the step before, not bought)"
    return f"{component.equiv:g} equiv"


def route_view(route: Route, catalogue: CatalogueStore, view: str = ROUTE_VIEW, seed: int = 0) -> dict:
    """The route an agent reads in ``view``: every step as a reaction record, with its step number (clean
    in ``routes``; perturbed in the noisy route views, see the module docstring)."""
    check_route_view(view)
    steps, scale = [], BASIS_MMOL
    for number, step in enumerate(route.steps, 1):
        if view == ROUTE_VIEW:
            record = agent_view(step, "clean", catalogue)
        else:
            rng = random.Random(f"{seed}|{view}|{step.reaction_id}")
            record = _noisy_record(step, catalogue, ROUTE_NOISE_LEVELS[view], rng, scale)
        steps.append({**record, "step": number})
        scale *= step.yield_pct / 100
    out: dict[str, Any] = {
        "route_id": route.route_id, "n_steps": len(route.steps),
        "basis": ("1 mmol of the limiting reagent of step 1; each later step runs on all of the intermediate "
                  "the step before gave (its limiting reagent, 1 equiv)"),
        "steps": steps, "product_smiles": route.product_smiles,
        "product_molar_mass_g_mol": route.product_molar_mass_g_mol}
    if view != ROUTE_VIEW:
        out["basis"] += ("; an amount written as mg, uL or mmol is the step's own amount at its scale, "
                         "equiv and mol% are relative to the step's limiting reagent")
        if random.Random(f"{seed}|{view}|{route.route_id}").random() < ROUTE_NOISE_LEVELS[view]:
            out["product_molar_mass_g_mol"] = None
    return out


def agent_view(reaction: Reaction, view: str, catalogue: CatalogueStore, seed: int = 0) -> dict:
    """The reaction record an agent reads in ``view`` (chemical ids never included)."""
    check_view(view)
    components = [{"name": c.name, "role": c.role, "equiv": c.equiv, "volume_ml_per_mmol": c.volume_ml_per_mmol,
                   "amount_text": _clean_amount(c)} for c in reaction.components]
    record = {"reaction_id": reaction.reaction_id, "reaction_class": reaction.reaction_class,
              "basis": f"{BASIS_MMOL:g} mmol of the limiting reagent", "components": components,
              "product_smiles": reaction.product_smiles,
              "product_molar_mass_g_mol": reaction.product_molar_mass_g_mol, "yield_pct": reaction.yield_pct,
              "procedure": reaction.procedure}
    if view not in NOISE_LEVELS:
        return record
    rng = random.Random(f"{seed}|{view}|{reaction.reaction_id}")
    return _noisy_record(reaction, catalogue, NOISE_LEVELS[view], rng)


def _noisy_record(reaction: Reaction, catalogue: CatalogueStore, rate: float, rng: random.Random,
                  scale_mmol: float = BASIS_MMOL) -> dict:
    """The clean record of ``reaction`` with each kind of noise applied at ``rate`` (quantities rewritten
    as masses, amounts or volumes at ``scale_mmol``); intermediates are left as they are."""
    record = agent_view(reaction, "clean", catalogue)
    components = record["components"]
    for shown, component in zip(components, reaction.components):
        chemical_id = component.chemical_id
        if component.is_intermediate or chemical_id is None:  # made in the step before: nothing to misspell
            continue
        if rng.random() < rate:
            spellings = [name for name, kind in catalogue.names_of(chemical_id)
                         if kind in ("abbreviation", "iupac", "cas", "synonym", "name") and name != shown["name"]]
            if spellings:
                shown["name"] = rng.choice(spellings[:8])
        formulas = SALT_FORMULA_NAMES.get(catalogue.chemical(chemical_id).name, ())
        if formulas and rng.random() < rate:
            shown["name"] = rng.choice([name for name in formulas if name != shown["name"]])
        if STEREO_PREFIX.match(shown["name"]) and rng.random() < rate:
            shown["name"] = STEREO_PREFIX.sub("", shown["name"], count=1)
        as_smiles = None
        if not component.is_solvent and rng.random() < rate * SMILES_SHARE:
            as_smiles = smiles_variant(catalogue, chemical_id, rng.randrange(2**31))
            shown["name"] = as_smiles or shown["name"]
        if rng.random() < rate:
            if component.is_solvent:
                shown["amount_text"] = rng.choice(("excess", "as solvent"))
                shown["volume_ml_per_mmol"] = None
            else:
                shown["amount_text"] = _quantity_text(component, catalogue, rng, scale_mmol)
                shown["equiv"] = None
        if rng.random() < rate / 2:
            shown["role"] = None
        if rng.random() < rate / 3 and not as_smiles:  # a SMILES is pasted, not retyped
            shown["name"] = _ocr(shown["name"], rng)
    if rng.random() < rate:
        record["product_molar_mass_g_mol"] = None
    if rng.random() < rate:
        record["procedure"] = mixed_layout(reaction, components)
    if rng.random() < rate:
        record["procedure"] = _ocr(_ocr(record["procedure"], rng), rng)
    return record


def mixed_layout(reaction: Reaction, components: list[dict]) -> str:
    """The procedure as a chemist's notebook page: one sentence, then a table of the components as shown."""
    rows = "".join(f"| {c['name']} | {c['role'] or ''} | {c['amount_text']} |\n" for c in components)
    verb = next(c.verb for c in REACTION_CLASSES if c.name == reaction.reaction_class)
    return (f"{reaction.reaction_class[0].upper()}{reaction.reaction_class[1:]} (components in the table): the mixture "
            f"{verb} until complete; work-up gave the product in {reaction.yield_pct:g}% yield.\n\n"
            f"| component | role | amount |\n|---|---|---|\n{rows}")
