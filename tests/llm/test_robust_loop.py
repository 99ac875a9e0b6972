"""A robust loop: budgets end episodes as truncated, a hung tool call comes back as a tool error the
model sees, model timeouts are retried a bounded number of times, and calls run concurrently only
where the server allows it."""

from __future__ import annotations

import asyncio
import json
from typing import Any, ClassVar

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.outputs import ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from mcp.shared.memory import create_connected_server_and_client_session
from pydantic import PrivateAttr

import gauntlet
from gauntlet.agents.llm.agent import LLMAgent
from gauntlet.agents.llm.calls import WRITTEN, ToolSpec, written_split
from gauntlet.agents.llm.graph import (
    Budget,
    ConversationTooLong,
    LoopSettings,
    build_graph,
    initial_state,
    run_config,
    run_on_session,
)
from gauntlet.agents.llm.records import conversation
from gauntlet.agents.llm.scripted import ScriptedChatModel
from gauntlet.bridges.tool_task_env import ToolTaskEnv, stop_action
from gauntlet.errors import UserError
from tests.llm.helpers import answer_turn, small_server, small_task, text_call

FIRST = [SystemMessage("Use the tools."), HumanMessage("Add 2 and 3.")]
ADD_FOREVER = [text_call("add", {"a": 2, "b": k}) for k in range(20)]


def scripted(turns: list[dict[str, Any]]) -> ScriptedChatModel:
    return ScriptedChatModel.model_validate({"turns": turns})


def run(agent: LLMAgent, **env_options: Any) -> gauntlet.Episode:
    env = ToolTaskEnv([small_task()], small_server, **env_options)
    try:
        return gauntlet.rollout(env, agent, seed=0)
    finally:
        env.close()


def plain(model: BaseChatModel, settings: LoopSettings, first=FIRST) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with create_connected_server_and_client_session(small_server()) as session:
            return dict(await run_on_session(model, session, first, settings))

    return asyncio.run(go())


@pytest.mark.parametrize(("budget", "reason", "model_calls"), [
    ({"max_steps": 3}, "max_steps", 3),
    ({"max_tokens": 40}, "max_tokens", 2),
    ({"wall_time_s": 0.0}, "wall_time_s", 0),
])
def test_a_spent_budget_ends_the_episode_truncated_and_unanswered(budget, reason, model_calls):
    episode = run(LLMAgent(model=scripted(ADD_FOREVER), system_prompt="Use the tools.", **budget))
    last = episode.steps[-1]
    assert last.action == stop_action(reason) and last.truncated and not last.terminated
    assert last.info["score"] == 0.0 and last.privileged["submitted"] is False
    assert {"budget": reason} in [e.data for e in last.events if e.kind == "note"]
    assert sum(e.kind == "model_call" for s in episode.steps for e in s.events) == model_calls
    assert len(episode.steps) == model_calls + 1
    assert episode.agent.config[next(iter(budget))] == next(iter(budget.values()))


def test_the_plain_graph_stops_on_the_same_budget_and_names_it():
    state = plain(scripted(ADD_FOREVER), LoopSettings(budget=Budget(max_steps=3)))
    assert state["stop_reason"] == "max_steps" and state["model_calls"] == 3
    assert [m.type for m in state["messages"]][-2:] == ["ai", "tool"]


class OutgrowsItsContext(ScriptedChatModel):
    """A scripted model whose context holds ``fits`` messages: a longer conversation raises as a local
    model's full context window does."""

    fits: int

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        if len(messages) > self.fits:
            raise ConversationTooLong(f"{len(messages)} messages do not fit the {self.fits}-message context")
        return super()._generate(messages, stop, run_manager, **kwargs)


