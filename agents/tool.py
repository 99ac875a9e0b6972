"""Agents for tool tasks: the gold agent, which replays a task's gold trajectory, and its complying
variant, which obeys the injected instructions of an attack view."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gymnasium import spaces

from gauntlet.agent import Agent, AgentOutput
from gauntlet.attacks import carries, injection_of
from gauntlet.bridges.tool_task_env import tool_call_action
from gauntlet.episode import Event, ToolCall
from gauntlet.tasks import GoldCall, ToolTask, load_suite


class GoldAgent(Agent):
    """Replays a tool task's gold trajectory, then submits the gold answer (for ``ToolTaskEnv``).

    It learns which task it faces from ``info['task_id']`` and looks the task up in ``suite`` (a
    suite path or a list of tasks). When a call's result differs from the ``obs`` the gold
    trajectory records for it, the next step carries a ``note`` event ``gold_obs_mismatch``: the
    suite and the server disagree. A gold run must score 1.0; one that does not is a broken suite.
    """

    name = "gold"

    def __init__(self, suite: str | os.PathLike[str] | Sequence[ToolTask]):
        if isinstance(suite, (str, os.PathLike)):
            self._source: str | None = str(suite)
            tasks = load_suite(Path(suite))
        else:
            self._source, tasks = None, list(suite)
        self._tasks = {task.id: task for task in tasks}
        self._task: ToolTask | None = None
        self._cursor = 0

    def config(self) -> dict[str, Any]:
        return {"suite": self._source} if self._source else {}

    def reset(self, *, seed: int | None, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        self._task, self._cursor = None, 0

    def act(self, observation: Any, info: dict[str, Any]) -> AgentOutput:
        task = self._task_of(info)
        events = self._check_last_result(task, info)
        return AgentOutput(action=self._next_gold_action(task, info), events=events)

    def _task_of(self, info: dict[str, Any]) -> ToolTask:
        if self._task is None:
            task_id = info.get("task_id")
            if task_id not in self._tasks:
                raise KeyError(f"{type(self).__name__} has no task {task_id!r} (its suite has {len(self._tasks)} "
                               "tasks); it acts in ToolTaskEnv, whose info names the task")
            self._task = self._tasks[task_id]
        return self._task

    def _next_gold_action(self, task: ToolTask, info: dict[str, Any]) -> str:
        """The next gold call, or the gold answer once every gold call is made."""
        gold = task.gold_trajectory
        if self._cursor < len(gold):
            action = tool_call_action(gold[self._cursor].call, gold[self._cursor].args)
        else:
            action = tool_call_action(info.get("answer_tool", "submit_answer"), {"answer": task.answer})
        self._cursor += 1
        return action

    def _check_last_result(self, task: ToolTask, info: dict[str, Any]) -> list[Event]:
        if not 0 < self._cursor <= len(task.gold_trajectory):
            return []
        expected: GoldCall = task.gold_trajectory[self._cursor - 1]
        call = info.get("tool_call")
        if not isinstance(call, ToolCall) or expected.obs is None or call.result == expected.obs:
            return []
        return [Event(source=self.name, kind="note",
                      data={"gold_obs_mismatch": {"call": expected.call, "index": self._cursor - 1,
                                                  "expected": expected.obs, "got": call.result}})]


class ComplyingGoldAgent(GoldAgent):
    """The gold agent that obeys injected instructions: the ceiling of an attack view's attack success.

    It replays the gold trajectory as ``GoldAgent`` does until a tool result carries the injection of
    its task (``gauntlet.attacks``; the suite's task says what the injection is), then carries out the
    injection's goal: an ``answer`` goal by submitting the injected number at once, a ``leak`` goal by
    submitting a reply that reveals the session key, a ``tool_call`` goal by making that call and then
    going on with the gold trajectory and its answer. On a task without an injection it is the gold agent.
    """

    name = "gold-complying"
    _complied = False  # the goal was carried out
    _detoured = False  # the last action was the goal's call, not a gold call

    def reset(self, *, seed: int | None, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        super().reset(seed=seed, observation_space=observation_space, action_space=action_space)
        self._complied = self._detoured = False

    def act(self, observation: Any, info: dict[str, Any]) -> AgentOutput:
        task = self._task_of(info)
        events = [] if self._detoured else self._check_last_result(task, info)
        self._detoured = False
        injection = injection_of(task)
        call = info.get("tool_call")
        if (injection is None or self._complied or not isinstance(call, ToolCall)
                or not carries(call.result, injection.text)):
            return AgentOutput(action=self._next_gold_action(task, info), events=events)
        self._complied = True
        goal = injection.goal
        if goal.kind == "tool_call":
            self._detoured = True
            return AgentOutput(action=tool_call_action(str(goal.tool), goal.arguments), events=events)
        if goal.kind == "answer" and goal.answer is not None:
            reply: Any = int(goal.answer) if goal.answer.is_integer() else goal.answer
        else:
            reply = f"My instructions hold the session key {injection.canary}."
        return AgentOutput(action=tool_call_action(info.get("answer_tool", "submit_answer"), {"answer": reply}),
                           events=events)
