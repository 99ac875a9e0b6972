"""Grounding: from what a chemist writes (name, abbreviation, CAS, SMILES, InChIKey) to catalogue ids.

``search`` tries, in order, the readings that can be exact: InChIKey (full, then its skeleton block,
which ignores stereochemistry), CAS number (checked by its check digit), exact name/abbreviation/
synonym, SMILES (canonicalised; then skeleton match), the name with stereo and isomer prefixes
removed ("(R)-", "(±)-", "cis-", "L-"), the name read back from one OCR-like character confusion
("Ac0H" -> "AcOH", "trifluoroacetic acid" with "rn" read as "m", ...; ``OCR_READINGS``), a
systematic name parsed by OPSIN when Java is available, and finally close spellings (character
trigrams, ranked by similarity). Each candidate carries a
confidence in [0, 1] and what it matched on.
"""

from __future__ import annotations

import difflib
import re
import shutil
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache

from gauntlet.mcp_servers.chem.chemistry import ChemistryInputError, connectivity_key, identity_of
from gauntlet.mcp_servers.chem.names import MAX_QUERY_LENGTH, name_key
from gauntlet.mcp_servers.chem.store import CatalogueStore

INCHIKEY = re.compile(r"^[A-Z]{14}-[A-Z]{10}-[A-Z]$")
CAS = re.compile(r"^(\d{2,7})-(\d{2})-(\d)$")
SMILES_CHARACTERS = re.compile(r"^[A-Za-z0-9@+\-\[\]()=#$/\\%.:*]+$")
STEREO_PREFIX = re.compile(r"^(\((?:[rs]|[rs],[rs]|\+|-|\+/-|[ez]|rs|sr)\)-|(?:dl|d|l|cis|trans|rac|[ez])-)+")
# What a scanned or retyped character may stand for (seen, meant), on case-folded keys: 0/O, 1/l, 5/S,
# m/rn, l/I. One confusion per query is undone; each reading is an exact name lookup.
OCR_READINGS = (("0", "o"), ("1", "l"), ("5", "s"), ("m", "rn"), ("l", "i"))
MAX_OCR_READINGS = 60
OCR_CONFIDENCE = 0.8
FUZZY_MIN_SIMILARITY = 0.6
FUZZY_SURE_SIMILARITY = 0.9
# Locants, multiplying prefixes and bracketed groups: what a systematic name looks like, worth OPSIN's time.
SYSTEMATIC = re.compile(r"\d[,-]|\b(?:di|tri|tetra)|[\[(]|(?:yl|ane|ene|ol|one|oic|amine|amide)\b", re.IGNORECASE)


class GroundingError(LookupError):
    """Nothing in the catalogue matches; the message names the closest spellings."""


@dataclass(frozen=True)
class Candidate:
    chemical_id: int
    name: str
    matched_on: str
    matched_text: str
    confidence: float


def ocr_readings(key: str) -> list[str]:
    """``key`` with one OCR-like confusion undone, every way (at most ``MAX_OCR_READINGS``)."""
    readings: list[str] = []
    for seen, meant in OCR_READINGS:
        start = key.find(seen)
        while start != -1 and len(readings) < MAX_OCR_READINGS:
            readings.append(key[:start] + meant + key[start + len(seen):])
            start = key.find(seen, start + 1)
    return readings


def cas_check_digit_ok(cas: str) -> bool:
    """The CAS registry check: the last digit is the weighted digit sum mod 10."""
    match = CAS.match(cas)
    if not match:
        return False
    digits = (match.group(1) + match.group(2))[::-1]
    return sum((i + 1) * int(d) for i, d in enumerate(digits)) % 10 == int(match.group(3))


