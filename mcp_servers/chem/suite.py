"""Task suites (``gauntlet.tasks`` format), one per view, with gold trajectories from the oracle.

Each reaction becomes one ``ToolTask``: the question states the pricing rule, ``inputs`` name the
reaction and view, the answer is the gold price (USD per gram of product, ``gold.py``), and the eval
spec accepts answers within 25 % (CTA@25). The gold trajectory is the oracle's (``solver.oracle``)
calls and results, recorded through a real MCP client session against the pricing server; the builder
refuses to write a suite whose oracle answer differs from the gold price (for noisy views the oracle
reads names and amounts from the clean view, so its trajectory is a correct solution of the noisy task).

The ``routes`` view is a suite of the multi-step routes (``routes.py``), priced by the route rule
(``gold.price_route``); its task inputs carry the route id as ``reaction_id``. The noisy route views
(``routes-noisy-low`` / ``-medium`` / ``-high``) are the same routes read through ``views.route_view``'s
noise, with the same gold.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gauntlet.mcp_servers.chem.build import built_catalogue_path
from gauntlet.mcp_servers.chem.reaction_data import CURATED_INPUTS, ReactionSet, built_reactions_dir, reactions_dir
from gauntlet.mcp_servers.chem.solver import Solver, oracle
from gauntlet.mcp_servers.chem.views import (NOISE_LEVELS, ROUTE_NOISE_LEVELS, ROUTE_VIEW, ROUTE_VIEWS, VIEWS,
                                                     check_view)

if TYPE_CHECKING:
    from gauntlet.bridges.mcp_client import BlockingMCPClient

CallTool = Callable[[str, dict[str, Any]], tuple[bool, Any]]

DATA_NAME = "chem-suite"
# 3: select_pack results are flat (gold trajectories record them); 4: noisy route views; 5: search results say
# whether the query was found (the gold trajectories record them), on the reaction set of builder 4
BUILDER_VERSION = "5"
SUITE_VIEWS = (*VIEWS, *ROUTE_VIEWS)
SUITE_FILE = "suite.jsonl"
CTA_TOLERANCE = 0.25
SERVER_NAME = "chem"


class GoldMismatchError(RuntimeError):
    """The oracle, run through the server, did not reproduce the gold price: the data are inconsistent."""


def question(reaction_id: str, view: str) -> str:
    if view in ROUTE_VIEWS:
        read = f"get_route(route_id={reaction_id!r})" if view == ROUTE_VIEW else \
            f"get_route(route_id={reaction_id!r}, view={view!r})"
        return (f"What does the multi-step route {reaction_id} cost per gram of its final product? Read it with "
                f"{read}. Step 1 runs on 1 mmol of its limiting reagent; each later step "
                "runs on all of the intermediate the step before gave (scale_k = scale_(k-1) x yield_(k-1) / 100 "
                "mmol). Intermediates are made, not bought. Buy each other non-solvent component of step k, "
                "equiv x scale_k mmol, as the cheapest valid pack that covers it (or whole multiples of the largest "
                "valid pack), step by step. Do not price solvents. Divide the total cost of all steps by the grams of "
                "final product. Answer with one number: US dollars per gram of final product.")
    solvents = ("Also buy each solvent by volume (mL per mmol x 1 mmol, as liquid), with the same pack rule. "
                if view == "solvents" else "Do not price solvents. ")
    return (f"What does reaction {reaction_id} cost per gram of product? Read it with get_reaction "
            f"(reaction_id={reaction_id!r}, view={view!r}). Work on a basis of "
            "1 mmol of the limiting reagent: each component needs equiv x molar mass x 1 mmol; buy that need as the "
            "cheapest valid pack that covers it (or whole multiples of the largest valid pack). "
            f"{solvents}Divide the total cost by the grams of product at the stated yield. Answer with one number: "
            "US dollars per gram of product.")


def build_suite(folder: Path, *, view: str = "clean", reactions: dict | None = None) -> None:
    """Write ``suite.jsonl`` for ``view`` over the reaction set built with ``reactions`` parameters."""
    from gauntlet.bridges.mcp_client import BlockingMCPClient, ServerTarget
    from gauntlet.mcp_servers.chem.server import build_server
    from gauntlet.tasks import EvalSpec, GoldCall, ToolTask, save_suite

    check_suite_view(view)
    reaction_params = dict(reactions or {})
    folder_of_reactions = built_reactions_dir(**reaction_params)
    database = built_catalogue_path(**reaction_params.get("catalogue", {}))
    reaction_set = ReactionSet(folder_of_reactions)
    pricing = ROUTE_VIEW if view in ROUTE_VIEWS else view if view == "solvents" else "clean"
    items = reaction_set.routes if view in ROUTE_VIEWS else reaction_set.records
    client = BlockingMCPClient(ServerTarget(factory=functools.partial(build_server, database, folder_of_reactions)))
    client.open()
    call_tool = tool_caller(client)
    tasks = []
    try:
        for reaction_id, record in items.items():
            spelling = "clean" if view in NOISE_LEVELS else ROUTE_VIEW if view in ROUTE_NOISE_LEVELS else None
            solver = oracle(reaction_id, view, spelling_view=spelling)
            answer, calls = run_calls(solver, call_tool)
            gold = record.gold[pricing]
            if answer is None or not math.isclose(answer, gold.cost_per_g_usd, rel_tol=1e-9):
                raise GoldMismatchError(f"{reaction_id} ({view}): the oracle answered {answer}, the gold rule gives "
                                        f"{gold.cost_per_g_usd}")
            tasks.append(ToolTask(
                id=f"{view}-{reaction_id}", question=question(reaction_id, view), server=SERVER_NAME,
                inputs={"reaction_id": reaction_id, "view": view},
                gold_trajectory=[GoldCall(call=name, args=arguments, obs=result)
                                 for name, arguments, _, result in calls],
                answer=gold.cost_per_g_usd, eval_spec=EvalSpec(kind="numeric", rel_tol=CTA_TOLERANCE),
                metadata={"reaction_class": _classes(record), "view": view,
                          "gold": gold.to_json()}))
    finally:
        client.close()
    save_suite(tasks, Path(folder) / SUITE_FILE)


def check_suite_view(view: str) -> None:
    if view not in ROUTE_VIEWS:
        check_view(view)


def _classes(record) -> str:
    """The reaction class, or for a route its classes in step order ("reductive amination > Suzuki coupling")."""
    if hasattr(record, "route"):
        return " > ".join(step.reaction_class for step in record.route.steps)
    return record.reaction.reaction_class


def tool_caller(client: BlockingMCPClient) -> CallTool:
    """``call_tool(name, arguments) -> (is_error, result value)`` on an open ``BlockingMCPClient``."""
    from gauntlet.bridges.mcp_client import result_value

    def call_tool(name: str, arguments: dict[str, Any]) -> tuple[bool, Any]:
        result = client.call_tool(name, arguments)
        return bool(result.isError), result_value(result)

    return call_tool


def solve_through(client: BlockingMCPClient, solver: Solver) -> tuple[float | None, list[dict[str, Any]]]:
    """Run ``solver`` through ``client``; its answer and its calls as dicts with ``ToolCall``'s field names
    (what the scorer reads)."""
    answer, calls = run_calls(solver, tool_caller(client))
    return answer, [{"name": n, "arguments": a, "is_error": e, "result": r} for n, a, e, r in calls]


def run_calls(solver: Solver, call_tool: CallTool) -> tuple[float | None, list[tuple[str, dict[str, Any], bool, Any]]]:
    """Drive a solver generator with ``call_tool(name, arguments) -> (is_error, result)``; returns its
    answer and the calls made as (name, arguments, is_error, result)."""
    calls: list[tuple[str, dict[str, Any], bool, Any]] = []
    try:
        name, arguments = next(solver)
        while True:
            is_error, result = call_tool(name, arguments)
            calls.append((name, arguments, is_error, result))
            name, arguments = solver.send((is_error, result))
    except StopIteration as stop:
        return stop.value, calls


def suite_path(view: str = "clean", **reaction_params) -> Path:
    """The suite file of ``view``, built on first use (each registered chem suite is this function with
    its view bound)."""
    from gauntlet.datacache import ensure_built

    check_suite_view(view)
    params = {"view": view, **({"reactions": reaction_params} if reaction_params else {})}
    reactions_dir(**reaction_params)
    return ensure_built(DATA_NAME, BUILDER_VERSION, build_suite, params=params, inputs=CURATED_INPUTS) / SUITE_FILE
