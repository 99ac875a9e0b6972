"""Reaction generator: RDKit reaction templates of real reaction classes applied to catalogue building blocks.

Each reaction is one synthetic step as a chemist would write it: a limiting reagent (1.0 equiv), a
partner in slight excess, the reagents, catalysts, ligands and bases of a standard protocol for its
class in the usual stoichiometry (equivalents, or mol% for catalysts), a solvent at a stated volume
per mmol, a stated isolated yield, the product (SMILES, from RDKit's ``RunReactants``) and a
procedure text. Conditions follow textbook protocols (HATU/DIPEA in DMF, Pd(dppf)Cl2/K2CO3 in
dioxane-water, Pd2(dba)3/XPhos/NaOtBu in toluene, NaBH(OAc)3/AcOH in DCE, ...). Generation is seeded
and deterministic; which building blocks a class uses depends only on the catalogue.

A reaction names each component by a spelling that grounds to exactly one catalogue chemical with
full confidence (its preferred name, a registered abbreviation, or its CAS number); the chemical ids
are kept beside the record for the scorer and never shown to an agent.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from gauntlet.mcp_servers.chem.chemistry import identity_of
from gauntlet.mcp_servers.chem.grounding import Grounder, GroundingError
from gauntlet.mcp_servers.chem.store import CatalogueStore

if TYPE_CHECKING:
    from rdkit.Chem.rdChemReactions import ChemicalReaction

SOLVENT_ML_PER_MMOL = (2.0, 4.0, 5.0, 10.0)
YIELD_RANGE_PCT = (42, 96)
MAX_BLOCK_HEAVY_ATOMS = 20
# A building block may carry only the group its reaction uses: a second acid, amine, aldehyde or
# boronic acid would compete and no chemist would run the step as written.
COMPETING_GROUPS = ("[CX3](=O)[OX2H1]", "[NX3;H2,H1;!$(NC=[O,S,N]);!$(N[#7,#8,#16])]", "[CX3H1](=O)[#6]",
                    "[c]B([OH])[OH]", "S(=O)(=O)[OH]")
MAX_FAILED_DRAWS = 300


@dataclass(frozen=True)
class Condition:
    """A reagent of a protocol: its catalogue spelling, role and amount (equiv; mol% written as equiv / 100)."""

    name: str
    role: str
    equiv: float | None = None
    solvent: bool = False


@dataclass(frozen=True)
class ReactionClass:
    name: str
    template: str  # reaction SMARTS, reactants in the order limiting reagent, partner
    reactant_patterns: tuple[str, ...]
    protocols: tuple[tuple[Condition, ...], ...]
    partner_equiv: tuple[float, ...] = (1.1, 1.2, 1.5)
    verb: str = "was stirred"
    # per reactant slot, groups that reactant must not carry (they would react with the other slot's
    # group under the class's conditions: a boronic acid that is also an aryl bromide self-couples)
    excluded_groups: tuple[tuple[str, ...], ...] = ()


PRIMARY_OR_SECONDARY_AMINE = "[NX3;H2,H1;!$(NC=[O,S,N]);!$(N-a);!$(N[#7,#8,#16]);!$(N-C=C)]"
ACID = "[CX3](=O)[OX2H1]"
ARYL_HALIDE = "[c;!$(c[c,n][N+](=O)[O-])][Br,I]"
ANY_ARYL_HALIDE = "c[Br,I]"


def mapped(atom_pattern: str, number: int) -> str:
    """A one-atom SMARTS with an atom map, so a template reacts at the atom its pool was chosen for
    (a bare ``[N:1]`` would also match an amide, nitrile or nitro nitrogen)."""
    return f"{atom_pattern[:-1]}:{number}]"


AMINE_3 = mapped(PRIMARY_OR_SECONDARY_AMINE, 3)

REACTION_CLASSES: tuple[ReactionClass, ...] = (
    ReactionClass("amide coupling", f"[C:1](=[O:2])[OX2H1].{AMINE_3}>>[C:1](=[O:2])[N:3]",
                  (ACID, PRIMARY_OR_SECONDARY_AMINE),
                  ((Condition("HATU", "coupling reagent", 1.2), Condition("DIPEA", "base", 3.0),
                    Condition("DMF", "solvent", solvent=True)),
                   (Condition("EDC", "coupling reagent", 1.5), Condition("HOBt", "additive", 1.5),
                    Condition("DIPEA", "base", 3.0), Condition("DCM", "solvent", solvent=True)),
                   (Condition("HBTU", "coupling reagent", 1.2), Condition("TEA", "base", 3.0),
                    Condition("DMF", "solvent", solvent=True)))),
    ReactionClass("Steglich esterification", "[C:1](=[O:2])[OX2H1].[CH2:3][OH:4]>>[C:1](=[O:2])[O:4][CH2:3]",
                  (ACID, "[CH2;!$(C[O,N]C=O)][OX2H1]"),
                  ((Condition("EDC", "coupling reagent", 1.5), Condition("DMAP", "catalyst", 0.1),
                    Condition("DCM", "solvent", solvent=True)),
                   (Condition("DCC", "coupling reagent", 1.2), Condition("DMAP", "catalyst", 0.1),
                    Condition("DCM", "solvent", solvent=True)))),
    ReactionClass("Suzuki coupling", "[c:1][Br,I].[c:2]B(O)O>>[c:1]-[c:2]", (ARYL_HALIDE, "[c]B([OH])[OH]"),
                  ((Condition("Pd(dppf)Cl2", "catalyst", 0.05), Condition("K2CO3", "base", 2.0),
                    Condition("dioxane", "solvent", solvent=True)),
                   (Condition("Pd(PPh3)4", "catalyst", 0.05), Condition("Cs2CO3", "base", 2.0),
                    Condition("DME", "solvent", solvent=True)),
                   (Condition("Pd(OAc)2", "catalyst", 0.02), Condition("SPhos", "ligand", 0.04),
                    Condition("K3PO4", "base", 2.0), Condition("toluene", "solvent", solvent=True))),
                  partner_equiv=(1.2, 1.3, 1.5), verb="was heated at 90 °C",
                  excluded_groups=((), (ANY_ARYL_HALIDE,))),
    ReactionClass("Buchwald-Hartwig amination", f"[c:1][Br,I].{AMINE_3}>>[c:1]-[N:3]",
                  (ARYL_HALIDE, PRIMARY_OR_SECONDARY_AMINE),
                  ((Condition("Pd2(dba)3", "catalyst", 0.02), Condition("XPhos", "ligand", 0.08),
                    Condition("NaOtBu", "base", 1.4), Condition("toluene", "solvent", solvent=True)),
                   (Condition("Pd(OAc)2", "catalyst", 0.05), Condition("BINAP", "ligand", 0.075),
                    Condition("Cs2CO3", "base", 1.5), Condition("dioxane", "solvent", solvent=True)),
                   (Condition("Pd2(dba)3", "catalyst", 0.02), Condition("RuPhos", "ligand", 0.04),
                    Condition("NaOtBu", "base", 1.4), Condition("THF", "solvent", solvent=True))),
                  verb="was heated at 100 °C", excluded_groups=((), (ANY_ARYL_HALIDE,))),
    ReactionClass("reductive amination", f"[CX3H1:1](=O)[#6:2].{AMINE_3}>>[CH2:1]([#6:2])[N:3]",
                  ("[CX3H1](=O)[#6]", PRIMARY_OR_SECONDARY_AMINE),
                  ((Condition("NaBH(OAc)3", "reductant", 1.5), Condition("AcOH", "acid", 1.0),
                    Condition("DCE", "solvent", solvent=True)),
                   (Condition("NaBH3CN", "reductant", 1.5), Condition("AcOH", "acid", 1.0),
                    Condition("MeOH", "solvent", solvent=True)))),
    ReactionClass("SNAr", "[F,Cl][c:1]1[c:2][c:3][c:4]([N+:5](=[O:6])[O-:7])[c:8][c:9]1."
                          f"{mapped(PRIMARY_OR_SECONDARY_AMINE, 10)}>>"
                          "[N:10][c:1]1[c:2][c:3][c:4]([N+:5](=[O:6])[O-:7])[c:8][c:9]1",
                  ("[F,Cl]c1ccc([N+](=O)[O-])cc1", PRIMARY_OR_SECONDARY_AMINE),
                  ((Condition("K2CO3", "base", 2.0), Condition("DMF", "solvent", solvent=True)),
                   (Condition("DIPEA", "base", 2.0), Condition("DMSO", "solvent", solvent=True))),
                  verb="was heated at 80 °C"),
    ReactionClass("Boc protection", f"{AMINE_3}>>CC(C)(C)OC(=O)[N:3]", (PRIMARY_OR_SECONDARY_AMINE,),
                  ((Condition("Boc2O", "reagent", 1.1), Condition("TEA", "base", 1.5),
                    Condition("DCM", "solvent", solvent=True)),
                   (Condition("Boc2O", "reagent", 1.2), Condition("DMAP", "catalyst", 0.1),
                    Condition("MeCN", "solvent", solvent=True)))),
    ReactionClass("Boc deprotection", "[N:1]-!@C(=O)-!@O-!@C([CH3])([CH3])[CH3]>>[N:1]",
                  ("[NX3]-!@C(=O)-!@O-!@C([CH3])([CH3])[CH3]",),
                  ((Condition("TFA", "acid", 10.0), Condition("DCM", "solvent", solvent=True)),)),
    ReactionClass("Grignard addition", "[CX3H1:1](=[O:2])[c:3]>>[CH1:1]([OH1:2])([c:3])c1ccccc1",
                  ("[CX3H1](=O)c",),
                  ((Condition("PhMgBr", "reagent", 1.5), Condition("THF", "solvent", solvent=True)),),
                  verb="was stirred at 0 °C"),
    ReactionClass("Wittig olefination", "[CX3H1:1](=O)[c:2]>>[c:2]/[CH1:1]=[CH1]/C(=O)OCC", ("[CX3H1](=O)c",),
                  ((Condition("Ph3P=CHCO2Et", "reagent", 1.2), Condition("toluene", "solvent", solvent=True)),
                   (Condition("Ph3P=CHCO2Et", "reagent", 1.3), Condition("DCM", "solvent", solvent=True)))),
    ReactionClass("Fischer esterification", "[C:1](=[O:2])[OX2H1]>>[C:1](=[O:2])OC", (ACID,),
                  ((Condition("methanol", "solvent", solvent=True), Condition("sulfuric acid", "catalyst", 0.1)),),
                  verb="was heated at reflux"),
)


INTERMEDIATE_ROLE = "intermediate"
REACTANT_ROLES = ("limiting reagent", INTERMEDIATE_ROLE, "coupling partner")


@dataclass
class Component:
    """A component of a step; an intermediate of a route (made by the step before) has no catalogue id."""

    name: str
    role: str
    chemical_id: int | None
    equiv: float | None = None
    volume_ml_per_mmol: float | None = None

    @property
    def is_solvent(self) -> bool:
        return self.volume_ml_per_mmol is not None

    @property
    def is_intermediate(self) -> bool:
        return self.role == INTERMEDIATE_ROLE

    def equivalents(self) -> float:
        """The equivalents of a component dosed by amount (a solvent states a volume instead)."""
        if self.equiv is None:
            raise ValueError(f"{self.name!r} states no equivalents")
        return self.equiv


@dataclass
class Reaction:
    reaction_id: str
    reaction_class: str
    components: list[Component]
    product_smiles: str
    product_molar_mass_g_mol: float
    yield_pct: float
    procedure: str

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Reaction:
        data = dict(data)
        data["components"] = [Component(**component) for component in data["components"]]
        return cls(**data)


def spelling_for(grounder: Grounder, chemical_id: int) -> str | None:
    """A spelling of the chemical that grounds to it alone with full confidence, or None."""
    record = grounder.store.chemical(chemical_id)
    names = grounder.store.names_of(chemical_id)
    options = [n for n, kind in names if kind == "abbreviation"][:1] + [record.name]
    options += [n for n, kind in names if kind == "cas"] + [record.smiles]
    for option in options:
        try:
            found = grounder.search(option, limit=2)
        except GroundingError:
            continue
        if found[0].chemical_id == chemical_id and found[0].confidence == 1.0 and (
                len(found) == 1 or found[1].confidence < 1.0):
            return option
    return None


def procedure_text(reaction_class: ReactionClass, components: list[Component], yield_pct: float) -> str:
    reactants = [c for c in components if c.role in REACTANT_ROLES]
    others = [c for c in components if c not in reactants and not c.is_solvent]
    solvent = next((c for c in components if c.is_solvent), None)
    parts = [f"{c.name} ({c.equivalents():g} equiv)" for c in reactants]
    extras = [f"{c.name} ({c.equivalents() * 100:g} mol%)" if c.equivalents() < 0.5
              else f"{c.name} ({c.equivalents():g} equiv)" for c in others]
    text = f"{' and '.join(parts)}"
    if solvent is not None:
        text += f" in {solvent.name} ({solvent.volume_ml_per_mmol:g} mL per mmol)"
    if extras:
        text += f" with {', '.join(extras)}"
    return (f"{reaction_class.name[0].upper()}{reaction_class.name[1:]}: {text} {reaction_class.verb} until complete. "
            f"Work-up and purification gave the product in {yield_pct:g}% yield.")


class StepFactory:
    """What every generator of steps needs: the building blocks, each class's reactant pools and
    grounded protocols, a fit test for a reactant, and a way to run a template and write the step."""

    def __init__(self, catalogue: CatalogueStore):
        from rdkit import Chem, rdBase
        from rdkit.Chem import rdChemReactions

        rdBase.DisableLog("rdApp.*")
        self.catalogue = catalogue
        self.grounder = Grounder(catalogue, use_opsin=False)
        blocks = [(chemical_id, smiles) for chemical_id, smiles in catalogue.all_structures()
                  if catalogue.chemical(chemical_id).source != "curated" and "." not in smiles]
        self.molecules = {chemical_id: Chem.MolFromSmiles(smiles) for chemical_id, smiles in blocks}
        self._spellings: dict[int, str | None] = {}
        self._competing = [Chem.MolFromSmarts(p) for p in COMPETING_GROUPS]
        self.classes: list[ClassKit] = []
        for reaction_class in REACTION_CLASSES:
            patterns = [Chem.MolFromSmarts(p) for p in reaction_class.reactant_patterns]
            excluded = [[Chem.MolFromSmarts(p) for p in groups] for groups in reaction_class.excluded_groups]
            excluded += [[] for _ in range(len(patterns) - len(excluded))]
            pools = [[cid for cid, mol in self.molecules.items() if self.fits(mol, pattern, excluded=excluded[slot])]
                     for slot, pattern in enumerate(patterns)]
            protocols = []
            for protocol in reaction_class.protocols:
                ids = [self.grounder.search(c.name, limit=1)[0].chemical_id for c in protocol]
                protocols.append(list(zip(protocol, ids)))
            self.classes.append(ClassKit(reaction_class, rdChemReactions.ReactionFromSmarts(reaction_class.template),
                                         patterns, pools, protocols, excluded))

    def spelling(self, chemical_id: int) -> str | None:
        if chemical_id not in self._spellings:
            self._spellings[chemical_id] = spelling_for(self.grounder, chemical_id)
        return self._spellings[chemical_id]

    def spellings(self, chemical_ids: Iterable[int]) -> list[str] | None:
        """The spelling of every chemical, or None when one of them has none."""
        names = [self.spelling(chemical_id) for chemical_id in chemical_ids]
        known = [name for name in names if name is not None]
        return known if len(known) == len(names) else None

    def fits(self, mol, pattern, max_heavy_atoms: int = MAX_BLOCK_HEAVY_ATOMS, excluded=()) -> bool:
        """One site for the template, no competing group beyond the one the template uses, and none of
        the ``excluded`` groups of the reactant's slot."""
        sites = mol.GetSubstructMatches(pattern)
        if len(sites) != 1 or not 6 <= mol.GetNumHeavyAtoms() <= max_heavy_atoms:
            return False
        if any(mol.HasSubstructMatch(group) for group in excluded):
            return False
        groups = [set(m) for q in self._competing for m in mol.GetSubstructMatches(q)]
        return all(group & set(sites[0]) for group in groups)

    @staticmethod
    def run(kit: ClassKit, reactants: tuple):
        """The product's structure facts, or None when the template gives nothing RDKit can sanitise."""
        from rdkit import Chem

        products = kit.template.RunReactants(reactants)
        if not products:
            return None
        product = products[0][0]
        try:
            Chem.SanitizeMol(product)
            facts = identity_of(Chem.MolToSmiles(product))
        except Exception:  # a template product RDKit cannot sanitise is not a real product: draw again
            return None
        return facts if facts.heavy_atoms >= 4 else None

    @staticmethod
    def conditions(kit: ClassKit, rng: random.Random) -> list[Component]:
        """The reagents, catalysts and solvent of one of the class's protocols, drawn with ``rng``."""
        components = []
        for condition, chemical_id in rng.choice(kit.protocols):
            if condition.solvent:
                components.append(Component(condition.name, "solvent", chemical_id,
                                            volume_ml_per_mmol=rng.choice(SOLVENT_ML_PER_MMOL)))
            else:
                components.append(Component(condition.name, condition.role, chemical_id, equiv=condition.equiv))
        return components


