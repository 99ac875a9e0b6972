"""Per-task tool scoping: which of a large MCP server's tools the model is offered for one task.

Every tool offered costs prompt tokens in every model call: the disaster server's 132 tool schemas
are 28,500 Qwen2.5 tokens as its chat template writes them, which a small local model reads before
each reply; 8 of them and ``find_tools`` are 2,200 on average (2,900 at most). A scope of ``k`` offers
the ``k`` tools whose ``"name: description"`` is nearest the task text (cosine similarity of
all-MiniLM-L6-v2 sentence embeddings, ``gauntlet.sentence_encoder``), always with the answer tool,
plus the ``find_tools`` pseudo-tool: when the model needs something it was not offered, it says what
in its own words, and the best matches not yet offered join its tools. ``find_tools`` is answered by
the agent itself; the env and the server never see it.

    scope = parse_tool_scope(8)                                 # from an agent config: "all", 8 or {"k": 8}
    offered = scope_tools(task_text, info["tools"], scope)      # 8 names + the answer tool
    found = find_tools(query, info["tools"], offered)           # the model's find_tools call
    offered, reply = found.offered, found.result                # the tools now offered, what the model reads
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gauntlet.bridges.tool_task_env import DEFAULT_ANSWER_TOOL
from gauntlet.sentence_encoder import sentence_encoder

ALL = "all"
FIND_TOOLS = "find_tools"
FIND_TOOLS_DEFAULT_K = 5
FIND_TOOLS_MAX_K = 10  # one search adds at most this many schemas to every later call's prompt
SUMMARY_MAX_CHARS = 200  # a found tool's one-line description, as the model reads it

ToolDict = Mapping[str, Any]  # {"name", "description", "input_schema"}, as ToolTaskEnv's reset info lists tools


@dataclass(frozen=True)
class ToolScope:
    """Which tools a task is offered: the ``k`` nearest the task text (``None``: every tool, scoping
    off), always with ``answer_tool``, which is not counted in ``k``."""

    k: int | None = None
    answer_tool: str = DEFAULT_ANSWER_TOOL


def tool_text(tool: ToolDict) -> str:
    """What a tool is ranked by: ``"name: description"`` (the name's words often say what the
    description assumes, e.g. ``seg_flood_extent``)."""
    return f"{tool['name']}: {tool.get('description') or ''}"


def rank_tools(text: str, tools: Sequence[ToolDict]) -> list[str]:
    """The names of ``tools``, nearest ``text`` first: cosine similarity of the sentence embeddings of
    ``text`` and of each tool's ``tool_text``; equal similarities in name order, so a ranking does not
    depend on the server's listing order. A tool's embedding is computed once per process (the
    encoder's memo), however many tasks rank it."""
    if not tools:
        return []
    encoder = sentence_encoder()
    vectors = encoder.encode([text, *(tool_text(tool) for tool in tools)])
    similarity = vectors[1:] @ vectors[0]  # unit vectors: the dot product is the cosine
    order = sorted(range(len(tools)), key=lambda i: (-float(similarity[i]), str(tools[i]["name"])))
    return [str(tools[i]["name"]) for i in order]


def scope_tools(task_text: str, tools: Sequence[ToolDict], scope: ToolScope) -> list[str]:
    """The names of the tools a task is offered: with ``scope.k`` set, the ``k`` tools nearest
    ``task_text`` (``rank_tools``), best first, then the answer tool if ``tools`` lists it; with
    ``scope.k`` ``None``, every tool in listing order."""
    if scope.k is None:
        return [str(tool["name"]) for tool in tools]
    candidates = [tool for tool in tools if tool["name"] != scope.answer_tool]
    kept = rank_tools(task_text, candidates)[:scope.k]
    answer = [scope.answer_tool] if len(candidates) < len(tools) else []
    return kept + answer


def find_tools_spec(default_k: int = FIND_TOOLS_DEFAULT_K) -> dict[str, Any]:
    """The ``find_tools`` pseudo-tool as the model is told of it (the form of ``ToolTaskEnv``'s reset
    info): offered beside a scoped tool set, answered by ``find_tools``."""
    return {
        "name": FIND_TOOLS,
        "description": ("Search the server's other tools by what you need them for; the best matches are added to "
                        "your tools and listed with what each does. You were offered only the tools "
                        "nearest your task: if none of them does a step you need (a detector, a unit "
                        "conversion, a route, a chart), describe that step here, then call the tool it adds."),
        "input_schema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1,
                          "description": "what you need a tool for, in a few words (e.g. 'road distance from a "
                                         "hospital to each shelter', 'area of a mask in square metres')"},
                "k": {"type": "integer", "minimum": 1, "maximum": FIND_TOOLS_MAX_K, "default": default_k,
                      "description": f"how many tools to add (1-{FIND_TOOLS_MAX_K})"},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    }


