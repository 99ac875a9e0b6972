"""Numbers a call passes must come from the episode: the check, what counts as a number, and what the
agent does with a call that invents or copies one."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from gauntlet.agents.llm.agent import LLMAgent
from gauntlet.agents.llm.calls import ToolSpec, repeatable_calls
from gauntlet.agents.llm.number_check import numbers_in, ungrounded_numbers
from gauntlet.agents.llm.records import conversation
from gauntlet.agents.llm.scripted import ScriptedChatModel
from tests.llm.helpers import answer_turn, run_scripted, text_call

REACTION = json.dumps({"components": [{"name": "vanillin", "equiv": 1.0}], "product_molar_mass_g_mol": 230.263,
                       "yield_pct": 55.0, "price_usd": 12.09, "quote_id": 23350})


def test_numbers_are_json_numbers_and_decimal_literals_in_strings():
    assert numbers_in({"a": 1, "b": True, "c": [2.5, None], "d": "(11.61 + 6.2e1) / 0.55", "e": "x-3"}) == \
        [1.0, 2.5, 11.61, 62.0, 0.55, 3.0]
    # digits inside a word (a SMILES ring closure, an id like RXN-0008's letters) are not numbers of their own
    assert numbers_in("COc1cc(C=O)ccc1O, 2-methylpropan-1-ol, A12") == [2.0, 1.0]


@pytest.mark.parametrize(("arguments", "ungrounded"), [
    ({"expression": "12.09 / (55.0 / 100 * 230.263 / 1000)"}, []),  # every number read
    ({"expression": "12.09 / (0.55 * 0.230263)"}, []),  # a percentage and a mass rescaled
    ({"expression": "12.1 / (0.55 * 230.26)"}, []),  # rounded figures of results (within 0.1 %)
    ({"expression": "12.2 / (0.55 * 230.26)"}, [12.2]),  # 12.2 is no result's 12.09
    ({"chemical_id": 23350, "required_amount": 1.0, "unit": "mmol"}, []),  # an id of a result, a free integer
    ({"chemical_id": 23351}, [23351]),  # an id nobody showed
    ({"chemical_id": 1, "required_amount": 1}, [1]),  # an id is never free, nor any equal number (equiv 1.0)
    ({"quote_ids": [23350, 7], "reaction_id": "RXN-0008"}, [7]),  # ids in lists; a string id the question named
    ({"reaction_id": "RXN-0009"}, ["RXN-0009"]),
    ({"answer": 95.2361}, [95.2361]),  # a figure done in the head
    ({"expression": "2 * 12.09 + 250 + 1000"}, []),  # counts and unit factors are free
])
def test_a_number_is_grounded_when_a_result_or_the_question_shows_it(arguments, ungrounded):
    assert ungrounded_numbers(arguments, ["Price RXN-0008.", REACTION]) == ungrounded


def test_calls_to_avoid_are_idempotent_repeats_and_refusals_with_nothing_run_since():
    read = ToolSpec("read", "", {}, idempotent=True)
    write = ToolSpec("write", "", {})
    tools = {"read": read, "write": write}

    def turn(number: int, name: str, args: dict, unrun: bool = False) -> list:
        return [AIMessage(content="", tool_calls=[{"id": f"c{number}", "name": name, "args": args}]),
                ToolMessage("r", tool_call_id=f"c{number}", artifact={"unrun": "x"} if unrun else None)]

    history = turn(0, "read", {"k": 0}) + turn(1, "write", {"k": 1}) + turn(2, "read", {"k": 2})
    assert repeatable_calls(history, tools) == [{"name": "read", "arguments": {"k": 2}}]
    refused = history + turn(3, "write", {"k": 3}, unrun=True)
    assert repeatable_calls(refused, tools) == [{"name": "read", "arguments": {"k": 2}},
                                                {"name": "write", "arguments": {"k": 3}}]
    assert {"name": "write", "arguments": {"k": 3}} not in repeatable_calls(refused + turn(4, "read", {"k": 4}), tools)


run = run_scripted


def test_a_call_with_a_number_the_episode_never_showed_is_refused_unrun_and_named():
    episode = run([text_call("add", {"a": 2.5, "b": 3}), text_call("add", {"a": 2, "b": 3}), answer_turn(5)])
    added, answered = episode.steps  # the refused call ran no step
    assert added.tool_call.arguments == {"a": 2, "b": 3} and answered.info["score"] == 1.0
    assert {"ungrounded_numbers": [2.5]} in [event.data for event in added.events if event.kind == "note"]
    refusal = conversation(episode)[3]
    assert refusal.type == "tool" and "2.5 appears in no result" in refusal.content
    assert "nothing was run" in refusal.content


def test_a_number_a_result_showed_may_be_passed_and_the_check_can_be_turned_off():
    shown = run([text_call("add", {"a": 2, "b": 3}), text_call("add", {"a": 5.0, "b": 0.05}), answer_turn(5)])
    assert [step.tool_call.arguments for step in shown.steps[:-1]] == [{"a": 2, "b": 3}, {"a": 5.0, "b": 0.05}]
    unchecked = run([text_call("add", {"a": 2.5, "b": 3}), answer_turn(5)], check_numbers=False)
    assert unchecked.steps[0].tool_call.arguments == {"a": 2.5, "b": 3}
    assert unchecked.agent.config["check_numbers"] is False


def test_a_check_numbers_that_is_not_true_or_false_is_one_line():
    from gauntlet.errors import UserError

    with pytest.raises(UserError, match="check_numbers is true or false, not 'yes'"):
        LLMAgent(model=ScriptedChatModel.model_validate({"turns": []}), check_numbers="yes")
