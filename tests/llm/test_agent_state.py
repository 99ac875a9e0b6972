"""The LLM agent's state is its LangGraph checkpoint: each call's answer is written into it as it is known,
the calls still to run are read off its messages, and a snapshot is the checkpoint (with the run config
LangGraph keeps out of checkpoints), so a fresh agent of the same config continues from it as the agent
would. A revision returns the step's new output and leaves the one ``act`` returned as it was."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from typing import Any

from langchain_core.messages import AIMessage, SystemMessage, ToolMessage

import gauntlet
from gauntlet.agent import AgentOutput
from gauntlet.agents.llm.agent import LLMAgent, LLMAgentSnapshot
from gauntlet.agents.llm.branching import AgentEpisode
from gauntlet.agents.llm.records import message_record
from gauntlet.agents.llm.scripted import ScriptedChatModel
from gauntlet.bridges.tool_task_env import ToolTaskEnv
from gauntlet.hooks import Decision, Prefix
from tests.llm.helpers import answer_turn, small_server, small_task, text_call

# A reply of two calls: one the env runs, then a search the agent answers itself (it widens the tools
# offered to the next reply, which calls the tool found).
TURNS = [{"content": "", "tool_calls": [{"name": "add", "args": {"a": 2, "b": 3}},
                                        {"name": "find_tools", "args": {"query": "sleep for some seconds", "k": 1}}]},
         text_call("wait", {"seconds": 0}),
         answer_turn(5)]


def new_agent(turns: list[dict[str, Any]] = TURNS, **options: Any) -> LLMAgent:
    return LLMAgent(model=ScriptedChatModel.model_validate({"turns": turns}), tool_scope=1, parallel_calls=True,
                    **options)


def new_episode(agent: LLMAgent) -> AgentEpisode:
    return AgentEpisode(agent, ToolTaskEnv([small_task()], small_server))


def conversation_of(agent: LLMAgent) -> list[dict[str, Any]]:
    return [message_record(message).model_dump() for message in agent._state()["messages"]]


def test_a_snapshot_holds_the_checkpoint_and_the_run_config_only():
    assert [field.name for field in dataclasses.fields(LLMAgentSnapshot)] == [
        "checkpoint", "metadata", "seed", "max_call_chars", "elapsed_s"]


def test_each_calls_answer_is_in_the_checkpoint_as_soon_as_it_is_known():
    both = {"content": "", "tool_calls": [{"name": "add", "args": {"a": 2, "b": 3}},
                                          {"name": "add", "args": {"a": 3, "b": 2}}]}
    episode = new_episode(new_agent([both, answer_turn(5)]))
    try:
        episode.reset(seed=0)
        first = episode.step()
        assert json.loads(first.action) == {"name": "add", "arguments": {"a": 2, "b": 3}}
        second = episode.propose()  # the agent reads the first call's result
        assert json.loads(second.action) == {"name": "add", "arguments": {"a": 3, "b": 2}}
        messages = episode.agent.snapshot().checkpoint["channel_values"]["messages"]
        reply, answer = messages[-2:]
        assert isinstance(reply, AIMessage) and isinstance(answer, ToolMessage)
        assert answer.tool_call_id == reply.tool_calls[0]["id"] and "5" in answer.text
        assert [m.role for m in second.messages] == ["tool"]
    finally:
        episode.close()


def test_a_fresh_agent_of_the_same_config_restored_from_a_snapshot_continues_identically():
    for prefix_steps in (0, 1):  # before the reply's first call ran; after its search widened the tools
        episode = new_episode(new_agent())
        twin = new_episode(new_agent())  # its own model object, checkpointer and session: nothing shared
        try:
            episode.reset(seed=0)
            for _ in range(prefix_steps):
                episode.step()
            episode.propose()
            snapshot = pickle.loads(pickle.dumps(episode.snapshot()))
            if prefix_steps:
                assert "wait" in snapshot.agent.checkpoint["channel_values"]["offered"]
            twin.restore(snapshot)
            outputs = [twin.step().output for _ in range(3 - prefix_steps)]
            original = [episode.step().output for _ in range(3 - prefix_steps)]
            assert twin.done and episode.done
            assert [(o.action, o.messages) for o in outputs] == [(o.action, o.messages) for o in original]
            assert conversation_of(twin.agent) == conversation_of(episode.agent)
            assert [json.loads(o.action)["name"] for o in original][-2:] == ["wait", "submit_answer"]
        finally:
            episode.close()
            twin.close()


def test_revise_returns_a_new_output_and_leaves_the_one_act_returned_untouched():
    agent = new_agent([text_call("add", {"a": 2, "b": 3}), answer_turn(5)], check_numbers=False)
    env = ToolTaskEnv([small_task()], small_server)
    try:
        observation, info = env.reset(seed=0)
        agent.reset(seed=0, observation_space=env.observation_space, action_space=env.action_space)
        output = agent.act(observation, info)
        kept = copy.deepcopy(output)
        revised = agent.revise(SystemMessage("Check the question again."))
        assert output == kept  # the runner's output, as act returned it
        assert isinstance(revised, AgentOutput) and revised is not output
        assert revised.messages[:len(output.messages)] == output.messages
        assert [m.role for m in revised.messages[len(output.messages):]] == ["system", "assistant"]
        assert sum(event.kind == "model_call" for event in revised.events) == 2
        # The scripted model replays by turn: the rewritten reply proposes the same call again.
        assert revised.action == output.action and agent.reply() is not None
    finally:
        env.close()


class ReviseOnce:
    """Has the agent write its first reply again and takes the revised output in place of the proposal."""

    name = "revise-once"

    def decide(self, prefix: Prefix, candidates: list[Any]) -> Decision:
        if prefix.steps or prefix.agent.reply() is None:
            return Decision.proceed()
        revised = prefix.agent.revise(SystemMessage("Check the question again."))
        return Decision.intervene("replace_action", action=revised, reason="test revision")


def test_the_runner_records_the_revised_output_in_place_of_the_proposal(tmp_path):
    env = ToolTaskEnv([small_task()], small_server)
    try:
        episode = gauntlet.rollout(env, new_agent([text_call("add", {"a": 2, "b": 3}), answer_turn(5)],
                                                  check_numbers=False),
                                   seed=0, hooks=[ReviseOnce()], record=tmp_path / "episode.jsonl", keep_steps=True)
    finally:
        env.close()
    [on_disk] = gauntlet.load_episodes(tmp_path / "episode.jsonl")
    assert on_disk.model_dump(exclude={"sidecar"}) == episode.model_dump(exclude={"sidecar"})
    first = episode.steps[0]
    assert [m.role for m in first.messages][-3:] == ["assistant", "system", "assistant"]
    assert sum(event.kind == "model_call" for event in first.events) == 2
    [intervention] = [event.data for event in first.events if event.kind == "intervention"]
    assert json.loads(intervention["original_action"]) == json.loads(first.action)
    assert episode.outcome.success
