"""The labelled names grounding is measured on, and the measure: precision of hits, recall, abstention, latency.

``data/chem/grounding_labels.json`` holds each name with its true identity (InChIKey of the structure,
CAS number) and whether the default catalogue sells it. Truth never comes from the grounder:

* hand-checked rows (``origin: hand-checked``): the names chemists write for common reagents
  ("LiAlH4", "aspirin", "4-bromoanisole", "Et3N"), and compounds the catalogue does not sell (drugs,
  named reagents, systematic names of building blocks), each with its CAS number and, where the row
  gives one, its structure; ``write_labels`` checks every CAS check digit, that the structure agrees
  with the PubChem tables' structure for that CAS number, and that OPSIN reads each systematic name
  as the structure given;
* rows drawn (seeded) from the PubChem tables of ``chemicals``: names of compounds the catalogue sells
  (each name unique to one compound across the tables), salts, CAS numbers, randomised SMILES,
  one-edit typos and OCR-like confusions of those names (kept only when the misspelling is no name in
  the tables), names of compounds the tables hold but the catalogue does not sell, and of those, the
  look-alikes: names a few edits from a catalogue name of another compound.

Whether a row's compound is in the catalogue is computed from the catalogue (by InChIKey, or by CAS
number), for the file's rows against the default catalogue and again by ``evaluate`` against the
catalogue it is given, so the same file measures a small test catalogue honestly (most names are then
not in it).

    python -m gauntlet.mcp_servers.chem.labelled_names   # regenerate the drawn rows (keeps the hand-checked)
"""

from __future__ import annotations

import json
import random
import re
import statistics
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gauntlet.curated import curated_path
from gauntlet.mcp_servers.chem.grounding import CAS, CONFIDENCE, Grounder, cas_check_digit_ok
from gauntlet.mcp_servers.chem.names import name_key
from gauntlet.mcp_servers.chem.spelling import OCR_READINGS, near_name_keys
from gauntlet.mcp_servers.chem.store import CatalogueStore

LABELS_FILE = "chem/grounding_labels.json"
HAND_CHECKED = "hand-checked"
# Rows drawn per group: (group, how many).
DRAWN_GROUPS = {"table name": 60, "salt": 25, "CAS number": 15, "SMILES": 15, "typo": 50, "OCR confusion": 20,
                "known, not sold": 45, "look-alike, not sold": 45}
MAX_LABEL_NAME_LENGTH = 60
MIN_TYPO_NAME_LENGTH = 8
LOOK_ALIKE_DISTANCE = 3


@dataclass(frozen=True)
class LabelledName:
    """A name and the compound it truly names (InChIKey and/or CAS number)."""

    name: str
    group: str
    inchikey: str | None
    cas: str | None
    in_catalogue: bool  # in the default catalogue (``evaluate`` recomputes it for the catalogue it scores)
    origin: str
    smiles: str | None = None


def load_labels(path: Path | None = None) -> list[LabelledName]:
    """The labelled names (``data/chem/grounding_labels.json`` unless ``path``)."""
    rows = json.loads((path or curated_path(LABELS_FILE)).read_text(encoding="utf-8"))["names"]
    return [LabelledName(name=row["name"], group=row["group"], inchikey=row.get("inchikey"), cas=row.get("cas"),
                         in_catalogue=row["in_catalogue"], origin=row["origin"], smiles=row.get("smiles"))
            for row in rows]


# Truth against a catalogue --------------------------------------------------------------------------------
def catalogue_ids(catalogue: CatalogueStore, label: LabelledName) -> set[int]:
    """The catalogue ids that are the label's compound: same InChIKey, or same CAS number."""
    ids = set(catalogue.ids_by("inchikey", label.inchikey)) if label.inchikey else set()
    if label.cas:
        ids |= {chemical_id for chemical_id, _, kind, _ in catalogue.names_with_keys([label.cas]) if kind == "cas"}
    return ids


@dataclass(frozen=True)
class Outcome:
    name: str
    group: str
    in_catalogue: bool
    found: bool
    correct: bool
    match_kind: str | None
    latency_ms: float


def evaluate(grounder: Grounder, labels: list[LabelledName]) -> list[Outcome]:
    """Ground every label's name (warm, one at a time) and judge the hit against the label's truth."""
    outcomes = []
    for label in labels:
        truth = catalogue_ids(grounder.store, label)
        start = time.perf_counter()
        grounding = grounder.ground(label.name)
        latency_ms = (time.perf_counter() - start) * 1e3
        hit = grounding.hits[0] if grounding.hits else None
        outcomes.append(Outcome(label.name, label.group, bool(truth), hit is not None,
                                hit is not None and hit.chemical_id in truth, hit.match_kind if hit else None,
                                latency_ms))
    return outcomes


