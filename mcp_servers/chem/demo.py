"""A short tour of the pricing server: price a few reactions through a real MCP client session.

``run_demo(out_dir)`` builds a demo-size catalogue and reaction set (cached after the first run),
starts the server, lets the oracle price three reactions of different classes and one multi-step
route call by call, checks each answer against the gold rule and writes what it did to
``out_dir/chem_demo.json``.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

DEMO_CATALOGUE = {"n_chemicals": 600, "n_suppliers": 30}
DEMO_REACTIONS = {"n_reactions": 12, "n_routes": 2, "catalogue": DEMO_CATALOGUE}
N_DEMO_REACTIONS = 3


def run_demo(out_dir: Path) -> None:
    from gauntlet.bridges.mcp_client import BlockingMCPClient, ServerTarget
    from gauntlet.mcp_servers.chem.build import catalogue_path
    from gauntlet.mcp_servers.chem.reaction_data import ReactionSet, reactions_dir
    from gauntlet.mcp_servers.chem.server import build_server
    from gauntlet.mcp_servers.chem.solver import oracle
    from gauntlet.mcp_servers.chem.suite import run_calls, tool_caller

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    print("chem pricing demo: building the demo catalogue and reactions (cached after the first run)")
    database = catalogue_path(**DEMO_CATALOGUE)
    folder = reactions_dir(**DEMO_REACTIONS)
    reaction_set = ReactionSet(folder)
    client = BlockingMCPClient(ServerTarget(factory=functools.partial(build_server, database, folder)))
    client.open()
    call_tool = tool_caller(client)

    picked: list[str] = []
    classes: set[str] = set()
    for reaction_id, record in reaction_set.records.items():
        if record.reaction.reaction_class not in classes and len(picked) < N_DEMO_REACTIONS:
            picked.append(reaction_id)
            classes.add(record.reaction.reaction_class)
    log = []
    try:
        print(f"server {client.server_name!r}: {len(client.list_tools())} tools over a real MCP client session")
        route_id, route = next(iter(reaction_set.routes.items()))
        tour = [(reaction_id, "clean", reaction_set.records[reaction_id].reaction.reaction_class,
                 reaction_set.records[reaction_id].reaction.procedure, reaction_set.records[reaction_id].gold["clean"])
                for reaction_id in picked]
        tour.append((route_id, "routes", " > ".join(step.reaction_class for step in route.route.steps),
                     f"a {len(route.route.steps)}-step route; intermediates are made, not bought",
                     route.gold["routes"]))
        for reaction_id, view, classes_text, text, gold_price in tour:
            print(f"\n{reaction_id} ({classes_text}): {text}")
            answer, calls = run_calls(oracle(reaction_id, view), call_tool)
            for name, _, is_error, result in calls:
                if name == "select_pack" and not is_error:
                    print(f"  buy {result['name']}: {result['required_g'] * 1000:.1f} mg needed -> "
                          f"{result['n_packs']} x {result['pack_amount']:g} {result['pack_unit']} from "
                          f"{result['supplier']} ({result['catalog_number']}) = ${result['total_usd']:.2f}")
            gold = gold_price.cost_per_g_usd
            print(f"  answer ${answer:,.2f} per g of product in {len(calls)} tool calls (gold ${gold:,.2f}/g)")
            log.append({"reaction_id": reaction_id, "answer_usd_per_g": answer, "gold_usd_per_g": gold,
                        "calls": [{"name": n, "arguments": a, "is_error": e} for n, a, e, _ in calls]})
    finally:
        client.close()
    tmp = out / "chem_demo.json.tmp"
    tmp.write_text(json.dumps(log, indent=1))
    os.replace(tmp, out / "chem_demo.json")
    print(f"\nwrote {out / 'chem_demo.json'}")
