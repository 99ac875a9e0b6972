"""The checklists: ChemCost's (what the episode has priced and what is left) and the instruction mode's
(the plan's steps done and the next), read from the episode's own turns, on made-up conversations and
on the chem server's gold calls (the disaster server's are in test_agent_servers.py)."""

from __future__ import annotations

import json
import re

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

import gauntlet
from gauntlet.agents.llm.agent import LLMAgent
from gauntlet.agents.llm.checklist import checklist_note, plan_note, with_note
from gauntlet.agents.llm.demonstrations import DEMO_CLOSING
from gauntlet.agents.llm.modes import INSTRUCTION, user_prompt
from gauntlet.agents.llm.records import conversation
from gauntlet.agents.llm.scripted import ScriptedChatModel
from gauntlet.errors import UserError
from gauntlet.tasks import load_suite
from tests.llm.helpers import answer_turn, gold_turns

REACTION = {"reaction_id": "RXN-1", "components": [
    {"name": "vanillin", "role": "limiting reagent", "equiv": 1.0},
    {"name": "PhMgBr", "role": "reagent", "equiv": 1.5},
    {"name": "THF", "role": "solvent", "equiv": None, "volume_ml_per_mmol": 4.0}]}


class Talk:
    """A conversation built call by call, each call answered by its result."""

    def __init__(self, *opening, note=checklist_note):
        self.messages, self.note = list(opening), note

    def call(self, name, args, result, status="success"):
        call_id = f"c{len(self.messages)}"
        self.messages.append(AIMessage(content="", tool_calls=[{"id": call_id, "name": name, "args": args}]))
        self.messages.append(ToolMessage(content=json.dumps(result), tool_call_id=call_id, name=name, status=status))
        return self.note(self.messages)


def test_the_reaction_s_components_are_listed_and_each_purchase_ticks_one_off():
    talk = Talk(HumanMessage("Price RXN-1."))
    assert talk.call("get_reaction", {"reaction_id": "RXN-1"}, REACTION) == \
        ("2 components to price, each with one search_chemical and one select_pack: vanillin (1 equiv), "
         "PhMgBr (1.5 equiv). Solvents are not priced.")
    assert talk.call("search_chemical", {"query": "vanillin"}, {"candidates": [{"chemical_id": 205}]}) is None
    assert talk.call("select_pack", {"chemical_id": 205}, {"name": "vanillin", "total_usd": 12.09}) == \
        "Priced vanillin $12.09. Still to price: PhMgBr (1.5 equiv)."
    # PhMgBr's catalogue name differs: the search for its name links the purchase to it.
    talk.call("search_chemical", {"query": "phmgbr"}, {"candidates": [{"chemical_id": 41}, {"chemical_id": 42}]})
    note = talk.call("select_pack", {"chemical_id": 41}, {"name": "phenylmagnesium bromide", "total_usd": 17.32})
    assert note.startswith("Every component is priced (vanillin $12.09, PhMgBr $17.32). Next: calculate their sum")


def test_a_purchase_of_no_component_a_failed_one_and_a_second_reading_count_for_nothing():
    talk = Talk()
    talk.call("get_reaction", {"reaction_id": "RXN-1"}, REACTION)
    assert talk.call("select_pack", {"chemical_id": 9}, {"name": "water", "total_usd": 1.0}) == \
        "Priced nothing yet. Still to price: vanillin (1 equiv), PhMgBr (1.5 equiv)."
    assert talk.call("select_pack", {"chemical_id": 205}, "no such pack", status="error") is None
    talk.call("select_pack", {"chemical_id": 205}, {"name": "Vanillin", "total_usd": 3.5})
    # Reading the reaction again starts the list again.
    talk.call("get_reaction", {"reaction_id": "RXN-1"}, REACTION)
    assert talk.call("select_pack", {"chemical_id": 9}, {"name": "water", "total_usd": 1.0}).startswith(
        "Priced nothing yet")


