"""The scripted chat model: replies read from a script, chosen by the conversation, with usage."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from gauntlet.agents.llm.calls import ToolSpec
from gauntlet.agents.llm.scripted import ScriptedChatModel, ScriptExhaustedError, ScriptFormatError

ADD = ToolSpec("add", "a + b", {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}})
TURNS = [{"text": 'Adding. {"name": "add", "arguments": {"a": 1, "b": 2}} '
                  '```json\n{"name": "add", "arguments": }\n```'},
         {"content": "Again.", "tool_calls": [{"name": "add", "args": {"a": 3}}, {"name": "sub", "args": {}}]},
         {"text": "The answer is 3"}]


@pytest.fixture
def model(write_script):
    return ScriptedChatModel.from_file(write_script(TURNS)).bind_tools([ADD.as_openai()])


def test_a_text_turn_is_parsed_like_a_local_models_reply_with_its_malformed_calls_kept(model):
    reply = model.invoke([HumanMessage("add 1 and 2")])
    assert reply.content == "Adding."
    assert reply.tool_calls == [{"name": "add", "args": {"a": 1, "b": 2}, "id": "call_0_0", "type": "tool_call"}]
    (invalid,) = reply.invalid_tool_calls
    assert invalid["id"] == "call_0_1" and "not valid JSON" in invalid["error"]


def test_a_structured_turn_is_returned_as_scripted_with_deterministic_ids(model):
    first = model.invoke([HumanMessage("add")])
    reply = model.invoke([HumanMessage("add"), first, ToolMessage("3", tool_call_id="call_0_0")])
    assert reply.content == "Again." and [c["id"] for c in reply.tool_calls] == ["call_1_0", "call_1_1"]
    assert [c["name"] for c in reply.tool_calls] == ["add", "sub"]  # unknown tools are the agent's to catch


def test_the_turn_played_is_the_number_of_assistant_turns_so_far(model):
    history = [HumanMessage("x"), AIMessage("one"), AIMessage("two")]
    assert model.invoke(history).content == "The answer is 3"
    assert model.invoke(history).content == "The answer is 3"  # no cursor: the same conversation, the same reply
    assert model.invoke([HumanMessage("x")]).content == "Adding."


def test_a_worked_example_before_the_task_plays_no_turn_of_the_script(model):
    from gauntlet.agents.llm.demonstrations import DEMO_CLOSING, DEMO_OPENING

    example = [HumanMessage(DEMO_OPENING), AIMessage("", tool_calls=[{"name": "add", "args": {"a": 5, "b": 5},
                                                                      "id": "demo_call_0"}]),
               ToolMessage("10", tool_call_id="demo_call_0"), AIMessage("shown")]
    task = [HumanMessage(f"{DEMO_CLOSING}\nadd 1 and 2")]
    assert model.invoke([*example, *task]).content == "Adding."  # the script's first turn, not its third
    assert model.invoke([*example, *task, AIMessage("one")]).content == "Again."


def test_usage_counts_whitespace_words(model):
    reply = model.invoke([HumanMessage("please add one and two")])
    assert reply.usage_metadata["input_tokens"] == 5
    assert reply.usage_metadata["output_tokens"] == len(TURNS[0]["text"].split())
    assert reply.usage_metadata["total_tokens"] == 5 + len(TURNS[0]["text"].split())


def test_a_conversation_longer_than_the_script_is_a_clear_error(model):
    with pytest.raises(ScriptExhaustedError, match="has 3 turns and the conversation asks for turn 4"):
        model.invoke([HumanMessage("x"), AIMessage("1"), AIMessage("2"), AIMessage("3")])


@pytest.mark.parametrize(("content", "problem"), [
    ('{"text": "not a list"}', "is not a script"),
    ('[{"txt": "typo"}]', "turn 0"),
    ("not json", "is not a script"),
])
def test_a_bad_script_file_is_refused_with_what_is_wrong(tmp_path, content, problem):
    path = tmp_path / "script.json"
    path.write_text(content)
    with pytest.raises(ScriptFormatError, match=problem):
        ScriptedChatModel.from_file(path)


def test_a_missing_script_file_is_named(tmp_path):
    with pytest.raises(ScriptFormatError, match="cannot read the script"):
        ScriptedChatModel.from_file(tmp_path / "missing.json")

