"""ToolTaskEnv: an MCP tool task as a Gymnasium env, one tool call per step."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import gymnasium as gym
from gymnasium import spaces

from gauntlet.branching import BranchingError
from mcp.client.session import SamplingFnT

from gauntlet.bridges.mcp_client import BlockingMCPClient, ServerSpec, ServerTarget, SessionEnded, result_value
from gauntlet.episode import ToolCall
from gauntlet.info_keys import METRICS, PRIVILEGED, SUCCESS, TASK_ID, TOOL_CALL
from gauntlet.registry import load_target
from gauntlet.spaces import describe
from gauntlet.tasks import NO_ANSWER, Scorer, ToolTask, load_suite

# Printable ASCII plus tab and newlines: enough for any JSON written with ensure_ascii.
CHARSET = "".join(chr(code) for code in range(32, 127)) + "\t\n\r"
_CHARSET_SET = frozenset(CHARSET)
ACTION_FORMAT = '{"name": "<tool>", "arguments": {...}} or {"answer": <final answer>}'
# The tool that submits the final answer, unless a task env is given another name.
DEFAULT_ANSWER_TOOL = "submit_answer"
# The answer tool is handled by the env itself, never sent to the server; this is its ToolCall.server.
ENV_SERVER = "gauntlet"
# The ToolCall.name of a stop action; not a valid MCP tool name, so no server tool can take it.
STOP = "<stop>"
# Room for a JSON result header and the truncation marker.
MIN_TEXT_LENGTH = 64


class ActionFormatError(ValueError):
    """An action string that is not a tool call in the expected JSON format."""


def tool_call_action(name: str, arguments: dict[str, Any] | None = None) -> str:
    """The action string that calls tool ``name`` with ``arguments``."""
    return json.dumps({"name": name, "arguments": arguments or {}}, ensure_ascii=True)


def stop_action(reason: str) -> str:
    """The action that ends the task unanswered and truncated, saying why (an agent whose budget is spent)."""
    return json.dumps({"stop": reason}, ensure_ascii=True)


def parse_action(action: str, answer_tool: str) -> tuple[str, dict[str, Any]]:
    """``(tool name, arguments)`` of an action; ``{"answer": x}`` reads as a call of ``answer_tool``,
    ``{"stop": reason}`` as a call of ``STOP``."""
    try:
        data = json.loads(action)
    except ValueError as exc:
        raise ActionFormatError(f"the action is not JSON ({exc}); expected {ACTION_FORMAT}") from None
    if isinstance(data, dict) and set(data) == {"answer"}:
        return answer_tool, {"answer": data["answer"]}
    if isinstance(data, dict) and set(data) == {"stop"}:
        return STOP, {"reason": str(data["stop"])}
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or set(data) - {"name", "arguments"}:
        raise ActionFormatError(f"expected {ACTION_FORMAT}; got {_short(action)}")
    arguments = data.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise ActionFormatError(f"'arguments' must be a JSON object; expected {ACTION_FORMAT}")
    return data["name"], arguments


def task_text(task: ToolTask) -> str:
    """The task as an agent reads it (before ``fit_text``): the question, then its inputs as JSON."""
    if not task.inputs:
        return task.question
    return task.question + "\n\nInputs: " + json.dumps(task.inputs, ensure_ascii=True)


def fit_text(text: str, max_length: int) -> str:
    """``text`` within the observation charset (other characters escaped) and ``max_length``
    (cut with a marker saying how much was cut)."""
    text = "".join(c if c in _CHARSET_SET else c.encode("unicode_escape").decode("ascii") for c in text)
    if len(text) <= max_length:
        return text
    keep = max_length
    while True:  # the marker's length depends on the count it reports; settle both
        marker = f"...[truncated {len(text) - keep} chars]"
        if keep + len(marker) <= max_length:
            return text[:keep] + marker
        keep = max_length - len(marker)


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else repr(value)
    return repr(text if len(text) <= limit else text[:limit] + "...")


SERVER_LOST = "the tool server stopped (its connection closed); this episode ends unanswered"


def _connection_lost(exc: BaseException) -> bool:
    """Whether a failed call means the server is gone (its process died or its connection closed)."""
    import anyio
    from mcp.shared.exceptions import McpError
    from mcp.types import CONNECTION_CLOSED

    if isinstance(exc, (SessionEnded, anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)):
        return True
    return isinstance(exc, McpError) and exc.error.code == CONNECTION_CLOSED


@dataclass(frozen=True)
class ToolTaskSnapshot:
    """A point in a tool task: the task and the actions taken (replayed on restore)."""

    task_id: str
    actions: tuple[str, ...]
    results: tuple[str, ...]
    next_task: int


class ToolTaskEnv(gym.Env[dict[str, str], str]):
    """A tool-server task as an environment: the agent calls one MCP tool per step.

    ## Description
    Each episode is one task of a suite (``gauntlet.tasks.ToolTask``): a question to answer by
    calling the tools of an MCP server. The env holds a real MCP client session, opened afresh at
    every reset (a new in-memory server, a new stdio process, or a new HTTP session).

    ## Action Space
    ``Text(max_text_length)`` over printable ASCII: one JSON tool call,
    ``{"name": "<tool>", "arguments": {...}}``, or ``{"answer": <final answer>}``. Calling the
    answer tool (``answer_tool``, default ``submit_answer``, with argument ``answer``) is the same
    as ``{"answer": ...}``; the env handles it and does not forward it to the server.
    ``{"stop": "<reason>"}`` (``stop_action``) ends the task without an answer, truncated: an agent
    that has spent its own budget. Write JSON with ``ensure_ascii`` (``tool_call_action`` does). A
    non-string, or one outside the space, raises ``ValueError``; a string in the space that is not
    a valid call is a step with an error result.

    ## Observation Space
    ``Dict(task=Text, result=Text)``: ``task`` is the question (with the task's inputs, if any);
    ``result`` is the last call's result as JSON ``{"tool", "is_error", "result"}`` (empty after
    reset), cut to ``max_text_length`` with a ``...[truncated N chars]`` marker. ``result`` holds the
    structured content when the tool has one, else its content blocks. It is the text an agent that
    reads only observations sees; the call itself, whole, is the step's ``info['tool_call']``.

    ## Rewards
    The task score (``gauntlet.tasks.Scorer``, in [0, 1]) when the episode ends, 0 before;
    ``-invalid_action_penalty`` for each action that is not a well-formed call.

    ## Starting State
    ``reset(seed=s)`` picks task ``s % len(tasks)``; ``reset()`` without a seed takes the next
    task in order; ``options={"task_id": ...}`` picks by id. ``info`` holds ``task_id``,
    ``answer_tool``, ``server`` and ``tools`` (name, description and input schema of each tool,
    the answer tool included).

    ## Episode End
    Terminates when an answer is submitted; truncates after ``max_steps`` steps or on a stop action
    (scored with no answer). A call that outlives ``call_timeout_s`` is a step with an error result
    (the server may still be working on it). A server that stops (its process dies, its connection
    closes) ends the episode: that step has an error result, ``info['server_lost']`` and is truncated,
    scored with no answer; the next reset connects afresh. Every step's ``info['tool_call']`` is a
    ``gauntlet.ToolCall`` (server, name, arguments, result, is_error, latency_ms), the one record of
    the call (the runner keeps it in the step's ``info``; ``Step.tool_call`` reads it); the last step's
    info has ``score``, ``success`` and the scorer's report under ``privileged``, and the report's
    ``metrics`` (an attack view's utility and attack success) under ``metrics`` when it has any.

    ## Arguments
    * ``tasks``: a suite path, a list of ``ToolTask`` (or dicts), or one task.
    * ``server``: where the tools are: a FastMCP factory or server (in memory), ``env:<ENV_ID>`` or a
      registered server name (in memory), an ``http(s)://`` URL, or a command list (stdio). Default:
      each task's ``server`` field.
    * ``answer_tool``, ``max_steps``, ``max_text_length``, ``invalid_action_penalty``,
      ``call_timeout_s`` (longest wait for one MCP call), ``scorer``.

    ## Client model
    A tool may ask its client for a language model (MCP sampling, e.g. the disaster server's
    ``report_summarize`` with ``writer='client_model'``). The env's session declines unless
    ``use_client_model(callback)`` gave it one; the runner gives it the agent's ``client_model()``
    (the LLM agent lends its own model), so the tool writes with the model under test.

    ## Branching
    ``snapshot()`` is the task and the actions so far; ``restore()`` opens a fresh session and
    replays them, so tools must be deterministic given the call sequence (a replay that yields a
    different result raises ``BranchingError``). ``fork(snapshot)`` gives an independent env.

    ## Version History
    * v0: initial version.
    """

    metadata = {"render_modes": []}

    def __init__(self, tasks: str | os.PathLike[str] | Sequence[ToolTask | dict[str, Any]] | ToolTask | None = None,
                 server: ServerSpec | None = None, *, answer_tool: str = DEFAULT_ANSWER_TOOL, max_steps: int = 32,
                 max_text_length: int = 4096, invalid_action_penalty: float = 0.0, call_timeout_s: float = 60.0,
                 scorer: Scorer | str | None = None):
        self._init_kwargs: dict[str, Any] = dict(
            tasks=tasks, server=server, answer_tool=answer_tool, max_steps=max_steps, max_text_length=max_text_length,
            invalid_action_penalty=invalid_action_penalty, call_timeout_s=call_timeout_s, scorer=scorer)
        if tasks is None:
            raise ValueError('ToolTaskEnv needs tasks: gym.make("gauntlet/ToolTask-v0", tasks="suite.jsonl" '
                             '(or a list of ToolTask), server="env:<ENV_ID>" (or a URL, a command list, a '
                             "FastMCP server), unless every task names its own server)")
        self.tasks = _read_tasks(tasks)
        if not self.tasks:
            raise ValueError("ToolTaskEnv needs at least one task")
        if max_text_length < MIN_TEXT_LENGTH:
            raise ValueError(f"max_text_length must be at least {MIN_TEXT_LENGTH}, got {max_text_length}")
        self._index_of = {task.id: index for index, task in enumerate(self.tasks)}
        self.server = server
        self.answer_tool = answer_tool
        self.max_steps = max_steps
        self.max_text_length = max_text_length
        self.invalid_action_penalty = float(invalid_action_penalty)
        self.call_timeout_s = call_timeout_s
        # A scorer may be named as "module:attribute" (a Scorer class or factory), which keeps the env's
        # kwargs JSON, so a recorded episode can re-create the env with the same scorer.
        self.scorer = load_target(scorer)() if isinstance(scorer, str) else (scorer or Scorer())
        self.action_space = spaces.Text(max_length=max_text_length, min_length=1, charset=CHARSET)
        self.observation_space = cast(spaces.Space[dict[str, str]], spaces.Dict({
            "task": spaces.Text(max_length=max_text_length, min_length=0, charset=CHARSET),
            "result": spaces.Text(max_length=max_text_length, min_length=0, charset=CHARSET)}))
        self._client: BlockingMCPClient | None = None
        self._client_model: SamplingFnT | None = None
        self._tools: list[dict[str, Any]] = []
        self.task: ToolTask | None = None
        self._next_task = 0
        self._clear_episode()

    def use_client_model(self, callback: SamplingFnT | None) -> None:
        """From the next reset, answer the server's requests for a language model (MCP sampling) with
        ``callback`` (the runner passes the agent's ``client_model()``); None declines them."""
        self._client_model = callback

    # Episode state ---------------------------------------------------------------------------
    def _current_task(self) -> ToolTask:
        if self.task is None:
            raise RuntimeError("call reset() first: no task is open")
        return self.task

    def _current_client(self) -> BlockingMCPClient:
        if self._client is None:
            raise RuntimeError("call reset() first: no MCP session is open")
        return self._client

    def _clear_episode(self) -> None:
        self._actions: list[str] = []
        self._results: list[str] = []
        self.calls: list[ToolCall] = []
        self._done = False
        self._server_lost = False

    def _open(self, index: int) -> None:
        """Start task ``index`` on a fresh MCP session."""
        task = self.tasks[index]
        spec = self.server if self.server is not None else task.server
        if spec is None:
            raise ValueError(f"task {task.id!r} names no server and ToolTaskEnv was given none")
        target = ServerTarget.coerce(spec)
        if self._client is None or self._client.target != target or \
                self._client.sampling_callback is not self._client_model:
            if self._client is not None:
                self._client.close()
            self._client = BlockingMCPClient(target, timeout_s=self.call_timeout_s,
                                             sampling_callback=self._client_model)
        self._client.open()
        self._tools = [{"name": tool.name, "description": tool.description or "", "input_schema": tool.inputSchema,
                        "annotations": tool.annotations.model_dump(exclude_none=True) if tool.annotations else {}}
                       for tool in self._client.list_tools() if tool.name != self.answer_tool]
        self.task, self._next_task = task, (index + 1) % len(self.tasks)
        self._clear_episode()

    def _observation(self) -> dict[str, str]:
        last = self._results[-1] if self._results else ""
        return {"task": fit_text(task_text(self._current_task()), self.max_text_length), "result": last}

    def _tool_list(self) -> list[dict[str, Any]]:
        answer = {"name": self.answer_tool, "description": "Submit your final answer; this ends the task.",
                  "input_schema": {"type": "object", "properties": {"answer": {"description": "your final answer"}},
                                   "required": ["answer"]}}
        return json.loads(json.dumps(self._tools + [answer]))  # a fresh copy per reset

    # Gymnasium API ---------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, str], dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        if "task_id" in options:
            if options["task_id"] not in self._index_of:
                raise ValueError(f"unknown task_id {options['task_id']!r}; the suite has "
                                 f"{', '.join(list(self._index_of)[:10])}{'...' if len(self.tasks) > 10 else ''}")
            index = self._index_of[options["task_id"]]
        else:
            index = seed % len(self.tasks) if seed is not None else self._next_task
        self._open(index)
        return self._observation(), {TASK_ID: self._current_task().id, "answer_tool": self.answer_tool,
                                     "server": self._current_client().server_name, "tools": self._tool_list()}

    def step(self, action: str) -> tuple[dict[str, str], float, bool, bool, dict[str, Any]]:
        if self.task is None:
            raise RuntimeError("call reset() before step()")
        if self._done:
            raise RuntimeError(f"task {self.task.id!r} has ended; call reset()")
        if not isinstance(action, str) or not self.action_space.contains(action):
            raise ValueError(f"the action must be a string in {describe(self.action_space)}, printable ASCII, "
                             f"holding {ACTION_FORMAT}; got {_short(action)}")
        return self._apply(action)

    def _apply(self, action: str) -> tuple[dict[str, str], float, bool, bool, dict[str, Any]]:
        self._actions.append(action)
        call, well_formed = self._make_call(action)
        self.calls.append(call)
        self._results.append(fit_text(json.dumps({"tool": call.name, "is_error": call.is_error,
                                                  "result": call.result}, ensure_ascii=True), self.max_text_length))
        reward = 0.0 if well_formed else -self.invalid_action_penalty
        stopped = call.server == ENV_SERVER and call.name == STOP
        terminated = call.server == ENV_SERVER and not call.is_error and not stopped
        truncated = not terminated and (stopped or self._server_lost or len(self._actions) >= self.max_steps)
        task = self._current_task()
        info: dict[str, Any] = {TASK_ID: task.id, "step": len(self._actions), TOOL_CALL: call,
                                "invalid_action": not well_formed}
        if self._server_lost:
            info["server_lost"] = True
        if terminated or truncated:
            report = self.scorer.score(task, call.arguments["answer"] if terminated else NO_ANSWER,
                                       [c for c in self.calls if c.server != ENV_SERVER])
            reward += report.score
            info.update({"score": report.score, SUCCESS: report.answer_correct,
                         PRIVILEGED: report.model_dump(mode="json")})
            if report.metrics:
                info[METRICS] = dict(report.metrics)
            self._done = True
        return self._observation(), float(reward), terminated, truncated, info

    def _make_call(self, action: str) -> tuple[ToolCall, bool]:
        """The ToolCall ``action`` makes, and whether the action was a well-formed call.

        Only calls of a known server tool reach the server; a malformed action, an unknown tool or
        an answer without ``answer`` gives an error result without a round trip.
        """
        client = self._current_client()
        server = client.server_name or "unknown"
        try:
            name, arguments = parse_action(action, self.answer_tool)
        except ActionFormatError as exc:
            return ToolCall(server=server, name="", arguments={"raw": action[:200]}, result={"error": str(exc)},
                            is_error=True), False
        if name == STOP:
            return ToolCall(server=ENV_SERVER, name=STOP, arguments=arguments, result={"stopped": True}), True
        if name == self.answer_tool:
            if "answer" not in arguments:
                return ToolCall(server=ENV_SERVER, name=name, arguments=arguments, is_error=True,
                                result={"error": f"{name} needs an 'answer' argument"}), True
            return ToolCall(server=ENV_SERVER, name=name, arguments=arguments, result={"submitted": True}), True
        if name not in {tool["name"] for tool in self._tools}:
            known = ", ".join([tool["name"] for tool in self._tools] + [self.answer_tool])
            return ToolCall(server=server, name=name, arguments=arguments, is_error=True,
                            result={"error": f"unknown tool {name!r}; the tools are {known}"}), True
        start = time.perf_counter()
        try:
            result = client.call_tool(name, arguments)
        except TimeoutError:  # the agent sees a hung call as a failed one, and the episode goes on
            return ToolCall(server=server, name=name, arguments=arguments, is_error=True,
                            result={"error": f"the call did not finish within {self.call_timeout_s:g} s"},
                            latency_ms=(time.perf_counter() - start) * 1e3), True
        except Exception as exc:
            if not _connection_lost(exc):
                raise
            # The server is gone: this episode ends (truncated, scored unanswered); the next reset
            # connects a fresh session, so a run of many episodes goes on.
            self._server_lost = True
            return ToolCall(server=server, name=name, arguments=arguments, is_error=True,
                            result={"error": SERVER_LOST}, latency_ms=(time.perf_counter() - start) * 1e3), True
        latency_ms = (time.perf_counter() - start) * 1e3
        return ToolCall(server=server, name=name, arguments=arguments, result=result_value(result),
                        is_error=bool(result.isError), latency_ms=latency_ms), True

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        super().close()

    # Branching -------------------------------------------------------------------------------
    def snapshot(self) -> ToolTaskSnapshot:
        """The task and the actions taken so far (see Branching in the class docstring)."""
        if self.task is None:
            raise RuntimeError("call reset() before snapshot()")
        return ToolTaskSnapshot(task_id=self.task.id, actions=tuple(self._actions), results=tuple(self._results),
                                next_task=self._next_task)

    def restore(self, snapshot: ToolTaskSnapshot) -> None:
        """Open a fresh session on the snapshot's task and replay its actions."""
        if snapshot.task_id not in self._index_of:
            raise BranchingError(f"snapshot is of task {snapshot.task_id!r}, which this env's suite lacks")
        self._open(self._index_of[snapshot.task_id])
        for number, (action, expected) in enumerate(zip(snapshot.actions, snapshot.results, strict=True), start=1):
            self._apply(action)
            if self._results[-1] != expected:
                raise BranchingError(f"replaying call {number} of task {snapshot.task_id!r} gave a different "
                                     "result; its tools are not deterministic, so it cannot be restored")
        self._next_task = snapshot.next_task

    def fork(self, snapshot: ToolTaskSnapshot) -> ToolTaskEnv:
        """An independent env (its own session) standing at ``snapshot``."""
        clone = ToolTaskEnv(**self._init_kwargs)
        clone.use_client_model(self._client_model)  # its replay asks the same model the original asked
        clone.restore(snapshot)
        return clone


def _read_tasks(tasks: str | os.PathLike[str] | Sequence[ToolTask | dict[str, Any]] | ToolTask) -> list[ToolTask]:
    if isinstance(tasks, ToolTask):
        return [tasks]
    if isinstance(tasks, (str, os.PathLike)):
        return load_suite(tasks)
    return [task if isinstance(task, ToolTask) else ToolTask.model_validate(task) for task in tasks]
