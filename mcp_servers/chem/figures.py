"""The agent table of the docs: each scripted agent on each suite view, through a real MCP client session.

    python -m gauntlet.mcp_servers.chem.figures --out runs/chem-figures.json [--views clean routes]
        [--agents chem-oracle]
    python -m gauntlet.mcp_servers.chem.figures --data     # the data figures of the docs only

For every (view, agent) pair it drives the agent's solver (``solver.py``: the same generator the
registered agent runs inside ``gauntlet eval``) against the pricing server over one in-memory MCP
client session, scores every task with the judge-free scorer (``scoring.diagnose``) and prints one
row: CTA@10/25/50, median relative error, component precision/recall and the failure stages. It is
the fast path to the numbers ``gauntlet eval <suite> --agent <agent>`` + ``scoring`` give task by
task (the env adds episode recording, not different answers).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gauntlet.mcp_servers.chem.scoring import diagnose, summarize
from gauntlet.mcp_servers.chem.solver import Solver, naive, oracle

# Each solver under the name of the agent that runs it in ``gauntlet eval`` (the rows of the docs' table).
SOLVERS: dict[str, Callable[[str, str], Solver]] = {"chem-oracle": oracle, "chem-naive": naive}
AGENTS = tuple(SOLVERS)
DEFAULT_VIEWS = ("clean", "solvents", "noisy-low", "noisy-medium", "noisy-high", "routes", "routes-noisy-low",
                 "routes-noisy-medium", "routes-noisy-high")


def evaluate_view(view: str, agents: tuple[str, ...] = AGENTS) -> dict[str, dict[str, Any]]:
    """Each agent's summary (``scoring.summarize``) on the suite of ``view``, keyed by agent name."""
    from gauntlet.bridges.mcp_client import BlockingMCPClient, ServerTarget
    from gauntlet.mcp_servers.chem.build import catalogue_path
    from gauntlet.mcp_servers.chem.reaction_data import reactions_dir
    from gauntlet.mcp_servers.chem.server import build_server
    from gauntlet.mcp_servers.chem.suite import solve_through, suite_path
    from gauntlet.tasks import NO_ANSWER, load_suite

    tasks = load_suite(suite_path(view))
    client = BlockingMCPClient(ServerTarget(factory=functools.partial(build_server, catalogue_path(),
                                                                      reactions_dir())))
    client.open()
    out = {}
    try:
        for agent in agents:
            solve = SOLVERS[agent]
            started = time.perf_counter()
            diagnoses = []
            for task in tasks:
                answer, calls = solve_through(client, solve(task.inputs["reaction_id"], view))
                diagnoses.append(diagnose(task, NO_ANSWER if answer is None else answer, calls))
            out[agent] = {**summarize(diagnoses), "seconds": round(time.perf_counter() - started, 1)}
    finally:
        client.close()
    return out


def data_figures() -> dict[str, Any]:
    """Counts and label statistics of the default catalogue, reaction set and routes (the docs' figures)."""
    import statistics
    from collections import Counter

    from gauntlet.mcp_servers.chem.build import catalogue_path
    from gauntlet.mcp_servers.chem.reaction_data import ReactionSet, reactions_dir
    from gauntlet.mcp_servers.chem.store import CatalogueStore

    catalogue = CatalogueStore(catalogue_path())
    try:
        sources = Counter(row[0] for row in catalogue._query("SELECT source FROM chemicals"))
        n_names = catalogue._query("SELECT COUNT(*) FROM names")[0][0]
        snapshot = {key: catalogue.snapshot[key] for key in ("n_chemicals", "n_suppliers", "n_quotes")}
    finally:
        catalogue.close()
    reaction_set = ReactionSet(reactions_dir())
    clean = [r.gold["clean"].cost_per_g_usd for r in reaction_set.records.values()]
    solvents = [r.gold["solvents"].cost_per_g_usd / r.gold["clean"].cost_per_g_usd
                for r in reaction_set.records.values()]
    routes = [r.gold["routes"].cost_per_g_usd for r in reaction_set.routes.values()]
    chains = Counter(" > ".join(s.reaction_class for s in r.route.steps) for r in reaction_set.routes.values())
    return {**snapshot, "n_names": n_names, "sources": dict(sources), "n_reactions": len(clean),
            "classes": dict(Counter(r.reaction.reaction_class for r in reaction_set.records.values()).most_common()),
            "clean_label_usd_per_g": {"median": statistics.median(clean), "min": min(clean), "max": max(clean)},
            "solvents_over_clean_median": statistics.median(solvents),
            "n_routes": len(routes),
            "route_steps": dict(sorted(Counter(len(r.route.steps) for r in reaction_set.routes.values()).items())),
            "route_label_usd_per_g": {"median": statistics.median(routes), "min": min(routes), "max": max(routes)},
            "route_chains_top": dict(chains.most_common(8)), "n_route_chains": len(chains)}


def markdown_rows(results: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    rows = []
    for view, by_agent in results.items():
        for agent, s in by_agent.items():
            stages = ", ".join(f"{stage} {n}" for stage, n in s["stages"].items() if stage != "correct" and n) or "none"
            median = "n/a" if s["median_relative_error"] is None else f"{s['median_relative_error']:.3f}"
            rows.append(f"| {view} | `{agent}` | {s['n_tasks']} | {s['cta@10']:.3f} | {s['cta@25']:.3f} | "
                        f"{s['cta@50']:.3f} | {median} | {s['component_precision']:.3f} / "
                        f"{s['component_recall']:.3f} | {stages} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description="CTA@k per view for the scripted chem agents (see the module doc).")
    parser.add_argument("--out", type=Path, help="write the results as JSON here (atomically)")
    parser.add_argument("--views", nargs="+", default=list(DEFAULT_VIEWS), choices=DEFAULT_VIEWS)
    parser.add_argument("--agents", nargs="+", default=list(AGENTS), choices=AGENTS)
    parser.add_argument("--data", action="store_true", help="print the data figures only")
    args = parser.parse_args()
    if args.data:
        print(json.dumps(data_figures(), indent=1))
        return
    results = {}
    for view in args.views:
        results[view] = evaluate_view(view, tuple(args.agents))
        print("\n".join(markdown_rows({view: results[view]})), flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_name(args.out.name + ".tmp")
        tmp.write_text(json.dumps(results, indent=1))
        os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
