"""The tool-call boundary: what a proposed call is checked against, and how a result goes back.

Both ways of running the agent share this module, so they tell the model the same things: the
plain LangGraph graph (its ``run_tools`` node runs the calls on MCP tools) and the runner (the env
runs them, one per step). A call is malformed when the parser could not read it, names no tool
the model was given, has arguments that violate the tool's input schema (checked with
``jsonschema``), or would not fit in one env action; a malformed call never reaches a server, and
the model gets an error message naming the problem (and the tool's schema, when the tool is known).

A tool answer the agent writes itself, for a call it did not run (a rejection here, the agent's own
refusals and notices), says so in its artifact: ``WRITTEN``, how many leading characters of its content
are the agent's; what follows, if anything, is a tool's earlier result it quotes (a repeated call's).
``written_split`` parts the two, so a reader of what the tools returned (the latent monitor's span filter)
reads no text of the agent's own.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jsonschema import validators
from jsonschema.exceptions import best_match
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

CALL_FORMAT = '{"name": "<tool>", "arguments": {...}}'
WRITTEN = "written"
"""The artifact key of a tool answer the agent wrote itself: how many leading characters of the content are
its own (module doc)."""


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model is told of it: name, description and JSON input schema."""

    name: str
    description: str
    input_schema: dict[str, Any]
    idempotent: bool = False  # the server's idempotentHint: the same call again gives the same result

    @classmethod
    def of(cls, tool: BaseTool | ToolSpec | Mapping[str, Any]) -> ToolSpec:
        """The spec of a LangChain tool (an MCP tool keeps its server's schema as is), or of a tool
        listed in ``ToolTaskEnv``'s reset info (``name``, ``description``, ``input_schema``)."""
        if isinstance(tool, ToolSpec):
            return tool
        if isinstance(tool, BaseTool):
            schema = tool.args_schema if isinstance(tool.args_schema, dict) else \
                convert_to_openai_tool(tool)["function"]["parameters"]
            return cls(tool.name, tool.description, dict(schema))
        hints = tool.get("annotations") or {}
        return cls(str(tool["name"]), str(tool.get("description") or ""), dict(tool["input_schema"]),
                   idempotent=bool(hints.get("idempotentHint")))

    def as_openai(self) -> dict[str, Any]:
        """The OpenAI function format every LangChain chat model's ``bind_tools`` reads."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.input_schema}}

    def argument_problem(self, arguments: dict[str, Any]) -> str | None:
        """What is wrong with ``arguments`` against the input schema, or None."""
        error = best_match(_validator(json.dumps(self.input_schema, sort_keys=True)).iter_errors(arguments))
        if error is None:
            return None
        where = "/".join(str(part) for part in error.absolute_path)
        return f"the arguments of {self.name} do not match its input schema: {error.message}" + \
            (f" (at {where})" if where else "")


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    """A validator per schema, shared (a spec stays plain data: snapshots holding it pickle)."""
    schema = json.loads(schema_json)
    return validators.validator_for(schema)(schema)


@dataclass(frozen=True)
class CheckedCall:
    """One call a reply proposes, with what is wrong with it (None: well formed)."""

    id: str
    name: str
    arguments: dict[str, Any]
    problem: str | None = None


ONE_CALL = ("one call per reply: only your first call runs; make this call again in a later reply if you "
            "still need it")


def check_calls(reply: AIMessage, tools: Mapping[str, ToolSpec], *, max_call_chars: int | None = None,
                parallel_calls: bool = True) -> list[CheckedCall]:
    """Every call of ``reply``, structured calls first, then those the parser could not read. Without
    ``parallel_calls``, each call after the first is refused (``ONE_CALL``): a small model that writes
    several calls at once writes the later ones before it has read what the first returns."""
    checked = []
    for index, call in enumerate(reply.tool_calls):
        call_id = call.get("id") or f"call_{index}"
        spec = tools.get(call["name"])
        problem = None
        if index > 0 and not parallel_calls:
            problem = ONE_CALL
        elif spec is None:
            problem = f"unknown tool {call['name']!r}; the tools are {', '.join(tools)}"
        else:
            problem = spec.argument_problem(call["args"])
            if problem is None and max_call_chars is not None and \
                    len(call_text(call["name"], call["args"])) > max_call_chars:
                problem = f"the call is longer than {max_call_chars} characters; pass shorter arguments"
        checked.append(CheckedCall(call_id, call["name"], call["args"], problem))
    for index, invalid in enumerate(reply.invalid_tool_calls, start=len(checked)):
        checked.append(CheckedCall(invalid.get("id") or f"call_{index}", invalid.get("name") or "", {},
                                   invalid.get("error") or f"a tool call that is not {CALL_FORMAT}"))
    return checked


def earlier_result(conversation: Sequence[BaseMessage], call: CheckedCall,
                   tools: Mapping[str, ToolSpec]) -> ToolMessage | None:
    """The tool message that answered an earlier call identical to ``call`` (same tool, same
    arguments) in ``conversation``, when running it again could only give that result: the tool is
    idempotent (its server's hint) and no call of a tool that is not came after it. None otherwise.
    A small model that loops on one call gets the result it already has instead of another step."""
    spec = tools.get(call.name)
    if spec is None or not spec.idempotent:
        return None
    calls = {tool_call.get("id"): (tool_call["name"], tool_call["args"])
             for message in conversation if isinstance(message, AIMessage) for tool_call in message.tool_calls}
    for message in reversed(conversation):
        if not isinstance(message, ToolMessage):
            continue
        name, arguments = calls.get(message.tool_call_id, (message.name, None))
        if (name, arguments) == (call.name, call.arguments):
            return message
        if name is None or name not in tools or not tools[name].idempotent:
            return None  # a call that may have changed what the repeat would return
    return None


def repeatable_calls(conversation: Sequence[BaseMessage], tools: Mapping[str, ToolSpec]) -> list[dict[str, Any]]:
    """The calls of ``conversation`` a model should not make again (``{"name", "arguments"}``, oldest
    first, each once): those ``earlier_result`` would answer from memory (calls of idempotent tools since
    the last call of a tool that is not), and those the agent refused unrun (a tool message whose
    artifact is ``{"unrun": <why>}``) with no call run since, which would be refused again (unless the
    artifact says ``"may_repeat"``: a call held back for a second look may be made again). A model
    that can redraw a reply avoids these."""
    answers = {message.tool_call_id: message for message in conversation if isinstance(message, ToolMessage)}
    found: list[dict[str, Any]] = []
    changed = ran = False  # a call that may change results / any call that ran, after the one looked at
    for message in reversed(conversation):
        if not isinstance(message, AIMessage):
            continue
        for tool_call in reversed(message.tool_calls):
            answer = answers.get(tool_call.get("id") or "")
            artifact = answer.artifact if answer is not None and isinstance(answer.artifact, dict) else {}
            spec = tools.get(tool_call["name"])
            call = {"name": tool_call["name"], "arguments": tool_call["args"]}
            if "unrun" in artifact:
                avoid = not ran and not artifact.get("may_repeat")
            else:
                avoid = not changed and spec is not None and spec.idempotent
                ran, changed = True, changed or spec is None or not spec.idempotent
            if avoid and call not in found:
                found.append(call)
    return list(reversed(found))


def call_text(name: str, arguments: dict[str, Any]) -> str:
    """The call as the JSON text of one ``ToolTaskEnv`` action."""
    return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=True)


@dataclass(frozen=True)
class ToolResult:
    """What a call gave, as plain JSON data: the structured content, else the content blocks."""

    value: Any
    is_error: bool = False

    @classmethod
    def of_message(cls, message: ToolMessage) -> ToolResult:
        """The result a LangChain tool returned (``langchain-mcp-adapters`` puts an MCP result's
        structured content in the message's artifact, and its content blocks in the content)."""
        artifact = message.artifact
        if isinstance(artifact, dict) and "structured_content" in artifact:
            value = artifact["structured_content"]
        else:
            value = _blocks_value(message.content)
        return cls(value, message.status == "error")

    def text(self) -> str:
        """The result as the model reads it; an error starts with ``Error:``."""
        text = self.value if isinstance(self.value, str) else json.dumps(self.value, ensure_ascii=False)
        return "Error: " + text if self.is_error else text


def _blocks_value(content: str | Sequence[Any]) -> Any:
    """Content blocks as ``gauntlet.bridges.mcp_client.result_value`` gives them: text decoded as
    JSON where it is JSON, binaries summarised; one block is the value itself."""
    if isinstance(content, str):
        return _decoded(content)
    values = []
    for block in content:
        if isinstance(block, str):
            values.append(_decoded(block))
        elif block.get("type") == "text":
            values.append(_decoded(block["text"]))
        else:
            values.append({"type": block.get("type"), "mimeType": block.get("mime_type"),
                           "base64_chars": len(block.get("base64") or "")})
    return values[0] if len(values) == 1 else values


def _decoded(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def tool_message(call: CheckedCall, result: ToolResult) -> ToolMessage:
    """The message that answers ``call`` with ``result``."""
    return ToolMessage(content=result.text(), tool_call_id=call.id, name=call.name,
                       status="error" if result.is_error else "success")


def rejection(call: CheckedCall, tools: Mapping[str, ToolSpec]) -> ToolMessage:
    """The message that answers a malformed call: the problem, that nothing ran, and how to call."""
    spec = tools.get(call.name)
    how = (f"{spec.name} takes arguments matching this JSON schema: {json.dumps(spec.input_schema)}"
           if spec is not None else f"Write a call as {CALL_FORMAT} to one of: {', '.join(tools)}")
    text = f"Error: {call.problem}. Nothing was run. {how}"
    return ToolMessage(content=text, tool_call_id=call.id, name=call.name, status="error",
                       artifact={WRITTEN: len(text)})


def written_split(message: ToolMessage) -> tuple[str, str]:
    """``message``'s text parted into the agent's own leading text and what a tool returned (module doc):
    ``("", text)`` for a tool's result, ``(text, "")`` for an answer wholly the agent's."""
    text = message.text
    artifact = message.artifact if isinstance(message.artifact, dict) else {}
    own = int(artifact.get(WRITTEN, 0))
    return text[:own], text[own:]


def timeout_result(timeout_s: float) -> ToolResult:
    """What a call that outlived its timeout gives the model."""
    return ToolResult({"error": f"the call did not finish within {timeout_s:g} s"}, is_error=True)
