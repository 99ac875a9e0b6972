"""Noisy views of the routes, the oracle's score on the noisy views at smoke size, and the reactant
exclusions that keep a step from reacting with itself."""

from __future__ import annotations

import math

import pytest

from gauntlet.mcp_servers.chem.reaction_data import ReactionSet
from gauntlet.mcp_servers.chem.reactions import StepFactory
from gauntlet.mcp_servers.chem.scoring import diagnose, summarize
from gauntlet.mcp_servers.chem.solver import oracle
from gauntlet.mcp_servers.chem.suite import solve_through
from gauntlet.mcp_servers.chem.views import ROUTE_NOISE_LEVELS, route_view
from gauntlet.tasks import NO_ANSWER, load_suite

# The oracle reads the noisy text as given (no clean spelling): it may lose a task to an OCR-corrupted
# name, not more than this share at smoke size.
MIN_NOISY_CTA25 = 0.95


@pytest.fixture(scope="module")
def reaction_set(small_data):
    return ReactionSet(small_data.reactions)


def test_noisy_route_views_perturb_names_and_amounts_but_keep_intermediates(reaction_set, catalogue):
    changed_names = changed_amounts = 0
    for record in reaction_set.routes.values():
        clean = route_view(record.route, catalogue)
        noisy = route_view(record.route, catalogue, "routes-noisy-high")
        assert noisy == route_view(record.route, catalogue, "routes-noisy-high")  # seeded
        assert [s["step"] for s in noisy["steps"]] == [s["step"] for s in clean["steps"]]
        for clean_step, noisy_step in zip(clean["steps"], noisy["steps"]):
            for a, b in zip(clean_step["components"], noisy_step["components"]):
                if a["role"] == "intermediate":
                    assert a == b
                changed_names += a["name"] != b["name"]
                changed_amounts += a["amount_text"] != b["amount_text"]
    assert changed_names and changed_amounts


def test_a_noisy_route_writes_masses_at_the_step_scale(reaction_set, catalogue):
    """A later step's mass is equiv x scale_k x MW, not equiv x 1 mmol x MW."""
    checked = 0
    for record in reaction_set.routes.values():
        noisy = route_view(record.route, catalogue, "routes-noisy-high")
        scale = 1.0
        for step, shown in zip(record.route.steps, noisy["steps"]):
            for component, text in zip(step.components, shown["components"]):
                amount = text["amount_text"]
                if amount.endswith(" mg") and not component.is_intermediate:
                    value = float(amount.removeprefix("ca. ").removesuffix(" mg"))
                    mw = catalogue.chemical(component.chemical_id).molar_mass_g_mol
                    assert value == pytest.approx(component.equiv * scale * mw, abs=0.051)
                    checked += scale < 1
            scale *= step.yield_pct / 100
    assert checked


@pytest.mark.parametrize("view", ["noisy-high", "routes-noisy-high"])
def test_the_oracle_reads_the_noisy_high_views_as_given(small_suite, client, view):
    tasks = load_suite(small_suite(view))
    assert tasks and all(t.inputs["view"] == view for t in tasks)
    diagnoses = []
    for task in tasks:
        answer, calls = solve_through(client, oracle(task.inputs["reaction_id"], view))
        diagnoses.append(diagnose(task, NO_ANSWER if answer is None else answer, calls))
    summary = summarize(diagnoses)
    assert summary["cta@25"] >= MIN_NOISY_CTA25, summary["stages"]


def test_the_noisy_route_suite_has_the_clean_gold_and_a_gold_trajectory_that_reads_the_noisy_view(small_data,
                                                                                                    small_suite):
    clean = {t.inputs["reaction_id"]: t for t in load_suite(small_data.routes_suite)}
    noisy = load_suite(small_suite("routes-noisy-high"))
    assert {t.inputs["reaction_id"] for t in noisy} == set(clean)
    for task in noisy:
        assert math.isclose(task.answer, clean[task.inputs["reaction_id"]].answer, rel_tol=1e-12)
        first = task.gold_trajectory[0]
        assert first.call == "get_route" and first.args["view"] == "routes-noisy-high"


def test_an_unknown_route_view_is_a_tool_error(client):
    result = client.call_tool("get_route", {"route_id": "ROUTE-0001", "view": "routes-noisy-extreme"})
    assert result.isError
    assert set(ROUTE_NOISE_LEVELS) == {"routes-noisy-low", "routes-noisy-medium", "routes-noisy-high"}


def test_a_suzuki_boronic_acid_or_a_buchwald_amine_never_carries_an_aryl_halide(catalogue):
    from rdkit import Chem

    factory = StepFactory(catalogue)
    kits = {kit.reaction_class.name: kit for kit in factory.classes}
    suzuki, buchwald = kits["Suzuki coupling"], kits["Buchwald-Hartwig amination"]
    bromo_boronic, boronic = Chem.MolFromSmiles("OB(O)c1ccc(Br)cc1"), Chem.MolFromSmiles("OB(O)c1ccc(C)cc1")
    assert factory.fits(boronic, suzuki.patterns[1], excluded=suzuki.excluded[1])
    assert not factory.fits(bromo_boronic, suzuki.patterns[1], excluded=suzuki.excluded[1])
    bromo_amine, amine = Chem.MolFromSmiles("NCc1ccc(Br)cc1"), Chem.MolFromSmiles("NCc1ccc(C)cc1")
    assert factory.fits(amine, buchwald.patterns[1], excluded=buchwald.excluded[1])
    assert not factory.fits(bromo_amine, buchwald.patterns[1], excluded=buchwald.excluded[1])
    halide = Chem.MolFromSmarts("c[Br,I]")
    for kit in (suzuki, buchwald):
        assert not any(factory.molecules[cid].HasSubstructMatch(halide) for cid in kit.pools[1])


def test_no_route_ends_with_a_protection(reaction_set):
    from gauntlet.mcp_servers.chem.routes import NOT_LAST_CLASSES

    assert all(r.route.steps[-1].reaction_class not in NOT_LAST_CLASSES for r in reaction_set.routes.values())


def test_a_smiles_variant_is_not_a_catalogue_name_and_grounds_to_its_chemical(catalogue, grounder):
    from gauntlet.mcp_servers.chem.names import name_key
    from gauntlet.mcp_servers.chem.views import smiles_variant

    checked = 0
    for chemical_id in range(1, 200):
        variant = smiles_variant(catalogue, chemical_id, seed=chemical_id)
        if variant is None:
            continue
        assert not catalogue.names_with_key(name_key(variant))  # no name table holds it: the grounder must parse it
        assert variant != catalogue.chemical(chemical_id).smiles
        assert grounder.search(variant, limit=1)[0].chemical_id == chemical_id
        checked += 1
    assert checked > 100


@pytest.mark.parametrize(("query", "meant"), [("Ac0H", "AcOH"), ("5odium tert-butoxide", "NaOtBu"),
                                              ("Pd(dppf)C12", "Pd(dppf)Cl2")])
def test_one_ocr_like_confusion_is_read_back_at_lower_confidence(grounder, query, meant):
    assert not grounder.store.names_with_key(query.casefold()), "the confusion is a catalogue spelling itself"
    expected = grounder.search(meant, limit=1)[0]
    found = grounder.search(query, limit=1)[0]
    assert found.chemical_id == expected.chemical_id and found.confidence < 1.0
    assert "OCR" in found.matched_on
