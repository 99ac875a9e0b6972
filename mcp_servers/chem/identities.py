"""Real chemical identities for the catalogue, from the PubChem tables shipped in ``chemicals``.

Selection (deterministic), in this order until ``n_chemicals`` places are filled:

1. the curated alias table (``data/chem/aliases.json``);
2. every compound of the package's "small" PubChem table (its common chemicals);
3. every compound of its "large" table that the CRC Handbook's organic constants table (shipped in the
   same package) lists by CAS number: the compounds a handbook thought worth measuring;
4. building blocks from the large table: organic, neutral, one fragment, 6 to 30 heavy atoms of
   C H N O S P F Cl Br I B, no isotopes, with at least one reactive handle (aryl halide, boronic acid,
   amine, acid, aldehyde, ketone, alcohol, ester, nitrile, alkene, 4-halonitroarene). Of those, the
   ``BIFUNCTIONAL_QUOTA`` lowest-CID aryl halides that carry a second handle come first (they feed
   multi-step routes), then the ``HANDLE_QUOTA`` lowest PubChem CIDs of each handle (so rare handles
   such as boronic acids are represented; older CIDs are the long-known, widely sold compounds), then
   the rest in CID order.

Rows with an isotope label or a molar mass over 1,500 g/mol are skipped. Identity = RDKit canonical
SMILES + InChIKey; rows with the same canonical SMILES are merged (their names pooled). Average molar
mass comes from RDKit (IUPAC atomic weights). Densities of liquids at 25 °C come from the CRC organic
constants table. The price category is read from the structure (``classify``); a small-table or
handbook compound of at most 10 heavy atoms is a commodity.

``min(n_chemicals // BOC_SHARE, MAX_BOC_DERIVATIVES)`` places at the end of the kept rows go to N-Boc
building blocks derived from the selected amines (``boc_derivatives``): N-Boc amines are stock
catalogue items of every fine-chemical supplier, but the package's tables hold almost none, and
without them Boc deprotection has nothing to act on.

Every compound of the two tables that the selection leaves out is a ``KnownCompound``
(``known_compounds``): the catalogue does not sell it, but the grounder can say what it is
(name, CAS number, formula) instead of mistaking its name for a catalogue compound's.
"""

from __future__ import annotations

import csv
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gauntlet.mcp_servers.chem.aliases import ALIASES
from gauntlet.mcp_servers.chem.chemistry import identity_of
from gauntlet.mcp_servers.chem.names import search_keys
from gauntlet.mcp_servers.chem.store import LOADED_SUFFIX

MAX_NAMES_PER_CHEMICAL = 24
ROOM_TEMPERATURE_K = 298.15
BUILDING_BLOCK_ELEMENTS = frozenset("C H N O S P F Cl Br I B".split())
PRECIOUS_METALS = frozenset("Pd Pt Rh Ru Ir Au Ag Os".split())
# Reactive handles; the last is the SNAr template's electrophile (a 4-halonitroarene), a handle of its own
# so every building block a reaction template takes has one.
HANDLES = ("[c][Cl,Br,I]", "[c]B(O)O", "[NX3;H2,H1;!$(NC=O)]", "C(=O)[OH]", "[CX3H1](=O)[#6]",
           "[#6][CX3](=O)[#6]", "[CX4][OH]", "C(=O)O[#6]", "C#N", "C=C", "[F,Cl]c1ccc([N+](=O)[O-])cc1")