def exact_lookup_outcomes(catalogue: CatalogueStore, labels: list[LabelledName]) -> list[Outcome]:
    """The baseline: a name is a hit when its normalised key is a catalogue spelling of exactly one compound."""
    outcomes = []
    for label in labels:
        truth = catalogue_ids(catalogue, label)
        start = time.perf_counter()
        owners = {chemical_id for chemical_id, *_ in catalogue.names_with_keys([name_key(label.name)])}
        latency_ms = (time.perf_counter() - start) * 1e3
        found = len(owners) == 1
        outcomes.append(Outcome(label.name, label.group, bool(truth), found, found and owners <= truth,
                                "name" if found else None, latency_ms))
    return outcomes


def summarise(outcomes: list[Outcome]) -> dict[str, Any]:
    """Precision of hits, recall on in-catalogue names, wrong hits on names not in the catalogue, per
    group and per match kind (beside the confidence the grounder states), and latency percentiles for
    names found and not found."""
    def rates(rows: list[Outcome]) -> dict[str, Any]:
        hits = [o for o in rows if o.found]
        inside = [o for o in rows if o.in_catalogue]
        return {"n": len(rows), "n_in_catalogue": len(inside), "hits": len(hits),
                "correct_hits": sum(o.correct for o in hits),
                "precision": sum(o.correct for o in hits) / len(hits) if hits else None,
                "recall_in_catalogue": sum(o.correct for o in inside) / len(inside) if inside else None,
                "wrong_hits_not_in_catalogue": sum(o.found for o in rows if not o.in_catalogue)}

    by_group: dict[str, list[Outcome]] = defaultdict(list)
    by_kind: dict[str, list[Outcome]] = defaultdict(list)
    for outcome in outcomes:
        by_group[outcome.group].append(outcome)
        if outcome.match_kind:
            by_kind[outcome.match_kind].append(outcome)
    found = [o.latency_ms for o in outcomes if o.found]
    missed = [o.latency_ms for o in outcomes if not o.found]
    return {**rates(outcomes),
            "n_not_in_catalogue": sum(not o.in_catalogue for o in outcomes),
            "groups": {group: rates(rows) for group, rows in sorted(by_group.items())},
            "match_kinds": {kind: {"hits": len(rows), "precision": sum(o.correct for o in rows) / len(rows),
                                   "stated_confidence": CONFIDENCE.get(kind)}
                            for kind, rows in sorted(by_kind.items())},
            "latency_found_ms": percentiles(found), "latency_not_found_ms": percentiles(missed),
            "wrong_hits": [asdict(o) for o in outcomes if o.found and not o.correct],
            "missed_in_catalogue": [asdict(o) for o in outcomes if o.in_catalogue and not o.correct]}


def percentiles(samples_ms: list[float]) -> dict[str, float | None]:
    if not samples_ms:
        return {"p50": None, "p99": None, "n": 0}
    ordered = sorted(samples_ms)
    return {"p50": statistics.median(ordered), "p99": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
            "n": len(ordered)}


# Drawing the labelled rows --------------------------------------------------------------------------------
@dataclass
class _TableRow:
    table: str
    cid: int
    cas: str | None
    smiles: str
    names: list[str]


def _table_universe() -> tuple[list[_TableRow], dict[str, set[str]]]:
    """Every row of the two PubChem tables, and name key -> the tables' InChIKeys of the rows listing it."""
    from gauntlet.mcp_servers.chem.identities import CAS_PATTERN, pubchem_rows

    rows, owners = [], defaultdict(set)
    for table in ("small", "large"):
        for cid, cas, _formula, _mw, smiles, _inchi, key, iupac, *names in pubchem_rows(table):
            spellings = [" ".join(n.split()) for n in names if n.strip()]
            rows.append(_TableRow(table, int(cid), cas if CAS_PATTERN.match(cas) else None, smiles, spellings))
            for spelling in [*spellings, iupac, cas]:
                owners[name_key(spelling)].add(key)
    return rows, owners


# Supplier and database codes the tables list among names ("ac1o5bmd", "ctk4b3059", "fla 63"): nobody
# writes them for a compound, so they are not labelled names.
CATALOGUE_CODE = re.compile(r"^(?:[a-z]*\d[a-z\d]*|[a-z]+ \d+|[a-z]+(?:-[a-z]+)*-[a-z]*\d[a-z\d]*)$")


