"""Name normalisation shared by the catalogue builder and the search: one key per spelling family.

``name_key`` folds case, unicode look-alikes (subscript digits, dashes, Greek letters) and whitespace:
two spellings with the same key are the same name. ``compact_key`` also drops spaces, hyphens and
apostrophes ("N,N-dimethyl formamide", "N,N-dimethylformamide"; "tert-butanol", "tert butanol"),
which chemists write either way; it keeps digits, commas and brackets, which carry structure
("1,2-" is not "2,1-" or "12-").
"""

from __future__ import annotations

import re

_TRANSLATION = str.maketrans({"₀": "0", "₁": "1", "₂": "2", "₃": "3", "₄": "4", "₅": "5", "₆": "6", "₇": "7",
                              "₈": "8", "₉": "9", "·": ".", "•": ".", "‐": "-", "‑": "-", "‒": "-", "–": "-",
                              "—": "-", "−": "-", "’": "'", "′": "'", "α": "alpha", "β": "beta", "ü": "u",
                              "±": "+/-"})
_SPACES = re.compile(r"\s+")
_COMPACTED = re.compile(r"[\s'-]+")
MAX_QUERY_LENGTH = 300


def name_key(text: str) -> str:
    """Case-folded, unicode-flattened, whitespace-collapsed form of a chemical name."""
    return _SPACES.sub(" ", text.translate(_TRANSLATION).casefold()).strip()


def compact_key(text: str) -> str:
    """``name_key`` without spaces, hyphens and apostrophes (see the module docstring)."""
    return _COMPACTED.sub("", name_key(text))


def search_keys(text: str) -> tuple[str, str]:
    """``(name_key(text), compact_key(text))``, normalising once."""
    key = name_key(text)
    return key, _COMPACTED.sub("", key)
