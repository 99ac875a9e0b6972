"""The LLM agent on a real OpenAI-compatible HTTP endpoint (a subprocess on 127.0.0.1) pricing a chem
reaction through a stdio chem server, run by the runner and recorded on disk."""

from __future__ import annotations

import json

import pytest

import gauntlet
from gauntlet.agents.llm.agent import LLMAgent
from gauntlet.agents.llm.records import conversation
from gauntlet.bridges.server_process import serve_command
from gauntlet.bridges.tool_task_env import ToolTaskEnv
from gauntlet.tasks import load_suite
from tests.llm.openai_server import running_server

SECRET = "sk-test-secret-that-must-not-be-recorded"


def test_the_agent_prices_a_reaction_through_an_openai_compatible_endpoint(chem_data, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    task = load_suite(chem_data.suite)[0]
    gold = task.gold_trajectory
    # Structured calls as a hosted API returns them, one written as text as llama.cpp does, then the answer.
    replies = [{"content": "", "tool_calls": [{"name": call.call, "arguments": call.args}]} for call in gold[:-1]]
    replies.append({"content": json.dumps({"name": gold[-1].call, "arguments": gold[-1].args})})
    replies.append({"content": "", "tool_calls": [{"name": "submit_answer", "arguments": {"answer": task.answer}}]})
    env = ToolTaskEnv(chem_data.suite, server=serve_command("chem", "--server-kwargs", chem_data.server_kwargs()))
    path = tmp_path / "episode.jsonl"
    with running_server(replies, tmp_path) as server:
        spec = f"openai:test-model@{server.base_url}"
        try:
            gauntlet.rollout(env, LLMAgent(model=spec, mode="chemcost", max_steps=len(replies)), seed=0,
                             record=path)
        finally:
            env.close()
        requests = server.requests()

    (episode,) = gauntlet.load_episodes(path)
    assert episode.steps[-1].terminated and episode.steps[-1].info["score"] == pytest.approx(1.0)
    assert [step.tool_call.name for step in episode.steps[:-1]] == [call.call for call in gold]
    assert episode.agent.config["model"] == spec and SECRET not in path.read_text()
    # The endpoint saw every server tool and the answer tool, typed for the mode, and the
    # conversation the episode records, turn for turn.
    assert len(requests) == len(replies)
    assert {tool["function"]["name"] for tool in requests[0]["tools"]} == {tool["name"] for tool in
                                                                          episode.reset_info["tools"]}
    answer_tool = next(tool for tool in requests[0]["tools"] if tool["function"]["name"] == "submit_answer")
    assert answer_tool["function"]["parameters"]["properties"]["answer"]["type"] == "number"
    last = requests[-1]["messages"]
    recorded = conversation(episode)[:-1]
    assert [m["role"] for m in last] == [{"human": "user", "ai": "assistant"}.get(m.type, m.type) for m in recorded]
    assert [m["content"] for m in last if m["role"] == "tool"] == [m.content for m in recorded if m.type == "tool"]
    model_calls = [e.data for s in episode.steps for e in s.events if e.kind == "model_call"]
    assert len(model_calls) == len(replies) and all(call["model"] == "test-model" for call in model_calls)
    assert all(call["input_tokens"] > 0 for call in model_calls)
