"""Name normalisation shared by the catalogue builder and the search: one key per spelling family."""

from __future__ import annotations

import re

_TRANSLATION = str.maketrans({"₀": "0", "₁": "1", "₂": "2", "₃": "3", "₄": "4", "₅": "5", "₆": "6", "₇": "7",
                              "₈": "8", "₉": "9", "·": ".", "•": ".", "‐": "-", "‑": "-", "‒": "-", "–": "-",
                              "—": "-", "−": "-", "’": "'", "′": "'", "α": "alpha", "β": "beta", "ü": "u",
                              "±": "+/-"})
_SPACES = re.compile(r"\s+")
MAX_QUERY_LENGTH = 300


def name_key(text: str) -> str:
    """Case-folded, unicode-flattened, whitespace-collapsed form of a chemical name."""
    return _SPACES.sub(" ", text.translate(_TRANSLATION).casefold()).strip()
