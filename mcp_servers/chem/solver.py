"""Scripted ways to price a reaction through the server's tools, as generators of tool calls.

A solver is a generator: it yields ``(tool name, arguments)``, receives ``(is_error, result)`` for
each call, and returns its answer (USD per gram of product, or None to abstain). The same solver
drives a real MCP client session in the suite builder (``suite.py``, the demo and the figures) and
acts as an agent in ``ToolTaskEnv`` (the chem agent family wraps it), so the oracle's trajectories are
exactly the gold trajectories.

* ``oracle`` follows the gold rule with the tools: ground each component (the compound the search
  identifies; it abstains when the search finds none, never buying a suggestion), buy its
  need with ``select_pack``, and divide the total by the product's grams at the stated yield with
  ``calculate``.
* ``naive`` grounds the same way but prices each component at the cheapest price per gram of any
  quote (whatever its grade or pack size) times the grams needed: what a careless shopper does.

In the ``routes`` view the id is a route's (``get_route``): the oracle runs step k on
``scale_k = scale_(k-1) x yield_(k-1) / 100`` mmol, buys each bought component of every step for
``equiv x scale_k`` mmol, skips the intermediates (made, not bought) and divides the total by the
grams of final product. The naive shopper does the same with its per-gram prices. In the noisy route
views (``routes-noisy-*``) an amount written as a mass, volume or mmol is already the step's own, and a
missing final molar mass is computed from the product's SMILES.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator
from typing import Any

Call = tuple[str, dict[str, Any]]
Solver = Generator[Call, tuple[bool, Any], float | None]
# buy(name, amount, unit): the cost of buying a component, as a term of the final calculate expression
Purchase = Callable[[str, float, str], Generator[Call, tuple[bool, Any], str | None]]
AMOUNT = re.compile(r"(?:ca\.\s*)?([0-9]*\.?[0-9]+)\s*(equiv|mol%|mmol|mg|uL|mL per mmol)")
SOLVENT_AMOUNTS = ("excess", "as solvent")
ROUTE_VIEW = "routes"
INTERMEDIATE_NAME = re.compile(r"^product of step \d+$")
# units of amount_of whose value is per mmol of the limiting reagent (the rest are a step's own amounts)
RELATIVE_TEXT_UNITS = ("equiv", "mol%", "mL per mmol")


def is_solvent(component: dict[str, Any]) -> bool:
    return (component.get("role") == "solvent" or component.get("volume_ml_per_mmol") is not None
            or component.get("amount_text") in SOLVENT_AMOUNTS)


def amount_of(component: dict[str, Any], scale_mmol: float = 1.0) -> tuple[float, str] | None:
    """The component's need as (amount, select_pack unit), or None if unreadable: equivalents and mol% on
    a scale of ``scale_mmol`` of the limiting reagent (1 mmol for a single step), masses, volumes and
    amounts as written (a noisy route step writes its own amounts at its scale)."""
    if component.get("volume_ml_per_mmol") is not None:
        return component["volume_ml_per_mmol"] * scale_mmol, "mL"
    if component.get("equiv") is not None:
        return component["equiv"] * scale_mmol, "mmol"
    match = AMOUNT.search(component.get("amount_text") or "")
    if not match:
        return None
    value, unit = float(match.group(1)), match.group(2)
    if unit in RELATIVE_TEXT_UNITS:
        value *= scale_mmol
    return {"equiv": (value, "mmol"), "mol%": (value / 100, "mmol"), "mmol": (value, "mmol"), "mg": (value, "mg"),
            "uL": (value, "uL"), "mL per mmol": (value, "mL")}[unit]


def is_intermediate(component: dict[str, Any]) -> bool:
    return component.get("role") == "intermediate" or bool(INTERMEDIATE_NAME.match(component.get("name") or ""))


def is_route_view(view: str) -> bool:
    return view == ROUTE_VIEW or view.startswith(f"{ROUTE_VIEW}-")


def _product_molar_mass(record: dict[str, Any]) -> Generator[Call, tuple[bool, Any], float | None]:
    """The product's molar mass as the reaction or route states it, else computed from its SMILES (the
    noisy views may leave it out); None if that fails."""
    molar_mass = record.get("product_molar_mass_g_mol")
    if molar_mass is not None:
        return molar_mass
    is_error, result = yield "compute_molar_mass", {"smiles": record["product_smiles"]}
    return None if is_error else result["molar_mass_g_mol"]


def _per_gram_of_product(terms: list[str], yields_pct: list[float],
                         molar_mass: float) -> Generator[Call, tuple[bool, Any], float | None]:
    """The answer through ``calculate``: the summed cost terms over the grams of product on a 1 mmol basis,
    ``(Σ terms) / (Π_k yield_k / 100 x molar mass / 1000)``."""
    yields = " * ".join(f"{yield_pct!r} / 100" for yield_pct in yields_pct)
    is_error, result = yield "calculate", {"expression": f"({' + '.join(terms)}) / ({yields} * {molar_mass!r} / 1000)"}
    return None if is_error else result["value"]


def _single_step_price(record: dict[str, Any], terms: list[str]) -> Generator[Call, tuple[bool, Any], float | None]:
    """Divide a reaction's cost ``terms`` by the grams of its product at the stated yield."""
    molar_mass = yield from _product_molar_mass(record)
    if molar_mass is None or record.get("yield_pct") is None or not terms:
        return None
    return (yield from _per_gram_of_product(terms, [record["yield_pct"]], molar_mass))


