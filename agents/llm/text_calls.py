"""Backends whose tool calls arrive as text: the tool schemas they are shown and the message they return.

A local model (``LocalChatModel``) and some OpenAI-compatible servers write a call as JSON in the reply
instead of returning structured ``tool_calls``. Both see the tools as OpenAI-style function schemas
(``openai_tool_schemas``) and both turn their text into the same LangChain ``AIMessage``
(``message_from_text``): the calls ``parse_tool_calls`` found become ``tool_calls``, what it could not
read becomes ``invalid_tool_calls`` (the agent sends those back to the model as an error observation).

Call ids are ``call_<n>``, ``n`` counting the calls already in the conversation, so replaying a
conversation gives the same ids: a random id would make two identical runs differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.tool import invalid_tool_call, tool_call
from langchain_core.utils.function_calling import convert_to_openai_tool

from gauntlet.agents.llm.tool_calls import parse_tool_calls


def mcp_tool_as_openai(tool: Any) -> Any:
    """An MCP tool (``mcp.types.Tool`` or a dict with ``name``, ``description``, ``inputSchema``) as an
    OpenAI function schema, which every LangChain ``bind_tools`` reads; any other tool unchanged. The
    schema's titles go, as ``langchain-mcp-adapters`` drops them: they are noise the model reads."""
    if hasattr(tool, "inputSchema") and hasattr(tool, "name"):  # mcp.types.Tool
        tool = {"name": tool.name, "description": tool.description or "", "inputSchema": tool.inputSchema}
    if not (isinstance(tool, Mapping) and "inputSchema" in tool):
        return tool
    return {"type": "function", "function": {"name": tool["name"], "description": tool.get("description") or "",
                                             "parameters": _without_titles(tool["inputSchema"])}}


def _without_titles(schema: Any) -> Any:
    if isinstance(schema, Mapping):
        return {key: _without_titles(value) for key, value in schema.items()
                if not (key == "title" and isinstance(value, str))}
    if isinstance(schema, list):
        return [_without_titles(value) for value in schema]
    return schema


def openai_tool_schema(tool: Any) -> dict[str, Any]:
    """The OpenAI function schema (``{"type": "function", "function": {...}}``) of a tool given as a
    LangChain tool, an OpenAI schema dict, a plain function, or an MCP tool."""
    return convert_to_openai_tool(mcp_tool_as_openai(tool))


def openai_tool_schemas(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """``openai_tool_schema`` of each tool, in order."""
    return [openai_tool_schema(tool) for tool in tools]


def tool_names(schemas: Sequence[Mapping[str, Any]]) -> list[str]:
    """The function names of OpenAI tool schemas."""
    return [schema["function"]["name"] for schema in schemas]


def calls_so_far(messages: Sequence[BaseMessage]) -> int:
    """How many tool calls (valid or not) the model made earlier in the conversation."""
    return sum(len(message.tool_calls) + len(message.invalid_tool_calls)
               for message in messages if isinstance(message, AIMessage))


def message_from_text(text: str, tools: Sequence[str], first_call: int, **fields: Any) -> AIMessage:
    """The ``AIMessage`` of a reply written as text: the prose as ``content``, each call to one of
    ``tools`` as a ``tool_call`` and each malformed one as an ``invalid_tool_call``, numbered
    ``call_<first_call>``, ``call_<first_call + 1>``, ... ``fields`` go to the message as they are.
    With no tools, the text is all content: JSON in it cannot be a call."""
    if not tools:
        return AIMessage(content=text, **fields)
    reply = parse_tool_calls(text, tools)
    calls = [tool_call(name=call.name, args=call.arguments, id=f"call_{first_call + index}")
             for index, call in enumerate(reply.calls)]
    first_invalid = first_call + len(calls)
    invalid = [invalid_tool_call(name=None, args=None, id=f"call_{first_invalid + index}", error=problem)
               for index, problem in enumerate(reply.problems)]
    return AIMessage(content=reply.content, tool_calls=calls, invalid_tool_calls=invalid, **fields)
