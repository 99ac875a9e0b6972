"""The same agent two ways: in the runner (the env runs each call) and as a plain LangGraph graph over
one langchain-mcp-adapters session; the same scripted model gives the same conversation."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_mcp_adapters.client import MultiServerMCPClient

import gauntlet
from gauntlet.agents.llm.agent import LLMAgent
from gauntlet.agents.llm.graph import LoopSettings, run_on_session
from gauntlet.agents.llm.modes import CHEMCOST, user_prompt
from gauntlet.agents.llm.records import conversation, message_record
from gauntlet.agents.llm.scripted import ScriptedChatModel
from gauntlet.bridges.server_process import serve_command
from gauntlet.bridges.tool_task_env import ToolTaskEnv
from gauntlet.tasks import load_suite
from tests.llm.helpers import answer_turn, text_call


def script_for(task):
    """Gold calls, with a malformed call, a call the server refuses and two calls in one reply."""
    gold = [(call.call, call.args) for call in task.gold_trajectory]
    return [text_call(*gold[0]),
            {"text": '```json\n{"name": "select_pack", "arguments": {"chemical_id": "one"}}\n```'},
            text_call("get_chemical", {"chemical_id": 999999}),
            {"content": "Both at once.", "tool_calls": [{"name": gold[1][0], "args": gold[1][1]},
                                                       {"name": gold[2][0], "args": gold[2][1]}]},
            *[text_call(name, args) for name, args in gold[3:]],
            answer_turn(task.answer)]


def dumped(messages):
    return [message_record(message).model_dump(mode="json") for message in messages]


def test_runner_and_plain_graph_give_the_same_conversation(chem_data, write_script, tmp_path):
    task = load_suite(chem_data.suite)[0]
    script = write_script(script_for(task))
    command = serve_command("chem", "--server-kwargs", chem_data.server_kwargs())

    env = ToolTaskEnv(chem_data.suite, server=command)
    try:
        # The number check and the checklist are the runner path's harness (docs/architecture.md): off, both
        # paths see one boundary.
        gauntlet.rollout(env, LLMAgent(model=ScriptedChatModel.from_file(script), mode="chemcost",
                                       parallel_calls=True, check_numbers=False, checklist=False),
                         seed=0, record=tmp_path / "runner.jsonl")
    finally:
        env.close()
    (episode,) = gauntlet.load_episodes(tmp_path / "runner.jsonl")

    # A plain LangGraph loop has no answer tool: it ends on a reply without a call, which the runner's
    # agent makes as a call of the env's answer tool. Everything before the answer is the same.
    plain_script = write_script([*script_for(task)[:-1], {"text": str(task.answer)}])

    async def plain():
        client = MultiServerMCPClient({"chem": {"transport": "stdio", "command": command[0], "args": command[1:]}})
        first = [SystemMessage(CHEMCOST.system_prompt),
                 HumanMessage(user_prompt(CHEMCOST, episode.initial_observation["task"]))]
        async with client.session("chem") as session:
            return await run_on_session(ScriptedChatModel.from_file(plain_script), session, first, LoopSettings())

    state = asyncio.run(plain())
    runner_messages = dumped(conversation(episode))
    assert dumped(state["messages"])[:-1] == runner_messages[:-1]
    assert conversation(episode)[-1].tool_calls[0]["args"] == {"answer": task.answer}
    assert state["malformed_calls"] == 1 and state["model_calls"] == len(script_for(task))
    assert sum(m["role"] == "tool" and m["status"] == "error" for m in runner_messages) == 2
    assert episode.steps[-1].info["score"] == pytest.approx(1.0)


def test_a_sqlite_checkpointer_gives_the_same_conversation_and_keeps_the_checkpoints(chem_data, write_script,
                                                                                      tmp_path):
    import sqlite3

    task = load_suite(chem_data.suite)[0]
    script = write_script(script_for(task))
    command = serve_command("chem", "--server-kwargs", chem_data.server_kwargs())
    conversations = []
    for checkpointer in ("memory", f"sqlite:{tmp_path / 'checkpoints.db'}"):
        env = ToolTaskEnv(chem_data.suite, server=command)
        try:
            agent = LLMAgent(model=ScriptedChatModel.from_file(script), mode="chemcost", checkpointer=checkpointer,
                             check_numbers=False)  # the script's call the server refuses names an unshown id
            gauntlet.rollout(env, agent, seed=0, record=tmp_path / f"{checkpointer[:6]}.jsonl")
        finally:
            env.close()
        (episode,) = gauntlet.load_episodes(tmp_path / f"{checkpointer[:6]}.jsonl")
        conversations.append(dumped(conversation(episode)))
    assert conversations[0] == conversations[1]
    with sqlite3.connect(tmp_path / "checkpoints.db") as db:
        (count,) = db.execute("select count(*) from checkpoints").fetchone()
    # At least one checkpoint per model call, on disk in the file the config named.
    assert count >= len(script_for(task))
