"""The one recipe for a Gauntlet MCP server: tools declared in a ``ToolSet``, served by a ``ToolServer``.

Declare::

    TOOLS = ToolSet[Catalogue](fixable=(UnknownChemicalError,))

    @TOOLS.tool(READ_ONLY)
    def get_chemical(catalogue: Catalogue,
                     chemical_id: Annotated[int, Field(description="catalogue id from search_chemical")]
                     ) -> ChemicalInfo:
        \"\"\"What the model reads: what the tool does, units, what it returns, when to use it.\"\"\"
        return ChemicalInfo(...)

and build::

    server = ToolServer(TOOLS, catalogue, name="chem", instructions="...")   # a FastMCP server

**A tool** is a plain function, unchanged by declaring it (tests and benchmarks call it directly).
Its first parameter receives the server's *state*; the others are the agent's arguments, typed
and described with pydantic (``Annotated[..., Field(description=..., examples=[...])]``). Its
return annotation, a pydantic model, is the output schema; its docstring is the description. Its
``ToolAnnotations`` must state all four hints (read-only, destructive, idempotent, open world).

**State** is passed, never captured: ``ToolServer(tools, state)`` hands ``state`` to every call
(the chem catalogue, the disaster workspace); with ``session_state=open`` each client session
instead gets its own object, made by ``open(session)`` on its first call and closed with the
session (the env bridge: one env per client). ``server.state`` is the shared state.

**Results** may be rewritten before they are sent: ``rewrite_result(name, arguments, structured)``
returns the structured content a successful call sends instead of the tool's own (the attack views
plant an injected instruction in it, ``gauntlet.attacks``); the text content is rendered from it.
A result model that derives from ``ResultWithContent`` also sends the content blocks attached to it
(a figure's PNG as an ``ImageContent``), after the text; they are not part of its structured content
or output schema, so a client that reads structured content sees the same result either way.

**Errors** follow one policy, in ``ToolServer.call_tool``:

* the agent can fix it: arguments that break the schema (the message names each argument, what is
  wrong and a valid example), ``ToolInputError``, the SDK's ``ToolError``, and the domain errors the
  tool set lists as ``fixable``. The result is an ``isError`` result with that message (real paths
  named in ``public_paths`` are shown by their public names);
* anything else is a bug: it is logged on the logger ``gauntlet.server.<server name>`` with its
  traceback, the tool, the arguments and a random incident id, and the agent's ``isError`` result
  says only ``internal error <id>``.
"""

from __future__ import annotations

import inspect
import logging
import os
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, Self, TypeVar

import pydantic_core
from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.fastmcp.tools import Tool
from mcp.server.session import ServerSession
from mcp.types import CallToolResult, ContentBlock, TextContent, ToolAnnotations
from pydantic import BaseModel, PrivateAttr, ValidationError

from gauntlet.bridges import mcp_compat
from gauntlet.bridges.tool_errors import (ToolInputError, argument_error, internal_error_text,
                                          new_incident_id)

StateT = TypeVar("StateT")
FunctionT = TypeVar("FunctionT", bound=Callable[..., Any])
HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
MAX_LOGGED_ARGUMENTS_CHARS = 2000
MAX_LISTED_TOOLS = 20


@dataclass(frozen=True)
class DeclaredTool:
    """One tool of a ``ToolSet``: its function (first parameter: the state) and what MCP clients see."""

    name: str
    fn: Callable[..., Any]
    annotations: ToolAnnotations
    description: str
    argument_descriptions: Mapping[str, str] = field(default_factory=dict)

    @property
    def state_parameter(self) -> str:
        return next(iter(inspect.signature(self.fn).parameters))


