"""The agent as a LangGraph graph: a ReAct loop of two nodes.

::

    START -> call_model -> run_tools -> call_model -> ... -> END
                  |                                          ^
                  +---- no call (the answer), or a budget spent

``call_model`` asks the model for its next reply (unless a budget is spent: then it sets
``stop_reason`` and the loop ends) and counts the model calls, tokens and malformed calls.
``run_tools`` answers every call of the reply, in order: a well-formed call runs on its LangChain
tool (MCP tools from ``langchain-mcp-adapters``) within ``tool_timeout_s`` (a call that outlives it
comes back as a tool error the model sees); a malformed call is answered with an error without
running (``gauntlet.agents.llm.calls``). The calls of one reply run one after another, or at once
when ``concurrent_tools`` says the server allows it.

The runner owns the tool-call boundary: ``build_graph(..., pause_before_tools=True)`` compiles
the graph with an interrupt before ``run_tools``, and ``LLMAgent`` runs the calls through the env
and writes each call's message, in call order, as an update of ``run_tools``
(``update_state(..., as_node="run_tools")``). Without the pause the graph runs the whole loop
in one ``ainvoke`` (``run_on_session`` does it over one MCP session). Both give the same messages
for the same model.

Repeats: with ``LoopSettings.avoid_repeats`` (the LLM agent sets it for a model that can redraw a
reply, the llama.cpp backend), ``call_model`` passes the model ``avoid_calls``: the calls whose
repetition would only bring back a result the conversation already holds (``repeatable_calls``).

Budgets (``Budget``): ``max_steps`` model calls, ``max_tokens`` input plus output tokens as the
model reports them (checked before each call, so the call that crosses the limit completes), and
``wall_time_s`` seconds since ``configurable.started_at`` (a ``time.monotonic()`` value; none
given: no wall-time limit). A model whose context window cannot hold the conversation and its reply
raises ``ConversationTooLong``: that too is a spent budget (``context_full``), not a failed run.
Model timeouts, rate limits and server errors are retried
``model_retries`` times with exponential backoff and jitter (``retrying``: ``tenacity``, as LangChain's
own ``with_retry``; each attempt is a model call its callbacks see, and one request of an API model,
whose SDK does not retry itself).
"""

from __future__ import annotations

import asyncio
import importlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from tenacity import AsyncRetrying, Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from gauntlet.agents.llm.calls import (
    CheckedCall,
    ToolResult,
    ToolSpec,
    check_calls,
    rejection,
    repeatable_calls,
    timeout_result,
    tool_message,
)
from gauntlet.errors import UserError

# The stop reason of an episode whose conversation outgrew the model's context window.
CONTEXT_FULL = "context_full"
# Exception names (on any class of the exception's MRO) of model timeouts, rate limits and server
# overloads in the provider SDKs and httpx: checked by name, so no SDK is imported to build the graph.
_RETRYABLE_NAMES = frozenset({"RateLimitError", "APITimeoutError", "APIConnectionError", "InternalServerError",
                              "OverloadedError", "ServiceUnavailableError", "TimeoutException"})
_RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504, 529})


class AgentState(TypedDict):
    """The graph's state: the conversation and the counters the budgets and records read."""

    messages: Annotated[list[AnyMessage], add_messages]
    model_calls: int
    malformed_calls: int
    input_tokens: int
    output_tokens: int
    stop_reason: str | None


def initial_state(messages: Sequence[AnyMessage]) -> AgentState:
    """The state a conversation starts from (system prompt and task as its first messages)."""
    return AgentState(messages=list(messages), model_calls=0, malformed_calls=0, input_tokens=0, output_tokens=0,
                      stop_reason=None)


class ConversationTooLong(UserError):
    """The conversation and a reply no longer fit the model's context window. The loop ends the episode
    on it as on a spent budget (``context_full``); a caller outside the loop sees a one-line error."""


@dataclass(frozen=True)
class Budget:
    """Limits that end the loop (see the module docstring); ``spent`` names the first one reached."""

    max_steps: int = 30
    max_tokens: int | None = None
    wall_time_s: float | None = None

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {self.max_steps}")

    def spent(self, state: AgentState, elapsed_s: float | None) -> str | None:
        if state["model_calls"] >= self.max_steps:
            return "max_steps"
        if self.max_tokens is not None and state["input_tokens"] + state["output_tokens"] >= self.max_tokens:
            return "max_tokens"
        if self.wall_time_s is not None and elapsed_s is not None and elapsed_s >= self.wall_time_s:
            return "wall_time_s"
        return None


