"""The agent's chat model answering a tool server's request for a model (MCP sampling).

A server asks its client to write something (``sampling/createMessage``; the disaster server's
``report_summarize`` with ``writer='client_model'``). ``sampling_callback(model, name)`` answers
with any LangChain chat model: pass it to an MCP ``ClientSession(..., sampling_callback=...)`` (or
``langchain-mcp-adapters``' ``session_kwargs``) in a plain LangGraph loop; under the runner the LLM
agent lends it through ``LLMAgent.client_model()``.

Only text is exchanged; a request with an image, audio or tool content is refused with an error the
server turns into a message for the agent. The request's temperature and token limit are the
server's wishes: the model's own settings apply (a local model decodes greedily unless configured to
sample). The model's call is not an agent turn: it is not added to the conversation, and the episode
records it only through the tool's result (the text and the model's name).
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from mcp import types


def sampling_callback(model: BaseChatModel, name: str) -> Any:
    """An MCP sampling callback (``mcp.client.session.SamplingFnT``) that answers with ``model``, reported to
    the server as ``name``."""

    async def answer(context: Any, params: types.CreateMessageRequestParams
                     ) -> types.CreateMessageResult | types.ErrorData:
        messages: list[BaseMessage] = [SystemMessage(params.systemPrompt)] if params.systemPrompt else []
        for message in params.messages:
            content = message.content
            if not isinstance(content, types.TextContent):
                return types.ErrorData(code=types.INVALID_PARAMS,
                                       message="this client's model reads text only; send the request as text")
            messages.append(HumanMessage(content.text) if message.role == "user" else AIMessage(content.text))
        try:
            reply = await model.ainvoke(messages)
        except Exception as exc:  # the server is told, and tells its caller; the agent's episode goes on
            return types.ErrorData(code=types.INTERNAL_ERROR,
                                   message=f"the client's model failed: {type(exc).__name__}")
        text = reply.content if isinstance(reply.content, str) else "".join(
            part.get("text", "") if isinstance(part, dict) else str(part) for part in reply.content)
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=text),
                                         model=name, stopReason="endTurn")

    return answer
