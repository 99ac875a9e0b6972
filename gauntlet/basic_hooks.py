"""The hooks every env supports: a budget controller that halts an episode at a step or cost limit.

It lives in core for the same reason as the basic agents: it needs nothing of any family, and it is
the smallest useful ``Controller`` (``gauntlet run ... --controller budget``), so every run can be
capped by cost as well as by length, with the halt recorded as a decision like any other.
"""

from __future__ import annotations

from typing import Any

from gauntlet.hooks import Decision, Prefix


class BudgetController:
    """Halts the episode before the step that would exceed ``max_steps`` steps or ``max_cost`` cost.

    Cost is the sum of the steps' recorded ``cost`` (the env's ``info["cost"]``: dollars, tokens, ...).
    """

    name = "budget"

    def __init__(self, max_steps: int | None = None, max_cost: float | None = None):
        if max_steps is None and max_cost is None:
            raise ValueError("the budget controller needs max_steps or max_cost, e.g. {\"max_cost\": 2.5}")
        if max_steps is not None and max_steps < 0:
            raise ValueError(f"max_steps must be >= 0, not {max_steps}")
        if max_cost is not None and not max_cost >= 0:
            raise ValueError(f"max_cost must be >= 0, not {max_cost}")
        self.max_steps = max_steps
        self.max_cost = max_cost

    def decide(self, prefix: Prefix, candidates: list[Any]) -> Decision:
        taken = len(prefix.steps)
        spent = sum(step.cost or 0.0 for step in prefix.steps)
        scores = {"steps": float(taken), "cost": spent}
        if self.max_steps is not None and taken >= self.max_steps:
            return Decision.intervene("halt", reason=f"step budget of {self.max_steps} reached", scores=scores)
        if self.max_cost is not None and spent >= self.max_cost:
            return Decision.intervene("halt", reason=f"cost budget of {self.max_cost} reached ({spent:g} spent)",
                                      scores=scores)
        return Decision(kind="continue", scores=scores)