@dataclass(frozen=True)
class LoopSettings:
    """How the loop runs: its budget, tool timeout and concurrency, and model retries."""

    budget: Budget = field(default_factory=Budget)
    tool_timeout_s: float = 60.0
    concurrent_tools: bool = False
    model_retries: int = 2
    retry_initial_s: float = 1.0
    retry_max_s: float = 30.0
    max_call_chars: int | None = None
    parallel_calls: bool = True
    avoid_repeats: bool = False


def is_retryable(error: BaseException) -> bool:
    """Whether a failed model call is worth retrying: a timeout, a lost connection, a rate limit or
    an overloaded server."""
    if isinstance(error, (TimeoutError, ConnectionError)):
        return True
    if any(cls.__name__ in _RETRYABLE_NAMES for cls in type(error).__mro__):
        return True
    return getattr(error, "status_code", None) in _RETRYABLE_STATUS


def retrying(settings: LoopSettings) -> dict[str, Any]:
    """The ``tenacity`` arguments of a model call's bounded retry (``Retrying(**retrying(settings))``):
    ``model_retries`` more attempts after a retryable failure, waiting ``retry_initial_s`` x 2^attempt
    (up to ``retry_max_s``) plus as much again at random; the last failure is raised as it is."""
    return dict(stop=stop_after_attempt(settings.model_retries + 1), retry=retry_if_exception(is_retryable),
                reraise=True, wait=wait_exponential_jitter(multiplier=settings.retry_initial_s,
                                                           max=settings.retry_max_s, jitter=settings.retry_initial_s))


def last_reply(state: AgentState) -> AIMessage:
    message = state["messages"][-1]
    if not isinstance(message, AIMessage):
        raise RuntimeError(f"the conversation ends with a {type(message).__name__}, not the model's reply")
    return message


def wants_tools(state: AgentState) -> bool:
    """Whether the loop goes on to ``run_tools``: the last reply proposes calls and no budget is spent."""
    if state["stop_reason"] is not None:
        return False
    reply = last_reply(state)
    return bool(reply.tool_calls or reply.invalid_tool_calls)


def make_checkpointer(spec: str = "memory") -> BaseCheckpointSaver:
    """``"memory"``: an ``InMemorySaver``; ``"sqlite:PATH"``: a ``SqliteSaver`` on that file (needs
    the ``langgraph-checkpoint-sqlite`` package)."""
    if spec == "memory":
        return InMemorySaver()
    if spec.startswith("sqlite:"):
        import sqlite3

        try:  # an optional package, not a dependency of the llm extra
            sqlite_saver = importlib.import_module("langgraph.checkpoint.sqlite").SqliteSaver
        except ImportError:
            raise ValueError("checkpointer 'sqlite:...' needs the langgraph-checkpoint-sqlite package; install it "
                             "or use checkpointer 'memory'") from None
        return cast(BaseCheckpointSaver, sqlite_saver(sqlite3.connect(spec.removeprefix("sqlite:"),
                                                                      check_same_thread=False)))
    raise ValueError(f"unknown checkpointer {spec!r}; use 'memory' or 'sqlite:PATH'")


