"""Spelling neighbours of a name: edit distance, OCR-like confusions, and the catalogue names a few edits away.

``near_name_keys`` finds catalogue name keys within a few edits of a query without scanning every name:
one edit leaves either the start of a key (all but its last half and one character) or its end (its
last half) as written, so the keys that begin with the query's head or end with its tail, of a length
within the edit budget, are the candidates (two indexed range scans, ``CatalogueStore.keys_near``);
the optimal-string-alignment distance (Damerau-Levenshtein with adjacent transpositions) ranks them.
Keys farther than one edit are found when their edits all fall in one half. A neighbourhood crowded
past ``store.MAX_NEAR_KEYS`` keys on either side is read only in part, and says so.
"""

from __future__ import annotations

from gauntlet.mcp_servers.chem.store import CatalogueStore

# What a scanned or retyped character may stand for (seen, meant), on case-folded keys: 0/O, 1/l, 5/S,
# m/rn, l/I. One confusion per query is undone; each reading is an exact name lookup.
OCR_READINGS = (("0", "o"), ("1", "l"), ("5", "s"), ("m", "rn"), ("l", "i"))
MAX_OCR_READINGS = 60
MIN_NEIGHBOUR_LENGTH = 5


def ocr_readings(key: str) -> list[str]:
    """``key`` with one OCR-like confusion undone, every way (at most ``MAX_OCR_READINGS``)."""
    readings: list[str] = []
    for seen, meant in OCR_READINGS:
        start = key.find(seen)
        while start != -1 and len(readings) < MAX_OCR_READINGS:
            readings.append(key[:start] + meant + key[start + len(seen):])
            start = key.find(seen, start + 1)
    return readings


def edit_distance(a: str, b: str, limit: int) -> int:
    """Optimal-string-alignment distance of ``a`` and ``b`` (insertions, deletions, substitutions and
    adjacent transpositions cost 1), or ``limit + 1`` as soon as it must exceed ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    previous_row: list[int] | None = None
    row = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            value = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + cost)
            if (previous_row is not None and i > 1 and j > 1 and a[i - 1] == b[j - 2]
                    and a[i - 2] == b[j - 1]):
                value = min(value, previous_row[j - 2] + 1)
            current[j] = value
        if min(current) > limit:
            return limit + 1
        previous_row, row = row, current
    return row[-1] if row[-1] <= limit else limit + 1


def edited_characters(a: str, b: str) -> set[str]:
    """The characters ``a`` and ``b`` do not share at their first difference and last difference: what a
    single edit changed (for telling a typo from a changed locant digit)."""
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    end_a, end_b = len(a), len(b)
    while end_a > start and end_b > start and a[end_a - 1] == b[end_b - 1]:
        end_a, end_b = end_a - 1, end_b - 1
    return set(a[start:end_a]) | set(b[start:end_b])


def near_name_keys(store: CatalogueStore, key: str, max_distance: int) -> tuple[list[tuple[str, int]], bool]:
    """(name key, distance) of the catalogue keys within ``max_distance`` edits of ``key`` that the
    head-or-tail rule finds (see the module docstring), nearest first, then alphabetical; and whether
    every key within one edit was examined (false in a crowded neighbourhood, ``CatalogueStore.keys_near``)."""
    if len(key) < MIN_NEIGHBOUR_LENGTH:
        return [], True
    middle = len(key) // 2
    head, tail = key[:middle - 1], key[middle:]
    candidates, complete = store.keys_near(head, tail, len(key) - max_distance, len(key) + max_distance)
    found = []
    for candidate in candidates:
        if candidate != key:
            distance = edit_distance(key, candidate, max_distance)
            if distance <= max_distance:
                found.append((candidate, distance))
    return sorted(found, key=lambda item: (item[1], item[0])), complete