def test_a_conversation_that_outgrows_the_context_ends_its_episode_and_the_next_one_runs():
    model = OutgrowsItsContext.model_validate({"turns": ADD_FOREVER, "fits": 6})
    env = ToolTaskEnv([small_task(), small_task()], small_server)
    agent = LLMAgent(model=model, system_prompt="Use the tools.")
    try:
        episodes = [gauntlet.rollout(env, agent, seed=seed) for seed in (0, 1)]
    finally:
        env.close()
    for episode in episodes:  # system + task + (reply, result) x 2 fit; the third reply does not
        last = episode.steps[-1]
        assert last.action == stop_action("context_full") and last.truncated and not last.terminated
        assert {"budget": "context_full"} in [e.data for e in last.events if e.kind == "note"]
        calls = [e.data for s in episode.steps for e in s.events if e.kind == "model_call"]
        assert len(calls) == 4 and calls[-1]["error"] == "ConversationTooLong"  # the refused call is recorded
    state = plain(OutgrowsItsContext.model_validate({"turns": ADD_FOREVER, "fits": 6}), LoopSettings())
    assert state["stop_reason"] == "context_full" and state["model_calls"] == 3


def test_an_answer_longer_than_one_action_is_sent_back_and_a_short_one_ends_the_episode():
    episode = run(LLMAgent(model=scripted([answer_turn("x" * 200), answer_turn("x")])), max_text_length=128)
    (answered,) = episode.steps
    assert answered.terminated and json.loads(answered.action)["arguments"] == {"answer": "x"}
    notes = [event.data for event in answered.events if event.kind == "note" and "malformed_calls" in event.data]
    assert notes[0]["malformed_calls"][0]["problem"] == "the call is longer than 128 characters; pass shorter arguments"


def test_a_reply_without_a_call_is_told_to_call_a_tool_and_never_read_as_an_answer():
    episode = run(LLMAgent(model=scripted([{"text": "5"}, answer_turn(5)])))
    (answered,) = episode.steps
    assert answered.terminated and answered.info["score"] == 1.0
    assert [event.data for event in answered.events if event.data.get("no_call")] == [{"no_call": True}]
    assert "Reply with exactly one tool call" in conversation(episode)[3].content


def test_a_repeated_call_is_answered_with_its_earlier_result_and_not_run_again():
    turns = [text_call("add", {"a": 2, "b": 3}), text_call("add", {"a": 2, "b": 3}), answer_turn(5)]
    episode = run(LLMAgent(model=scripted(turns)))
    added, answered = episode.steps  # the repeat ran no step
    assert added.tool_call.result == {"result": 5.0} and answered.terminated
    assert [event.data for event in answered.events if "repeated_call" in event.data] == [{"repeated_call": "add"}]
    repeat = conversation(episode)[5]
    assert repeat.type == "tool" and repeat.content.startswith("You made this exact call before") and \
        repeat.content.endswith('{"result": 5.0}')


def test_the_agents_own_text_in_a_tool_turn_is_marked_apart_from_what_the_tool_returned_and_kept_on_record():
    """A repeat's notice (and a notice quoting a notice) and a malformed call's rejection are the agent's text;
    a server's result is not. The mark rides on the record, so a conversation rebuilt from disk keeps it."""
    add = text_call("add", {"a": 2, "b": 3})
    turns = [add, add, add, {"text": '{"name": "nope", "arguments": {}}'}, answer_turn(5)]
    episode = run(LLMAgent(model=scripted(turns)))
    system, task, _, added, _, repeat, _, again, _, rejected, _ = conversation(episode)
    assert written_split(added) == ("", '{"result": 5.0}')
    for notice in (repeat, again):
        own, returned = written_split(notice)
        assert own.startswith("You made this exact call before") and returned == '{"result": 5.0}'
    assert written_split(again)[0].count("You made this exact call before") == 2  # it quoted the first notice
    assert rejected.content.startswith("Error:") and written_split(rejected) == (rejected.content, "")
    records = [record for step in episode.steps for record in step.messages if record.role == "tool"]
    assert [getattr(record, WRITTEN, None) is None for record in records] == [True, False, False, False]


