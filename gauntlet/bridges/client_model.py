"""A tool asks the language model of the client that called it to write (MCP sampling).

A Gauntlet server has no model of its own, and gets no key: where a tool can use one (the prose of a
report), it sends ``sampling/createMessage`` to the client session that called it, and the client
answers with whatever model it is configured with (the LLM agent's backend, through
``gauntlet.agents.llm.sampling``) or declines. Tools stay deterministic unless a call asks for this.

The request names the tool that asks in its ``metadata`` (``{"tool": <name>}``), so the client can record
the model call as that tool's (the LLM agent's ``model_call`` event says ``requested_by``).

``ask_client_model`` raises ``ClientModelUnavailable`` (a ``ToolInputError``: the caller can fix it by
asking for the deterministic path) when the session did not declare the ``sampling`` capability, when
the call came from outside a client session (a tool run in process), or when the client declined or
returned no text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp.shared.exceptions import McpError
from mcp.types import ClientCapabilities, SamplingCapability, SamplingMessage, TextContent

from gauntlet.bridges.tool_errors import ToolInputError


REQUESTING_TOOL = "tool"
"""The key of a sampling request's ``metadata`` that names the tool asking."""


class ClientModelUnavailable(ToolInputError):
    """The calling client has no language model to lend, or its model gave no usable text."""


@dataclass(frozen=True)
class ClientReply:
    """What the client's model wrote, and the model's name as the client reports it."""

    text: str
    model: str


async def ask_client_model(session: Any, prompt: str, *, tool: str, system: str, max_tokens: int,
                           fallback: str) -> ClientReply:
    """Ask the model of the client behind ``session`` (an MCP ``ServerSession``, or None outside a client
    request) to answer ``prompt`` under ``system``, greedily (temperature 0), with at most ``max_tokens``,
    for the tool named ``tool``.

    ``fallback`` names what the caller should do instead; it ends every ``ClientModelUnavailable``."""
    if session is None:
        raise ClientModelUnavailable(f"no client session is calling this tool, so no client model can be asked; "
                                     f"{fallback}")
    if not session.check_client_capability(ClientCapabilities(sampling=SamplingCapability())):
        raise ClientModelUnavailable("this MCP client offers no language model (it did not declare the 'sampling' "
                                     f"capability); {fallback}")
    message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
    try:
        result = await session.create_message([message], max_tokens=max_tokens, system_prompt=system,
                                              temperature=0.0, include_context="none",
                                              metadata={REQUESTING_TOOL: tool})
    except McpError as exc:
        raise ClientModelUnavailable(f"the client's language model declined: {exc.error.message}; {fallback}") from None
    content = result.content
    text = content.text.strip() if isinstance(content, TextContent) else ""
    if not text:
        raise ClientModelUnavailable(f"the client's language model returned no text; {fallback}")
    return ClientReply(text=text, model=result.model)