class ToolSet(Generic[StateT]):
    """The tools of one server, declared once; ``ToolServer`` serves them.

    ``fixable`` lists the domain exceptions that mean "the agent's request cannot be served as
    asked" (their messages say what to change); ``includes`` adds other tool sets' tools (and their
    fixable errors) after this set's own, for tools whose state this set's state also provides.
    """

    def __init__(self, *, fixable: Sequence[type[BaseException]] = (), includes: Sequence[ToolSet[Any]] = ()):
        self.fixable = tuple(fixable)
        self.includes = tuple(includes)
        self._own: dict[str, DeclaredTool] = {}

    def tool(self, annotations: ToolAnnotations, *, name: str | None = None,
             description: str | None = None) -> Callable[[FunctionT], FunctionT]:
        """Decorator: declare the function as a tool (the function itself is returned unchanged)."""

        def declare(fn: FunctionT) -> FunctionT:
            self.add(fn, annotations, name=name, description=description)
            return fn

        return declare

    def add(self, fn: Callable[..., Any], annotations: ToolAnnotations, *, name: str | None = None,
            description: str | None = None, argument_descriptions: Mapping[str, str] | None = None) -> DeclaredTool:
        """Declare ``fn`` as a tool. ``description`` replaces the docstring and ``argument_descriptions``
        the arguments' descriptions, for text known only when the tool set is made (the env bridge's
        spaces)."""
        tool_name = name or fn.__name__
        text = description or inspect.cleandoc(fn.__doc__ or "")
        if not text:
            raise ValueError(f"tool {tool_name!r} needs a docstring or a description: it is what the model reads")
        unstated = [hint for hint in HINTS if getattr(annotations, hint) is None]
        if unstated:
            raise ValueError(f"tool {tool_name!r}: its annotations must state {', '.join(unstated)}")
        if not inspect.signature(fn).parameters:
            raise ValueError(f"tool {tool_name!r}: its first parameter must receive the server's state")
        if tool_name in self.names():
            raise ValueError(f"tool {tool_name!r} declared twice")
        declared = DeclaredTool(tool_name, fn, annotations, text, dict(argument_descriptions or {}))
        self._own[tool_name] = declared
        return declared

    def __iter__(self) -> Iterator[DeclaredTool]:
        yield from self._own.values()
        for included in self.includes:
            yield from included

    def __getitem__(self, name: str) -> DeclaredTool:
        for declared in self:
            if declared.name == name:
                return declared
        raise KeyError(name)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def names(self) -> list[str]:
        return [declared.name for declared in self]

    def fixable_errors(self) -> tuple[type[BaseException], ...]:
        return self.fixable + tuple(error for included in self.includes for error in included.fixable_errors())


class ResultWithContent(BaseModel):
    """A tool result model that also sends content blocks beside its structured content: ``attach`` an
    ``ImageContent`` (``mcp.server.fastmcp.Image(data=..., format="png").to_image_content()``) and the
    call's result carries it after the text. The blocks are not fields: the output schema, the
    structured content and ``model_dump`` are the model's fields alone."""

    _attached: list[ContentBlock] = PrivateAttr(default_factory=list)

    def attach(self, *blocks: ContentBlock) -> Self:
        """Add content blocks to send with this result; returns the result."""
        self._attached.extend(blocks)
        return self

    @property
    def attached(self) -> list[ContentBlock]:
        """The content blocks sent after the text, in the order attached."""
        return list(self._attached)


ResultRewrite = Callable[[str, dict[str, Any], dict[str, Any]], dict[str, Any]]
"""``rewrite_result(tool name, arguments as sent, structured content) -> structured content to send``."""


class SessionState(Protocol):
    """State made for one client session; ``close`` runs when the session goes away."""

    def close(self) -> None: ...


