"""A chat model that replays a script: deterministic replies, for tests, demos and benchmarks.

A script is a JSON list of turns, one per model call, played in order::

    [{"text": "I will read the reaction. {\\"name\\": \\"get_reaction\\", \\"arguments\\": {...}}"},
     {"content": "", "tool_calls": [{"name": "search_chemical", "args": {"query": "HATU"}}]},
     {"text": "12.5"}]

``{"text": ...}`` is raw model text, read for calls by ``parse_tool_calls`` exactly as a local
model's reply is, so a script can hold malformed calls (bad JSON, an unknown tool); what the
parser could not read becomes the message's ``invalid_tool_calls``. ``{"content", "tool_calls"}``
is a structured reply, as an API model returns it (its calls are not checked here: a call to an
unknown tool or with bad arguments is the agent's to catch).

The turn played is the number of assistant turns already in the conversation, after a worked example
if there is one (``demonstrations.DEMO_CLOSING`` ends it: the script plays the task's own turns, so one
script serves an agent with and without a demonstration): the model keeps no
cursor of its own, so any copy of a conversation (a LangGraph checkpoint, a fork of it) gets the
same next reply, and one model serves any number of episodes at once. Call ids are
``call_<turn>_<k>``. Usage is reported with tokens counted as whitespace-separated words (input:
every message's text and calls; output: the turn's raw text, or its content and calls), so token budgets can be tested.
A conversation longer than the script raises ``ScriptExhaustedError``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, InvalidToolCall, ToolCall
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from gauntlet.agents.llm.demonstrations import DEMO_CLOSING
from gauntlet.agents.llm.tool_calls import parse_tool_calls


class ScriptExhaustedError(RuntimeError):
    """The conversation asked for more turns than the script has."""


class ScriptFormatError(ValueError):
    """A script file that is not a JSON list of turns."""


class TextTurn(BaseModel):
    """Raw model text, parsed for tool calls like a local model's reply."""

    model_config = ConfigDict(extra="forbid")
    text: str


class ScriptedCall(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class StructuredTurn(BaseModel):
    """A reply with structured tool calls, as an API model returns it."""

    model_config = ConfigDict(extra="forbid")
    content: str = ""
    tool_calls: list[ScriptedCall] = Field(default_factory=list)


Turn = TextTurn | StructuredTurn
_turns = TypeAdapter(list[Turn])


def words(text: str) -> int:
    """Tokens as this model counts them: whitespace-separated words."""
    return len(text.split())


def _message_text(message: BaseMessage) -> str:
    text = message.content if isinstance(message.content, str) else json.dumps(message.content)
    calls = getattr(message, "tool_calls", None)
    return text + (" " + json.dumps(calls) if calls else "")


def _task_start(messages: Sequence[BaseMessage]) -> int:
    """Where the task's own turns start: after the message that closes a worked example, else at 0."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, HumanMessage) and DEMO_CLOSING in str(message.content):
            return index + 1
    return 0


class ScriptedChatModel(BaseChatModel):
    """Replays ``turns`` (see the module docstring); ``source`` is the script file, if any."""

    turns: list[Turn]
    source: str | None = None
    model_name: str = "scripted"

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ScriptedChatModel:
        """The model playing the script in ``path`` (``ScriptFormatError`` names what is wrong)."""
        path = Path(path)
        try:
            turns = _turns.validate_json(path.read_bytes())
        except OSError as exc:
            raise ScriptFormatError(f"cannot read the script {path} ({exc.strerror})") from None
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(part) for part in problem["loc"][:2])
            raise ScriptFormatError(f"{path} is not a script (turn {where}: {problem['msg']}); expected a JSON list "
                                    'of {"text": ...} or {"content": ..., "tool_calls": [{"name", "args"}]}') from None
        return cls(turns=turns, source=str(path))

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name, "source": self.source}

    def bind_tools(self, tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool], *,
                   tool_choice: str | None = None, **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        """The model with ``tools`` bound: text turns are parsed for calls to these tools."""
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        turn = sum(isinstance(message, AIMessage) for message in messages[_task_start(messages):])
        if turn >= len(self.turns):
            where = f" ({self.source})" if self.source else ""
            raise ScriptExhaustedError(f"the script{where} has {len(self.turns)} turns and the conversation asks "
                                       f"for turn {turn + 1}; add turns or lower the agent's max_steps")
        tool_names = [tool["function"]["name"] for tool in kwargs.get("tools", [])]
        reply = self._reply(turn, self.turns[turn], tool_names)
        input_tokens = sum(words(_message_text(message)) for message in messages)
        scripted = self.turns[turn]
        output_tokens = words(scripted.text) if isinstance(scripted, TextTurn) else words(_message_text(reply))
        reply.usage_metadata = UsageMetadata(input_tokens=input_tokens, output_tokens=output_tokens,
                                             total_tokens=input_tokens + output_tokens)
        reply.response_metadata = {"model_name": self.model_name}
        return ChatResult(generations=[ChatGeneration(message=reply)])

    @staticmethod
    def _reply(turn: int, scripted: Turn, tool_names: list[str]) -> AIMessage:
        if isinstance(scripted, StructuredTurn):
            calls = [ToolCall(name=call.name, args=call.args, id=f"call_{turn}_{k}", type="tool_call")
                     for k, call in enumerate(scripted.tool_calls)]
            return AIMessage(content=scripted.content, tool_calls=calls)
        parsed = parse_tool_calls(scripted.text, tool_names)
        calls = [ToolCall(name=call.name, args=call.arguments, id=f"call_{turn}_{k}", type="tool_call")
                 for k, call in enumerate(parsed.calls)]
        invalid = [InvalidToolCall(name=None, args=None, id=f"call_{turn}_{len(calls) + k}", error=problem,
                                   type="invalid_tool_call")
                   for k, problem in enumerate(parsed.problems)]
        return AIMessage(content=parsed.content, tool_calls=calls, invalid_tool_calls=invalid)
