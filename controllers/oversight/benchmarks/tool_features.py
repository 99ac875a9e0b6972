"""What an overseer sees of a tool episode's prefix: the features of the tool benchmarks."""

from __future__ import annotations

from typing import Any

from gauntlet.controllers.oversight.features import History
from gauntlet.episode import ToolCall
from gauntlet.info_keys import TOOL_CALL

TOOL_FEATURES = ("tool_errors", "tool_error_share", "tool_last_error", "tool_error_run", "tool_invalid_actions",
                 "tool_repeated_calls", "tool_distinct_tools", "tool_steps_since_new_call",
                 "tool_last_result_chars", "tool_task_chars")


def _tool_call(info: dict[str, Any]) -> ToolCall | None:
    call = info.get(TOOL_CALL)
    if call is None or isinstance(call, ToolCall):
        return call
    return ToolCall.model_validate(call)


def tool_features(history: History) -> dict[str, float]:
    """What an overseer sees of a tool episode's prefix (``TOOL_FEATURES``): error results so far (and
    their share, the last one, the run of them at the end), invalid actions, calls identical to an
    earlier call, distinct tools used, steps since the last call unlike every earlier one (a loop
    makes it grow), the length of the last
    result and of the task text. Read from the calls in the infos and from observations; never from
    ``privileged``."""
    t = history.t
    calls = [_tool_call(info) for info in history.infos[1:t + 1]]
    errors = [call is not None and call.is_error for call in calls]
    error_run = next((t - 1 - k for k in range(t - 1, -1, -1) if not errors[k]), t)
    actions = [str(action) for action in history.actions]
    new = [k for k in range(t) if actions[k] not in actions[:k]]
    tools = {call.name for call in calls if call is not None and call.name and not call.is_error}
    observation = history.observations[t] if isinstance(history.observations[t], dict) else {}
    return {
        "tool_errors": float(sum(errors)),
        "tool_error_share": sum(errors) / t if t else 0.0,
        "tool_last_error": float(bool(errors) and errors[-1]),
        "tool_error_run": float(error_run),
        "tool_invalid_actions": float(sum(bool(info.get("invalid_action")) for info in history.infos[1:t + 1])),
        "tool_repeated_calls": float(t - len(new)),
        "tool_distinct_tools": float(len(tools)),
        "tool_steps_since_new_call": float(t - 1 - new[-1] if new else 0),
        "tool_last_result_chars": float(len(observation.get("result", ""))),
        "tool_task_chars": float(len(observation.get("task", ""))),
    }

