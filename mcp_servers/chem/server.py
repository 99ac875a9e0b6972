"""The chemical procurement pricing MCP server: ground chemicals, read supplier quotes, buy packs.

    gauntlet serve chem                                              # stdio
    gauntlet serve chem --transport http --port 8000
    gauntlet serve chem --server-kwargs '{"db_path": "catalogue.sqlite", "reactions_dir": "reactions"}'

Built by the server recipe (``gauntlet.bridges.tool_server``): every tool is a function of the
``Chem`` state (the catalogue, its indexes and the reaction set) and the agent's arguments. Tools
are thin: each calls a domain module (grounding, procurement, quantities, chemistry, calculator,
reactions) and returns a pydantic model. The domain errors in ``DOMAIN_ERRORS`` are the agent's to
fix (their messages say how); anything else is a bug, logged on the server. The catalogue database
is opened read-only.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

from pydantic import BaseModel, Field

from gauntlet.bridges.tool_server import ResultRewrite, ToolServer, ToolSet
from gauntlet.mcp_servers.chem import calculator, chemistry, grounding, procurement, quantities, store
from gauntlet.mcp_servers.chem import reaction_tools
from gauntlet.mcp_servers.chem.pricing import Quote
from gauntlet.mcp_servers.chem.reaction_tools import READ_ONLY, open_reaction_set
from gauntlet.mcp_servers.chem.similarity import SimilarityIndex

if TYPE_CHECKING:
    from gauntlet.mcp_servers.chem.reaction_data import ReactionSet

MAX_QUOTES = 200
# The domain's "cannot serve this request as asked" errors; their messages say what to change.
DOMAIN_ERRORS = (grounding.GroundingError, chemistry.ChemistryInputError, quantities.QuantityError,
                 procurement.ProcurementError, calculator.CalculationError, store.UnknownChemicalError)
PhysicalState = Literal["solid", "liquid"]


# Results -----------------------------------------------------------------------------------------
class Candidate(BaseModel):
    chemical_id: int = Field(description="catalogue id; pass it to get_chemical, get_supplier_quotes, select_pack")
    name: str
    smiles: str = Field(description="RDKit canonical SMILES")
    cas: str | None
    molar_mass_g_mol: float = Field(description="average molar mass, g/mol (per mol of metal for loaded catalysts)")
    confidence: float = Field(description="how surely the query names this compound, by match kind: 1.0 an exact "
                                          "identifier or preferred name, 0.95 a listed synonym or a parsed "
                                          "systematic name, 0.9 a normalised spelling, 0.8 a corrected slip")
    match_kind: grounding.MatchKind = Field(description="identifier (CAS, InChIKey, SMILES), name (preferred name "
                                                        "or abbreviation), synonym, normalised, parsed name "
                                                        "(systematic name read as a structure) or fuzzy (an "
                                                        "OCR-like confusion or one typing slip corrected)")
    matched_on: str = Field(description="the spelling or reading the query matched")


class Suggestion(BaseModel):
    """A catalogue compound near the query that the query does NOT identify: check before using it."""

    chemical_id: int
    name: str
    smiles: str = Field(description="RDKit canonical SMILES")
    cas: str | None
    kind: grounding.SuggestionKind = Field(description="ambiguous (the name is shared by several compounds), "
                                                       "stereo form (same skeleton, other stereochemistry) or "
                                                       "similar spelling (another compound's name a few edits away)")
    reason: str
    confidence: float = Field(description=f"below {grounding.HIT_THRESHOLD}: not an identification")


class KnownCompound(BaseModel):
    """What the query names when that compound is known but this catalogue does not sell it."""

    name: str
    cas: str | None
    formula: str
    pubchem_cid: int | None


class SearchResult(BaseModel):
    query: str
    found: bool = Field(description="true: candidates[0] is the compound the query names; false: no catalogue "
                                    "compound is, and suggestions are other compounds, never the answer")
    candidates: list[Candidate] = Field(description="the identified compound (one), empty when found is false")
    suggestions: list[Suggestion] = Field(description="when not found: compounds near the query, for you to check "
                                                      "(by SMILES or CAS) before using one")
    known_compound: KnownCompound | None = Field(description="when not found: the compound the query names, if it "
                                                             "is known but not sold here")
    parsed_smiles: str | None = Field(description="when not found: the structure read from the query, if any (use "
                                                  "it with similar_chemicals)")
    message: str = Field(description="what matched, or why nothing did and what to try")


class ChemicalInfo(BaseModel):
    chemical_id: int
    name: str
    smiles: str
    inchikey: str
    formula: str
    molar_mass_g_mol: float = Field(description="average molar mass in g/mol, for weighing reagents")
    density_g_ml: float | None = Field(description="density of the liquid at 20-25 °C in g/mL; null for solids")
    physical_state: PhysicalState
    cas: str | None
    category: str = Field(description="solvent, base, catalyst, ligand, coupling_reagent, fine, commodity, ...")
    pubchem_cid: int | None
    names: list[str] = Field(description="other names and abbreviations")
    note: str


class PackFields(BaseModel):
    """A pack on offer: who sells it, how much it holds, what it costs."""

    quote_id: int
    supplier: str
    catalog_number: str
    pack_amount: float
    pack_unit: Literal["mg", "g", "kg", "mL", "L"]
    pack_mass_g: float = Field(description="content of one pack in grams (liquids: volume x density)")
    price_usd: float = Field(description="price of one pack in US dollars")


class QuoteOut(PackFields):
    """One supplier quote, every field."""

    purity_pct: float
    grade: str
    price_usd_per_g: float
    valid: bool = Field(description="acceptable for synthesis: purity >= 95 %, not isotope-labelled, not a "
                                    "reference standard")
    lead_time_days: int


class QuotesResult(BaseModel):
    chemical_id: int
    name: str
    n_quotes: int = Field(description="quotes on offer (before the limit)")
    quotes: list[QuoteOut] = Field(description="cheapest pack first")


class PackSelection(PackFields):
    """The pack to buy (always a valid quote: get_supplier_quotes shows its grade and purity), how many of
    it, and the total. Flat on purpose: every field is checked against the schema on both sides of a call."""

    chemical_id: int
    name: str
    required_g: float = Field(description="the need in grams")
    n_packs: int = Field(description="how many of that pack (more than 1 only when no pack covers the need)")
    total_usd: float = Field(description="n_packs x pack price, US dollars")


class ConvertedQuantity(BaseModel):
    value: float
    unit: str
    molar_mass_g_mol: float | None
    density_g_ml: float | None


class StructureInfo(BaseModel):
    canonical_smiles: str
    inchikey: str
    formula: str = Field(description="Hill formula")
    molar_mass_g_mol: float = Field(description="average molar mass (IUPAC atomic weights): use for stoichiometry")
    monoisotopic_mass_da: float = Field(description="mass of the most abundant isotopes: for mass spectra only")


class SimilarChemical(BaseModel):
    chemical_id: int
    name: str
    smiles: str
    tanimoto: float = Field(description="Morgan (radius 2, 2048 bits) Tanimoto similarity in [0, 1]")


class SimilarResult(BaseModel):
    query_smiles: str
    matches: list[SimilarChemical]


class CalculationResult(BaseModel):
    expression: str
    value: float


def _pack_fields(quote: Quote, suppliers: dict[int, str]) -> dict[str, Any]:
    return {"quote_id": quote.quote_id, "supplier": suppliers[quote.supplier_id],
            "catalog_number": quote.catalog_number, "pack_amount": quote.pack_amount, "pack_unit": quote.pack_unit,
            "pack_mass_g": quote.pack_mass_g, "price_usd": quote.price_usd}


def _quote_out(quote: Quote, suppliers: dict[int, str]) -> QuoteOut:
    return QuoteOut(**_pack_fields(quote, suppliers), purity_pct=quote.purity_pct, grade=quote.grade,
                    price_usd_per_g=round(quote.price_usd / quote.pack_mass_g, 6), valid=quote.is_valid,
                    lead_time_days=quote.lead_time_days)


@functools.lru_cache(maxsize=4)
def open_catalogue(path: Path) -> tuple[store.CatalogueStore, grounding.Grounder, SimilarityIndex]:
    """The catalogue at ``path`` with its search and similarity indexes, shared by every server built in
    this process: it is read-only, so sessions cannot disturb each other, and the indexes load once."""
    catalogue = store.CatalogueStore(path)
    return catalogue, grounding.Grounder(catalogue), SimilarityIndex(catalogue)


@dataclass(frozen=True)
class Chem:
    """The state every chem tool reads: the catalogue with its indexes, and where the reactions are."""

    catalogue: store.CatalogueStore
    grounder: grounding.Grounder
    similarity: SimilarityIndex
    suppliers: dict[int, str]
    reactions_dir: Path | None = None

    def reactions(self) -> ReactionSet:
        """The reaction set, loaded on first use (default: the full set) and shared by the process."""
        from gauntlet.mcp_servers.chem.reaction_data import reactions_dir as default_dir

        return open_reaction_set(Path(self.reactions_dir or default_dir()).resolve())


TOOLS = ToolSet[Chem](fixable=DOMAIN_ERRORS, includes=[reaction_tools.TOOLS])

# Catalogue ids are SQLite integers: at least 1, at most 2**63 - 1 (a larger one cannot even be looked up).
ChemicalId = Annotated[int, Field(description="catalogue id from search_chemical", ge=1, le=2**63 - 1, examples=[1])]
# A SMILES must hold at least one non-blank character; an empty one would reach RDKit as no molecule.
Smiles = Annotated[str, Field(description="SMILES of the compound (salts as dot-separated fragments)",
                              min_length=1, max_length=2000, pattern=r"\S", examples=["CCO"])]
Unit = Annotated[str, Field(description="mg, g, kg, umol, mmol, mol, uL, mL or L", examples=["g"])]


@TOOLS.tool(READ_ONLY)
def search_chemical(
        chem: Chem,
        query: Annotated[str, Field(description="a name, abbreviation (THF, HATU), CAS number, SMILES or InChIKey",
                                    max_length=300, examples=["HATU"])],
        limit: Annotated[int, Field(ge=1, le=20, description="most suggestions to list when nothing is found")] = 5
) -> SearchResult:
    """Find the catalogue compound a name, abbreviation, CAS number, SMILES or InChIKey identifies.

    Works offline over the frozen catalogue. found=true: candidates[0] is the compound, with how it
    matched (match_kind) and a confidence; use its chemical_id with the other tools. found=false:
    nothing in the catalogue is this compound (it may be a known compound the catalogue does not sell:
    known_compound says which); the suggestions are OTHER compounds with similar names or the same
    skeleton, listed so you can check them, never to be bought in its place without checking. Search
    every chemical of a reaction with this first.
    """
    found = chem.grounder.ground(query, limit)
    candidates = [Candidate(chemical_id=hit.chemical_id, name=hit.name, smiles=record.smiles, cas=record.cas,
                            molar_mass_g_mol=record.molar_mass_g_mol, confidence=hit.confidence,
                            match_kind=hit.match_kind, matched_on=hit.matched_on)
                  for hit in found.hits for record in [chem.catalogue.chemical(hit.chemical_id)]]
    suggestions = [Suggestion(chemical_id=near.chemical_id, name=near.name, smiles=record.smiles, cas=record.cas,
                              kind=near.kind, reason=near.reason, confidence=near.confidence)
                   for near in found.suggestions for record in [chem.catalogue.chemical(near.chemical_id)]]
    known = found.known
    return SearchResult(query=query, found=found.found, candidates=candidates, suggestions=suggestions,
                        known_compound=KnownCompound(name=known.name, cas=known.cas, formula=known.formula,
                                                     pubchem_cid=known.pubchem_cid) if known else None,
                        parsed_smiles=found.parsed_smiles if not found.found else None,
                        message=found.explanation())


@TOOLS.tool(READ_ONLY)
def get_chemical(chem: Chem, chemical_id: ChemicalId) -> ChemicalInfo:
    """Full record of one catalogue chemical: structure, formula, average molar mass (g/mol), density
    (g/mL, liquids only), category and other names. Use it for the molar mass and density you need to
    turn equivalents into grams or millilitres."""
    record = chem.catalogue.chemical(chemical_id)
    names = [name for name, _kind in chem.catalogue.names_of(chemical_id) if name != record.name][:15]
    return ChemicalInfo(chemical_id=record.chemical_id, name=record.name, smiles=record.smiles,
                        inchikey=record.inchikey, formula=record.formula,
                        molar_mass_g_mol=record.molar_mass_g_mol, density_g_ml=record.density_g_ml,
                        physical_state=cast(PhysicalState, record.physical_state), cas=record.cas,
                        category=record.category, pubchem_cid=record.pubchem_cid, names=names, note=record.note)


@TOOLS.tool(READ_ONLY)
def get_supplier_quotes(
        chem: Chem, chemical_id: ChemicalId,
        valid_only: Annotated[bool, Field(description="drop labelled, reference-standard and < 95 % rows")] = False,
        limit: Annotated[int, Field(ge=1, le=MAX_QUOTES, description="most quotes to return")] = 50) -> QuotesResult:
    """Supplier quotes for one chemical, cheapest pack first: supplier, catalogue number, pack size
    (mg/g/kg, or mL/L for liquids, with the pack's mass in grams), price in USD, price per gram,
    purity, grade and whether the row is valid for synthesis. Isotope-labelled, reference-standard
    and technical (< 95 %) rows are listed but marked invalid: do not buy them."""
    quotes = chem.catalogue.quotes(chemical_id)
    if valid_only:
        quotes = [quote for quote in quotes if quote.is_valid]
    return QuotesResult(chemical_id=chemical_id, name=chem.catalogue.chemical(chemical_id).name,
                        n_quotes=len(quotes), quotes=[_quote_out(quote, chem.suppliers) for quote in quotes[:limit]])


@TOOLS.tool(READ_ONLY)
def select_pack(
        chem: Chem, chemical_id: ChemicalId,
        required_amount: Annotated[float, Field(gt=0, description="how much you need")],
        unit: Annotated[Literal["mg", "g", "kg", "mL", "L", "uL", "umol", "mmol", "mol"],
                        Field(description="unit of required_amount")] = "g") -> PackSelection:
    """The cheapest valid purchase covering a need: the cheapest single valid pack holding at least
    the required amount, or, when no pack is big enough, whole multiples of the largest valid pack.
    Amounts in mmol/mol are converted with the chemical's molar mass, volumes with its density.
    Returns the pack, how many to buy and the total in USD."""
    record = chem.catalogue.chemical(chemical_id)
    required_g = quantities.convert_quantity(required_amount, unit, "g", record.molar_mass_g_mol, record.density_g_ml)
    choice = procurement.select_pack_in_store(chem.catalogue, chemical_id, required_g)
    return PackSelection(**_pack_fields(choice.quote, chem.suppliers), chemical_id=chemical_id, name=record.name,
                         required_g=required_g, n_packs=choice.n_packs, total_usd=choice.total_usd)


@TOOLS.tool(READ_ONLY)
def convert_quantity(
        chem: Chem,
        value: Annotated[float, Field(ge=0, description="the quantity to convert")],
        from_unit: Unit, to_unit: Unit,
        chemical_id: Annotated[int | None, Field(ge=1, le=2**63 - 1, description="take molar mass and density "
                                                 "from this catalogue chemical")] = None,
        molar_mass_g_mol: Annotated[float | None, Field(gt=0, description="molar mass, g/mol")] = None,
        density_g_ml: Annotated[float | None, Field(gt=0, description="density, g/mL")] = None) -> ConvertedQuantity:
    """Convert between mass, amount of substance and volume. Mass <-> moles needs a molar mass,
    mass <-> volume a density; give them directly or name a catalogue chemical to take them from."""
    if chemical_id is not None:
        record = chem.catalogue.chemical(chemical_id)
        molar_mass_g_mol = molar_mass_g_mol or record.molar_mass_g_mol
        density_g_ml = density_g_ml or record.density_g_ml
    value_out = quantities.convert_quantity(value, from_unit, to_unit, molar_mass_g_mol, density_g_ml)
    return ConvertedQuantity(value=value_out, unit=to_unit, molar_mass_g_mol=molar_mass_g_mol,
                             density_g_ml=density_g_ml)


@TOOLS.tool(READ_ONLY)
def compute_molar_mass(chem: Chem, smiles: Smiles) -> StructureInfo:
    """Average molar mass (g/mol, IUPAC atomic weights) and Hill formula from a SMILES string. This is
    the mass for stoichiometry; the monoisotopic mass is returned too but is for mass spectra only."""
    return _structure(smiles)


@TOOLS.tool(READ_ONLY)
def canonicalize_smiles(
        chem: Chem,
        smiles: Annotated[str, Field(description="any valid SMILES", min_length=1, max_length=2000, pattern=r"\S",
                                     examples=["C(O)C"])]
) -> StructureInfo:
    """RDKit canonical SMILES and InChIKey of a structure, to compare two structures or to search the
    catalogue by an exact identity. Also returns formula and masses."""
    return _structure(smiles)


@TOOLS.tool(READ_ONLY)
def similar_chemicals(
        chem: Chem,
        smiles: Annotated[str, Field(description="SMILES of the query structure", min_length=1, max_length=2000,
                                     pattern=r"\S", examples=["CCO"])],
        limit: Annotated[int, Field(ge=1, le=20, description="most matches to return")] = 5) -> SimilarResult:
    """Catalogue chemicals most similar in structure to a SMILES (Morgan fingerprint Tanimoto), most
    similar first. Use it when a structure is not sold as such, to find the nearest purchasable
    analogue or an isomer whose name was written differently."""
    canonical = chemistry.structure_of(smiles).smiles
    matches = []
    for chemical_id, score in chem.similarity.most_similar(canonical, limit):
        record = chem.catalogue.chemical(chemical_id)
        matches.append(SimilarChemical(chemical_id=chemical_id, name=record.name, smiles=record.smiles,
                                       tanimoto=round(score, 4)))
    return SimilarResult(query_smiles=canonical, matches=matches)


@TOOLS.tool(READ_ONLY)
def calculate(chem: Chem, expression: Annotated[str, Field(description="arithmetic, e.g. '(12.5 + 3.2) / 0.85'",
                                                           max_length=500, examples=["(12.5 + 3.2) / 0.85"])]
              ) -> CalculationResult:
    """Evaluate arithmetic exactly as written: numbers, + - * / // % ** (or ^), parentheses and min,
    max, abs, round, sqrt, log, log10, exp, ceil, floor. Use it for every sum and ratio of a price."""
    return CalculationResult(expression=expression, value=calculator.calculate(expression))


def _structure(smiles: str) -> StructureInfo:
    facts = chemistry.structure_of(smiles)
    return StructureInfo(canonical_smiles=facts.smiles, inchikey=facts.inchikey, formula=facts.formula,
                         molar_mass_g_mol=facts.molar_mass_g_mol, monoisotopic_mass_da=facts.monoisotopic_mass_da)


def build_server(db_path: str | Path | None = None, reactions_dir: str | Path | None = None) -> ToolServer[Chem]:
    """The pricing server over the catalogue at ``db_path`` (default: the full catalogue, built on first
    use) and the reaction set in ``reactions_dir`` (default: the full set)."""
    return pricing_server(db_path, reactions_dir)


def pricing_server(db_path: str | Path | None, reactions_dir: str | Path | None,
                   rewrite_result: ResultRewrite | None = None) -> ToolServer[Chem]:
    """``build_server``'s server, whose successful results pass through ``rewrite_result`` (the attack
    view's injections, ``attack.build_attack_server``)."""
    from gauntlet.mcp_servers.chem.build import catalogue_path

    catalogue, grounder, similarity = open_catalogue(Path(db_path or catalogue_path()).resolve())
    state = Chem(catalogue, grounder, similarity, catalogue.supplier_names(),
                 Path(reactions_dir) if reactions_dir is not None else None)
    instructions = ("Price chemical reactions: ground each chemical with search_chemical (use a result only when "
                    "found is true; suggestions are other compounds), read get_chemical for molar mass and density, "
                    "buy with select_pack, add up with calculate. Catalogue snapshot "
                    + str(catalogue.snapshot.get("snapshot_date")))
    return ToolServer(TOOLS, state, name="chem-pricing", instructions=instructions, rewrite_result=rewrite_result)
