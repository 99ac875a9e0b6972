"""What a proposed call is checked against, how results and messages are recorded, and the modes."""

from __future__ import annotations

from dataclasses import replace

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

import gauntlet
from gauntlet.agents.llm.agent import LLMAgent
from gauntlet.agents.llm.calls import (
    ONE_CALL,
    CheckedCall,
    ToolResult,
    ToolSpec,
    check_calls,
    earlier_result,
    rejection,
)
from gauntlet.agents.llm.modes import AUTONOMOUS, CHEMCOST, INSTRUCTION, answer_spec, plan_steps, user_prompt
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


@pytest.mark.parametrize(("mode", "answer", "valid"), [
    (CHEMCOST, 12.5, True), (CHEMCOST, "It costs $12.5 per gram.", False), (CHEMCOST, None, False),
    (AUTONOMOUS, ["A", "B"], True), (AUTONOMOUS, "Bad Neuenahr Shelter A", True), (AUTONOMOUS, 3, True),
])
def test_the_answer_tool_is_typed_by_the_mode(mode, answer, valid):
    spec = answer_spec(mode, "submit_answer")
    assert spec.name == "submit_answer"
    assert (spec.argument_problem({"answer": answer}) is None) == valid
    assert spec.argument_problem({}) is not None  # the answer is required


@pytest.mark.parametrize(("kind", "answer", "valid"), [
    ("numeric", 2070, True), ("numeric", [366474.7, 5600944.1], True), ("numeric", {"value": 2070}, False),
    ("numeric", "2070 people", False), ("numeric", [], False),
    ("set", ["Shelter A", "School 3"], True), ("list", ["North", "South"], True), ("set", "Shelter A", False),
    ("set", [{"name": "Shelter A"}], False),
    ("exact", "2022-09-02", True), ("exact", {"type": "Polygon", "coordinates": []}, True), (None, 3, True),
])
def test_outside_a_number_mode_the_answer_is_typed_by_the_task_s_grading_kind(kind, answer, valid):
    spec = answer_spec(AUTONOMOUS, "submit_answer", kind)
    assert (spec.argument_problem({"answer": answer}) is None) == valid
    number_mode = answer_spec(CHEMCOST, "submit_answer").input_schema
    assert answer_spec(CHEMCOST, "submit_answer", "set").input_schema == number_mode  # the mode's type wins


def test_every_typed_answer_has_a_call_grammar():
    from gauntlet.agents.llm.call_grammar import call_grammar
    from gauntlet.agents.llm.modes import ANSWER_TYPES

    for kind in ANSWER_TYPES:
        assert "root ::=" in call_grammar([answer_spec(AUTONOMOUS, "submit_answer", kind)])


def test_only_the_first_call_of_a_reply_runs_without_parallel_calls():
    both = reply(("price", {"chemical_id": 4}), ("price", {"chemical_id": 5}))
    first, second = check_calls(both, TOOLS, parallel_calls=False)
    assert first.problem is None and second.problem == ONE_CALL
    assert [call.problem for call in check_calls(both, TOOLS)] == [None, None]


def test_an_identical_earlier_call_of_an_idempotent_tool_is_found_with_its_result():
    tools = {"price": replace(PRICE, idempotent=True), "buy": ToolSpec("buy", "", {"type": "object"})}
    conversation = [reply(("price", {"chemical_id": 4})),
                    ToolMessage(content="12.0", tool_call_id="c0", name="price")]
    same = CheckedCall("call_9", "price", {"chemical_id": 4})
    found = earlier_result(conversation, same, tools)
    assert found is not None and found.content == "12.0"
    assert earlier_result(conversation, CheckedCall("call_9", "price", {"chemical_id": 5}), tools) is None
    assert earlier_result(conversation, same, TOOLS) is None  # not idempotent: a repeat may differ
    bought = [*conversation, AIMessage(content="", tool_calls=[{"name": "buy", "args": {}, "id": "c1"}]),
              ToolMessage(content="ok", tool_call_id="c1", name="buy")]
    assert earlier_result(bought, same, tools) is None  # a call that may change the price came between


def test_the_agent_config_records_model_mode_prompt_and_budgets_and_rebuilds_the_agent(tmp_path):
    script = tmp_path / "script.json"
    script.write_text("[]")
    agent = LLMAgent(model=f"scripted:{script}", mode="chemcost", max_steps=7, wall_time_s=30.0)
    config = agent.spec().config
    assert config["system_prompt"] == CHEMCOST.system_prompt
    assert (config["model"], config["mode"], config["max_steps"], config["wall_time_s"]) == \
        (f"scripted:{script}", "chemcost", 7, 30.0)
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


