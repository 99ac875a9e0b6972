"""The expert of the tool benchmarks: the gold continuation, named by an env wrapper.

From any prefix, the gold continuation is the gold trajectory's calls not yet seen to succeed, in gold
order, then the gold answer. What has been done is the env's own call record, which a restore rebuilds
by replay, so the env computes the continuation (``GoldContinuation``, a wrapper) and names it in
``info["privileged"]["expert_action"]`` on every reset and step; the expert is ``PrivilegedExpert``
and keeps no state of its own (a weakened one keeps only its RNG). It is exact from every prefix,
whoever made the calls before it. A gold call counts as done when a successful call matches it as the
scorer matches them (same tool, every gold argument equal), so a repeated gold call (routes look some
chemicals up twice) is not repeated.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from gauntlet.bridges.tool_task_env import ToolTaskEnv, tool_call_action
from gauntlet.controllers.oversight.lapsing import EXPERT_ACTION
from gauntlet.episode import ToolCall
from gauntlet.info_keys import PRIVILEGED
from gauntlet.tasks import Scorer, ToolTask

_MATCHER = Scorer()  # the scorer's rule for "this call is that gold call"; chem and disaster scorers share it


def answer_action(answer: Any) -> str:
    """The action that submits ``answer`` as the final answer."""
    return json.dumps({"answer": answer}, ensure_ascii=True)


def gold_continuation(task: ToolTask, calls: Sequence[ToolCall]) -> str:
    """The expert's next action after ``calls``: the first gold call no successful call has matched
    yet, or the gold answer once every gold call has been matched."""
    made, _ = _MATCHER.grade_trajectory(task.gold_trajectory, calls)
    for gold, done in zip(task.gold_trajectory, made, strict=True):
        if not done:
            return tool_call_action(gold.call, gold.args)
    return answer_action(task.answer)


class GoldContinuation(gym.Wrapper[dict[str, str], str, dict[str, str], str]):
    """A ``ToolTaskEnv`` whose info names the gold continuation under ``info["privileged"]["expert_action"]``
    on the reset and on every step that does not end the episode (the last step's ``privileged`` stays
    the scorer's report). It keeps no state: the continuation is read off the env's own calls, so
    ``gauntlet.branching.branchable`` snapshots the env natively and the annotation follows."""

    def __init__(self, env: ToolTaskEnv):
        super().__init__(env)
        self.tool_env = env

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, str], dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        return observation, self._annotated(info)

    def step(self, action: str) -> tuple[dict[str, str], float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        return observation, float(reward), terminated, truncated, (
            info if terminated or truncated else self._annotated(info))

    def _annotated(self, info: dict[str, Any]) -> dict[str, Any]:
        task = self.tool_env.task
        assert task is not None  # reset() opened one
        return {**info, PRIVILEGED: {EXPERT_ACTION: gold_continuation(task, self.tool_env.calls)}}

