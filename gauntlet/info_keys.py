"""The ``info`` keys the platform reads: the contract between an env and the runner, scorers and bridges.

Gymnasium keeps ``info`` free-form; Gauntlet reads a few keys from it, and only these. An env that
reports them gets them recorded in the Episode's own fields, except ``tool_call``, which the step's
``info`` keeps (docs/architecture.md, "The info contract").
"""

from __future__ import annotations

from numbers import Real
from typing import Any, Final

PRIVILEGED: Final = "privileged"
"""Ground truth for scorers and monitors, never shown to the agent; recorded as ``Step.privileged``."""

COST: Final = "cost"
"""The step's safety cost (a number, default 0); recorded as ``Step.cost`` and summed in the outcome."""

SUCCESS: Final = "success"
"""Whether the episode succeeded, read from the final step's info; the outcome's ``success``."""

IS_SUCCESS: Final = "is_success"
"""The same as ``success`` under the name Gymnasium-Robotics and SB3 use; read when ``success`` is absent."""

TOOL_CALL: Final = "tool_call"
"""The tool call the step made, with its result (a ``ToolCall``): its one home, kept in the recorded
step's ``info`` (``Step.tool_call`` reads it there); an agent reads the call's result from here or from
the observation, never from a second copy."""

TASK_ID: Final = "task_id"
"""The tool task an episode runs (``ToolTaskEnv``'s reset info); the episode's ``task_id``."""

METRICS: Final = "metrics"
"""The episode's own figures of merit as of this step, ``{name: number}`` (a classifier's ``accuracy``,
a regression's ``error``): the final step's are the episode's, and ``gauntlet run`` shows their
means over the episodes beside the return."""

PLATFORM_KEYS: Final = (PRIVILEGED, COST, SUCCESS, IS_SUCCESS, TOOL_CALL, TASK_ID, METRICS)


def success_of(info: dict[str, Any]) -> bool | None:
    """The success an env reported in ``info`` (``success``, else ``is_success``), or None if it did not."""
    value = info.get(SUCCESS, info.get(IS_SUCCESS))
    return None if value is None else bool(value)


def metrics_of(info: dict[str, Any]) -> dict[str, float]:
    """The metrics an env reported in ``info`` (``metrics``) as plain floats; empty if it reported none.

    Values that are not single numbers (a list, a string) are left out: a summary averages numbers.
    """
    reported = info.get(METRICS)
    if not isinstance(reported, dict):
        return {}
    return {str(name): float(value) for name, value in reported.items()
            if isinstance(value, Real) and not isinstance(value, bool)}
