"""Numbers and ids a call passes that the episode never showed: a small model's invented or copied figures.

A small model that prices a reaction after a worked example often writes the example's prices into its
own calculation, or a plausible figure it never read. Every number a call passes should come from the
task's question, a result the model read in this episode, or a computation it asked a tool for, so
``ungrounded_numbers`` lists the numbers of a call's arguments found in none of those ``sources``; the
LLM agent answers such a call with an error naming them instead of running it (option
``check_numbers``; a ``note`` event ``ungrounded_numbers`` counts them).

What counts as a number of a call: every JSON number of its arguments (booleans aside) and every decimal
literal inside its string arguments (an expression for the calculator), except integers of magnitude
at most ``FREE_INTEGER`` (counts, percentages, unit factors like 100 and 1000, ring-closure digits of a
SMILES, the digits of a chemical name). A number is grounded when it matches a number of the sources to
``REL_TOL`` (an integer exactly: ids have neighbours), as it is or scaled by 100 or 1000 either way (a
yield of 55 % written as 0.55, 230.263 mg written as 0.230263 g), so rounding and unit changes are not
errors; arithmetic the model did in its head is, and the error says to do it with a tool.

Identifiers: an argument named like an id (``ID_NAME``: ``chemical_id``, ``reaction_id``, ``quote_ids``)
refers to something a result or the question named, whatever its size: an integer id must be shown as
the value of an id (``"chemical_id": 2760``), a string id must occur in a shown text. A model that buys
"chemical 1" without having searched for anything is refused, as one that copies an example's price is.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Iterable
from typing import Any

FREE_INTEGER = 1000
REL_TOL = 1e-3
EXACT = 1e-9  # an integer past FREE_INTEGER (an id, a count of milligrams) must be one shown, not a neighbour
SCALES = (1.0, 100.0, 0.01, 1000.0, 0.001)
# An argument named like this holds a reference to something a result named: it cannot be made up.
ID_NAME = re.compile(r"(^|_)ids?$", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def numbers_in(value: Any) -> list[float]:
    """Every number of a JSON value: its numbers and the decimal literals of its strings, in order."""
    found: list[float] = []
    if isinstance(value, bool) or value is None:
        return found
    if isinstance(value, (int, float)):
        found.append(float(value))
    elif isinstance(value, str):
        found += [float(match) for match in _NUMBER.findall(value)]
    elif isinstance(value, dict):
        for item in value.values():
            found += numbers_in(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            found += numbers_in(item)
    return [number for number in found if math.isfinite(number)]


def _free(number: float) -> bool:
    return number.is_integer() and abs(number) <= FREE_INTEGER


def identifiers_in(arguments: dict[str, Any]) -> list[int | str]:
    """The values of the arguments named like an identifier (``ID_NAME``: ``chemical_id``, ``quote_ids``),
    list items one by one."""
    found: list[int | str] = []
    for name, value in arguments.items():
        if isinstance(value, dict):
            found += identifiers_in(value)
            continue
        if not ID_NAME.search(str(name)):
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, (int, str)) and not isinstance(item, bool) and str(item):
                found.append(item)
    return found


def ungrounded_numbers(arguments: dict[str, Any], sources: Iterable[str]) -> list[float | int | str]:
    """The numbers and identifiers of ``arguments`` (see the module docstring) that ``sources`` (the
    texts the model was shown in this episode) never showed, each once, in order."""
    texts = list(sources)
    identifiers = list(dict.fromkeys(identifiers_in(arguments)))
    wanted = [number for number in dict.fromkeys(numbers_in(arguments)) if not _free(number)
              and number not in identifiers]
    if not wanted and not identifiers:
        return []
    known = sorted({abs(number) for text in texts for number in numbers_in(text)})
    missing: list[float | int | str] = [identifier for identifier in identifiers
                                        if not any(_shows_id(text, identifier) for text in texts)]
    return missing + [number for number in wanted
                      if not any(matches(abs(number) * scale, known, EXACT if number.is_integer() else REL_TOL)
                                 for scale in SCALES)]


def _shows_id(text: str, identifier: int | str) -> bool:
    """Whether ``text`` names ``identifier``: a string id anywhere in it, an integer id as the value of an
    id (``"chemical_id": 2760``, ``chemical_id 2760``), not any number that happens to be equal."""
    if isinstance(identifier, str):
        return identifier in text
    return re.search(rf"id\"?\s*[:=]?\s*\"?{identifier}(?![\w.])", text, re.IGNORECASE) is not None


def matches(value: float, known: list[float], tolerance: float) -> bool:
    """Whether ``value`` is within ``tolerance`` (relative) of a number of the sorted list ``known``."""
    index = bisect.bisect_left(known, value * (1 - tolerance))
    return index < len(known) and known[index] <= value * (1 + tolerance)


UNGROUNDED_PREFIX = "Error: numbers not from this task:"


def ungrounded_message(values: list[float | int | str], answer_tool: str) -> str:
    """The error a call with ungrounded ``values`` gets instead of running (it starts ``UNGROUNDED_PREFIX``)."""
    shown = ", ".join(f"{value:g}" if isinstance(value, float) else str(value) for value in values[:8])
    return (f"{UNGROUNDED_PREFIX} {shown} appear{'s' if len(values) == 1 else ''} in no result of this task and not "
            "in its question; nothing was run. Take every number and id from a result of your own task (a worked "
            "example's are not yours), or compute the number with a tool first, then call again (or call "
            f"{answer_tool} with a number you computed).")


__all__ = ["EXACT", "FREE_INTEGER", "ID_NAME", "REL_TOL", "SCALES", "UNGROUNDED_PREFIX", "identifiers_in", "matches",
           "numbers_in", "ungrounded_message", "ungrounded_numbers"]
