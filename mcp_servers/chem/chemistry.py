"""Structure facts from SMILES with RDKit: canonical form, InChIKey, formula, average molar mass.

Average molar mass (IUPAC standard atomic weights) is what stoichiometry needs: a gram of a real
sample holds the natural isotope mix. The monoisotopic mass (one isotope per element, what a mass
spectrometer sees) is reported beside it and is never the one to weigh reagents with.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_SMILES_LENGTH = 2000


class ChemistryInputError(ValueError):
    """A SMILES string RDKit cannot read, or one too long to be a reagent."""


@dataclass(frozen=True)
class StructureFacts:
    smiles: str
    inchikey: str
    formula: str
    molar_mass_g_mol: float
    monoisotopic_mass_da: float
    heavy_atoms: int


def parse_smiles(smiles: str):
    """The RDKit molecule of ``smiles``; ``ChemistryInputError`` when it is not valid SMILES."""
    from rdkit import Chem, rdBase

    rdBase.DisableLog("rdApp.*")
    text = smiles.strip()
    if not text:
        raise ChemistryInputError("empty SMILES")
    if len(text) > MAX_SMILES_LENGTH:
        raise ChemistryInputError(f"SMILES of {len(text)} characters is longer than the {MAX_SMILES_LENGTH} allowed")
    mol = Chem.MolFromSmiles(text)
    if mol is None or mol.GetNumAtoms() == 0:
        raise ChemistryInputError(f"{text[:80]!r} is not valid SMILES (check brackets, ring closures and valences)")
    return mol


def identity_of(smiles: str) -> StructureFacts:
    """Canonical SMILES, InChIKey, Hill formula, average and monoisotopic mass of ``smiles``."""
    from rdkit import Chem
    from rdkit.Chem import Descriptors, rdMolDescriptors

    mol = parse_smiles(smiles)
    return StructureFacts(smiles=Chem.MolToSmiles(mol), inchikey=Chem.MolToInchiKey(mol) or "",
                          formula=rdMolDescriptors.CalcMolFormula(mol),
                          # rdkit's stubs omit the descriptors Descriptors defines at import time
                          molar_mass_g_mol=round(Descriptors.MolWt(mol), 4),  # type: ignore[attr-defined]
                          monoisotopic_mass_da=round(rdMolDescriptors.CalcExactMolWt(mol), 4),
                          heavy_atoms=mol.GetNumHeavyAtoms())


def structure_of(smiles: str) -> StructureFacts:
    """``identity_of`` for a structure an agent gives: ``ChemistryInputError`` when it holds a wildcard
    atom ('*', atomic number 0), which has no mass, so a molar mass or an identity of it means nothing."""
    if any(atom.GetAtomicNum() == 0 for atom in parse_smiles(smiles).GetAtoms()):
        raise ChemistryInputError(f"{smiles.strip()[:80]!r} holds a wildcard atom '*', which has no mass or "
                                  "identity; give every atom, e.g. 'c1ccccc1Br' for bromobenzene")
    return identity_of(smiles)


def connectivity_key(inchikey: str) -> str:
    """The first InChIKey block: the skeleton, blind to stereochemistry and isotopes."""
    return inchikey.split("-")[0]
