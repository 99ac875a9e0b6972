"""Grounding: from what a chemist writes (name, abbreviation, CAS, SMILES, InChIKey) to one catalogue compound,
or a plain "not in the catalogue".

The contract. ``Grounder.ground(query)`` answers with a ``Grounding``: the compound the query
identifies (``hits``, one compound, with a match kind and a confidence), or, when nothing identifies
it, no hit at all and ``suggestions``: other catalogue compounds the query comes near (similar
spelling, another stereo form of the same skeleton, the compounds an ambiguous name is shared by).
A suggestion is never the answer; it says what to check. A reading is a hit only when its confidence
is at least ``HIT_THRESHOLD``; the confidences per match kind (``CONFIDENCE``) are what the labelled
set of ``gauntlet bench chem`` measures them to be (the bench prints each kind's precision beside
them).

Readings, in order (the first that identifies the query wins):

* ``identifier``: the InChIKey, a CAS number (its check digit verified), or a SMILES whose RDKit
  canonical form is a catalogue compound's;
* ``name``: the preferred name or a listed abbreviation; ``synonym``: a listed synonym or IUPAC name.
  When one spelling belongs to two compounds at the same rank, it identifies neither: both come back
  as suggestions (``ambiguous``);
* ``normalised``: the same name with spaces, hyphens and apostrophes ignored, or without a racemic
  descriptor ("(±)-", "rac-", "DL-": the racemate is the compound of unspecified stereochemistry);
* ``parsed name``: OPSIN reads a systematic name as a structure (``opsin``: one warm Java process,
  about a millisecond a name) that is a catalogue compound's;
* ``fuzzy``: one OCR-like confusion undone ("Ac0H" -> "AcOH") or one typing slip of a name of at least
  ``MIN_TYPO_LENGTH`` characters, not in a digit, leading to exactly one compound. Only when the
  query names no other compound: not a name of a compound the tables know but the catalogue does not
  sell (``known``), and no structure OPSIN can read from it. So "4-fluoronitrobenzene" is never
  read as "4-chloronitrobenzene".

A specific stereo descriptor ("(R)-", "L-", "cis-") the catalogue's name lacks, or lacks where the
query has none, a structure whose skeleton matches but not its stereochemistry, and names a few edits
away are suggestions only: they are other compounds.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Literal

from gauntlet.mcp_servers.chem.chemistry import ChemistryInputError, connectivity_key, identity_of
from gauntlet.mcp_servers.chem.names import MAX_QUERY_LENGTH, compact_key, name_key
from gauntlet.mcp_servers.chem.spelling import edited_characters, near_name_keys, ocr_readings
from gauntlet.mcp_servers.chem.store import CatalogueStore, KnownRecord

INCHIKEY = re.compile(r"^[A-Z]{14}-[A-Z]{10}-[A-Z]$")
CAS = re.compile(r"^(\d{2,7})-(\d{2})-(\d)$")
SMILES_CHARACTERS = re.compile(r"^[A-Za-z0-9@+\-\[\]()=#$/\\%.:*]+$")
# On name keys (case-folded, "±" written "+/-"). A racemic descriptor keeps the identity (the racemate
# is the compound of unspecified stereochemistry); a specific one names another compound.
RACEMIC_PREFIX = re.compile(r"^(?:\((?:\+/-|rs|r,s|dl)\)-|(?:dl|rac|\+/-)-)")
SPECIFIC_PREFIX = re.compile(r"^(?:\((?:[rs]|[rs],[rs]|\+|-|[ez])\)-|(?:d|l|cis|trans|[ez])-)")
STEREO_PREFIXES = ("l-", "d-", "(r)-", "(s)-", "(+)-", "(-)-", "cis-", "trans-", "(e)-", "(z)-", "dl-", "(+/-)-",
                   "rac-")

MatchKind = Literal["identifier", "name", "synonym", "normalised", "parsed name", "fuzzy"]
SuggestionKind = Literal["ambiguous", "stereo form", "similar spelling"]
# Confidence of a hit by match kind: the share of such hits that are right, as measured on the labelled
# names of `gauntlet bench chem` (which prints each kind's measured precision beside these).
CONFIDENCE: dict[str, float] = {"identifier": 1.0, "name": 1.0, "synonym": 0.95, "normalised": 0.9,
                                "parsed name": 0.95, "fuzzy": 0.8}
HIT_THRESHOLD = 0.75
# Confidence of a suggestion (always below the threshold: a suggestion is another compound, or a guess).
SUGGESTION_CONFIDENCE = {"ambiguous": 0.45, "stereo form": 0.4, "similar spelling": 0.3}
SUGGESTION_ORDER: tuple[SuggestionKind, ...] = ("ambiguous", "stereo form", "similar spelling")
# A name shorter than this is one edit away from too many other real names ("DMF"/"DMA", "TEA"/"TFA").
MIN_TYPO_LENGTH = 8
MAX_SUGGESTION_DISTANCE = 3
# Rank of each kind of catalogue spelling: a preferred name or abbreviation outranks a CAS number, which
# outranks an IUPAC name, which outranks a listed synonym; within one rank, two compounds tie.
SPELLING_RANKS = {"name": 0, "abbreviation": 0, "cas": 1, "iupac": 2, "synonym": 3}
SPELLING_MATCH_KIND: dict[str, MatchKind] = {"name": "name", "abbreviation": "name", "cas": "identifier",
                                             "iupac": "synonym", "synonym": "synonym"}


class GroundingError(LookupError):
    """The query cannot be searched as given (empty, too long, a CAS number with a wrong check digit), or,
    from ``Grounder.search``, nothing in the catalogue is the compound it names."""


@dataclass(frozen=True)
class Candidate:
    """The catalogue compound a query identifies: how (``match_kind``, ``matched_on``) and how surely."""

    chemical_id: int
    name: str
    matched_on: str
    matched_text: str
    confidence: float
    match_kind: MatchKind = "name"


@dataclass(frozen=True)
class Suggestion:
    """A catalogue compound near the query that the query does not identify, and why it is listed."""

    chemical_id: int
    name: str
    kind: SuggestionKind
    reason: str
    confidence: float


@dataclass(frozen=True)
class Grounding:
    """What a query identifies in the catalogue (``hits``) or, when nothing, what it comes near."""

    query: str
    hits: list[Candidate]
    suggestions: list[Suggestion] = field(default_factory=list)
    known: KnownRecord | None = None  # the tables know the compound; the catalogue does not sell it
    parsed_smiles: str | None = None  # the structure read from the query (SMILES or OPSIN), if one was

    @property
    def found(self) -> bool:
        return bool(self.hits)

    def explanation(self) -> str:
        """One plain paragraph: what matched, or that nothing did and what to try."""
        if self.hits:
            best = self.hits[0]
            return (f"{self.query!r} is {best.name!r} (chemical_id {best.chemical_id}): {best.match_kind} match on "
                    f"{best.matched_on}, confidence {best.confidence:g}.")
        parts = [f"{self.query!r} is not in the catalogue: no compound here is the one it names."]
        if self.known is not None:
            cas = f", CAS {self.known.cas}" if self.known.cas else ""
            parts.append(f"It is {self.known.name} ({self.known.formula}{cas}), a known compound this catalogue "
                         "does not sell.")
        elif self.parsed_smiles:
            parts.append(f"Its structure reads as {self.parsed_smiles}, which no catalogue compound has.")
        if any(s.kind == "ambiguous" for s in self.suggestions):
            parts.append("The name belongs to several catalogue compounds; give a CAS number or SMILES to pick one.")
        if self.suggestions:
            listed = "; ".join(f"{s.name!r} (chemical_id {s.chemical_id}: {s.reason})" for s in self.suggestions)
            parts.append(f"Near it, not the same compound: {listed}.")
        parts.append("Try the CAS number, a SMILES string or the full name; similar_chemicals finds "
                     "purchasable analogues of a structure.")
        return " ".join(parts)


def cas_check_digit_ok(cas: str) -> bool:
    """The CAS registry check: the last digit is the weighted digit sum mod 10."""
    match = CAS.match(cas)
    if not match:
        return False
    digits = (match.group(1) + match.group(2))[::-1]
    return sum((i + 1) * int(d) for i, d in enumerate(digits)) % 10 == int(match.group(3))


class _Evidence:
    """What the readings of one query found: the hit (once one identifies the query), suggestions, and
    what the query was found to name outside the catalogue."""

    def __init__(self, grounder: Grounder, text: str):
        self.grounder, self.text = grounder, text
        self.hit: Candidate | None = None
        self.ambiguous = False  # a spelling or structure shared by several compounds: no later reading guesses
        self._suggestions: dict[int, tuple[tuple[int, int], Suggestion]] = {}
        self.known: KnownRecord | None = None
        self.parsed_smiles: str | None = None
        self.names_other_compound = False  # the query is a real name or structure: no spelling correction

    def identify(self, chemical_id: int, kind: MatchKind, matched_on: str, matched_text: str | None = None) -> None:
        if self.hit is None:
            name = self.grounder.store.chemical(chemical_id).name
            self.hit = Candidate(chemical_id, name, matched_on, matched_text or self.text, CONFIDENCE[kind], kind)

    def suggest(self, chemical_id: int, kind: SuggestionKind, reason: str, distance: int = 0) -> None:
        """List a compound the query does not identify; ranked by kind (ambiguous, stereo form, similar
        spelling), then edit distance, then id."""
        if kind == "ambiguous":
            self.ambiguous = True
        if chemical_id not in self._suggestions:
            name = self.grounder.store.chemical(chemical_id).name
            self._suggestions[chemical_id] = ((SUGGESTION_ORDER.index(kind), distance),
                                              Suggestion(chemical_id, name, kind, reason, SUGGESTION_CONFIDENCE[kind]))

    def suggestions(self) -> list[Suggestion]:
        ranked = sorted(self._suggestions.items(), key=lambda item: (item[1][0], item[0]))
        return [suggestion for _, (_, suggestion) in ranked]


class Grounder:
    """Search over one catalogue (see the module docstring). ``use_opsin``: read systematic names with
    OPSIN (default: when Java and the OPSIN jar are installed); its process starts in the background."""

    def __init__(self, store: CatalogueStore, use_opsin: bool | None = None):
        from gauntlet.mcp_servers.chem import opsin

        self.store = store
        self.use_opsin = opsin.available() if use_opsin is None else use_opsin
        self._parser = opsin.shared_parser() if self.use_opsin else None
        if self._parser is not None:
            self._parser.start_in_background()

    def search(self, query: str, limit: int = 5) -> list[Candidate]:
        """The compound ``query`` identifies, as a one-element list; ``GroundingError`` (naming the
        suggestions) when it identifies none. ``ground`` gives the whole answer."""
        grounding = self.ground(query, limit)
        if not grounding.found:
            raise GroundingError(grounding.explanation())
        return grounding.hits

    def ground(self, query: str, limit: int = 5) -> Grounding:
        """What ``query`` identifies, or why nothing, with at most ``limit`` suggestions."""
        text = " ".join(query.split())
        if not text:
            raise GroundingError("empty query: give a name, abbreviation, CAS number, SMILES or InChIKey")
        if len(text) > MAX_QUERY_LENGTH:
            raise GroundingError(f"query of {len(text)} characters is longer than the {MAX_QUERY_LENGTH} allowed; "
                                 "search one chemical at a time")
        evidence = _Evidence(self, text)
        key = name_key(text)
        if INCHIKEY.match(text):
            self._read_inchikey(evidence, text)
        elif CAS.match(text):
            if not cas_check_digit_ok(text):
                raise GroundingError(f"{text!r} is not a valid CAS number (its check digit is wrong)")
            self._read_spellings(evidence, [key], "name_key")
            self._note_known(evidence, self.store.known("cas", text))
        else:
            for reading in (self._read_name, self._read_smiles, self._read_normalised, self._read_parsed_name,
                            self._read_past_slips):
                if evidence.hit is not None or evidence.ambiguous:
                    break
                reading(evidence, text, key)
        if evidence.hit is None:
            self._suggest_near_spellings(evidence, key, limit)
        suggestions = [] if evidence.hit else evidence.suggestions()[:limit]
        return Grounding(text, [evidence.hit] if evidence.hit else [], suggestions, evidence.known,
                         evidence.parsed_smiles)

    # Readings ---------------------------------------------------------------------------------------------
    def _read_spellings(self, evidence: _Evidence, keys: list[str], column: str, kind: MatchKind | None = None,
                        matched_on: str | None = None) -> None:
        """Identify by catalogue spellings whose key is one of ``keys``: the best-ranked kind of spelling
        wins; two compounds at that rank make the name ambiguous (suggestions, no hit)."""
        by_rank: dict[int, dict[int, tuple[str, str]]] = defaultdict(dict)
        for chemical_id, name, spelling_kind, _ in self.store.names_with_keys(keys, column):
            by_rank[SPELLING_RANKS.get(spelling_kind, 3)].setdefault(chemical_id, (spelling_kind, name))
        if not by_rank:
            return
        best = by_rank[min(by_rank)]
        if len(best) == 1:
            ((chemical_id, (spelling_kind, name)),) = best.items()
            evidence.identify(chemical_id, kind or SPELLING_MATCH_KIND[spelling_kind], matched_on or spelling_kind,
                              name)
        else:
            for chemical_id, (spelling_kind, name) in best.items():
                evidence.suggest(chemical_id, "ambiguous", f"{spelling_kind} {name!r} is shared by {len(best)} "
                                                           "catalogue compounds")

    def _read_name(self, evidence: _Evidence, text: str, key: str) -> None:
        self._read_spellings(evidence, [key], "name_key")
        if evidence.hit is None:
            self._note_known(evidence, self.store.known("name_key", key))

    def _read_smiles(self, evidence: _Evidence, text: str, key: str) -> None:
        if SMILES_CHARACTERS.match(text):
            self._read_structure(evidence, text, "smiles")

    def _read_structure(self, evidence: _Evidence, smiles: str, via: str) -> None:
        """Identify by a structure's canonical SMILES; a skeleton match (other stereo or isotope form) is a
        suggestion; a structure the tables know is noted."""
        try:
            facts = identity_of(smiles)
        except ChemistryInputError:
            return
        evidence.parsed_smiles = facts.smiles
        evidence.names_other_compound = True
        exact = self.store.ids_by("smiles", facts.smiles)
        # A catalyst sold by loading (Pd/C) shares the metal's structure but is not what the structure names.
        bare = [chemical_id for chemical_id in exact if not self.store.chemical(chemical_id).sold_by_loading]
        if len(bare) == 1:
            evidence.identify(bare[0], "identifier" if via == "smiles" else "parsed name", via)
            return
        for chemical_id in bare:
            evidence.suggest(chemical_id, "ambiguous", f"one of {len(bare)} catalogue items with this structure")
        for chemical_id in self.store.ids_by("connectivity", connectivity_key(facts.inchikey)):
            if self.store.chemical(chemical_id).sold_by_loading:
                evidence.suggest(chemical_id, "stereo form", "this element on a support, sold by loading")
            else:
                evidence.suggest(chemical_id, "stereo form", "same skeleton, other stereochemistry or isotopes")
        self._note_known(evidence, self.store.known("inchikey", facts.inchikey))

    def _read_inchikey(self, evidence: _Evidence, text: str) -> None:
        exact = self.store.ids_by("inchikey", text)
        if len(exact) == 1:
            evidence.identify(exact[0], "identifier", "inchikey")
            return
        for chemical_id in self.store.ids_by("connectivity", connectivity_key(text)):
            evidence.suggest(chemical_id, "stereo form", "same InChIKey skeleton, other stereochemistry or isotopes")
        self._note_known(evidence, self.store.known("inchikey", text))

    def _read_normalised(self, evidence: _Evidence, text: str, key: str) -> None:
        self._read_spellings(evidence, [compact_key(text)], "compact_key", "normalised",
                             "name with spaces, hyphens and apostrophes ignored")
        if evidence.hit is not None:
            return
        racemate = RACEMIC_PREFIX.sub("", key)
        bare = SPECIFIC_PREFIX.sub("", racemate)
        if racemate != key:
            self._read_spellings(evidence, [racemate], "name_key", "normalised", "name without a racemic descriptor")
        if evidence.hit is not None:
            return
        # The catalogue spells the same name with a stereo descriptor the query lacks, or without the one it
        # has: the same skeleton, maybe another compound. "DL-" forms are the racemate: a hit.
        racemic_forms = [f"{prefix}{bare}" for prefix in ("dl-", "(+/-)-", "rac-")]
        self._read_spellings(evidence, racemic_forms if bare == key else [], "name_key", "normalised",
                             "name of the racemate")
        if evidence.hit is not None:
            return
        variants = [f"{prefix}{bare}" for prefix in STEREO_PREFIXES] + [bare]
        for chemical_id, name, _, _ in self.store.names_with_keys([v for v in variants if v != key]):
            evidence.suggest(chemical_id, "stereo form", f"named {name!r}: another stereo descriptor")
        if evidence.known is None:
            self._note_known(evidence, self.store.known("compact_key", compact_key(text)))

    def _read_parsed_name(self, evidence: _Evidence, text: str, key: str) -> None:
        if self._parser is None or evidence.parsed_smiles is not None:
            return
        smiles = self._parser.parse(text)
        if smiles:
            self._read_structure(evidence, smiles, "systematic name (OPSIN)")

    def _read_past_slips(self, evidence: _Evidence, text: str, key: str) -> None:
        """An OCR-like confusion or one typing slip, only when the query names no other compound."""
        if evidence.names_other_compound or evidence.suggestions():
            return
        readings = ocr_readings(key)
        found = {chemical_id for chemical_id, *_ in self.store.names_with_keys(readings)}
        if len(found) == 1:
            self._read_spellings(evidence, readings, "name_key", "fuzzy", "name read past an OCR-like confusion")
            return
        if len(key) < MIN_TYPO_LENGTH:
            return
        near, complete = near_name_keys(self.store, key, 1)
        one_edit = [candidate for candidate, _ in near
                    if not any(ch.isdigit() for ch in edited_characters(key, candidate))]
        owners = {chemical_id for chemical_id, *_ in self.store.names_with_keys(one_edit)}
        if len(owners) == 1 and complete:  # in a crowded neighbourhood a second owner may be unread
            self._read_spellings(evidence, one_edit, "name_key", "fuzzy", "spelling one edit away")

    def _note_known(self, evidence: _Evidence, known: list[KnownRecord]) -> None:
        if known and evidence.known is None and evidence.hit is None:
            evidence.known = known[0]
            evidence.names_other_compound = True

    def _suggest_near_spellings(self, evidence: _Evidence, key: str, limit: int) -> None:
        budget = max(1, min(MAX_SUGGESTION_DISTANCE, len(key) // 4))
        near = dict(near_name_keys(self.store, key, budget)[0][:limit * 4])
        for chemical_id, name, _, matched in self.store.names_with_keys(list(near)):
            distance = near[matched]
            evidence.suggest(chemical_id, "similar spelling",
                             f"named {name!r}, {distance} edit{'s' if distance > 1 else ''} away", distance)