def build_graph(model: BaseChatModel, tools: Sequence[BaseTool | ToolSpec], settings: LoopSettings | None = None,
                *, checkpointer: BaseCheckpointSaver | None = None, pause_before_tools: bool = False,
                state_schema: type[AgentState] = AgentState,
                prompt_tools: Sequence[ToolSpec] | None = None) -> CompiledStateGraph:
    """The agent graph (see the module docstring). ``tools`` are LangChain tools to run, or
    ``ToolSpec``s when the graph pauses before ``run_tools`` and its caller runs the calls.
    ``state_schema``: ``AgentState`` or a ``TypedDict`` extending it with keys of the caller's (the
    nodes pass them through; ``gauntlet.agents.llm.state.EpisodeState`` holds the LLM agent's tools).
    ``prompt_tools``: the tools the prompt's system turn shows, when not all of ``tools`` (a local model
    whose tools widened in the conversation; its chat model must take a ``prompt_tools`` binding)."""
    settings = settings or LoopSettings()
    specs = {spec.name: spec for spec in map(ToolSpec.of, tools)}
    runnable = {tool.name: tool for tool in tools if isinstance(tool, BaseTool)}
    shown: dict[str, Any] = {}
    if prompt_tools is not None:
        shown["prompt_tools"] = [spec.as_openai() for spec in prompt_tools]
    bound = model.bind_tools([spec.as_openai() for spec in specs.values()], **shown)
    retries = retrying(settings)

    def counted(state: AgentState, reply: AIMessage) -> dict[str, Any]:
        usage = reply.usage_metadata or {"input_tokens": 0, "output_tokens": 0}
        malformed = sum(call.problem is not None
                        for call in check_calls(reply, specs, max_call_chars=settings.max_call_chars,
                                               parallel_calls=settings.parallel_calls))
        return {"messages": [reply], "model_calls": state["model_calls"] + 1,
                "malformed_calls": state["malformed_calls"] + malformed,
                "input_tokens": state["input_tokens"] + usage["input_tokens"],
                "output_tokens": state["output_tokens"] + usage["output_tokens"]}

    def model_kwargs(state: AgentState) -> dict[str, Any]:
        # A model that can redraw a reply is told which calls would only repeat an earlier result.
        return {"avoid_calls": repeatable_calls(state["messages"], specs)} if settings.avoid_repeats else {}

    def spent(state: AgentState, config: RunnableConfig) -> str | None:
        started = config.get("configurable", {}).get("started_at")
        return settings.budget.spent(state, None if started is None else time.monotonic() - started)

    def call_model(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        if reason := spent(state, config):
            return {"stop_reason": reason}
        try:
            for attempt in Retrying(**retries):
                with attempt:
                    reply = bound.invoke(state["messages"], config, **model_kwargs(state))
        except ConversationTooLong:
            return {"stop_reason": CONTEXT_FULL}
        return counted(state, reply)

    async def acall_model(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        if reason := spent(state, config):
            return {"stop_reason": reason}
        try:
            async for attempt in AsyncRetrying(**retries):
                with attempt:
                    reply = await bound.ainvoke(state["messages"], config, **model_kwargs(state))
        except ConversationTooLong:
            return {"stop_reason": CONTEXT_FULL}
        return counted(state, reply)

    async def run_one(call: CheckedCall) -> ToolResult:
        tool = runnable.get(call.name)
        if tool is None:
            raise RuntimeError(f"the graph has no tool {call.name!r} to run; build it with LangChain tools, or "
                               "with pause_before_tools=True and run the calls yourself")
        try:
            message = await asyncio.wait_for(
                tool.ainvoke({"type": "tool_call", "name": call.name, "args": call.arguments, "id": call.id}),
                settings.tool_timeout_s)
        except TimeoutError:
            return timeout_result(settings.tool_timeout_s)
        return ToolResult.of_message(message)

    async def run_tools(state: AgentState) -> dict[str, Any]:
        checked = check_calls(last_reply(state), specs, max_call_chars=settings.max_call_chars,
                              parallel_calls=settings.parallel_calls)
        well_formed = [call for call in checked if call.problem is None]
        if settings.concurrent_tools:
            results = list(await asyncio.gather(*(run_one(call) for call in well_formed)))
        else:
            results = [await run_one(call) for call in well_formed]
        return {"messages": answers(checked, dict(zip([call.id for call in well_formed], results, strict=True)),
                                    specs)}

    def after_model(state: AgentState) -> str:
        return "run_tools" if wants_tools(state) else END

    graph = StateGraph(state_schema)
    graph.add_node("call_model", RunnableLambda(call_model, afunc=acall_model, name="call_model"))
    graph.add_node("run_tools", run_tools)
    graph.add_edge(START, "call_model")
    graph.add_conditional_edges("call_model", after_model, ["run_tools", END])
    graph.add_edge("run_tools", "call_model")
    return graph.compile(checkpointer=checkpointer if checkpointer is not None else InMemorySaver(),
                         interrupt_before=["run_tools"] if pause_before_tools else None)


def answers(checked: Sequence[CheckedCall], results: dict[str, ToolResult],
            specs: dict[str, ToolSpec]) -> list[ToolMessage]:
    """``run_tools``'s messages: one per call of the reply, in order; a malformed call's is its
    rejection, a well-formed call's its result from ``results`` (by call id)."""
    return [rejection(call, specs) if call.problem is not None else tool_message(call, results[call.id])
            for call in checked]


def run_config(thread_id: str, settings: LoopSettings, started_at: float | None = None) -> RunnableConfig:
    """The config of one run on ``thread_id``: the clock the wall-time budget reads, and a recursion
    limit that lets ``max_steps`` model calls (and their tool rounds) run."""
    return RunnableConfig(configurable={"thread_id": thread_id,
                                        "started_at": time.monotonic() if started_at is None else started_at},
                          recursion_limit=2 * settings.budget.max_steps + 4)


async def run_on_session(model: BaseChatModel, session: Any, messages: Sequence[AnyMessage],
                         settings: LoopSettings | None = None, *, thread_id: str = "main") -> AgentState:
    """Run the whole loop on the tools of one open MCP ``ClientSession`` (``load_mcp_tools``), as a
    plain LangGraph user would; returns the final state."""
    from langchain_mcp_adapters.tools import load_mcp_tools

    settings = settings or LoopSettings()
    graph = build_graph(model, await load_mcp_tools(session), settings)
    return cast(AgentState, await graph.ainvoke(initial_state(messages), run_config(thread_id, settings)))