def test_a_worked_example_before_the_task_is_not_read_and_a_noted_result_is_read_back():
    example = Talk(HumanMessage("Here is a worked example"))
    example.call("get_reaction", {"reaction_id": "RXN-9"}, REACTION)
    talk = Talk(*example.messages, HumanMessage(DEMO_CLOSING), HumanMessage("Price RXN-1."))
    # The task has not read its reaction: the example's does not count.
    assert talk.call("select_pack", {"chemical_id": 205}, {"name": "vanillin", "total_usd": 12.09}) is None
    talk.call("get_reaction", {"reaction_id": "RXN-1"}, REACTION)
    talk.messages[-1].content = with_note(talk.messages[-1].content, checklist_note(talk.messages))
    talk.call("search_chemical", {"query": "vanillin"}, {"candidates": [{"chemical_id": 205}]})
    assert talk.call("select_pack", {"chemical_id": 205}, {"name": "vanillin", "total_usd": 12.09}).startswith(
        "Priced vanillin $12.09. Still to price: PhMgBr")


def test_on_the_chem_server_the_gold_calls_tick_off_every_component_at_the_gold_pack_prices(
        chem_data, chem_env, write_script, tmp_path):
    task = load_suite(chem_data.suite)[0]
    script = write_script([*gold_turns(task), answer_turn(task.answer)])
    agent = LLMAgent(model=f"scripted:{script}", mode="chemcost", max_steps=40, checklist=True)
    path = tmp_path / "chem.jsonl"
    gauntlet.rollout(chem_env, agent, seed=0, record=path)
    (episode,) = gauntlet.load_episodes(path)
    assert episode.agent.config["checklist"] is True
    # The notes did not change what ran or how it scored.
    assert [step.tool_call.name for step in episode.steps[:-1]] == [call.call for call in task.gold_trajectory]
    assert episode.steps[-1].info["score"] == pytest.approx(1.0)
    results = [message.content for message in conversation(episode) if message.type == "tool"]
    reaction = next(call.obs for call in task.gold_trajectory if call.call == "get_reaction")
    priced = [component for component in reaction["components"] if component.get("equiv") is not None]
    assert f"{len(priced)} components to price" in results[0]
    # The truth: the gold purchases' own totals, each named once in the last purchase's note.
    totals = [call.obs["total_usd"] for call in task.gold_trajectory if call.call == "select_pack"]
    last_purchase = max(index for index, call in enumerate(task.gold_trajectory) if call.call == "select_pack")
    note = results[last_purchase].split("Checklist: ", 1)[1]
    assert note.startswith("Every component is priced")
    assert sorted(float(number) for number in re.findall(r"\$([0-9.]+)", note)) == sorted(totals)
    assert all("Checklist: " not in text for text in results[last_purchase + 1:])  # the calculator's: no note


PLAN = [{"call": "seg_water_mndwi", "args": {"image": "data/x/pre_s2.tif"}},
        {"call": "seg_water_mndwi", "args": {"image": "data/x/post_s2.tif"}},
        {"call": "seg_flood_extent", "args": {"pre_water": {"$ref": [0, "path"]}, "post_water": {"$ref": [1, "path"]}}},
        {"call": "poi_population_exposed", "args": {"mask": {"$ref": [2, "path"]}, "population": "data/x/pop.tif"}}]


def plan_talk(*before):
    return Talk(*before, HumanMessage(user_prompt(INSTRUCTION, "How many people live in the flooded area?",
                                                  {"tool_plan": PLAN})), note=plan_note)


