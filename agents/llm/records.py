"""How an LLM agent's episode is recorded: its messages as ``Message`` records, its model calls as events.

Each step's ``messages`` are the turns that joined the conversation since the step before (the
first step's start with the system prompt and the task), so the steps' messages, concatenated, are
the whole conversation up to the last model reply: ``conversation(episode)`` rebuilds it as
LangChain messages. A record is ``{"role", "content"}`` plus, for an assistant turn, its
``tool_calls`` (``id``, ``name``, ``arguments``) and ``invalid_tool_calls`` (``id``, ``name``,
``args``, ``error``), and for a tool turn its ``tool_call_id``, ``name`` and ``status`` (and ``written``
for an answer the agent wrote itself: how many leading characters are its own, ``calls.WRITTEN``).

``ModelCallRecorder`` is a LangChain callback handler: every call of the chat model becomes a
``model_call`` event with ``input_tokens``, ``output_tokens`` (as the model reports them),
``latency_ms``, ``model`` and, for a priced model, ``cost_usd``; a call that failed (and may be
retried) has ``error`` instead of tokens. A call a tool server asked for (MCP sampling,
``gauntlet.agents.llm.sampling``) carries ``requested_by`` (``{"tool": <the tool that asked>}``) from
its run metadata into its event.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    InvalidToolCall,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.outputs import LLMResult

from gauntlet.agents.llm.calls import WRITTEN
from gauntlet.agents.llm.kept_states import carry_states
from gauntlet.episode import Episode, Event, Message

_ROLES = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage, "tool": ToolMessage}
REQUESTED_BY = "requested_by"
"""Run metadata, copied into the ``model_call`` event: the tool server's tool a call was made for."""


def message_record(message: BaseMessage) -> Message:
    """``message`` as an episode's ``Message`` record (see the module docstring)."""
    if isinstance(message, AIMessage):
        fields: dict[str, Any] = {}
        if message.tool_calls:
            fields["tool_calls"] = [{"id": call["id"], "name": call["name"], "arguments": call["args"]}
                                    for call in message.tool_calls]
        if message.invalid_tool_calls:
            fields["invalid_tool_calls"] = [{key: call.get(key) for key in ("id", "name", "args", "error")}
                                            for call in message.invalid_tool_calls]
        # The reply's layer states ride on the record in memory (never written), so a monitor scores them.
        return carry_states(Message(role="assistant", content=message.content, **fields), message)
    if isinstance(message, ToolMessage):
        own = message.artifact.get(WRITTEN) if isinstance(message.artifact, dict) else None
        return Message(role="tool", content=message.content, tool_call_id=message.tool_call_id, name=message.name,
                       status=message.status, **({WRITTEN: own} if own is not None else {}))
    if isinstance(message, SystemMessage):
        return Message(role="system", content=message.content)
    if isinstance(message, HumanMessage):
        return Message(role="user", content=message.content)
    raise TypeError(f"cannot record a {type(message).__name__}; the agent's conversation holds system, user, "
                    "assistant and tool turns")


def message_of(record: Message | dict[str, Any]) -> AnyMessage:
    """The LangChain message a record holds (the inverse of ``message_record``)."""
    data = record.model_dump() if isinstance(record, Message) else dict(record)
    role, content = data.pop("role"), data.pop("content")
    if role not in _ROLES:
        raise ValueError(f"a message record's role is one of {', '.join(_ROLES)}, not {role!r}")
    if role == "assistant":
        calls = [ToolCall(id=call["id"], name=call["name"], args=call["arguments"], type="tool_call")
                 for call in data.get("tool_calls", [])]
        invalid = [InvalidToolCall(type="invalid_tool_call", id=call.get("id"), name=call.get("name"),
                                   args=call.get("args"), error=call.get("error"))
                   for call in data.get("invalid_tool_calls", [])]
        return AIMessage(content=content, tool_calls=calls, invalid_tool_calls=invalid)
    if role == "tool":
        return ToolMessage(content=content, tool_call_id=data["tool_call_id"], name=data.get("name"),
                           status=data.get("status", "success"),
                           **({"artifact": {WRITTEN: data[WRITTEN]}} if WRITTEN in data else {}))
    return SystemMessage(content=content) if role == "system" else HumanMessage(content=content)


def records(messages: Iterable[BaseMessage]) -> list[Message]:
    return [message_record(message) for message in messages]


def conversation(episode: Episode) -> list[AnyMessage]:
    """The conversation of an LLM agent's episode, rebuilt from its steps' messages."""
    return [message_of(record) for step in episode.steps for record in step.messages]


class ModelCallRecorder(BaseCallbackHandler):
    """Turns each chat-model call into a ``model_call`` event (see the module docstring); ``drain``
    hands over the events recorded since it was last called, or, given ``deliver``, each event goes
    there as it is recorded."""

    def __init__(self, source: str, price_usd_per_mtok: Sequence[float] | None = None,
                 deliver: Callable[[Event], None] | None = None):
        self.source = source
        self.price_usd_per_mtok = tuple(price_usd_per_mtok) if price_usd_per_mtok else None
        self._started: dict[UUID, tuple[float, dict[str, Any]]] = {}
        self._events: list[Event] = []
        self._deliver = deliver

    def on_chat_model_start(self, serialized: dict[str, Any], messages: list[list[BaseMessage]], *, run_id: UUID,
                            metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        metadata = metadata or {}
        fields = {"model": metadata.get("ls_model_name")}
        if REQUESTED_BY in metadata:
            fields[REQUESTED_BY] = metadata[REQUESTED_BY]
        self._started[run_id] = (time.perf_counter(), fields)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        started, fields = self._started.pop(run_id, (time.perf_counter(), {"model": None}))
        message = getattr(response.generations[0][0], "message", None) if response.generations else None
        usage = getattr(message, "usage_metadata", None) or {}
        model = (getattr(message, "response_metadata", {}) or {}).get("model_name") or fields["model"]
        data: dict[str, Any] = {"input_tokens": usage.get("input_tokens", 0),
                                "output_tokens": usage.get("output_tokens", 0),
                                "latency_ms": (time.perf_counter() - started) * 1e3, **fields, "model": model}
        if self.price_usd_per_mtok is not None:
            input_price, output_price = self.price_usd_per_mtok
            data["cost_usd"] = (data["input_tokens"] * input_price + data["output_tokens"] * output_price) / 1e6
        self._record(Event(source=self.source, kind="model_call", data=data))

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        started, fields = self._started.pop(run_id, (time.perf_counter(), {"model": None}))
        self._record(Event(source=self.source, kind="model_call", data={
            "error": type(error).__name__, "latency_ms": (time.perf_counter() - started) * 1e3, **fields}))

    def _record(self, event: Event) -> None:
        if self._deliver is not None:
            self._deliver(event)
        else:
            self._events.append(event)

    def drain(self) -> list[Event]:
        events, self._events = self._events, []
        return events
