"""The text tool-call parser finds the calls small models write as bare JSON, fenced or tagged."""

from __future__ import annotations

import pytest

from gauntlet.agents.llm.tool_calls import ParsedCall, parse_tool_calls

TOOLS = {"search_chemical", "select_pack", "submit_answer"}


@pytest.mark.parametrize("text", [
    '{"name": "search_chemical", "arguments": {"query": "ethanol"}}',
    'I will search.\n```json\n{"name": "search_chemical", "arguments": {"query": "ethanol"}}\n```',
    '<tool_call>\n{"name": "search_chemical", "arguments": {"query": "ethanol"}}\n</tool_call>',
    '{"type": "function", "function": {"name": "search_chemical", "arguments": "{\\"query\\": \\"ethanol\\"}"}}',
    '{"name": "search_chemical", "parameters": {"query": "ethanol"}}',
])
def test_a_call_in_any_of_the_forms_models_write_is_found(text):
    reply = parse_tool_calls(text, TOOLS)
    assert reply.calls == [ParsedCall("search_chemical", {"query": "ethanol"})]
    assert reply.problems == []
    assert "ethanol" not in reply.content


def test_several_calls_are_found_in_order_and_the_prose_is_kept():
    text = ('First the acid.\n{"name": "search_chemical", "arguments": {"query": "acetic acid"}}\n'
            'then [{"name": "select_pack", "arguments": {"chemical_id": 4, "grams": 2.5}}]')
    reply = parse_tool_calls(text, TOOLS)
    assert [call.name for call in reply.calls] == ["search_chemical", "select_pack"]
    assert reply.calls[1].arguments == {"chemical_id": 4, "grams": 2.5}
    assert reply.content.startswith("First the acid.") and "then" in reply.content


def test_an_unknown_tool_is_a_problem_naming_the_tools():
    reply = parse_tool_calls('{"name": "buy_everything", "arguments": {}}', TOOLS)
    assert reply.calls == []
    assert reply.problems and "buy_everything" in reply.problems[0] and "select_pack" in reply.problems[0]


@pytest.mark.parametrize("text", [
    '```json\n{"name": "search_chemical", "arguments": {"query": "ethanol"\n```',
    '<tool_call>{"name": "search_chemical", "arguments": </tool_call>',
    '{"name": "search_chemical", "arguments": "{not json"}',
    '{"name": "search_chemical", "arguments": [1, 2]}',
])
def test_a_malformed_call_is_a_problem_not_a_call(text):
    reply = parse_tool_calls(text, TOOLS)
    assert reply.calls == [] and len(reply.problems) == 1


def test_json_that_is_not_a_call_stays_in_the_content():
    reply = parse_tool_calls('The answer is {"price_usd_per_g": 12.5}.', TOOLS)
    assert reply.calls == [] and reply.problems == []
    assert reply.content == 'The answer is {"price_usd_per_g": 12.5}.'


def test_plain_text_has_no_calls():
    assert parse_tool_calls("The cheapest pack costs $3.20.", TOOLS).calls == []