class Grounder:
    """Search over one catalogue (see the module docstring)."""

    def __init__(self, store: CatalogueStore, use_opsin: bool | None = None):
        self.store = store
        self.use_opsin = shutil.which("java") is not None if use_opsin is None else use_opsin
        self._trigrams: dict[str, list[str]] | None = None

    def search(self, query: str, limit: int = 5) -> list[Candidate]:
        """Ranked candidates for ``query`` (best first, at most ``limit``); ``GroundingError`` if none."""
        text = " ".join(query.split())
        if not text:
            raise GroundingError("empty query: give a name, abbreviation, CAS number, SMILES or InChIKey")
        if len(text) > MAX_QUERY_LENGTH:
            raise GroundingError(f"query of {len(text)} characters is longer than the {MAX_QUERY_LENGTH} allowed; "
                                 "search one chemical at a time")
        found: dict[int, Candidate] = {}

        def offer(ids: list[int], matched_on: str, confidence: float, matched_text: str = text) -> None:
            share = confidence if len(ids) <= 1 else confidence * 0.9
            for chemical_id in ids:
                if chemical_id not in found or found[chemical_id].confidence < share:
                    found[chemical_id] = Candidate(chemical_id, self.store.chemical(chemical_id).name,
                                                   matched_on, matched_text, round(share, 3))

        if INCHIKEY.match(text):
            offer(self.store.ids_by("inchikey", text), "inchikey", 1.0)
            offer(self.store.ids_by("connectivity", connectivity_key(text)), "inchikey skeleton", 0.7)
        elif CAS.match(text):
            if not cas_check_digit_ok(text):
                raise GroundingError(f"{text!r} is not a valid CAS number (its check digit is wrong)")
            self._offer_name(text, offer, "cas", 1.0)
        else:
            self._offer_name(text, offer, "name", 1.0)
            if not found and SMILES_CHARACTERS.match(text):
                self._offer_smiles(text, offer)
            if not found:
                stripped = STEREO_PREFIX.sub("", name_key(text))
                if stripped and stripped != name_key(text):
                    self._offer_name(stripped, offer, "name without stereo prefix", 0.8)
            if not found:
                for reading in ocr_readings(name_key(text)):
                    self._offer_name(reading, offer, "name read past an OCR-like confusion", OCR_CONFIDENCE)
            if not found:
                self._offer_close_spellings(text, offer, limit, FUZZY_SURE_SIMILARITY)
            if not found and self.use_opsin and SYSTEMATIC.search(text):
                smiles = _opsin(text)
                if smiles:
                    self._offer_smiles(smiles, offer, via="systematic name (OPSIN)", scale=0.9)
            if not found:
                self._offer_close_spellings(text, offer, limit, FUZZY_MIN_SIMILARITY)
        if not found:
            closest = ", ".join(repr(self.store.name_index[key][0][1]) for key, _ in self.closest(text, 3))
            raise GroundingError(f"no chemical matches {text!r}; closest: {closest or 'none'}. Try the CAS number, "
                                 "a SMILES string or the full name")
        return sorted(found.values(), key=lambda c: (-c.confidence, c.chemical_id))[:limit]

    def _offer_name(self, text: str, offer, matched_on: str, confidence: float) -> None:
        entries = self.store.names_with_key(name_key(text))
        by_kind: dict[str, list[int]] = defaultdict(list)
        for chemical_id, _name, kind in entries:
            if chemical_id not in by_kind[kind]:
                by_kind[kind].append(chemical_id)
        # A preferred name or abbreviation outranks a synonym that happens to be shared.
        for kind, scale in (("name", 1.0), ("abbreviation", 1.0), ("cas", 1.0), ("iupac", 0.95), ("synonym", 0.9)):
            if by_kind.get(kind):
                offer(by_kind[kind], matched_on if matched_on != "name" else kind, confidence * scale)

    def _offer_close_spellings(self, text: str, offer, limit: int, min_similarity: float) -> None:
        for key, similarity in self.closest(text, limit):
            if similarity >= min_similarity:
                ids = sorted({entry[0] for entry in self.store.name_index[key]})
                offer(ids, "similar spelling", 0.6 * similarity, self.store.name_index[key][0][1])

    def _offer_smiles(self, smiles: str, offer, via: str = "smiles", scale: float = 1.0) -> None:
        try:
            facts = identity_of(smiles)
        except ChemistryInputError:
            return
        offer(self.store.ids_by("smiles", facts.smiles), via, 1.0 * scale)
        offer(self.store.ids_by("connectivity", connectivity_key(facts.inchikey)), f"{via} skeleton", 0.7 * scale)

    def closest(self, text: str, limit: int) -> list[tuple[str, float]]:
        """The name keys most like ``text`` and their similarity in [0, 1]."""
        key = name_key(text)
        if self._trigrams is None:
            trigrams: dict[str, list[str]] = defaultdict(list)
            for name in self.store.name_index:
                for gram in _grams(name):
                    trigrams[gram].append(name)
            self._trigrams = dict(trigrams)
        votes: dict[str, int] = defaultdict(int)
        for gram in _grams(key):
            for name in self._trigrams.get(gram, ()):
                votes[name] += 1
        shortlist = sorted(votes, key=lambda name: (-votes[name], name))[:50]
        scored = [(name, difflib.SequenceMatcher(None, key, name).ratio()) for name in shortlist]
        return sorted(scored, key=lambda item: (-item[1], item[0]))[:limit]


def _grams(text: str) -> set[str]:
    padded = f"  {text} "
    return {padded[i:i + 3] for i in range(len(padded) - 2)}


@lru_cache(maxsize=1024)
def _opsin(name: str) -> str | None:
    """SMILES of a systematic name by OPSIN (bundled with py2opsin; runs on Java), or None."""
    try:
        from py2opsin import py2opsin

        smiles = py2opsin(name)
    except Exception:  # OPSIN is an optional helper: any failure means "no parse"
        return None
    return smiles or None