def test_the_plan_note_ticks_off_steps_in_order_with_their_paths_and_names_the_next_step_as_written():
    talk = plan_talk()
    assert talk.call("seg_water_mndwi", {"image": "data/x/pre_s2.tif"}, {"path": "ws/a.tif"}) == \
        'Plan steps done: step 1 -> ws/a.tif. Next: step 2. seg_water_mndwi(image="data/x/post_s2.tif")'
    # A step's tool run on the wrong input fails and counts for nothing; the next step is still step 2.
    assert talk.call("seg_water_mndwi", {"image": "ws/a.tif"}, "no band named 'B3'", status="error").endswith(
        'Next: step 2. seg_water_mndwi(image="data/x/post_s2.tif")')
    # A call of no step's tool (here a later step's, out of order) does not move the plan on either.
    assert talk.call("poi_population_exposed", {"mask": "ws/a.tif"}, {"value": 3}).endswith("Next: step 2. "
                                                                                          'seg_water_mndwi(image="data/x/post_s2.tif")')
    talk.call("seg_water_mndwi", {"image": "data/x/post_s2.tif"}, {"path": "ws/b.tif"})
    assert talk.call("seg_flood_extent", {"pre_water": "ws/a.tif", "post_water": "ws/b.tif"}, {"path": "ws/c.tif"}) == (
        "Plan steps done: step 1 -> ws/a.tif; step 2 -> ws/b.tif; step 3 -> ws/c.tif. Next: step 4. "
        "poi_population_exposed(mask=<step 3 result: path>, population=\"data/x/pop.tif\")")
    # The last step: no path in its result, and the note says to submit.
    assert talk.call("poi_population_exposed", {"mask": "ws/c.tif", "population": "data/x/pop.tif"},
                     {"value": 2070.0, "unit": "people"}) == (
        "Every step of the plan is done (step 1 -> ws/a.tif; step 2 -> ws/b.tif; step 3 -> ws/c.tif; step 4). "
        "Step 4's result answers the question: call submit_answer with the answer now, in the format the "
        "question asks for.")
    # A call after the last step leaves the note pointing at the last step's result, not at the call's.
    assert "Step 4's result answers" in talk.call("vec_voronoi_polygons", {}, {"path": "ws/d.geojson"})


def test_the_plan_note_reads_only_the_task_s_plan_and_results():
    assert plan_talk().call("seg_flood_extent", {}, {"path": "ws/c.tif"}) == \
        'No step of the plan is done yet. Next: step 1. seg_water_mndwi(image="data/x/pre_s2.tif")'
    # A task without a plan (the autonomous mode's question) has no note.
    assert Talk(HumanMessage("How many people?"), note=plan_note).call("seg_water_mndwi", {}, {"path": "a"}) is None
    # A worked example's plan and calls before the task do not count.
    example = plan_talk()
    example.call("seg_water_mndwi", {"image": "data/x/pre_s2.tif"}, {"path": "ws/a.tif"})
    talk = plan_talk(*example.messages, HumanMessage(DEMO_CLOSING))
    assert talk.call("seg_water_mndwi", {"image": "data/x/post_s2.tif"}, {"path": "ws/b.tif"}).startswith(
        "Plan steps done: step 1 -> ws/b.tif. Next: step 2.")


@pytest.mark.parametrize(("options", "message"), [
    ({"checklist": 1}, "checklist is true or false, not 1"),
    ({"checklist": True, "mode": "autonomous"}, "checklist is for modes chemcost, instruction"),
])
def test_a_checklist_option_that_cannot_hold_is_one_line(options, message):
    with pytest.raises(UserError, match=message):
        LLMAgent(model=ScriptedChatModel.model_validate({"turns": []}), **options)


def test_the_chemcost_mode_turns_the_checklist_and_a_demonstration_on_unless_set_instruction_its_checklist(
        tmp_path):
    model = ScriptedChatModel.model_validate({"turns": []})
    suite = tmp_path / "suite.jsonl"
    suite.write_text("")

    def harness(**options) -> tuple[bool, bool]:
        config = LLMAgent(model=model, **options).config()
        return config["demonstrations"], config["checklist"]

    assert harness(mode="chemcost", suite=str(suite)) == (True, True)
    # A demonstration comes from the suite's training split: without the suite there is none to show.
    assert harness(mode="chemcost") == (False, True)
    assert harness(mode="chemcost", suite=str(suite), demonstrations=False, checklist=False) == (False, False)
    # DORA's instruction mode turns its checklist (the plan's progress) on; the autonomous mode has none.
    assert harness(mode="autonomous", suite=str(suite)) == (False, False)
    assert harness(mode="instruction", suite=str(suite)) == (False, True)
    assert harness(mode="instruction", suite=str(suite), checklist=False) == (False, False)
