"""report_summarize with writer='client_model': the server asks the calling client's model (MCP sampling)
through a real in-memory session; a client without a model, or one that declines, gets a fixable error;
under the runner an agent's lent model answers through ToolTaskEnv's own session."""

from __future__ import annotations

import json

import anyio
import pytest
from mcp import types
from mcp.shared.memory import create_connected_server_and_client_session

from gauntlet.agent import Agent
from gauntlet.runner import rollout
from gauntlet.agents.llm.agent import LLMAgent
from gauntlet.agents.llm.sampling import sampling_callback
from gauntlet.agents.llm.scripted import ScriptedChatModel
from gauntlet.bridges.tool_task_env import ToolTaskEnv, tool_call_action
from gauntlet.episode import load_episodes
from gauntlet.hooks import Decision
from gauntlet.mcp_servers.disaster import reporting
from gauntlet.mcp_servers.disaster.server import build_server
from gauntlet.tasks import ToolTask
from gauntlet.trace_view import render_traces
from tests.disaster.helpers import error_text
from tests.llm.openai_server import running_server

FACTS = {"event": "Ahr valley flood, July 2021", "hazard": "flood",
         "findings": [{"label": "Flooded area", "value": 1250000, "unit": "m2"},
                      {"label": "People exposed", "value": 4210.5, "unit": "people"},
                      {"label": "Most exposed district", "value": "Bad Neuenahr"}],
         "recommendations": ["Evacuate the riverside streets."]}
TEMPLATE = reporting.summary_sentences("Ahr valley flood, July 2021", "flood",
                                       [("Flooded area", 1250000, "m2"), ("People exposed", 4210.5, "people"),
                                        ("Most exposed district", "Bad Neuenahr", "")],
                                       None, ["Evacuate the riverside streets."])


@pytest.fixture
def server(tmp_path):
    (tmp_path / "data").mkdir()
    return build_server(tmp_path / "data", families=["report"], workspace_dir=tmp_path / "ws")


class Writer:
    """A client model that answers with ``reply`` (or an error) and keeps what it was asked."""

    def __init__(self, reply: str | None):
        self.reply, self.asked = reply, []

    async def __call__(self, context, params: types.CreateMessageRequestParams):
        self.asked.append(params)
        if self.reply is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message="the user refused")
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=self.reply),
                                         model="test-writer", stopReason="endTurn")


def summarize(server, arguments, writer=None):
    async def run():
        async with create_connected_server_and_client_session(server, sampling_callback=writer) as session:
            return await session.call_tool("report_summarize", arguments)

    return anyio.run(run)


def test_the_clients_model_writes_from_the_templates_facts_and_lost_numbers_are_listed(server):
    prose = ("The Ahr valley flood of July 2021 covered 1,250,000 m² and exposed about 4,200 people, most of "
             "them in Bad Neuenahr. Responders should evacuate the riverside streets.")
    writer = Writer(prose)
    result = summarize(server, {**FACTS, "writer": "client_model"}, writer)
    assert not result.isError
    summary = result.structuredContent
    assert summary["writer"] == "client_model" and summary["model"] == "test-writer"
    assert summary["text"] == prose and summary["template_text"] == "\n".join(TEMPLATE)
    # 4210.5 became "about 4,200": the rewrite lost that number, and the result says so.
    assert summary["facts_missing"] == ["People exposed"]
    (asked,) = writer.asked
    assert asked.systemPrompt == reporting.WRITER_SYSTEM and asked.maxTokens == reporting.WRITER_MAX_TOKENS
    prompt = asked.messages[0].content.text
    assert all(sentence in prompt for sentence in TEMPLATE)


def test_the_template_is_the_default_and_never_asks_the_client(server):
    writer = Writer("never used")
    result = summarize(server, FACTS, writer)
    assert result.structuredContent["writer"] == "template" and result.structuredContent["text"] == "\n".join(TEMPLATE)
    assert writer.asked == []


@pytest.mark.parametrize(("writer", "reason"), [(None, "offers no language model"),
                                                (Writer(None), "declined: the user refused"),
                                                (Writer("   "), "returned no text")])
def test_a_client_without_a_usable_model_gets_an_error_naming_the_template_path(server, writer, reason):
    message = error_text(summarize(server, {**FACTS, "writer": "client_model"}, writer))
    assert reason in message and "writer='template'" in message