HANDLE_QUOTA = 40
# Bifunctional building blocks (an aryl bromide or iodide plus a group another template uses: acid,
# aldehyde, alkyl amine, primary alcohol) keep a handle after their first step, so multi-step routes
# can run e.g. amide coupling > Suzuki, or reductive amination > Boc protection > Suzuki > Boc
# deprotection. The lowest-CID ``BIFUNCTIONAL_QUOTA`` of them come before the per-handle quotas.
BIFUNCTIONAL_ARYL_HALIDE = "[c][Br,I]"
SECOND_HANDLES = ("C(=O)[OH]", "[CX3H1](=O)[#6]", "[NX3;H2,H1;!$(NC=O);!$(N-a)]", "[CH2][OH]")
BIFUNCTIONAL_QUOTA = 60
BOC_SHARE = 30
MAX_BOC_DERIVATIVES = 200
# At most this many common names of a compound the catalogue does not sell are kept for the grounder (the
# tables list common names first; a systematic name is read by OPSIN and found by its InChIKey instead).
MAX_NAMES_PER_KNOWN_COMPOUND = 6
COMMODITY_MAX_HEAVY_ATOMS = 10
BOC_AMINE = "[NX3;H2,H1;!$(NC=[O,S,N]);!$(N-a);!$(N[#7,#8,#16]);!$(N-C=C)]"
# An amine worth protecting carries no second group that Boc2O or a later step would also touch.
BOC_EXCLUDED_GROUPS = ("[CX3](=O)[OX2H1]", "[CX3H1](=O)[#6]", "[c]B([OH])[OH]", "S(=O)(=O)[OH]", "[OX2H1]",
                       "[SX2H1]")
BOC_ARYL_HALIDE = "[c][Br,I]"
BOC_MAX_HEAVY_ATOMS = 18
CAS_PATTERN = re.compile(r"^\d{2,7}-\d{2}-\d$")


@dataclass
class Identity:
    """One catalogue chemical before pricing."""

    name: str
    smiles: str
    inchikey: str
    formula: str
    molar_mass_g_mol: float
    cas: str | None
    category: str
    source: str
    pubchem_cid: int | None = None
    iupac_name: str | None = None
    density_g_ml: float | None = None
    note: str = ""
    names: list[tuple[str, str]] = field(default_factory=list)  # (name, kind)
    table_keys: set[str] = field(default_factory=set)  # the tables' InChIKeys of every row merged here

    def add_name(self, name: str, kind: str) -> None:
        name = " ".join(name.split())
        if name and len(self.names) < MAX_NAMES_PER_CHEMICAL and all(n.casefold() != name.casefold()
                                                                       for n, _ in self.names):
            self.names.append((name, kind))


def package_root() -> Path:
    import chemicals

    return Path(chemicals.__file__).parent


def pubchem_rows(table: str) -> Iterator[list[str]]:
    """Rows of a ``chemicals`` PubChem table: cid, CAS, formula, MW, SMILES, InChI, InChIKey, IUPAC, names..."""
    path = package_root() / "Identifiers" / f"chemical identifiers pubchem {table}.tsv"
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            values = line.rstrip("\n").split("\t")
            if len(values) >= 9:
                yield values