class ToolServer(FastMCP[Any], Generic[StateT]):
    """A FastMCP server serving the tools of a ``ToolSet`` (see the module docstring).

    ``only`` serves a subset of the tools, by name, in that order. ``public_paths`` maps real folders
    to the names the agent knows them by, for messages of fixable errors. ``rewrite_result`` rewrites
    the structured content of every successful call of a tool that has an output schema.
    """

    def __init__(self, tools: ToolSet[Any], state: StateT, *, name: str, instructions: str,
                 only: Sequence[str] | None = None,
                 session_state: Callable[[ServerSession], SessionState] | None = None,
                 public_paths: Mapping[str | os.PathLike[str], str] | None = None,
                 rewrite_result: ResultRewrite | None = None):
        mcp_compat.install_server_validation_cache()
        unknown = sorted(set(only or ()) - set(tools.names()))
        if unknown:
            raise ValueError(f"no tools named {', '.join(unknown)} in this tool set")
        chosen = list(tools) if only is None else [tools[name] for name in only]
        self._served: dict[str, Tool] = {
            declared.name: mcp_compat.sdk_tool(
                declared.fn, name=declared.name, description=declared.description,
                annotations=declared.annotations, state_parameter=declared.state_parameter,
                argument_descriptions=declared.argument_descriptions)
            for declared in chosen}
        super().__init__(name, instructions=instructions, log_level="WARNING", tools=list(self._served.values()))
        self.state = state
        self.tool_set = tools
        self.logger = logging.getLogger(f"gauntlet.server.{name}")
        self._fixable: tuple[type[BaseException], ...] = (ToolInputError, ToolError, *tools.fixable_errors())
        self._open_session_state = session_state
        self._rewrite_result = rewrite_result
        self._session_states: weakref.WeakKeyDictionary[ServerSession, Any] = weakref.WeakKeyDictionary()
        # Longest first, so a folder inside another is named by its own public name.
        self._public_paths = sorted(((os.fspath(real), public) for real, public in (public_paths or {}).items()),
                                    key=lambda pair: -len(pair[0]))

    @property
    def tool_names(self) -> list[str]:
        """The names of the tools this server serves, in order."""
        return list(self._served)

    # The SDK annotates call_tool's result narrower than what its low-level handler accepts (and what
    # FastMCP's own call_tool returns): content blocks with structured content, or a CallToolResult.
    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:  # type: ignore[override]
        """Run one call under the error policy (see the module docstring); never raises."""
        try:
            result = await self.run_tool(name, arguments)
            converted = mcp_compat.convert_result(self._served[name], result)
            if self._rewrite_result is not None and isinstance(converted, tuple):  # (content, structured)
                structured = self._rewrite_result(name, arguments, converted[1])
                converted = ([TextContent(type="text", text=pydantic_core.to_json(structured, indent=2).decode())],
                             structured)
            if isinstance(result, ResultWithContent) and isinstance(converted, tuple):
                converted = ([*converted[0], *result.attached], converted[1])
            return converted
        except self._fixable as exc:
            message = self._public(str(exc))
            self.logger.info("%s refused: %s", name, message)
            return _error_result(message)
        except Exception as exc:
            incident = new_incident_id()
            shown = repr(arguments)
            if len(shown) > MAX_LOGGED_ARGUMENTS_CHARS:
                shown = shown[:MAX_LOGGED_ARGUMENTS_CHARS] + "..."
            self.logger.error("internal error %s in tool %s called with %s", incident, name, shown, exc_info=exc)
            return _error_result(internal_error_text(incident))

    async def run_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """Run one tool of this server and return its raw result (for tools that call other tools).

        Raises ``ToolInputError`` for an unknown tool or arguments that break its schema; whatever the
        tool raises passes through.
        """
        tool = self._served.get(name)
        if tool is None:
            names = list(self._served)
            listed = ", ".join(names) if len(names) <= MAX_LISTED_TOOLS else f"{len(names)} tools, see tools/list"
            raise ToolInputError(f"unknown tool {name!r}; this server has {listed}")
        try:
            parsed = mcp_compat.parse_arguments(tool, arguments)
        except ValidationError as exc:
            raise argument_error(name, exc, tool.parameters, arguments) from None
        return await mcp_compat.call_declared(tool, parsed, self._state_for_call())

    def request_session(self) -> ServerSession | None:
        """The client session of the request being served; None outside one (a tool run in process).
        Tools that ask the client for something (``gauntlet.bridges.client_model``) reach it through this."""
        try:
            return self.get_context().session
        except ValueError:  # the SDK's "Context is not available outside of a request"
            return None

    def _state_for_call(self) -> Any:
        if self._open_session_state is None:
            return self.state
        session = self.get_context().session
        state = self._session_states.get(session)
        if state is None:
            state = self._session_states[session] = self._open_session_state(session)
            weakref.finalize(session, state.close)
        return state

    def _public(self, message: str) -> str:
        for real, public in self._public_paths:
            message = message.replace(real, public)
        return message


def _error_result(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], isError=True)
