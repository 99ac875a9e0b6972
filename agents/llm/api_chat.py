"""The API chat models (``langchain-openai``, ``langchain-anthropic``) as the agent needs them.

Three things change from the stock classes. The SDK's own retries are off (``max_retries=0``): one call
of the model is one HTTP request, and the agent's bounded retry (``gauntlet.agents.llm.graph``) is the
only one, so each attempt is a ``model_call`` event of the record (the SDK's two retries inside the
agent's three attempts made one recorded call up to nine requests). The errors a user fixes — a server
that is down, a key that is refused, a model the server does not have — become one-line ``UserError``s
naming the URL or the variable, raised on the first call (nothing is probed before); timeouts, rate
limits and server errors pass through unchanged for the agent's bounded retries. And an
OpenAI-compatible server that writes its calls as text in ``content`` (llama.cpp, ``transformers
serve``, small models behind vLLM) has its reply read by ``parse_tool_calls`` when it holds no
structured ``tool_calls``, so the agent sees the same calls a hosted API would return.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, ClassVar, Literal

from langchain_anthropic import ChatAnthropic
from langchain_core.exceptions import ModelAuthenticationError, ModelConnectionError, ModelNotFoundError
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_openai import ChatOpenAI

from gauntlet.agents.llm.text_calls import calls_so_far, mcp_tool_as_openai, message_from_text, tool_names
from gauntlet.errors import UserError

_FIXABLE = (ModelConnectionError, ModelAuthenticationError, ModelNotFoundError)


class _ExplainsEndpointErrors(BaseChatModel):
    """Raises the errors a user fixes as ``UserError`` (see the module docstring). A mixin: it comes
    before a concrete chat model in the bases, whose methods its ``super()`` calls reach."""

    key_variable: ClassVar[str] = ""

    def _endpoint(self) -> str:
        raise NotImplementedError

    def _unreachable_fix(self) -> str:
        raise NotImplementedError

    def _explained(self, exc: Exception) -> UserError:
        if isinstance(exc, ModelConnectionError):
            return UserError(f"cannot reach the model endpoint {self._endpoint()} ({exc}); {self._unreachable_fix()}")
        if isinstance(exc, ModelAuthenticationError):
            return UserError(f"{self._endpoint()} refused the API key ({exc}); set {self.key_variable} to a valid key")
        return UserError(f"{self._endpoint()} has no such model ({exc}); fix the model name in --model")

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        """The stock ``bind_tools``, which also takes MCP tools (``mcp.types.Tool`` or their dicts)."""
        return super().bind_tools([mcp_tool_as_openai(tool) for tool in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        try:
            return super()._generate(messages, stop, run_manager, **kwargs)  # type: ignore[safe-super]
        except _FIXABLE as exc:
            raise self._explained(exc) from None

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                         **kwargs: Any) -> ChatResult:
        try:
            return await super()._agenerate(messages, stop, run_manager, **kwargs)
        except _FIXABLE as exc:
            raise self._explained(exc) from None

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        try:
            yield from super()._stream(messages, stop, run_manager, **kwargs)
        except _FIXABLE as exc:
            raise self._explained(exc) from None

    async def _astream(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                       **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        try:
            async for chunk in super()._astream(messages, stop, run_manager, **kwargs):
                yield chunk
        except _FIXABLE as exc:
            raise self._explained(exc) from None


class OpenAICompatibleChat(_ExplainsEndpointErrors, ChatOpenAI):
    """``ChatOpenAI`` for any OpenAI-compatible server, the SDK's retries off. Streaming is off: a call
    written as text is only known once the whole reply is in."""

    key_variable: ClassVar[str] = "OPENAI_API_KEY"
    disable_streaming: bool | Literal["tool_calling"] = True
    max_retries: int | None = 0  # the agent retries, and records each attempt (see the module docstring)

    def _endpoint(self) -> str:
        return self.openai_api_base or "https://api.openai.com/v1"

    def _unreachable_fix(self) -> str:
        return "start the server there, or fix the URL: --model openai:<model>@<base_url>"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        return with_text_calls(super()._generate(messages, stop, run_manager, **kwargs), messages, kwargs)

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                         **kwargs: Any) -> ChatResult:
        return with_text_calls(await super()._agenerate(messages, stop, run_manager, **kwargs), messages, kwargs)


class AnthropicChat(_ExplainsEndpointErrors, ChatAnthropic):
    """``ChatAnthropic`` with the errors a user fixes explained and the SDK's retries off."""

    key_variable: ClassVar[str] = "ANTHROPIC_API_KEY"
    max_retries: int = 0  # the agent retries, and records each attempt (see the module docstring)

    def _endpoint(self) -> str:
        return self.anthropic_api_url or "https://api.anthropic.com"

    def _unreachable_fix(self) -> str:
        return "check this machine's network connection"


def with_text_calls(result: ChatResult, messages: list[BaseMessage], kwargs: dict[str, Any]) -> ChatResult:
    """``result`` with each reply that has no structured calls but writes calls to the bound tools as
    text given those calls (and its malformed ones) as ``tool_calls`` (``invalid_tool_calls``)."""
    names = tool_names(kwargs.get("tools") or [])
    for generation in result.generations:
        message = generation.message
        if names and isinstance(message, AIMessage) and not message.tool_calls and isinstance(message.content, str):
            parsed = message_from_text(message.content, names, calls_so_far(messages), id=message.id,
                                       usage_metadata=message.usage_metadata,
                                       response_metadata=message.response_metadata)
            if parsed.tool_calls or parsed.invalid_tool_calls:
                generation.message = parsed
    return result
