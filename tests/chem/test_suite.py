"""Reactions, views, the gold rule, the oracle and naive agents, and the scorer's stage diagnosis."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from gauntlet.agents.chem.agents import NaiveAgent, OracleAgent
from gauntlet.agents.tool import GoldAgent
from gauntlet.mcp_servers.chem.gold import price_reaction
from gauntlet.mcp_servers.chem.reaction_data import ReactionSet
from gauntlet.mcp_servers.chem.scoring import diagnose, score_episodes, summarize
from gauntlet.mcp_servers.chem.solver import naive, oracle
from gauntlet.mcp_servers.chem.suite import solve_through
from gauntlet.mcp_servers.chem.views import agent_view
from gauntlet.runner import rollout
from gauntlet.tasks import load_suite


@pytest.fixture(scope="module")
def tasks(small_data):
    return load_suite(small_data.clean_suite)


@pytest.fixture(scope="module")
def reaction_set(small_data):
    return ReactionSet(small_data.reactions)


def evaluate(small_data, tasks, agent):
    env = gym.make("gauntlet/ToolTask-v0", tasks=tasks, server=small_data.server_factory())
    try:
        return [rollout(env, agent, seed=index, record="memory") for index in range(len(tasks))]
    finally:
        env.close()


# Reactions and the gold rule -----------------------------------------------------------------
def test_gold_price_is_total_pack_cost_over_grams_of_product(reaction_set, catalogue):
    record = next(iter(reaction_set.records.values()))
    reaction, gold = record.reaction, record.gold["clean"]
    total = 0.0
    for component in reaction.components:
        if component.is_solvent:
            continue
        need_g = component.equiv * catalogue.chemical(component.chemical_id).molar_mass_g_mol / 1000
        valid = [q for q in catalogue.quotes(component.chemical_id) if q.is_valid and q.pack_mass_g >= need_g]
        total += min(q.price_usd for q in valid)
    grams = reaction.yield_pct / 100 * reaction.product_molar_mass_g_mol / 1000
    assert gold.cost_per_g_usd == pytest.approx(total / grams, rel=1e-9)
    assert price_reaction(reaction, catalogue).cost_per_g_usd == pytest.approx(gold.cost_per_g_usd)


def test_reaction_generation_is_deterministic(catalogue, reaction_set):
    from gauntlet.mcp_servers.chem.reactions import generate_reactions

    first = [r.to_json() for r in generate_reactions(catalogue, 24, seed=0)]
    assert first == [r.to_json() for r in generate_reactions(catalogue, 24, seed=0)]
    assert first == [record.reaction.to_json() for record in reaction_set.records.values()]
    assert first != [r.to_json() for r in generate_reactions(catalogue, 24, seed=1)]


def test_the_solvent_view_adds_each_solvent_bought_by_volume(reaction_set):
    for record in reaction_set.records.values():
        solvents = [c for c in record.reaction.components if c.is_solvent]
        assert solvents and record.gold["solvents"].total_usd > record.gold["clean"].total_usd
        assert len(record.gold["solvents"].components) == len(record.gold["clean"].components) + len(solvents)


def test_reactions_span_several_real_classes_with_realistic_roles(reaction_set):
    classes = {record.reaction.reaction_class for record in reaction_set.records.values()}
    assert len(classes) >= 6
    for record in reaction_set.records.values():
        roles = [c.role for c in record.reaction.components]
        assert roles[0] == "limiting reagent" and record.reaction.components[0].equiv == 1.0
        assert 40 <= record.reaction.yield_pct <= 100 and "solvent" in roles


def test_noisy_views_perturb_text_but_not_the_reaction(reaction_set, catalogue):
    clean = reaction_set.view("clean")
    high = reaction_set.view("noisy-high")
    assert set(clean) == set(high)
    changed = sum(clean[i]["components"] != high[i]["components"] for i in clean)
    assert changed >= len(clean) // 2
    record = next(iter(reaction_set.records.values())).reaction
    assert agent_view(record, "noisy-high", catalogue) == agent_view(record, "noisy-high", catalogue)
    assert "chemical_id" not in json.dumps(high)


# Agents --------------------------------------------------------------------------------------
def test_the_oracle_scores_every_clean_task_through_mcp(small_data, tasks):
    episodes = evaluate(small_data, tasks, OracleAgent())
    assert all(episode.outcome.success for episode in episodes)
    diagnoses, summary = score_episodes(tasks, episodes)
    assert summary["cta@10"] == summary["cta@25"] == 1.0 and summary["median_relative_error"] < 1e-9
    assert summary["component_precision"] == summary["component_recall"] == 1.0


def test_replaying_the_gold_trajectories_scores_full_marks(small_data, tasks):
    episodes = evaluate(small_data, tasks[:6], GoldAgent(tasks))
    assert [episode.outcome.score for episode in episodes] == [1.0] * 6


def test_the_naive_shopper_is_told_apart_from_the_oracle(small_data, tasks):
    episodes = evaluate(small_data, tasks, NaiveAgent())
    _, summary = score_episodes(tasks, episodes)
    assert summary["cta@25"] < 0.5
    assert summary["stages"]["procurement"] > 0 and summary["component_recall"] == 1.0


# Stage diagnosis with agents that fail on purpose --------------------------------------------
def sabotage(solver, rewrite):
    """Run ``solver`` but send each call as ``rewrite(name, args)`` returns it."""
    call = next(solver)
    while True:
        reply = yield rewrite(*call)
        try:
            call = solver.send(reply)
        except StopIteration as stop:
            return stop.value


def wrong_grounding(name, args):
    return (name, {**args, "query": "water"}) if name == "search_chemical" else (name, args)


def bad_procurement(name, args):
    if name != "select_pack":
        return name, args
    return name, {**args, "required_amount": args["required_amount"] * 5000}


def bad_arithmetic(name, args):
    return (name, {"expression": f"3 * ({args['expression']})"}) if name == "calculate" else (name, args)


@pytest.mark.parametrize("rewrite, stage", [(wrong_grounding, "grounding"), (bad_procurement, "procurement"),
                                            (bad_arithmetic, "arithmetic")])
def test_the_scorer_names_the_stage_an_agent_failed_at(client, tasks, rewrite, stage):
    stages = []
    for task in tasks[:8]:
        answer, calls = solve_through(client, sabotage(oracle(task.inputs["reaction_id"]), rewrite))
        stages.append(diagnose(task, answer, calls).stage)
    assert stages.count(stage) >= 6 and set(stages) <= {stage, "correct"}


def test_an_agent_that_grounds_but_never_prices_fails_at_retrieval(client, tasks):
    def ground_then_guess(name, args):
        return ("get_chemical", {"chemical_id": args["chemical_id"]}) if name == "select_pack" else (name, args)

    stages = []
    for task in tasks[:8]:
        solver = sabotage(oracle(task.inputs["reaction_id"]), ground_then_guess)
        # get_chemical's reply has no total_usd: the oracle reads none, so feed it a guessed price instead.
        answer, calls = solve_through(client, _guess_prices(solver))
        stages.append(diagnose(task, answer, calls).stage)
    assert stages.count("retrieval") >= 6 and set(stages) <= {"retrieval", "correct"}


def _guess_prices(solver):
    call = next(solver)
    while True:
        is_error, result = yield call
        if call[0] == "get_chemical":
            result = {"total_usd": 1.0}
        try:
            call = solver.send((is_error, result))
        except StopIteration as stop:
            return stop.value


def test_abstaining_is_a_failure_at_every_tolerance(tasks):
    from gauntlet.tasks import NO_ANSWER

    diagnosis = diagnose(tasks[0], NO_ANSWER, [])
    assert diagnosis.stage == "abstained"
    assert summarize([diagnosis])["cta@50"] == 0.0


def test_the_naive_solver_and_the_oracle_share_grounding(client, tasks):
    _, oracle_calls = solve_through(client, oracle(tasks[0].inputs["reaction_id"]))
    _, naive_calls = solve_through(client, naive(tasks[0].inputs["reaction_id"]))
    queries = [c["arguments"]["query"] for c in oracle_calls if c["name"] == "search_chemical"]
    assert queries == [c["arguments"]["query"] for c in naive_calls if c["name"] == "search_chemical"]


def test_the_demo_prices_reactions_and_a_route_through_the_server_and_matches_gold(tmp_path, capsys):
    from gauntlet.mcp_servers.chem.demo import N_DEMO_REACTIONS, run_demo

    run_demo(tmp_path)
    log = json.loads((tmp_path / "chem_demo.json").read_text())
    assert len(log) == N_DEMO_REACTIONS + 1 and log[-1]["reaction_id"].startswith("ROUTE-")
    assert all(entry["answer_usd_per_g"] == pytest.approx(entry["gold_usd_per_g"], rel=1e-9) for entry in log)
    assert "buy " in capsys.readouterr().out


def test_cta_counts_answers_within_each_tolerance_and_abstentions_as_misses(tasks):
    from gauntlet.tasks import NO_ANSWER

    gold = float(tasks[0].answer)
    answers = [gold * 1.05, gold * 0.8, gold * 1.4, gold * 3.0, NO_ANSWER]  # errors 5 %, 20 %, 40 %, 200 %, none
    summary = summarize([diagnose(tasks[0], answer, []) for answer in answers])
    assert (summary["cta@10"], summary["cta@25"], summary["cta@50"]) == (1 / 5, 2 / 5, 3 / 5)
    assert summary["median_relative_error"] == pytest.approx(0.30)
    assert summary["mean_relative_error"] == pytest.approx((0.05 + 0.2 + 0.4 + 2.0) / 4)
    assert summary["stages"]["abstained"] == 1 and summary["stages"]["correct"] == 2
    # No call acted on a component, so both correct answers are guesses, not prices.
    assert summary["correct_unpriced"] == 2 and summary["cta@25_priced"] == 0.0


def test_a_correct_answer_counts_as_priced_only_when_every_gold_component_was_acted_on(tasks):
    gold = float(tasks[0].answer)
    components = tasks[0].metadata["gold"]["components"]
    every = [{"name": "get_chemical", "arguments": {"chemical_id": c["chemical_id"]}, "result": {}, "is_error": False}
             for c in components]
    summary = summarize([diagnose(tasks[0], gold, every), diagnose(tasks[0], gold, every[:-1])])
    assert summary["cta@25"] == 1.0 and summary["correct_unpriced"] == 1 and summary["cta@25_priced"] == 0.5