def test_the_llm_agents_adapter_answers_with_its_chat_model(server, tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "Flooded area 1250000 m2, 4210.5 people exposed, Bad Neuenahr worst."}]))
    callback = sampling_callback(ScriptedChatModel.from_file(script), "scripted:script.json")
    summary = summarize(server, {**FACTS, "writer": "client_model"}, callback).structuredContent
    assert summary["model"] == "scripted:script.json" and summary["facts_missing"] == []
    assert summary["text"].startswith("Flooded area 1250000 m2")


class Summarizer(Agent):
    """Asks for a model-written summary, then answers; lends ``lent`` as its client model."""

    name = "summarizer"

    def __init__(self, lent):
        self.lent = lent

    def client_model(self):
        return self.lent

    def act(self, observation, info):
        if not observation["result"]:
            return tool_call_action("report_summarize", {**FACTS, "writer": "client_model"})
        return json.dumps({"answer": json.loads(observation["result"])["is_error"]})


@pytest.mark.parametrize("lends", [True, False])
def test_under_the_runner_the_env_session_answers_with_the_agents_lent_model(server, lends):
    writer = Writer("1,250,000 m² flooded; 4210.5 people exposed; Bad Neuenahr hit hardest.")
    task = ToolTask(id="summary", question="Summarise the flood.", answer=False)
    env = ToolTaskEnv([task], server=server)
    episode = rollout(env, Summarizer(writer if lends else None), seed=0)
    call = episode.steps[0].tool_call
    assert call is not None and call.is_error is not lends
    if lends:
        assert call.result["model"] == "test-writer" and call.result["facts_missing"] == []
        assert len(writer.asked) == 1
    else:
        assert "offers no language model" in json.dumps(call.result)


class Proceed:
    """A controller that lets every action run."""

    name = "proceed"

    def decide(self, prefix, candidates):
        return Decision.proceed()


@pytest.mark.parametrize("hooks", [[], [Proceed()]], ids=["alone", "under a controller"])
def test_the_llm_agents_lent_model_call_is_a_model_call_event_of_the_step_whose_tool_asked(server, tmp_path, hooks):
    prose = "The Ahr valley flood covered 1,250,000 m2; 4210.5 people were exposed, most in Bad Neuenahr."
    replies = [{"content": "", "tool_calls": [{"name": "report_summarize",
                                               "arguments": {**FACTS, "writer": "client_model"}}]},
               {"status": 500},  # the lent call's first attempt fails, and is retried like the agent's own
               {"content": prose},
               {"content": "", "tool_calls": [{"name": "submit_answer", "arguments": {"answer": "done"}}]}]
    env = ToolTaskEnv([ToolTask(id="summary", question="Summarise the flood.", answer="done")], server=server)
    path = tmp_path / "episode.jsonl"
    with running_server(replies, tmp_path) as endpoint:
        # The facts' numbers are the test's, not from a result of the task: the agent's number check is off.
        agent = LLMAgent(model=f"openai:test-model@{endpoint.base_url}", retry_backoff_s=0.0, check_numbers=False)
        try:
            rollout(env, agent, seed=0, record=path, hooks=hooks)
        finally:
            env.close()
        requests = endpoint.requests()

    assert len(requests) == len(replies)
    assert requests[2]["messages"][0]["content"] == reporting.WRITER_SYSTEM  # the server's request, as sent
    (episode,) = load_episodes(path)
    first = episode.steps[0]
    assert first.tool_call.name == "report_summarize" and first.tool_call.result["text"] == prose
    own, failed, written = [event.data for event in first.events if event.kind == "model_call"]
    assert "requested_by" not in own and own["input_tokens"] > 0
    assert failed["requested_by"] == written["requested_by"] == {"tool": "report_summarize"}
    assert failed["error"] == "OpenAIAPIError" and failed["model"] == "test-model"
    assert written["model"] == "test-model" and written["input_tokens"] > 0 and written["output_tokens"] > 0
    assert written["latency_ms"] > 0
    # The lent call is not an agent turn: the conversation holds the agent's own turns only.
    assert all(message.content != prose for step in episode.steps for message in step.messages)

    page = render_traces([episode], [0])
    step_html = page[page.index('id="ep-0-step-0"'):page.index('id="ep-0-step-1"')]
    assert step_html.count("asked by tool report_summarize") == 2
    assert "<td>4 (test-model), 1 failed, 2 asked by tools</td>" in page