def test_a_tool_list_shows_the_model_only_those_tools_and_a_name_the_server_lacks_is_one_line():
    from gauntlet.agents.llm.scripted import ScriptedChatModel
    from gauntlet.bridges.tool_task_env import ToolTaskEnv
    from tests.llm.helpers import answer_turn, small_server, small_task, text_call

    turns = [text_call("wait", {"seconds": 0}), text_call("add", {"a": 2, "b": 3}), answer_turn(5)]
    env = ToolTaskEnv([small_task()], small_server)
    try:
        agent = LLMAgent(model=ScriptedChatModel.model_validate({"turns": turns}), tools=["add"])
        episode = gauntlet.rollout(env, agent, seed=0)
        assert episode.agent.config["tools"] == ["add"]
        notes = [e.data for s in episode.steps for e in s.events if e.kind == "note" and "malformed_calls" in e.data]
        offered = [e.data for s in episode.steps for e in s.events if e.kind == "note" and "tools_offered" in e.data]
        assert offered == [{"tools_offered": ["add", "submit_answer"]}]
        assert [[call["problem"] for call in note["malformed_calls"]] for note in notes] == [
            ["unknown tool 'wait'; the tools are add, submit_answer"]]
        assert [s.action for s in episode.steps][0] == '{"name": "add", "arguments": {"a": 2, "b": 3}}'
        assert episode.outcome.score == 1.0
        with pytest.raises(UserError, match="tools names nope, which the server does not have; its tools are add"):
            gauntlet.rollout(env, LLMAgent(model=ScriptedChatModel.model_validate({"turns": turns}),
                                           tools=["add", "nope"]), seed=0)
    finally:
        env.close()


@pytest.mark.parametrize("tools", ["add", [], [1]])
def test_a_tool_list_that_is_not_a_list_of_names_is_refused(tools):
    with pytest.raises(UserError, match="tools is a non-empty list of tool names"):
        LLMAgent(model="offline", tools=tools)


def test_every_model_call_of_an_episode_gets_the_episode_seed_and_a_fork_keeps_it():
    from langchain_core.language_models import BaseChatModel
    from langchain_core.outputs import ChatGeneration, ChatResult

    from gauntlet.bridges.tool_task_env import ToolTaskEnv
    from tests.llm.helpers import small_server, small_task

    seen = []

    class SeedEcho(BaseChatModel):
        @property
        def _llm_type(self):
            return "seed-echo"

        def bind_tools(self, tools, **kwargs):
            return self

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            seen.append(run_manager.metadata.get("sampling_seed"))
            answer = {"name": "submit_answer", "args": {"answer": 5}, "id": "call_0"}
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content="", tool_calls=[answer]))])

    env = ToolTaskEnv([small_task()], small_server)
    try:
        agent = LLMAgent(model=SeedEcho())
        for seed in (7, 8):
            gauntlet.rollout(env, agent, seed=seed)
        assert seen == [7, 8]
        assert agent.fork(agent.snapshot()).snapshot().seed == 8
    finally:
        env.close()


def test_a_local_models_load_is_a_note_of_the_first_step_and_not_part_of_a_calls_latency():
    import time

    from langchain_core.language_models import BaseChatModel
    from langchain_core.outputs import ChatGeneration, ChatResult

    from gauntlet.bridges.tool_task_env import ToolTaskEnv
    from tests.llm.helpers import small_server, small_task

    class SlowToLoad(BaseChatModel):
        loaded: bool = False

        @property
        def _llm_type(self):
            return "slow-to-load"

        @property
        def weights(self):
            if not self.loaded:
                time.sleep(0.7)
                self.loaded = True
            return "weights"

        def bind_tools(self, tools, **kwargs):
            return self

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            loaded_when_called.append(self.loaded)
            answer = {"name": "submit_answer", "args": {"answer": 5}, "id": "call_0"}
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content="", tool_calls=[answer]))])

    loaded_when_called = []
    env = ToolTaskEnv([small_task()], small_server)
    try:
        agent = LLMAgent(model=SlowToLoad())
        first, second = (gauntlet.rollout(env, agent, seed=seed) for seed in (0, 1))
    finally:
        env.close()
    (load,) = [e.data for s in first.steps for e in s.events if "model_load_s" in e.data]
    assert load["model_load_s"] >= 0.7
    assert loaded_when_called == [True, True]  # loaded before the first call, so not timed as part of it
    assert not [e for s in second.steps for e in s.events if "model_load_s" in e.data]  # loaded once