def test_only_the_first_call_of_a_reply_runs_unless_parallel_calls_are_on():
    both = {"text": json.dumps({"name": "add", "arguments": {"a": 2, "b": 3}}) + "\n" +
            json.dumps({"name": "add", "arguments": {"a": 1, "b": 1}})}
    one = run(LLMAgent(model=scripted([both, answer_turn(5)])))
    assert [step.tool_call.arguments for step in one.steps[:-1]] == [{"a": 2, "b": 3}]
    parallel = run(LLMAgent(model=scripted([both, answer_turn(5)]), parallel_calls=True))
    assert [step.tool_call.arguments for step in parallel.steps[:-1]] == [{"a": 2, "b": 3}, {"a": 1, "b": 1}]


def test_a_hung_tool_call_comes_back_to_the_model_as_a_tool_error_and_the_episode_goes_on():
    turns = [text_call("wait", {"seconds": 600}), text_call("add", {"a": 2, "b": 3}), answer_turn(5)]
    episode = run(LLMAgent(model=scripted(turns)), call_timeout_s=2)
    hung, added, answered = episode.steps
    assert hung.tool_call.is_error and hung.tool_call.result == {"error": "the call did not finish within 2 s"}
    assert added.tool_call.result == {"result": 5.0} and answered.terminated and answered.info["score"] == 1.0
    seen = conversation(episode)
    assert seen[3].type == "tool" and seen[3].content == 'Error: {"error": "the call did not finish within 2 s"}'


def test_the_plain_graph_times_a_hung_call_out_the_same_way():
    # The plain LangGraph loop has no answer tool: its last reply, without a call, is the answer.
    turns = [text_call("wait", {"seconds": 600}), text_call("add", {"a": 2, "b": 3}), {"text": "5"}]
    state = plain(scripted(turns), LoopSettings(tool_timeout_s=2))
    assert state["messages"][3].content == 'Error: {"error": "the call did not finish within 2 s"}'
    assert state["messages"][5].content == '{"result": 5.0}' and state["messages"][-1].content == "5"


class FlakyModel(BaseChatModel):
    """Fails its first ``failures`` calls with ``error``, then answers as ``inner``."""

    inner: ScriptedChatModel
    failures: int
    error: type[Exception] = TimeoutError
    _calls: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "flaky"

    def bind_tools(self, tools, **kwargs):
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        self._calls += 1
        if self._calls <= self.failures:
            raise self.error(f"failure {self._calls}")
        return self.inner._generate(messages, stop, run_manager, **kwargs)


def test_model_timeouts_are_retried_and_each_failed_call_is_recorded():
    model = FlakyModel(inner=scripted([text_call("add", {"a": 2, "b": 3}), answer_turn(5)]), failures=2)
    episode = run(LLMAgent(model=model, model_retries=2, retry_backoff_s=0.0))
    calls = [e.data for e in episode.steps[0].events if e.kind == "model_call"]
    assert [call.get("error") for call in calls] == ["TimeoutError", "TimeoutError", None]
    assert episode.steps[-1].info["score"] == 1.0


@pytest.mark.parametrize(("failures", "error"), [(3, TimeoutError), (1, ValueError)])
def test_retries_are_bounded_and_only_for_transient_errors(failures, error):
    model = FlakyModel(inner=scripted([answer_turn(5)]), failures=failures, error=error)
    settings = LoopSettings(model_retries=2, retry_initial_s=0.0, retry_max_s=0.0)
    graph = build_graph(model, [ToolSpec("add", "a + b", {"type": "object"})], settings)
    with pytest.raises(error):
        graph.invoke(initial_state(FIRST), run_config("retries", settings))
    assert model._calls == min(failures, 3)


def test_calls_of_one_reply_run_concurrently_only_when_the_server_allows_it():
    meet = {"content": "", "tool_calls": [{"name": "meet", "args": {"name": "a"}},
                                          {"name": "meet", "args": {"name": "b"}}]}
    together = plain(scripted([meet, {"text": "done"}]), LoopSettings(concurrent_tools=True))
    assert [m.content for m in together["messages"][3:5]] == ['{"result": "a met b"}', '{"result": "b met a"}']
    one_by_one = plain(scripted([meet, {"text": "done"}]), LoopSettings(tool_timeout_s=1))
    assert one_by_one["messages"][3].status == "error"


