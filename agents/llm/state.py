"""The LLM agent's episode state: what its LangGraph checkpoint holds, and what is read off it.

``EpisodeState`` is the graph's state (``gauntlet.agents.llm.graph.AgentState``: the conversation and
its counters) plus the episode's tools: ``server_tools`` (the server's tools the agent may offer, as
``ToolTaskEnv``'s reset info lists them), ``answer_tool`` and ``offered`` (the names of the tools the
current reply was written against: server tools, ``find_tools`` when the set is scoped, and the answer
tool, in the order the model is shown them). Everything else of an episode is read off the messages:

* the **current reply** is the last assistant turn when only tool messages follow it (``current_reply``);
* its calls are that reply checked against the offered tools, and they are answered **in call order**,
  one tool message per call, each written into the checkpoint as soon as it is known; so the calls
  still to answer are those after the tool messages that follow the reply (``unanswered``), and the
  first of them is the call the env is running;
* a ``find_tools`` answer carries the tool set it leaves offered (its artifact's ``offered``); the set
  becomes the state's ``offered`` with the reply's last answer, so the reply's calls stay checked
  against the tools it was written for (``offered_now``);
* when the tools widen in the conversation (a local model's default), that answer also carries the names
  the system turn keeps showing (its artifact's ``prompted``), so the prompt the model has read stays
  a prefix of the next (``prompted_now``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage

from gauntlet.agents.llm.calls import ToolSpec
from gauntlet.agents.llm.graph import AgentState, initial_state
from gauntlet.agents.llm.modes import Mode, answer_spec
from gauntlet.agents.llm.tool_scope import FIND_TOOLS, find_tools_spec

OFFERED = "offered"
"""The artifact key of a ``find_tools`` answer: the names offered once the reply is answered."""

PROMPTED = "prompted"
"""The artifact key of a ``find_tools`` answer that widened the tools in the conversation: the names
whose schemas the prompt's system turn keeps (those offered before the episode's first widening)."""


class EpisodeState(AgentState):
    """The LLM agent's graph state (see the module docstring)."""

    server_tools: list[dict[str, Any]]
    answer_tool: str
    offered: list[str]
    answer_kind: str | None


def episode_state(messages: Sequence[AnyMessage], server_tools: Sequence[dict[str, Any]], answer_tool: str,
                  offered: Sequence[str], answer_kind: str | None = None) -> EpisodeState:
    """The state an episode starts from: its first messages, its tools and how its answer is graded
    (the task's ``EvalSpec.kind``, which types the answer tool; None when the task is not known)."""
    return {**initial_state(messages), "server_tools": list(server_tools), "answer_tool": answer_tool,
            "offered": list(offered), "answer_kind": answer_kind}


def offered_names(server_names: Sequence[str], *, search: bool, answer_tool: str) -> list[str]:
    """What the model is offered: the server tools ``server_names``, ``find_tools`` when ``search``
    (some server tools are left out), and the answer tool."""
    return [*server_names, *([FIND_TOOLS] if search else []), answer_tool]


def tool_specs(state: EpisodeState, offered: Sequence[str], mode: Mode) -> tuple[ToolSpec, ...]:
    """The specs of the ``offered`` tools: the server's as listed, ``find_tools``'s, and the answer
    tool typed for ``mode``."""
    by_name = {tool["name"]: tool for tool in state["server_tools"]}
    specs = []
    for name in offered:
        if name == state["answer_tool"]:
            specs.append(answer_spec(mode, name, state.get("answer_kind")))
        elif name == FIND_TOOLS:
            specs.append(ToolSpec.of(find_tools_spec()))
        else:
            specs.append(ToolSpec.of(by_name[name]))
    return tuple(specs)


def current_reply(messages: Sequence[AnyMessage]) -> int | None:
    """The index of the reply whose calls are being answered: the last message when it is an
    assistant turn with calls, or the assistant turn that only tool messages follow; None otherwise."""
    index = len(messages) - 1
    while index >= 0 and isinstance(messages[index], ToolMessage):
        index -= 1
    reply = messages[index] if index >= 0 else None
    return index if isinstance(reply, AIMessage) and (reply.tool_calls or reply.invalid_tool_calls) else None


def answered(messages: Sequence[AnyMessage], reply_at: int) -> int:
    """How many calls of the reply at ``reply_at`` are answered (their tool messages follow it, in order)."""
    return len(messages) - reply_at - 1


def offered_now(state: EpisodeState, reply_at: int) -> list[str]:
    """The tools offered once the answers written so far take effect: the last ``find_tools`` answer's
    set, else the state's."""
    for message in reversed(state["messages"][reply_at + 1:]):
        if isinstance(message, ToolMessage) and isinstance(message.artifact, dict) and OFFERED in message.artifact:
            return list(message.artifact[OFFERED])
    return list(state["offered"])


def prompted_now(state: EpisodeState) -> list[str]:
    """The tools whose schemas the system turn shows: the last ``find_tools`` answer's ``prompted`` set when
    tools were widened in the conversation (the found tools' schemas are in its results, so the prompt's
    prefix stays the one the model has read), else the offered set."""
    for message in reversed(state["messages"]):
        if isinstance(message, ToolMessage) and isinstance(message.artifact, dict) and PROMPTED in message.artifact:
            return list(message.artifact[PROMPTED])
    return list(state["offered"])


__all__ = ["OFFERED", "PROMPTED", "EpisodeState", "answered", "current_reply", "episode_state", "offered_names",
           "offered_now", "prompted_now", "tool_specs"]
