"""Multi-step routes (intermediates made, not bought), Boc deprotection, and the route suite."""

from __future__ import annotations

import math

import pytest

from gauntlet.bridges.mcp_client import result_value
from gauntlet.mcp_servers.chem.gold import need_g, price_route
from gauntlet.mcp_servers.chem.procurement import select_pack
from gauntlet.mcp_servers.chem.reaction_data import ReactionSet
from gauntlet.mcp_servers.chem.reactions import REACTION_CLASSES, StepFactory, generate_reactions
from gauntlet.mcp_servers.chem.routes import generate_routes
from gauntlet.mcp_servers.chem.scoring import diagnose
from gauntlet.mcp_servers.chem.solver import naive, oracle
from gauntlet.mcp_servers.chem.suite import solve_through
from gauntlet.tasks import load_suite


@pytest.fixture(scope="module")
def routes(small_data):
    return ReactionSet(small_data.reactions).routes


@pytest.fixture(scope="module")
def factory(catalogue):
    return StepFactory(catalogue)


def test_every_later_step_runs_its_template_on_the_product_of_the_step_before(routes, catalogue):
    from rdkit import Chem
    from rdkit.Chem import AllChem

    templates = {c.name: AllChem.ReactionFromSmarts(c.template) for c in REACTION_CLASSES}
    assert routes
    for record in routes.values():
        steps = record.route.steps
        assert len(steps) >= 2
        for before, step in zip(steps, steps[1:]):
            intermediates = [c for c in step.components if c.is_intermediate]
            assert len(intermediates) == 1 and intermediates[0].chemical_id is None and intermediates[0].equiv == 1.0
            partners = [Chem.MolFromSmiles(catalogue.chemical(c.chemical_id).smiles)
                        for c in step.components if c.role == "coupling partner"]
            made = Chem.MolFromSmiles(before.product_smiles)
            orders = [(made, *partners), (*partners, made)]
            products = {Chem.MolToSmiles(product[0]) for order in orders
                        for product in templates[step.reaction_class].RunReactants(order)
                        if Chem.SanitizeMol(product[0], catchErrors=True) == 0}
            assert Chem.CanonSmiles(step.product_smiles) in {Chem.CanonSmiles(p) for p in products}


def test_a_route_is_priced_by_cascading_each_step_on_what_the_step_before_gave(routes, catalogue):
    for record in routes.values():
        route, gold = record.route, record.gold["routes"]
        scale, total, bought = 1.0, 0.0, 0
        for step in route.steps:
            for component in step.components:
                if component.is_solvent or component.is_intermediate:
                    continue
                total += select_pack(catalogue.quotes(component.chemical_id),
                                     need_g(catalogue, component.chemical_id, component.equiv, scale)).total_usd
                bought += 1
            scale *= step.yield_pct / 100
        assert len(gold.components) == bought and all(c.chemical_id is not None for c in gold.components)
        assert gold.cost_per_g_usd == pytest.approx(total / (scale * route.product_molar_mass_g_mol / 1000), rel=1e-12)
        assert price_route(route, catalogue) == gold


def test_a_lower_yield_early_in_a_route_makes_the_final_product_dearer(routes, catalogue):
    route = next(iter(routes.values())).route
    cheaper = price_route(route, catalogue).cost_per_g_usd
    route.steps[0].yield_pct /= 2
    try:
        assert price_route(route, catalogue).cost_per_g_usd > cheaper
    finally:
        route.steps[0].yield_pct *= 2


def test_route_generation_is_deterministic(catalogue, factory, routes):
    again = generate_routes(catalogue, len(routes), 0, factory)
    assert [r.to_json() for r in again] == [r.route.to_json() for r in routes.values()]


def test_the_oracle_prices_every_route_through_the_route_tools(small_data, client):
    tasks = load_suite(small_data.routes_suite)
    assert len(tasks) == 8
    for task in tasks:
        answer, calls = solve_through(client, oracle(task.inputs["reaction_id"], "routes"))
        assert calls[0]["name"] == "get_route"
        assert diagnose(task, answer, calls).stage == "correct"
        assert math.isclose(answer, task.answer, rel_tol=1e-9)


def test_the_naive_shopper_misses_routes_at_procurement(small_data, client):
    stages = []
    for task in load_suite(small_data.routes_suite):
        answer, calls = solve_through(client, naive(task.inputs["reaction_id"], "routes"))
        stages.append(diagnose(task, answer, calls).stage)
    assert stages.count("procurement") >= 6


def test_an_unknown_route_is_a_tool_error_that_names_the_ids(client):
    result = client.call_tool("get_route", {"route_id": "ROUTE-9999"})
    assert result.isError and "ROUTE-0001" in result.content[0].text
    listed = result_value(client.call_tool("list_routes", {"limit": 3}))
    assert listed["total"] == 8 and len(listed["routes"]) == 3 and listed["routes"][0]["n_steps"] >= 2


def test_boc_deprotection_frees_the_amine_of_a_catalogue_boc_building_block(catalogue, factory):
    reactions = generate_reactions(catalogue, 160, 0, factory)
    deprotections = [r for r in reactions if r.reaction_class == "Boc deprotection"]
    assert deprotections
    for reaction in deprotections:
        substrate = catalogue.chemical(reaction.components[0].chemical_id)
        assert substrate.source == "derived" and substrate.name.startswith("N-Boc-")
        parent = catalogue.chemical(catalogue.ids_by("smiles", reaction.product_smiles)[0])
        assert substrate.name == f"N-Boc-{parent.name}"
