"""The server's indexed pack rule, the noise views' salt formulas and layouts, the per-task scorer,
the suites' registry metadata and the data bundle."""

from __future__ import annotations

import json

import pytest

from gauntlet.mcp_servers.chem import bundle, procurement
from gauntlet.mcp_servers.chem.reaction_data import ReactionSet
from gauntlet.mcp_servers.chem.scoring import ChemScorer, diagnose
from gauntlet.mcp_servers.chem.suite import suite_path
from gauntlet.mcp_servers.chem.views import SALT_FORMULA_NAMES, mixed_layout
from gauntlet.tasks import NO_ANSWER, load_suite


def test_the_indexed_pack_rule_chooses_what_the_pack_rule_chooses_on_every_chemical(catalogue):
    for chemical_id in range(1, catalogue.snapshot["n_chemicals"] + 1):
        mass = catalogue.chemical(chemical_id).molar_mass_g_mol
        for need in (mass * 1e-6, mass * 1e-3, mass * 0.05, mass, mass * 20):  # from a micromole to 20 mol
            expected = procurement.select_pack(catalogue.quotes(chemical_id), need)
            assert procurement.select_pack_in_store(catalogue, chemical_id, need) == expected


def test_the_indexed_pack_rule_refuses_a_need_that_is_not_positive(catalogue):
    for need in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(procurement.ProcurementError, match="positive"):
            procurement.select_pack_in_store(catalogue, 1, need)


def test_every_salt_formula_variant_grounds_to_its_chemical_alone(grounder):
    for name, variants in SALT_FORMULA_NAMES.items():
        chemical_id = grounder.search(name, limit=1)[0].chemical_id
        for variant in variants:
            found = grounder.search(variant, limit=2)
            assert found[0].chemical_id == chemical_id and found[0].confidence == 1.0, variant
            assert len(found) == 1 or found[1].confidence < 1.0, variant


def test_noisy_views_use_salt_formulas_and_mixed_text_and_table_layouts(small_data):
    reaction_set = ReactionSet(small_data.reactions)
    names = [c["name"] for record in reaction_set.view("noisy-high").values() for c in record["components"]]
    formulas = {v for variants in SALT_FORMULA_NAMES.values() for v in variants if not v.islower()}
    assert formulas & set(names)
    layouts = [r["procedure"] for r in reaction_set.view("noisy-high").values() if "| component |" in r["procedure"]]
    assert layouts and not any("| component |" in r["procedure"] for r in reaction_set.view("clean").values())


def test_the_mixed_layout_has_one_table_row_per_component_as_shown(small_data):
    record = next(iter(ReactionSet(small_data.reactions).records.values()))
    shown = [{"name": f"name {i}", "role": None, "amount_text": f"{i} mg"}
             for i in range(len(record.reaction.components))]
    text = mixed_layout(record.reaction, shown)
    rows = [line for line in text.splitlines() if line.startswith("| name ")]
    assert rows == [f"| name {i} |  | {i} mg |" for i in range(len(shown))]
    assert f"{record.reaction.yield_pct:g}% yield" in text


def test_the_chem_scorer_grades_by_the_eval_spec_and_carries_the_diagnosis(small_data):
    tasks = load_suite(small_data.clean_suite)
    scorer = ChemScorer()
    right = scorer.score(tasks[0], tasks[0].answer * 1.1, [])
    wrong = scorer.score(tasks[1], tasks[1].answer * 3, [])
    silent = scorer.score(tasks[2], NO_ANSWER, [])
    assert right.answer_correct and not wrong.answer_correct and not silent.answer_correct
    assert right.details["chem"] == json.loads(json.dumps(diagnose(tasks[0], tasks[0].answer * 1.1, []).__dict__))
    summary = ChemScorer.summarize([right, wrong.model_dump(mode="json"), silent])
    assert summary["n_tasks"] == 3 and summary["cta@25"] == pytest.approx(1 / 3)
    assert summary["stages"]["abstained"] == 1 and summary["stages"]["grounding"] == 1


def test_the_chem_score_is_cta_at_25_relative_to_the_gold_price(small_data):
    # 30 % above gold is a miss (a price that lay within math.isclose's 25 % of the larger number passed before).
    task = load_suite(small_data.clean_suite)[0]
    above = ChemScorer().score(task, task.answer * 1.3, [])
    assert not above.answer_correct and above.score == 0.0 and above.details["chem"]["stage"] != "correct"
    for factor in (0.8, 1.2):  # within 25 % either way
        report = ChemScorer().score(task, task.answer * factor, [])
        assert report.answer_correct and report.score == 1.0 and report.details["chem"]["stage"] == "correct"


def test_every_chem_suite_names_the_chem_scorer_and_lists_every_view():
    from gauntlet.attacks import AttackScorer
    from gauntlet.mcp_servers.chem.attack import attack_suite_path, build_attack_server
    from gauntlet.registry import load_target, registry

    views = {"clean": "chem", "solvents": "chem-solvents", "noisy-low": "chem-noisy-low",
             "noisy-medium": "chem-noisy-medium", "noisy-high": "chem-noisy-high", "routes": "chem-routes",
             "routes-noisy-low": "chem-routes-noisy-low", "routes-noisy-medium": "chem-routes-noisy-medium",
             "routes-noisy-high": "chem-routes-noisy-high", "attack": "chem-attack"}
    for view, name in views.items():
        entry = registry.get("suite", name)
        assert entry.metadata["views"] == views and entry.metadata["view"] == view
        if view == "attack":  # the clean tasks through the server that plants injections, scored for both
            scorer = load_target(entry.metadata["env_kwargs"]["scorer"])()
            assert isinstance(scorer, AttackScorer) and isinstance(scorer.base, ChemScorer)
            assert entry.load() is attack_suite_path and entry.metadata["server"] == "chem-attack"
            assert registry.get("server", "chem-attack").load() is build_attack_server
            continue
        assert load_target(entry.metadata["env_kwargs"]["scorer"]) is ChemScorer
        loaded = entry.load()  # one builder for every view: suite_path with the view bound
        assert loaded.func is suite_path and loaded.args == () and loaded.keywords == {"view": view}


def test_the_data_bundle_records_every_part_it_built(small_data, tmp_path, monkeypatch):
    monkeypatch.setattr(bundle, "SUITE_VIEWS", ("clean", "routes"))  # the other views build the same way, slower
    monkeypatch.setenv("GAUNTLET_HOME", str(small_data.home))
    bundle.build_everything(tmp_path, n_chemicals=600, n_suppliers=30, n_reactions=24, n_routes=8)
    built = json.loads((tmp_path / bundle.BUNDLE_FILE).read_text())
    assert (built["n_chemicals"], built["n_reactions"], built["n_routes"]) == (600, 24, 8)
    assert built["suites"] == {"clean": str(small_data.clean_suite), "routes": str(small_data.routes_suite)}
    assert built["catalogue"] == str(small_data.database)