def test_find_tools_widens_a_scoped_tool_set_inside_the_agent_and_a_fork_keeps_it():
    from gauntlet.agents.llm.branching import AgentEpisode

    turns = [text_call("find_tools", {"query": "sleep for some seconds", "k": 1}),
             text_call("wait", {"seconds": 0}), answer_turn(5)]
    agent = LLMAgent(model=scripted(turns), tool_scope=1)
    episode = run(agent)
    waited, answered = episode.steps  # the search ran no step
    assert waited.tool_call.name == "wait" and answered.terminated
    offered = [event.data["tools_offered"] for step in episode.steps for event in step.events
               if "tools_offered" in event.data]
    assert len(offered) == 2 and "wait" not in offered[0] and "find_tools" in offered[0]
    assert "wait" in offered[1] and set(offered[0]) - {"find_tools"} <= set(offered[1])
    found = conversation(episode)[3]
    assert found.type == "tool" and '"name": "wait"' in found.content

    pair = AgentEpisode(LLMAgent(model=scripted(turns), tool_scope=1), ToolTaskEnv([small_task()], small_server))
    try:
        pair.reset(seed=0)
        proposal = pair.propose().action  # the search was answered inside the agent: the first proposal is wait
        twin = gauntlet.fork(pair, pair.snapshot())
        assert twin.propose().action == proposal and '"wait"' in proposal
        twin.close()
    finally:
        pair.close()


class PromptedScript(ScriptedChatModel):
    """A scripted model that, like the local backends, takes a ``prompt_tools`` binding; it keeps the
    names of the tools each reply's prompt showed and those its calls could use."""

    takes_prompt_tools: ClassVar[bool] = True
    _seen: list[tuple[list[str], list[str]]] = PrivateAttr(default_factory=list)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        names = [tool["function"]["name"] for tool in kwargs.get("tools", [])]
        shown = kwargs.get("prompt_tools")
        self._seen.append((names if shown is None else [tool["function"]["name"] for tool in shown], names))
        return super()._generate(messages, stop, run_manager, **kwargs)


def test_a_local_model_widens_in_the_results_so_its_prompt_stays_the_one_it_read():
    turns = [text_call("find_tools", {"query": "sleep for some seconds", "k": 1}),
             text_call("wait", {"seconds": 0}), answer_turn(5)]
    model = PromptedScript.model_validate({"turns": turns})
    episode = run(LLMAgent(model=model, tool_scope=1))
    waited, answered = episode.steps
    assert waited.tool_call.name == "wait" and answered.terminated
    (first_shown, first_callable), *later = model._seen
    assert "wait" not in first_shown and first_shown == first_callable
    for shown, callable_ in later:  # the system turn keeps its tools; the found one is callable
        assert shown == first_shown and "wait" in callable_ and set(first_callable) <= set(callable_)
    found = json.loads(conversation(episode)[3].content)
    (added,) = found["added"]
    assert added["name"] == "wait" and added["parameters"]["properties"]["seconds"]
    # The same script on the old way: the system turn gains the tool, the result lists one line.
    model = PromptedScript.model_validate({"turns": turns})
    episode = run(LLMAgent(model=model, tool_scope=1, widen_tools="in_prompt"))
    assert "wait" in model._seen[-1][0] and "parameters" not in conversation(episode)[3].content
    # A model that gets its tools with each request cannot widen in the results.
    with pytest.raises(UserError, match='widen_tools "in_results" needs a local model'):
        run(LLMAgent(model=scripted(turns), tool_scope=1, widen_tools="in_results"))
    with pytest.raises(UserError, match='widen_tools "in_results" needs a local model'):
        LLMAgent(model="openai:gpt-4o-mini", widen_tools="in_results")  # told before any episode
    with pytest.raises(UserError, match="widen_tools is 'auto', 'in_results', 'in_prompt', not 'sometimes'"):
        LLMAgent(model=scripted(turns), widen_tools="sometimes")


