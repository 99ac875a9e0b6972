"""Script builders and controllers shared by the LLM agent's tests."""

from __future__ import annotations

import json
from typing import Any

from gauntlet.hooks import Decision, Prefix
from gauntlet.tasks import ToolTask


def text_call(name: str, arguments: dict[str, Any]) -> dict[str, str]:
    """A turn writing one call as a small local model does: prose, then bare JSON."""
    return {"text": f"I will call {name}. " + json.dumps({"name": name, "arguments": arguments})}


def gold_turns(task: ToolTask) -> list[dict[str, Any]]:
    """Turns that make the task's gold calls one by one."""
    return [text_call(call.call, call.args) for call in task.gold_trajectory]


def answer_turn(answer: Any) -> dict[str, str]:
    return {"text": json.dumps(answer)}


class ReplaceWhen:
    """Replaces the first proposed call of tool ``name`` with ``action``."""

    name = "replace-when"

    def __init__(self, tool: str, action: str):
        self.tool, self.action, self.done = tool, action, False

    def decide(self, prefix: Prefix, candidates: list[Any]) -> Decision:
        proposed = json.loads(candidates[0])
        if not self.done and proposed.get("name") == self.tool:
            self.done = True
            return Decision.intervene("replace_action", action=self.action, reason="test replacement")
        return Decision.proceed()


class HaltAt:
    """Halts before step ``index``."""

    name = "halt-at"

    def __init__(self, index: int):
        self.index = index

    def decide(self, prefix: Prefix, candidates: list[Any]) -> Decision:
        if len(prefix.steps) == self.index:
            return Decision.intervene("halt", reason="test halt")
        return Decision.proceed()
