"""How a conversation becomes the text a local model reads: its chat template, as transformers renders it.

Both local backends use this module, so a model is shown the same prompt whichever runtime decodes
it: ``render_messages`` turns LangChain messages into the dicts a chat template reads, and
``render_prompt`` runs the template the model file ships (a GGUF's ``tokenizer.chat_template``)
the way transformers' ``apply_chat_template`` does: a sandboxed Jinja environment with
``trim_blocks``/``lstrip_blocks``, a ``tojson`` that does not escape HTML characters, and
``raise_exception``. The test suite checks the two render alike.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

_ROLES = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}
# For a chat template that cannot show tools (SmolLM2's): the words Qwen's template uses.
_TOOLS_PROMPT = ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                 "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{schemas}\n"
                 "</tools>\n\nFor each function call, return a json object with function name and arguments "
                 "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
                 '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>')


def render_messages(messages: Sequence[BaseMessage], tools: Sequence[Mapping[str, Any]] | None,
                    template: str) -> list[dict[str, Any]]:
    """The conversation as chat-template dicts. A ``template`` that cannot show tools gets them in the
    system message, and one that cannot show an assistant's calls gets them written as text, in the
    tags Qwen's template uses, so every model is asked for and shown its calls the same way."""
    rendered: list[dict[str, Any]] = []
    for message in messages:
        entry: dict[str, Any] = {"role": _ROLES.get(message.type, message.type), "content": message.text}
        if isinstance(message, AIMessage) and message.tool_calls:
            calls = [{"name": call["name"], "arguments": call["args"]} for call in message.tool_calls]
            if "tool_calls" in template:
                entry["tool_calls"] = [{"type": "function", "function": call} for call in calls]
            else:
                written = "\n".join(f"<tool_call>\n{json.dumps(call)}\n</tool_call>" for call in calls)
                entry["content"] = f"{entry['content']}\n{written}".strip()
        if isinstance(message, ToolMessage):
            entry["tool_call_id"] = message.tool_call_id
        rendered.append(entry)
    if tools and "tools" not in template:
        described = _TOOLS_PROMPT.format(schemas="\n".join(json.dumps(tool) for tool in tools))
        if rendered and rendered[0]["role"] == "system":
            rendered[0] = {**rendered[0], "content": f"{rendered[0]['content']}\n\n{described}"}
        else:
            rendered.insert(0, {"role": "system", "content": described})
    return rendered




def render_prompt(template: str, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None,
                  *, add_generation_prompt: bool = True) -> str:
    """The text ``template`` makes of ``messages`` (``render_messages``'s dicts) and ``tools`` (OpenAI
    function schemas), with the assistant's turn opened when ``add_generation_prompt``."""
    return str(_compiled(template).render(messages=list(messages), tools=list(tools) if tools else None,
                                          add_generation_prompt=add_generation_prompt))


@functools.lru_cache(maxsize=8)
def _compiled(template: str) -> Any:
    from jinja2.exceptions import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    def tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
               separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    environment.filters["tojson"] = tojson
    environment.globals["raise_exception"] = raise_exception
    return environment.from_string(template)