def crc_liquid_densities() -> dict[str, float]:
    """CAS -> density (g/mL) of compounds liquid at 25 °C in the CRC organic constants table."""
    path = package_root() / "Misc" / "Physical Constants of Organic Compounds.csv"
    densities = {}
    with open(path, encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            try:
                melting, boiling, rho = float(row["Tm"]), float(row["Tb"]), float(row["rho"])
            except (TypeError, ValueError):
                continue
            if melting < ROOM_TEMPERATURE_K < boiling and 300.0 < rho < 4000.0:
                densities[row["CAS"]] = round(rho / 1000.0, 4)
    return densities


def classify(mol, common: bool) -> str:
    """Price-model category from structure: catalyst (precious metal), inorganic, ligand, commodity (a
    ``common`` compound, of the small table or the handbook, with at most 10 heavy atoms) or fine."""
    symbols = {atom.GetSymbol() for atom in mol.GetAtoms()}
    if symbols & PRECIOUS_METALS:
        return "catalyst"
    if "C" not in symbols:
        return "inorganic"
    aromatic_rings = sum(1 for ring in mol.GetRingInfo().AtomRings()
                         if all(mol.GetAtomWithIdx(i).GetIsAromatic() for i in ring))
    if "P" in symbols and aromatic_rings >= 2:
        return "ligand"
    if common and mol.GetNumHeavyAtoms() <= COMMODITY_MAX_HEAVY_ATOMS:
        return "commodity"
    return "fine"


def _is_building_block(mol) -> bool:
    """Organic, neutral, one fragment, 6-30 heavy atoms of the building-block elements, no isotopes."""
    from rdkit import Chem

    heavy = mol.GetNumHeavyAtoms()
    if not 6 <= heavy <= 30 or len(Chem.GetMolFrags(mol)) != 1:
        return False
    return all(atom.GetSymbol() in BUILDING_BLOCK_ELEMENTS and not atom.GetIsotope() and not atom.GetFormalCharge()
               for atom in mol.GetAtoms())


def select_identities(n_chemicals: int) -> list[Identity]:
    """The first ``n_chemicals`` identities in selection order (see the module docstring)."""
    from rdkit import Chem, rdBase

    rdBase.DisableLog("rdApp.*")
    densities = crc_liquid_densities()
    handbook = handbook_cas_numbers()
    by_smiles: dict[str, Identity] = {}
    ordered: list[Identity] = []

    def add(identity: Identity) -> None:
        by_smiles[identity.smiles] = identity
        ordered.append(identity)

    for alias in ALIASES:
        facts = identity_of(alias.smiles)
        identity = Identity(name=alias.name, smiles=facts.smiles, inchikey=facts.inchikey, formula=facts.formula,
                            molar_mass_g_mol=alias.molar_mass_g_mol or facts.molar_mass_g_mol, cas=alias.cas,
                            category=alias.category, source="curated", density_g_ml=alias.density_g_ml,
                            note=alias.note)
        if alias.molar_mass_g_mol:  # a loading-sold catalyst is its own identity, not the bare metal
            identity.inchikey = f"{facts.inchikey}{LOADED_SUFFIX}"
        identity.add_name(alias.name, "name")
        for abbreviation in alias.abbreviations:
            identity.add_name(abbreviation, "abbreviation")
        for synonym in alias.synonyms:
            identity.add_name(synonym, "synonym")
        if alias.cas:
            identity.add_name(alias.cas, "cas")
        if alias.molar_mass_g_mol:
            ordered.append(identity)  # shares its SMILES with the bare metal on purpose
        else:
            add(identity)

    patterns = [Chem.MolFromSmarts(s) for s in HANDLES]
    for values in _candidate_rows(patterns, handbook):
        if len(ordered) >= n_chemicals:
            break
        table, (cid, cas, _formula, _mw, smiles, _inchi, table_key, iupac, *names) = values
        mol = Chem.MolFromSmiles(smiles)
        if mol is None or mol.GetNumHeavyAtoms() == 0 or any(atom.GetIsotope() for atom in mol.GetAtoms()):
            continue
        facts = identity_of(smiles)
        known = by_smiles.get(facts.smiles)
        if known is None:
            if facts.molar_mass_g_mol > 1500:
                continue
            common_name = names[0] if names else iupac
            known = Identity(name=common_name, smiles=facts.smiles, inchikey=facts.inchikey,
                             formula=facts.formula, molar_mass_g_mol=facts.molar_mass_g_mol,
                             cas=cas if CAS_PATTERN.match(cas) else None,
                             category=classify(mol, table == "small" or cas in handbook),
                             source=f"pubchem-{table}",
                             pubchem_cid=int(cid) if int(cid) > 0 else None, iupac_name=iupac or None,
                             density_g_ml=densities.get(cas))
            known.add_name(common_name, "name")
            add(known)
        elif known.pubchem_cid is None and int(cid) > 0:
            known.pubchem_cid, known.iupac_name = int(cid), iupac or None
            if known.density_g_ml is None:
                known.density_g_ml = densities.get(cas)
        known.table_keys.add(table_key)
        # Identifiers before synonyms: a compound with many synonyms keeps its CAS number and IUPAC name.
        if CAS_PATTERN.match(cas):
            known.add_name(cas, "cas")
        if iupac:
            known.add_name(iupac, "iupac")
        for name in names:
            known.add_name(name, "synonym")
    quota = min(n_chemicals // BOC_SHARE, MAX_BOC_DERIVATIVES)
    kept = ordered[:n_chemicals - quota]
    derived = [d for d in boc_derivatives(kept, quota) if d.smiles not in by_smiles]
    return kept + derived + ordered[len(kept):n_chemicals - len(derived)]


def boc_derivatives(identities: list[Identity], limit: int) -> list[Identity]:
    """Up to ``limit`` N-Boc forms of the selected amines (one primary or secondary alkyl amine, no other
    nucleophile or acid), those that also carry an aryl bromide or iodide first (they feed Suzuki and
    Buchwald-Hartwig steps in multi-step routes), then in selection order. Named "N-Boc-<amine name>",
    the way catalogues list them."""
    from rdkit import Chem
    from rdkit.Chem import rdChemReactions

    amine = Chem.MolFromSmarts(BOC_AMINE)
    protect = rdChemReactions.ReactionFromSmarts(f"{BOC_AMINE[:-1]}:1]>>CC(C)(C)OC(=O)[N:1]")
    excluded = [Chem.MolFromSmarts(p) for p in BOC_EXCLUDED_GROUPS]
    aryl_halide = Chem.MolFromSmarts(BOC_ARYL_HALIDE)
    candidates: list[tuple[bool, int, Identity, Any]] = []  # Any: an RDKit Mol (untyped)
    for identity in identities:
        if identity.source == "curated" or "." in identity.smiles:
            continue
        mol = Chem.MolFromSmiles(identity.smiles)
        if mol is None or not 4 <= mol.GetNumHeavyAtoms() <= BOC_MAX_HEAVY_ATOMS:
            continue
        sites = mol.GetSubstructMatches(amine)
        if len(sites) != 1 or any(mol.HasSubstructMatch(q) for q in excluded):
            continue
        candidates.append((not mol.HasSubstructMatch(aryl_halide), len(candidates), identity, mol))
    derived: list[Identity] = []
    for _, _, identity, mol in sorted(candidates, key=lambda c: c[:2]):
        if len(derived) == limit:
            break
        product = protect.RunReactants((mol,))[0][0]
        try:
            Chem.SanitizeMol(product)
        except Exception:  # a valence RDKit rejects: no Boc form for this amine
            continue
        facts = identity_of(Chem.MolToSmiles(product))
        name = f"N-Boc-{identity.name}"
        protected = Identity(name=name, smiles=facts.smiles, inchikey=facts.inchikey, formula=facts.formula,
                             molar_mass_g_mol=facts.molar_mass_g_mol, cas=None, category="fine", source="derived",
                             note=f"N-Boc form of {identity.name} (catalogue item; structure derived with RDKit)")
        protected.add_name(name, "name")
        protected.add_name(f"Boc-{identity.name}", "synonym")
        derived.append(protected)
    return derived


def handbook_cas_numbers() -> set[str]:
    """CAS numbers of every compound of the CRC organic constants table."""
    path = package_root() / "Misc" / "Physical Constants of Organic Compounds.csv"
    with open(path, encoding="utf-8") as handle:
        return {row["CAS"] for row in csv.DictReader(handle, delimiter="\t")}


def _candidate_rows(patterns, handbook: set[str]) -> Iterator[tuple[str, list[str]]]:
    """Rows of the small table, then the handbook compounds of the large table, then its building blocks:
    first the lowest-CID bifunctional aryl halides, then the lowest-CID ``HANDLE_QUOTA`` of each reactive
    handle (so rare handles such as boronic acids are represented), then the rest in CID order."""
    from rdkit import Chem

    for values in pubchem_rows("small"):
        yield "small", values
    taken: set[str] = set()
    for values in pubchem_rows("large"):
        if values[1] in handbook:
            taken.add(values[0])
            yield "large", values
    aryl_halide = Chem.MolFromSmarts(BIFUNCTIONAL_ARYL_HALIDE)
    second = [Chem.MolFromSmarts(p) for p in SECOND_HANDLES]
    blocks, bifunctional = [], []
    for values in pubchem_rows("large"):
        if values[0] in taken or not (6 <= _heavy_atom_estimate(values[4]) <= 30):
            continue
        mol = Chem.MolFromSmiles(values[4])
        if mol is not None and _is_building_block(mol):
            blocks.append((values, [i for i, p in enumerate(patterns) if mol.HasSubstructMatch(p)]))
            if mol.HasSubstructMatch(aryl_halide) and any(mol.HasSubstructMatch(q) for q in second):
                bifunctional.append(values)
    blocks = [(values, handles) for values, handles in blocks if handles]
    blocks.sort(key=lambda item: int(item[0][0]))
    for values in sorted(bifunctional, key=lambda v: int(v[0]))[:BIFUNCTIONAL_QUOTA]:
        taken.add(values[0])
        yield "large", values
    for index in range(len(patterns)):
        for values, _ in [item for item in blocks if index in item[1]][:HANDLE_QUOTA]:
            if values[0] not in taken:
                taken.add(values[0])
                yield "large", values
    for values, _ in blocks:
        if values[0] not in taken:
            yield "large", values


@dataclass(frozen=True)
class KnownCompound:
    """A compound of the PubChem tables that the catalogue does not sell (identity as the table gives it)."""

    name: str
    cas: str | None
    formula: str
    inchikey: str
    pubchem_cid: int | None
    names: tuple[str, ...]
    search_keys: tuple[str, ...]  # the name and compact keys of ``names``, sorted


def known_compounds(identities: list[Identity]) -> Iterator[KnownCompound]:
    """Every compound of the small and large tables that none of ``identities`` is (by the tables' InChIKey,
    or RDKit's), once per InChIKey, in table order; at most ``MAX_NAMES_PER_KNOWN_COMPOUND`` names each."""
    sold = {identity.inchikey for identity in identities}
    for identity in identities:
        sold |= identity.table_keys
    return (compound for compound in _table_compounds() if compound.inchikey not in sold)


@functools.lru_cache(maxsize=1)
def _table_compounds() -> tuple[KnownCompound, ...]:
    """Every compound of the two tables once per InChIKey, in table order, with its search keys: the same
    for every catalogue, so a process that builds several catalogues reads the tables once."""
    compounds, seen = [], set()
    for table in ("small", "large"):
        for cid, cas, formula, _mw, _smiles, _inchi, key, iupac, *names in pubchem_rows(table):
            if key in seen:
                continue
            seen.add(key)
            spellings = list(dict.fromkeys(" ".join(n.split()) for n in names[:2 * MAX_NAMES_PER_KNOWN_COMPOUND]
                                           if n.strip()))[:MAX_NAMES_PER_KNOWN_COMPOUND]
            compounds.append(KnownCompound(
                name=spellings[0] if spellings else iupac or key, cas=cas if CAS_PATTERN.match(cas) else None,
                formula=formula, inchikey=key, pubchem_cid=int(cid) if int(cid) > 0 else None, names=tuple(spellings),
                search_keys=tuple(sorted({k for spelling in spellings for k in search_keys(spelling)}))))
    return tuple(compounds)


def _heavy_atom_estimate(smiles: str) -> int:
    """Letters that start an atom symbol, minus hydrogens: a cheap upper bound used before parsing."""
    return sum(1 for ch in smiles if ch.isupper() and ch != "H") + sum(1 for ch in smiles if ch in "cnos")
