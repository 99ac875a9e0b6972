"""Read-only access to the catalogue database: chemicals, their names, their supplier quotes, and the
compounds the tables know that the catalogue does not sell."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from gauntlet.mcp_servers.chem.pricing import INVALID_GRADES, VALID_MIN_PURITY_PCT, Quote


QUOTE_CACHE_SIZE = 512
# The InChIKey suffix of a catalyst sold by loading (Pd/C): its own identity, though it has the metal's structure.
LOADED_SUFFIX = "-LOADED"
# Quote.is_valid in SQL, and its parameters: the minimum purity, then the invalid grades in sorted order.
_VALID_SQL = f"AND purity_pct >= ? AND grade NOT IN ({', '.join('?' * len(INVALID_GRADES))})"
_VALID_PARAMETERS = (VALID_MIN_PURITY_PCT, *sorted(INVALID_GRADES))


class UnknownChemicalError(LookupError):
    """A chemical id that is not in the catalogue."""


@dataclass(frozen=True)
class ChemicalRecord:
    chemical_id: int
    name: str
    smiles: str
    inchikey: str
    formula: str
    molar_mass_g_mol: float
    density_g_ml: float | None
    physical_state: str
    cas: str | None
    category: str
    source: str
    pubchem_cid: int | None
    iupac_name: str | None
    note: str

    @property
    def sold_by_loading(self) -> bool:
        return self.inchikey.endswith(LOADED_SUFFIX)


@dataclass(frozen=True)
class KnownRecord:
    """A compound of the PubChem tables that the catalogue does not sell."""

    name: str
    cas: str | None
    formula: str
    inchikey: str
    pubchem_cid: int | None


# Upper bound of a key range: every key that starts with a prefix sorts below prefix + this.
_AFTER_EVERY_CHARACTER = "\U0010ffff"
MAX_NEAR_KEYS = 300
_CHEMICAL_COLUMNS = ("chemical_id, name, smiles, inchikey, formula, molar_mass_g_mol, density_g_ml, physical_state, "
                     "cas, category, source, pubchem_cid, iupac_name, note")
_QUOTE_COLUMNS = ("quote_id, chemical_id, supplier_id, catalog_number, pack_amount, pack_unit, pack_mass_g, "
                  "pack_volume_ml, price_usd, purity_pct, grade, lead_time_days")


class CatalogueStore:
    """The catalogue, opened read-only (SQLite ``mode=ro``): nothing a caller does can change it.

    The name index (every spelling's key -> chemical ids) loads on first search, so opening is cheap.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"no catalogue database at {self.path}; build it with `gauntlet data build chem`")
        self._connection = sqlite3.connect(f"file:{self.path.resolve()}?mode=ro", uri=True, check_same_thread=False)
        # Pages read through a memory map instead of one read call each: a lookup of a chemical not yet read
        # touches a few pages no cache holds (a pack choice is ~10 % faster at p50). A rebuild replaces the
        # file whole, never in place, so the map stays valid.
        self._connection.execute(f"PRAGMA mmap_size = {self.path.stat().st_size}")
        self._lock = threading.Lock()
        self._names: dict[str, list[tuple[int, str, str]]] | None = None
        self._chemicals: dict[int, ChemicalRecord] = {}
        self._quotes: dict[int, list[Quote]] = {}
        self.snapshot = {key: json.loads(value) for key, value in self._query("SELECT key, value FROM meta")}

    def close(self) -> None:
        self._connection.close()

    def _query(self, sql: str, parameters: tuple = ()) -> list[tuple]:
        with self._lock:
            return self._connection.execute(sql, parameters).fetchall()

    # Chemicals -------------------------------------------------------------------------------
    def chemical(self, chemical_id: int) -> ChemicalRecord:
        """A chemical's record, read by its primary key on first use and kept (the catalogue never changes
        under a store), so a fresh server answers its first call without loading 25,000 records."""
        cached = self._chemicals.get(chemical_id)
        if cached is None:
            rows = self._query(f"SELECT {_CHEMICAL_COLUMNS} FROM chemicals WHERE chemical_id = ?", (chemical_id,))
            if not rows:
                raise UnknownChemicalError(f"no chemical with id {chemical_id} (ids run from 1 to "
                                           f"{self.snapshot['n_chemicals']}); find ids with search_chemical")
            cached = self._chemicals[chemical_id] = ChemicalRecord(*rows[0])
        return cached

    def ids_by(self, column: str, value: str) -> list[int]:
        """Chemical ids whose ``smiles``, ``inchikey`` or ``connectivity`` equals ``value``."""
        if column not in ("smiles", "inchikey", "connectivity"):
            raise ValueError(f"cannot look chemicals up by {column!r}")
        return [row[0] for row in self._query(f"SELECT chemical_id FROM chemicals WHERE {column} = ? "
                                              "ORDER BY chemical_id", (value,))]

    def names_of(self, chemical_id: int) -> list[tuple[str, str]]:
        """(name, kind) of every spelling of a chemical, in catalogue order."""
        return self._query("SELECT name, kind FROM names WHERE chemical_id = ? ORDER BY rowid", (chemical_id,))

    def all_structures(self) -> list[tuple[int, str]]:
        return self._query("SELECT chemical_id, smiles FROM chemicals ORDER BY chemical_id")

    def names_with_keys(self, keys: list[str], column: str = "name_key") -> list[tuple[int, str, str, str]]:
        """[(chemical id, name as written, kind, the key it matched)] of the spellings whose ``name_key``
        (or ``compact_key``) is one of ``keys``, in catalogue order."""
        if column not in ("name_key", "compact_key"):
            raise ValueError(f"cannot look names up by {column!r}")
        if not keys:
            return []
        marks = ", ".join("?" * len(keys))
        return self._query(f"SELECT chemical_id, name, kind, {column} FROM names WHERE {column} IN ({marks}) "
                           "ORDER BY rowid", tuple(keys))

    def keys_near(self, head: str, tail: str, min_length: int, max_length: int) -> tuple[list[str], bool]:
        """The distinct name keys of ``min_length`` to ``max_length`` characters that start with ``head``
        or end with ``tail`` (two indexed range scans), and whether that is all of them: at most
        ``MAX_NEAR_KEYS`` are read from each side (a crowded neighbourhood, such as a supplier's codes that
        share a prefix, is cut short)."""
        starting = self._query("SELECT DISTINCT name_key FROM names WHERE name_key >= ? AND name_key < ? "
                               "AND length(name_key) BETWEEN ? AND ? LIMIT ?",
                               (head, head + _AFTER_EVERY_CHARACTER, min_length, max_length, MAX_NEAR_KEYS + 1))
        reversed_tail = tail[::-1]
        ending = self._query("SELECT DISTINCT reversed_key FROM names WHERE reversed_key >= ? AND reversed_key < ? "
                             "AND length(reversed_key) BETWEEN ? AND ? LIMIT ?",
                             (reversed_tail, reversed_tail + _AFTER_EVERY_CHARACTER, min_length, max_length,
                              MAX_NEAR_KEYS + 1))
        complete = len(starting) <= MAX_NEAR_KEYS and len(ending) <= MAX_NEAR_KEYS
        keys = {key for (key,) in starting[:MAX_NEAR_KEYS]} | {key[::-1] for (key,) in ending[:MAX_NEAR_KEYS]}
        return sorted(keys), complete

    def known(self, column: str, value: str) -> list[KnownRecord]:
        """Compounds the catalogue does not sell whose common name has the search key ``value``
        (``column`` "name_key" or "compact_key": both are stored under one key column), or whose
        ``inchikey`` or ``cas`` is ``value``."""
        if column in ("name_key", "compact_key"):
            sql = ("SELECT k.name, k.cas, k.formula, k.inchikey, k.pubchem_cid FROM known_names n "
                   "JOIN known k ON k.known_id = n.known_id WHERE n.search_key = ? ORDER BY k.known_id")
        elif column in ("inchikey", "cas"):
            sql = f"SELECT name, cas, formula, inchikey, pubchem_cid FROM known WHERE {column} = ? ORDER BY known_id"
        else:
            raise ValueError(f"cannot look known compounds up by {column!r}")
        return [KnownRecord(*row) for row in self._query(sql, (value,))]

    def names_with_key(self, key: str) -> list[tuple[int, str, str]]:
        """[(chemical id, name as written, kind)] of the spellings whose search key is ``key``; an indexed
        query until the full name index is loaded (so a fresh server answers its first search fast)."""
        if self._names is not None:
            return self._names.get(key, [])
        return self._query("SELECT chemical_id, name, kind FROM names WHERE name_key = ? ORDER BY rowid", (key,))

    @property
    def name_index(self) -> dict[str, list[tuple[int, str, str]]]:
        """name key -> [(chemical id, name as written, kind)], loaded once."""
        if self._names is None:
            index: dict[str, list[tuple[int, str, str]]] = defaultdict(list)
            for chemical_id, name, key, kind in self._query(
                    "SELECT chemical_id, name, name_key, kind FROM names ORDER BY rowid"):
                index[key].append((chemical_id, name, kind))
            self._names = dict(index)
        return self._names

    # Quotes ----------------------------------------------------------------------------------
    def quotes(self, chemical_id: int) -> list[Quote]:
        """Every quote of a chemical, cheapest first (ties by quote id). The last ``QUOTE_CACHE_SIZE``
        chemicals' quotes are kept: the database never changes under a store."""
        self.chemical(chemical_id)
        cached = self._quotes.get(chemical_id)
        if cached is None:
            cached = list(map(Quote._make, self._query(  # _make skips the per-row argument unpacking
                f"SELECT {_QUOTE_COLUMNS} FROM quotes WHERE chemical_id = ? ORDER BY price_usd, quote_id",
                (chemical_id,))))
            if len(self._quotes) >= QUOTE_CACHE_SIZE:
                self._quotes.pop(next(iter(self._quotes)))
            self._quotes[chemical_id] = cached
        return list(cached)

    def cheapest_valid_covering(self, chemical_id: int, min_mass_g: float) -> Quote | None:
        """The cheapest valid quote (ties: lower id) whose pack holds at least ``min_mass_g`` grams, or None.

        One indexed query that stops at the first match in price order: the pack rule's common case
        without decoding every quote of the chemical (``procurement.select_pack_in_store``)."""
        rows = self._query(f"SELECT {_QUOTE_COLUMNS} FROM quotes WHERE chemical_id = ? AND pack_mass_g >= ? "
                           f"{_VALID_SQL} ORDER BY price_usd, quote_id LIMIT 1",
                           (chemical_id, min_mass_g, *_VALID_PARAMETERS))
        return Quote._make(rows[0]) if rows else None

    def cheapest_largest_valid(self, chemical_id: int) -> Quote | None:
        """Of the valid quotes with the largest pack, the cheapest (ties: lower id), or None if none is valid."""
        rows = self._query(f"SELECT {_QUOTE_COLUMNS} FROM quotes WHERE chemical_id = ? {_VALID_SQL} "
                           "ORDER BY pack_mass_g DESC, price_usd, quote_id LIMIT 1", (chemical_id, *_VALID_PARAMETERS))
        return Quote._make(rows[0]) if rows else None

    def supplier_names(self) -> dict[int, str]:
        return dict(self._query("SELECT supplier_id, name FROM suppliers"))