def test_a_numeric_task_s_answer_tool_takes_a_number_not_an_object_copied_from_a_result(tmp_path):
    suite = tmp_path / "small.jsonl"
    suite.write_text(small_task().model_dump_json() + "\n")
    wrapped = [answer_turn({"value": 5, "unit": "people"}), answer_turn(5)]
    episode = run(LLMAgent(model=scripted(wrapped), suite=str(suite)))
    (answered,) = episode.steps  # the wrapped answer was refused unrun; the bare number ended the task
    assert answered.terminated and answered.info["score"] == 1.0
    assert "not valid under any of the given schemas" in conversation(episode)[3].content
    # Without the suite the task's grading is unknown: the answer stays any JSON value, and the wrapper goes in.
    (submitted,) = run(LLMAgent(model=scripted(wrapped))).steps
    assert submitted.terminated and submitted.info["score"] == 0.0


def test_a_bad_tool_scope_is_one_line_before_any_episode():
    with pytest.raises(UserError, match='tool_scope is "all"'):
        LLMAgent(model=scripted([answer_turn(5)]), tool_scope="some")
    with pytest.raises(UserError, match="demonstrations come from the training split.*gauntlet eval gives it"):
        LLMAgent(model=scripted([answer_turn(5)]), demonstrations=True)


def test_a_misspelt_model_is_one_line_before_any_run_folder(tmp_path, capsys, monkeypatch):
    from gauntlet import registry
    from gauntlet.cli import main
    from gauntlet.registry import Entry

    task = {"id": "t-0", "server": "env:CartPole-v1", "answer": 4, "eval_spec": {"kind": "numeric"},
            "question": "How many numbers are in the observation?",
            "gold_trajectory": [{"call": "reset", "args": {"seed": 0}, "obs": None}]}
    (tmp_path / "tiny.jsonl").write_text(json.dumps(task) + "\n")
    (tmp_path / "tiny_suite_module.py").write_text(f"SUITE = {str(tmp_path / 'tiny.jsonl')!r}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry._entries["suite"], "tiny", Entry("suite", "tiny", "tiny_suite_module:SUITE"))
    for spec, says in (("offline:nope", "no offline model 'nope' is pinned"),
                       (f"scripted:{tmp_path / 'missing.json'}", "does not exist; fix the path"),
                       (f"llama:{tmp_path / 'missing.gguf'}", "is not a .gguf file")):
        out = tmp_path / "run"
        with pytest.raises(SystemExit) as stop:
            main(["eval", "tiny", "--agent", "llm", "--agent-config", json.dumps({"model": spec}),
                  "--out", str(out)])
        assert stop.value.code == 2 and says in capsys.readouterr().err
        assert not out.exists()  # the corrected command can use the same folder


class Redrawing(ScriptedChatModel):
    """A scripted model that says it can redraw a reply, and keeps the calls each reply was told to avoid."""

    resample_repeats: int = 1
    _avoided: list[list[dict[str, Any]]] = PrivateAttr(default_factory=list)

    def _generate(self, messages, stop=None, run_manager=None, avoid_calls=(), **kwargs) -> ChatResult:
        self._avoided.append(list(avoid_calls))
        return super()._generate(messages, stop, run_manager, **kwargs)


def test_a_model_that_can_redraw_is_told_which_calls_would_only_repeat_a_result():
    model = Redrawing.model_validate({"turns": [text_call("add", {"a": 2, "b": 3}), text_call("add", {"a": 2, "b": 3}),
                                                answer_turn(5)]})
    episode = run(LLMAgent(model=model))
    assert model._avoided == [[], [{"name": "add", "arguments": {"a": 2, "b": 3}}],
                              [{"name": "add", "arguments": {"a": 2, "b": 3}}]]
    assert episode.steps[-1].info["score"] == 1.0
    # a model without the option is never passed one (an API model would send it to its server)
    plain_run = run(LLMAgent(model=scripted([text_call("add", {"a": 2, "b": 3}), answer_turn(5)])))
    assert plain_run.steps[-1].info["score"] == 1.0