@dataclass(frozen=True)
class FoundTools:
    """The answer to one ``find_tools`` call: the names offered after it (those before, then the
    added ones) and the result the model reads."""

    offered: tuple[str, ...]
    result: dict[str, Any]


def find_tools(query: str, tools: Sequence[ToolDict], offered: Sequence[str],
               k: int = FIND_TOOLS_DEFAULT_K, *, schemas: bool = False) -> FoundTools:
    """Answer a ``find_tools`` call (arguments already checked against ``find_tools_spec``): the ``k``
    tools of ``tools`` not yet ``offered`` nearest ``query`` join the offered names; the result lists
    each added tool's name and first sentence, or with ``schemas`` its whole description and its
    arguments' schema (for a model whose prompt keeps the tools it started with: the result is the only
    place it reads how to call them). When every tool is offered, nothing is added and the result says so."""
    shown = set(offered)
    added = rank_tools(query, [tool for tool in tools if tool["name"] not in shown])[:k]
    by_name = {str(tool["name"]): tool for tool in tools}
    if not added:
        result: dict[str, Any] = {"added": [], "note": "every tool of the server is already among your tools"}
    elif schemas:
        result = {"added": [{"name": name, "description": " ".join(str(by_name[name].get("description") or "").split()),
                             "parameters": by_name[name].get("input_schema") or {"type": "object"}}
                            for name in added],
                  "note": "these tools are now among your tools; call them by name with arguments as their "
                          "parameters say"}
    else:
        result = {"added": [{"name": name, "description": summary(str(by_name[name].get("description") or ""))}
                            for name in added],
                  "note": "these tools are now among your tools; call them by name"}
    return FoundTools(offered=(*offered, *added), result=result)


def summary(description: str) -> str:
    """A tool description's first sentence on one line, at most ``SUMMARY_MAX_CHARS`` characters (the
    full description comes with the tool's schema once it is offered)."""
    line = " ".join(description.split())
    # A sentence ends at a full stop before a capital letter; "e.g. population" does not end one.
    first = re.split(r"(?<=[.!?])\s+(?=[A-Z])", line, maxsplit=1)[0]
    return first if len(first) <= SUMMARY_MAX_CHARS else first[:SUMMARY_MAX_CHARS - 3].rstrip() + "..."


def parse_tool_scope(option: Any, answer_tool: str = DEFAULT_ANSWER_TOOL) -> ToolScope:
    """The scope an agent config's ``tool_scope`` asks for: ``"all"`` (every tool), a number of tools
    ``k >= 1``, or ``{"k": k}``; anything else is a ``ValueError`` naming the valid values."""
    if option == ALL:
        return ToolScope(None, answer_tool)
    k = option.get("k") if isinstance(option, Mapping) and set(option) == {"k"} else option
    if isinstance(k, int) and not isinstance(k, bool) and k >= 1:
        return ToolScope(k, answer_tool)
    raise ValueError(f'tool_scope is "all" (every tool), a number of tools k >= 1 (e.g. 8), or {{"k": 8}}; '
                     f"got {option!r}")


__all__ = ["ALL", "FIND_TOOLS", "FoundTools", "ToolScope", "find_tools", "find_tools_spec", "parse_tool_scope",
           "rank_tools", "scope_tools", "summary", "tool_text"]