@dataclass
class ClassKit:
    """A reaction class ready to draw from: compiled template and patterns, reactant pools, protocols."""

    reaction_class: ReactionClass
    template: ChemicalReaction
    patterns: list
    pools: list[list[int]]
    protocols: list[list[tuple[Condition, int]]]
    excluded: list[list] = field(default_factory=list)  # per slot: compiled ``ReactionClass.excluded_groups``
    failures: int = 0


def generate_reactions(catalogue: CatalogueStore, n_reactions: int, seed: int,
                       factory: StepFactory | None = None) -> list[Reaction]:
    """``n_reactions`` single-step reactions, spread over the classes that the catalogue can feed."""
    factory = factory or StepFactory(catalogue)
    rng = random.Random(f"{seed}|reactions")
    usable = [kit for kit in factory.classes if all(kit.pools)]
    for kit in usable:
        kit.failures = 0
    reactions: list[Reaction] = []
    seen: set[tuple] = set()
    turn = 0
    while len(reactions) < n_reactions and usable:
        kit = usable[turn % len(usable)]
        turn += 1
        if kit.failures > MAX_FAILED_DRAWS:  # this class has run out of new reactant combinations
            usable.remove(kit)
            continue
        kit.failures += 1
        reaction_class = kit.reaction_class
        reactant_ids = [rng.choice(pool) for pool in kit.pools]
        key = (reaction_class.name, *reactant_ids)
        if key in seen or len(set(reactant_ids)) != len(reactant_ids):
            continue
        seen.add(key)
        facts = factory.run(kit, tuple(factory.molecules[cid] for cid in reactant_ids))
        if facts is None:
            continue
        names = factory.spellings(reactant_ids)
        if names is None:
            continue
        components = [Component(names[0], "limiting reagent", reactant_ids[0], equiv=1.0)]
        if len(reactant_ids) > 1:
            components.append(Component(names[1], "coupling partner", reactant_ids[1],
                                        equiv=rng.choice(reaction_class.partner_equiv)))
        components += factory.conditions(kit, rng)
        kit.failures = 0
        yield_pct = float(rng.randint(*YIELD_RANGE_PCT))
        reactions.append(Reaction(reaction_id=f"RXN-{len(reactions) + 1:04d}", reaction_class=reaction_class.name,
                                  components=components, product_smiles=facts.smiles,
                                  product_molar_mass_g_mol=facts.molar_mass_g_mol, yield_pct=yield_pct,
                                  procedure=procedure_text(reaction_class, components, yield_pct)))
    return reactions