def oracle(reaction_id: str, view: str = "clean", spelling_view: str | None = None) -> Solver:
    """The oracle (see the module docstring). ``spelling_view`` reads names and amounts from another
    view of the same reaction (the suite builder's gold trajectories for noisy views use ``clean``)."""
    if is_route_view(view):
        return (yield from _route(reaction_id, _buy_pack, view, spelling_view))
    is_error, record = yield "get_reaction", {"reaction_id": reaction_id, "view": view}
    if is_error:
        return None
    if spelling_view and spelling_view != view:
        is_error, record = yield "get_reaction", {"reaction_id": reaction_id, "view": spelling_view}
        if is_error:
            return None
    include_solvents = view == "solvents"
    costs = []
    for component in record["components"]:
        if is_solvent(component) and not include_solvents:
            continue
        amount = amount_of(component)
        if amount is None:
            return None
        cost = yield from _buy_pack(component["name"], *amount)
        if cost is None:
            return None
        costs.append(cost)
    return (yield from _single_step_price(record, costs))


def naive(reaction_id: str, view: str = "clean") -> Solver:
    """The naive shopper (see the module docstring)."""
    if is_route_view(view):
        return (yield from _route(reaction_id, _buy_per_gram, view))
    is_error, record = yield "get_reaction", {"reaction_id": reaction_id, "view": view}
    if is_error:
        return None
    terms = []
    for component in record["components"]:
        if is_solvent(component) and view != "solvents":
            continue
        amount = amount_of(component)
        if amount is None:
            continue
        term = yield from _buy_per_gram(component["name"], *amount)
        if term is not None:
            terms.append(term)
    return (yield from _single_step_price(record, terms))


def _buy_pack(name: str, amount: float, unit: str) -> Generator[Call, tuple[bool, Any], str | None]:
    """The gold rule's purchase: ground ``name`` (the compound the search identifies) and buy the amount
    with select_pack; the cost as a number for a calculate expression, or None."""
    is_error, found = yield "search_chemical", {"query": name, "limit": 3}
    if is_error or not found["found"]:
        return None
    is_error, pack = yield "select_pack", {"chemical_id": found["candidates"][0]["chemical_id"],
                                           "required_amount": amount, "unit": unit}
    return None if is_error else repr(pack["total_usd"])


def _buy_per_gram(name: str, amount: float, unit: str) -> Generator[Call, tuple[bool, Any], str | None]:
    """The naive purchase: grams needed x the cheapest price per gram of any quote, as an expression."""
    is_error, found = yield "search_chemical", {"query": name, "limit": 1}
    if is_error or not found["found"]:
        return None
    chemical_id = found["candidates"][0]["chemical_id"]
    is_error, grams = yield "convert_quantity", {"value": amount, "from_unit": unit, "to_unit": "g",
                                                 "chemical_id": chemical_id}
    if is_error:
        return None
    is_error, quotes = yield "get_supplier_quotes", {"chemical_id": chemical_id, "limit": 200}
    if is_error:
        return None
    return f"{grams['value']!r} * {min(quote['price_usd_per_g'] for quote in quotes['quotes'])!r}"


def _route(route_id: str, buy: Purchase, view: str = ROUTE_VIEW, spelling_view: str | None = None) -> Solver:
    """Price a multi-step route (see the module docstring) with ``buy(name, amount, unit)``;
    ``spelling_view`` as for ``oracle``."""
    arguments = {"route_id": route_id} if view == ROUTE_VIEW else {"route_id": route_id, "view": view}
    is_error, route = yield "get_route", arguments
    if is_error:
        return None
    if spelling_view and spelling_view != view:
        is_error, route = yield "get_route", {"route_id": route_id, "view": spelling_view}
        if is_error:
            return None
    scale_mmol = 1.0
    terms = []
    for step in route["steps"]:
        for component in step["components"]:
            if is_solvent(component) or is_intermediate(component):
                continue
            amount = amount_of(component, scale_mmol)
            if amount is None:
                return None
            term = yield from buy(component["name"], *amount)
            if term is None:
                return None
            terms.append(term)
        if step.get("yield_pct") is None:
            return None
        scale_mmol = scale_mmol * step["yield_pct"] / 100
    if not terms:
        return None
    molar_mass = yield from _product_molar_mass(route)
    if molar_mass is None:
        return None
    return (yield from _per_gram_of_product(terms, [step["yield_pct"] for step in route["steps"]], molar_mass))