def _unique_name(row: _TableRow, owners: dict[str, set[str]], rng: random.Random) -> str | None:
    """One of the row's first five names that names no other compound in the tables and is no supplier
    code, or None."""
    options = [n for n in row.names[:5] if len(owners[name_key(n)]) == 1 and len(n) <= MAX_LABEL_NAME_LENGTH
               and any(ch.isalpha() for ch in n) and not CAS.match(n) and not CATALOGUE_CODE.match(name_key(n))]
    return rng.choice(options) if options else None


def _typo(name: str, rng: random.Random) -> str:
    """One slip of the keyboard at a letter: a letter dropped, doubled, swapped with the next, or replaced."""
    letters = [i for i, ch in enumerate(name) if ch.isalpha()]
    i = rng.choice(letters)
    kind = rng.choice(("drop", "double", "swap", "replace"))
    if kind == "drop":
        return name[:i] + name[i + 1:]
    if kind == "double":
        return name[:i] + name[i] + name[i:]
    if kind == "swap" and i + 1 < len(name) and name[i + 1].isalpha() and name[i + 1] != name[i]:
        return name[:i] + name[i + 1] + name[i] + name[i + 2:]
    replacement = rng.choice([c for c in "abcdefghijklmnopqrstuvwxyz" if c != name[i].lower()])
    return name[:i] + replacement + name[i + 1:]


def _ocr(name: str, rng: random.Random) -> str | None:
    """The name with one OCR-like confusion made (the grounder's readings undo these), or None."""
    options = [(i, meant, seen) for seen, meant in OCR_READINGS for i in range(len(name))
               if name.lower().startswith(meant, i)]
    if not options:
        return None
    i, meant, seen = rng.choice(options)
    return name[:i] + seen + name[i + len(meant):]


def draw_rows(catalogue: CatalogueStore, seed: int = 0) -> list[dict[str, Any]]:
    """The drawn rows (see the module docstring), against ``catalogue`` (the default catalogue)."""
    from rdkit import Chem

    from gauntlet.mcp_servers.chem.chemistry import identity_of

    rng = random.Random(f"{seed}|grounding-labels")
    rows, owners = _table_universe()
    catalogue_keys = set(catalogue.name_index)
    sold: list[tuple[_TableRow, dict[str, Any]]] = []
    unsold: list[tuple[_TableRow, dict[str, Any]]] = []
    for row in rows:
        try:
            facts = identity_of(row.smiles)
        except Exception:  # a table structure RDKit cannot read: no truth to label it with
            continue
        truth = {"inchikey": facts.inchikey, "cas": row.cas, "smiles": facts.smiles}
        label = LabelledName("", "", facts.inchikey, row.cas, False, "")
        (sold if catalogue_ids(catalogue, label) else unsold).append((row, truth))
    rng.shuffle(sold)
    rng.shuffle(unsold)
    drawn: list[dict[str, Any]] = []
    used: set[str] = set()

    def add(name: str, group: str, truth: dict, in_catalogue: bool, origin: str) -> None:
        drawn.append({"name": name, "group": group, "inchikey": truth["inchikey"], "cas": truth["cas"],
                      "in_catalogue": in_catalogue, "origin": origin})
        used.add(truth["inchikey"])

    def quota(group: str) -> bool:
        return sum(row["group"] == group for row in drawn) < DRAWN_GROUPS[group]

    for row, truth in sold:
        if truth["inchikey"] in used:
            continue
        origin = f"chemicals pubchem {row.table} table, CID {row.cid}"
        name = _unique_name(row, owners, rng)
        if "." in row.smiles and name and quota("salt"):
            add(name, "salt", truth, True, origin)
        elif name and quota("table name"):
            add(name, "table name", truth, True, origin)
        elif name and len(name) >= MIN_TYPO_NAME_LENGTH and quota("typo"):
            typo = _typo(name, rng)
            if name_key(typo) not in owners and name_key(typo) not in catalogue_keys:
                add(typo, "typo", truth, True, f"{origin}: one slip in {name!r}")
        elif name and quota("OCR confusion"):
            misread = _ocr(name, rng)
            if misread and name_key(misread) not in owners and name_key(misread) not in catalogue_keys:
                add(misread, "OCR confusion", truth, True, f"{origin}: one OCR-like confusion in {name!r}")
        elif row.cas and len(owners[name_key(row.cas)]) == 1 and quota("CAS number"):
            add(row.cas, "CAS number", truth, True, origin)
        elif quota("SMILES"):
            mol = Chem.MolFromSmiles(truth["smiles"])
            variants = [s for s in Chem.MolToRandomSmilesVect(mol, 2, randomSeed=row.cid) if s != truth["smiles"]]
            if variants:
                add(variants[0], "SMILES", truth, True, f"{origin}: a randomised SMILES of its structure")
    for row, truth in unsold:
        name = _unique_name(row, owners, rng)
        if not name or truth["inchikey"] in used or name_key(name) in catalogue_keys:
            continue
        origin = f"chemicals pubchem {row.table} table, CID {row.cid} (not in the catalogue)"
        near = near_name_keys(catalogue, name_key(name), LOOK_ALIKE_DISTANCE)[0] if len(name) >= 6 else []
        if near and quota("look-alike, not sold"):
            add(name, "look-alike, not sold", truth, False, f"{origin}; {near[0][1]} edits from {near[0][0]!r}")
        elif not near and quota("known, not sold"):
            add(name, "known, not sold", truth, False, origin)
        if not any(quota(group) for group in DRAWN_GROUPS):
            break
    return drawn


