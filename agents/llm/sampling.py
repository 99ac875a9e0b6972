"""The agent's chat model answering a tool server's request for a model (MCP sampling).

A server asks its client to write something (``sampling/createMessage``; the disaster server's
``report_summarize`` with ``writer='client_model'``). ``sampling_callback(model, name)`` answers
with any LangChain chat model: pass it to an MCP ``ClientSession(..., sampling_callback=...)`` (or
``langchain-mcp-adapters``' ``session_kwargs``) in a plain LangGraph loop; under the runner the LLM
agent lends it through ``LLMAgent.client_model()``.

Only text is exchanged; a request with an image, audio or tool content is refused with an error the
server turns into a message for the agent. The request's temperature and token limit are the
server's wishes: the model's own settings apply (a local model decodes greedily unless configured to
sample). A timeout, rate limit or server error is retried as the agent's own calls are
(``LoopSettings``' ``model_retries``).

The model's call is not an agent turn: it is not added to the conversation, and it counts against
no budget. It is a model call all the same: it runs with the given LangChain ``callbacks`` and the run
metadata ``requested_by`` (``{"tool": <the tool that asked, when the server names it>}``), so the LLM
agent's ``ModelCallRecorder`` records each attempt as a ``model_call`` event marked as asked by that
tool, in the step whose tool call asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from mcp import types
from tenacity import AsyncRetrying

from gauntlet.agents.llm.graph import LoopSettings, retrying
from gauntlet.agents.llm.records import REQUESTED_BY
from gauntlet.bridges.client_model import REQUESTING_TOOL


def sampling_callback(model: BaseChatModel, name: str, *, callbacks: Sequence[BaseCallbackHandler] = (),
                      settings: LoopSettings | None = None) -> Any:
    """An MCP sampling callback (``mcp.client.session.SamplingFnT``) that answers with ``model``, reported to
    the server as ``name``; each attempt runs with ``callbacks``, retried as ``settings`` say (default:
    ``LoopSettings()``'s retries)."""
    retries = retrying(settings or LoopSettings())

    async def answer(context: Any, params: types.CreateMessageRequestParams
                     ) -> types.CreateMessageResult | types.ErrorData:
        messages: list[BaseMessage] = [SystemMessage(params.systemPrompt)] if params.systemPrompt else []
        for message in params.messages:
            content = message.content
            if not isinstance(content, types.TextContent):
                return types.ErrorData(code=types.INVALID_PARAMS,
                                       message="this client's model reads text only; send the request as text")
            messages.append(HumanMessage(content.text) if message.role == "user" else AIMessage(content.text))
        asking_tool = (params.metadata or {}).get(REQUESTING_TOOL)
        config = RunnableConfig(callbacks=list(callbacks), metadata={REQUESTED_BY: {"tool": asking_tool}})
        try:
            async for attempt in AsyncRetrying(**retries):
                with attempt:
                    reply = await model.ainvoke(messages, config)
        except Exception as exc:  # the server is told, and tells its caller; the agent's episode goes on
            return types.ErrorData(code=types.INTERNAL_ERROR,
                                   message=f"the client's model failed: {type(exc).__name__}")
        text = reply.content if isinstance(reply.content, str) else "".join(
            part.get("text", "") if isinstance(part, dict) else str(part) for part in reply.content)
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=text),
                                         model=name, stopReason="endTurn")

    return answer
