"""What a proposed call is checked against, how results and messages are recorded, and the modes."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

import gauntlet
from gauntlet.agents.llm.agent import LLMAgent
from gauntlet.agents.llm.calls import ToolResult, ToolSpec, check_calls, rejection
from gauntlet.agents.llm.modes import AUTONOMOUS, CHEMCOST, INSTRUCTION, final_answer, plan_steps, user_prompt
from gauntlet.agents.llm.records import message_of, message_record
from gauntlet.errors import UserError

PRICE = ToolSpec("price", "the price of a chemical", {
    "type": "object", "properties": {"chemical_id": {"type": "integer"}, "unit": {"enum": ["g", "mmol"]}},
    "required": ["chemical_id"]})
TOOLS = {"price": PRICE}


def reply(*calls, invalid=()):
    return AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": f"c{i}"} for i, (n, a) in enumerate(calls)],
                     invalid_tool_calls=list(invalid))


@pytest.mark.parametrize(("call", "problem"), [
    (("price", {"chemical_id": 4}), None),
    (("price", {"chemical_id": "four"}), "'four' is not of type 'integer' (at chemical_id)"),
    (("price", {"unit": "g"}), "'chemical_id' is a required property"),
    (("price", {"chemical_id": 4, "unit": "kg"}), "'kg' is not one of ['g', 'mmol'] (at unit)"),
    (("cost", {}), "unknown tool 'cost'; the tools are price"),
])
def test_a_call_is_checked_against_the_tool_and_its_input_schema(call, problem):
    (checked,) = check_calls(reply(call), TOOLS)
    assert checked.problem == problem or problem in (checked.problem or "")
    assert (checked.problem is None) == (problem is None)


def test_a_call_too_long_for_one_action_is_malformed_and_unreadable_calls_are_kept_in_order():
    checked = check_calls(reply(("price", {"chemical_id": 4}), invalid=[
        {"type": "invalid_tool_call", "id": "bad", "name": None, "args": None, "error": "not JSON"}]),
        TOOLS, max_call_chars=20)
    assert [c.id for c in checked] == ["c0", "bad"]
    assert "longer than 20 characters" in checked[0].problem and checked[1].problem == "not JSON"


def test_a_rejection_names_the_problem_says_nothing_ran_and_shows_the_schema():
    (checked,) = check_calls(reply(("price", {"chemical_id": "four"})), TOOLS)
    message = rejection(checked, TOOLS)
    assert message.status == "error" and message.tool_call_id == "c0"
    assert message.content.startswith("Error: the arguments of price do not match its input schema")
    assert "Nothing was run" in message.content and '"required": ["chemical_id"]' in message.content


def test_a_tool_result_is_the_structured_content_when_there_is_one():
    structured = ToolMessage(content=[{"type": "text", "text": '{"a": 1}'}], tool_call_id="c0",
                             artifact={"structured_content": {"a": 1, "b": 2}})
    assert ToolResult.of_message(structured) == ToolResult({"a": 1, "b": 2})
    failed = ToolMessage(content=[{"type": "text", "text": "no such id"}], tool_call_id="c0", status="error")
    assert ToolResult.of_message(failed).text() == "Error: no such id"


def test_messages_round_trip_through_episode_records():
    messages = [SystemMessage("s"), HumanMessage("q"), reply(("price", {"chemical_id": 4}), invalid=[
        {"type": "invalid_tool_call", "id": "bad", "name": None, "args": None, "error": "not JSON"}]),
                ToolMessage("12.5", tool_call_id="c0", name="price", status="success")]
    records = [message_record(m) for m in messages]
    assert [r.role for r in records] == ["system", "user", "assistant", "tool"]
    assert records[2].tool_calls == [{"id": "c0", "name": "price", "arguments": {"chemical_id": 4}}]
    rebuilt = [message_of(r.model_dump()) for r in records]
    assert [message_record(m) for m in rebuilt] == records


def test_the_instruction_mode_shows_the_plan_as_numbered_steps_with_earlier_results_named():
    plan = [{"call": "seg_water", "args": {"image": "data/x/pre.tif"}},
            {"call": "ras_area_m2", "args": {"mask": {"$ref": [0, "path"]}, "scale": 2}}]
    assert plan_steps(plan) == ('1. seg_water(image="data/x/pre.tif")\n'
                                '2. ras_area_m2(mask=<step 1 result: path>, scale=2)')
    prompt = user_prompt(INSTRUCTION, "How wet?", {"tool_plan": plan, "answer_format": "number (m2)"})
    assert prompt == "How wet?\n\nAnswer format: number (m2).\n\nPlan:\n" + plan_steps(plan)
    assert user_prompt(AUTONOMOUS, "How wet?", {"tool_plan": plan}) == "How wet?"
    with pytest.raises(ValueError, match="has none"):
        user_prompt(INSTRUCTION, "How wet?", {})


@pytest.mark.parametrize(("mode", "text", "answer"), [
    (AUTONOMOUS, "143400.0", 143400.0),
    (AUTONOMOUS, 'The schools are:\n```json\n["A", "B"]\n```', ["A", "B"]),
    (AUTONOMOUS, "Answer: 3", 3),
    (AUTONOMOUS, '{"result": 5.0}', 5.0),
    (AUTONOMOUS, '{"type": "Point", "coordinates": [1, 2]}', {"type": "Point", "coordinates": [1, 2]}),
    (AUTONOMOUS, "Bad Neuenahr Shelter A", "Bad Neuenahr Shelter A"),
    (CHEMCOST, "It costs $1,234.5 per gram.", 1234.5),
    (CHEMCOST, "12.5", 12.5),
    (CHEMCOST, "I cannot price it.", None),
])
def test_a_final_reply_is_read_as_the_modes_answer(mode, text, answer):
    assert final_answer(mode, text) == answer


def test_the_agent_config_records_model_mode_prompt_and_budgets_and_rebuilds_the_agent():
    agent = LLMAgent(model="scripted:/tmp/script.json", mode="chemcost", max_steps=7, wall_time_s=30.0)
    config = agent.spec().config
    assert config["system_prompt"] == CHEMCOST.system_prompt
    assert (config["model"], config["mode"], config["max_steps"], config["wall_time_s"]) == \
        ("scripted:/tmp/script.json", "chemcost", 7, 30.0)
    assert gauntlet.make_agent("llm", **config).config() == config


@pytest.mark.parametrize(("config", "problem"), [
    ({"model": "gpt:4o"}, "unknown model backend 'gpt'"),
    ({"mode": "freestyle"}, "unknown mode 'freestyle'"),
    ({"max_steps": 0}, "max_steps must be at least 1"),
    ({"checkpointer": "redis:x"}, "unknown checkpointer"),
    ({"price_usd_per_mtok": [1.0]}, "[input, output]"),
])
def test_a_bad_agent_config_is_the_users_error(config, problem):
    with pytest.raises(UserError, match=problem.replace("[", r"\[")):
        LLMAgent(**config)