def check_hand_rows(rows: list[dict[str, Any]], catalogue: CatalogueStore) -> list[dict[str, Any]]:
    """The hand-checked rows with their InChIKey filled in from their structure and their catalogue
    membership computed; ``ValueError`` when a CAS check digit is wrong, a structure disagrees with the
    tables' structure for its CAS number, or OPSIN reads a systematic name as another structure."""
    from gauntlet.mcp_servers.chem import opsin
    from gauntlet.mcp_servers.chem.chemistry import identity_of
    from gauntlet.mcp_servers.chem.identities import pubchem_rows

    wanted = {row["cas"] for row in rows if row.get("cas")}
    by_cas: dict[str, set[str]] = defaultdict(set)
    for table in ("small", "large"):
        for values in pubchem_rows(table):
            if values[1] in wanted:
                by_cas[values[1]].add(identity_of(values[4]).inchikey)
    parser = opsin.OpsinParser() if opsin.available() else None
    checked = []
    try:
        for row in rows:
            if row.get("cas") and not cas_check_digit_ok(row["cas"]):
                raise ValueError(f"{row['name']!r}: CAS {row['cas']} fails its check digit")
            inchikey = identity_of(row["smiles"]).inchikey if row.get("smiles") else None
            if inchikey and row.get("cas") in by_cas and inchikey not in by_cas[row["cas"]]:
                raise ValueError(f"{row['name']!r}: the structure given is not the tables' structure for CAS "
                                 f"{row['cas']}")
            if inchikey and parser is not None and row.get("systematic"):
                parsed = parser.parse(row["name"])
                if not parsed or identity_of(parsed).inchikey != inchikey:
                    raise ValueError(f"{row['name']!r}: OPSIN reads it as {parsed}, not the structure given")
            label = LabelledName(row["name"], row["group"], inchikey, row.get("cas"), False, HAND_CHECKED)
            checked.append({**row, "inchikey": inchikey, "in_catalogue": bool(catalogue_ids(catalogue, label)),
                            "origin": HAND_CHECKED})
    finally:
        if parser is not None:
            parser.close()
    return checked


def write_labels(catalogue: CatalogueStore, path: Path | None = None, seed: int = 0) -> dict[str, Any]:
    """Rewrite the labelled-names file: its hand-checked rows checked, the drawn rows drawn afresh."""
    path = path or curated_path(LABELS_FILE)
    document = json.loads(path.read_text(encoding="utf-8"))
    hand = check_hand_rows([row for row in document["names"] if row["origin"] == HAND_CHECKED], catalogue)
    document["names"] = hand + draw_rows(catalogue, seed)
    document["catalogue"] = {key: catalogue.snapshot[key] for key in ("builder_version", "n_chemicals",
                                                                       "content_sha256")}
    counts = Counter((row["group"], row["in_catalogue"]) for row in document["names"])
    document["counts"] = {f"{group} ({'in' if inside else 'not in'} catalogue)": n
                          for (group, inside), n in sorted(counts.items())}
    path.write_text(_dump(document), encoding="utf-8")
    return document


def _dump(document: dict[str, Any]) -> str:
    """The file with one labelled name per line (diffs stay readable)."""
    head = {key: value for key, value in document.items() if key != "names"}
    lines = ",\n  ".join(json.dumps(row, ensure_ascii=False) for row in document["names"])
    text = json.dumps(head, indent=1, ensure_ascii=False)
    return text[:-2] + f',\n "names": [\n  {lines}\n ]\n}}\n'


if __name__ == "__main__":
    from gauntlet.mcp_servers.chem.build import catalogue_path

    written = write_labels(CatalogueStore(catalogue_path()))
    print(json.dumps(written["counts"], indent=1))
