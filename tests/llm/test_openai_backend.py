"""The openai: backend against a real OpenAI-compatible HTTP server started on 127.0.0.1 by the test."""

from __future__ import annotations

import json
import socket

import openai
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

import gauntlet
from gauntlet.agents.llm.agent import LLMAgent
from gauntlet.agents.llm.models import make_chat_model
from gauntlet.bridges.tool_task_env import ToolTaskEnv
from gauntlet.errors import UserError
from tests.llm.helpers import small_server, small_task
from tests.llm.openai_server import running_server

TOOLS = [
    {"name": "search_chemical", "description": "Find catalogue chemicals matching a name.",
     "inputSchema": {"type": "object", "properties": {"query": {"type": "string", "title": "Query"}},
                     "required": ["query"], "title": "search_chemicalArguments"}},
    {"name": "calculate", "description": "Evaluate arithmetic exactly as written.",
     "inputSchema": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}},
]
QUESTION = [HumanMessage("Find HATU in the catalogue.")]


@pytest.fixture(autouse=True)
def no_api_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def bound_model(server):
    return make_chat_model(f"openai:test-model@{server.base_url}").bind_tools(TOOLS)


def test_structured_tool_calls_come_back_as_tool_calls_and_the_server_sees_the_tools(tmp_path):
    replies = [{"content": "", "tool_calls": [{"name": "search_chemical", "arguments": {"query": "HATU"}}]}]
    with running_server(replies, tmp_path) as server:
        reply = bound_model(server).invoke(QUESTION)
        [request] = server.requests()
    assert [(call["name"], call["args"]) for call in reply.tool_calls] == [("search_chemical", {"query": "HATU"})]
    assert reply.tool_calls[0]["id"] == "call_srv_0_0"
    assert request["model"] == "test-model" and not request.get("stream")
    assert [tool["function"]["name"] for tool in request["tools"]] == ["search_chemical", "calculate"]
    assert request["tools"][0]["function"]["parameters"]["required"] == ["query"]
    assert request["messages"] == [{"role": "user", "content": "Find HATU in the catalogue."}]
    assert reply.usage_metadata is not None and reply.usage_metadata["input_tokens"] > 0


def test_a_call_written_as_text_comes_back_as_a_tool_call_with_the_prose_kept(tmp_path):
    text = 'Let me look it up.\n```json\n{"name": "search_chemical", "arguments": {"query": "HATU"}}\n```'
    with running_server([{"content": text}], tmp_path) as server:
        reply = bound_model(server).invoke(QUESTION)
    assert reply.tool_calls == [{"name": "search_chemical", "args": {"query": "HATU"}, "id": "call_0",
                                 "type": "tool_call"}]
    assert reply.content == "Let me look it up."
    assert reply.usage_metadata is not None


def test_a_malformed_call_written_as_text_is_an_invalid_tool_call(tmp_path):
    with running_server([{"content": '{"name": "buy_everything", "arguments": {}}'}], tmp_path) as server:
        reply = bound_model(server).invoke(QUESTION)
    assert reply.tool_calls == []
    [invalid] = reply.invalid_tool_calls
    assert "buy_everything" in invalid["error"] and invalid["id"] == "call_0"


def test_text_calls_are_numbered_after_the_calls_already_in_the_conversation(tmp_path):
    earlier = AIMessage(content="", tool_calls=[{"name": "search_chemical", "args": {"query": "HATU"}, "id": "call_0"}])
    conversation = [*QUESTION, earlier, ToolMessage('{"id": 7}', tool_call_id="call_0")]
    with running_server([{"content": '{"name": "calculate", "arguments": {"expression": "2*3"}}'}],
                        tmp_path) as server:
        reply = bound_model(server).invoke(conversation)
        [request] = server.requests()
    assert reply.tool_calls[0]["id"] == "call_1" and reply.tool_calls[0]["args"] == {"expression": "2*3"}
    sent = request["messages"]
    assert sent[1]["tool_calls"][0]["function"] == {"name": "search_chemical",
                                                     "arguments": json.dumps({"query": "HATU"})}
    assert sent[2] == {"role": "tool", "content": '{"id": 7}', "tool_call_id": "call_0"}


def test_json_that_is_not_a_call_stays_an_answer(tmp_path):
    with running_server([{"content": '{"price_usd_per_g": 12.5}'}], tmp_path) as server:
        reply = bound_model(server).invoke(QUESTION)
    assert reply.tool_calls == [] and reply.invalid_tool_calls == []
    assert reply.content == '{"price_usd_per_g": 12.5}'


def test_an_unreachable_endpoint_fails_the_first_call_with_one_line_naming_the_url():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    model = make_chat_model(f"openai:test-model@{url}")  # building it does not probe
    with pytest.raises(UserError) as caught:
        model.invoke(QUESTION)
    message = str(caught.value)
    assert url in message and "--model openai:" in message and "\n" not in message


def test_the_api_key_is_read_from_the_environment_and_never_shows_in_the_model(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-123")
    with running_server([{"content": "hello"}], tmp_path) as server:
        model = make_chat_model(f"openai:test-model@{server.base_url}")
        assert model.invoke(QUESTION).content == "hello"
        [request] = server.requests()
    assert "sk-test-secret-123" not in repr(model) + json.dumps(model.to_json(), default=str)
    assert "sk-test-secret-123" not in json.dumps(request)


ADD = {"content": "", "tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}
ANSWER = {"content": "", "tool_calls": [{"name": "submit_answer", "arguments": {"answer": 5}}]}


def run_agent(server, model_retries: int) -> gauntlet.Episode:
    env = ToolTaskEnv([small_task()], small_server)
    agent = LLMAgent(model=f"openai:test-model@{server.base_url}", model_retries=model_retries, retry_backoff_s=0.0)
    try:
        return gauntlet.rollout(env, agent, seed=0)
    finally:
        env.close()


@pytest.mark.parametrize(("status", "error"), [(500, "OpenAIAPIError"), (429, "OpenAIRateLimitError")])
def test_each_retry_of_a_failing_server_is_one_request_and_one_recorded_model_call(tmp_path, status, error):
    with running_server([{"status": status}, {"status": status}, ADD, ANSWER], tmp_path) as server:
        episode = run_agent(server, model_retries=2)
        requests = server.requests()
    assert len(requests) == 4  # two failures, the reply they delayed, the answer
    calls = [event.data for event in episode.steps[0].events if event.kind == "model_call"]
    assert [call.get("error") for call in calls] == [error, error, None]
    assert all(call["model"] == "test-model" for call in calls)
    assert episode.steps[-1].info["score"] == 1.0


def test_a_model_call_that_keeps_failing_is_as_many_requests_as_the_agent_makes_attempts(tmp_path):
    with running_server([{"status": 500}] * 9, tmp_path) as server:
        with pytest.raises(openai.InternalServerError):
            run_agent(server, model_retries=2)
        assert len(server.requests()) == 3
