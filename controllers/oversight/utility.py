"""Overseer actions and the realised utility of a branch.

At every prefix the overseer chooses one of ``ACTIONS``:

``continue``  the base agent goes on to the end of the episode;
``quit``      stop now: no step is run and the utility is ``u_quit``;
``expert``    the expert acts for the rest of the episode;
``expert_k``  the expert acts for ``k`` steps, then the base agent to the end;
``rollback``  return to the coupled state of ``r`` steps earlier (clamped at step 0) and let the base
              agent try again with a fresh random draw (an LLM agent, greedy, is also told which calls
              were undone: ``protocol``);
``stronger``  a stronger base agent acts to the end (only where the benchmark configures one);
``hint``      the base agent is shown the expert's next action before it writes its reply again, then
              goes on by itself (``REVISIONS``: only where the benchmark can revise a reply, the LLM
              benchmarks);
``confirm``   the base agent is asked to check its proposed action before it runs and may change it,
              then goes on by itself (cheaper than a hint, and weaker: it shows nothing new).

``INTERVENTIONS`` (the intervention ladder) cost ``c_intervene`` each, but ``hint`` (``c_hint``, one
step of an overseer's attention) and ``confirm`` (``c_confirm``, a yes/no question). The realised
utility of a branch that ran ``steps`` env steps after the decision (the paper's equation):

    U_a = w * success - c_a - s * steps,      U_quit = u_quit

with ``c_a = c_continue`` for ``continue`` and the intervention's cost for the others. Rows keep
``success`` and ``steps`` of every branch, so ``recompute`` re-prices them under another
``UtilityConfig`` without running anything again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

LADDER = ("continue", "quit", "expert", "expert_k", "rollback", "stronger")
"""The actions of the scripted-agent benchmarks' collections (every benchmark branches them)."""
ACTIONS = (*LADDER, "hint", "confirm")
INTERVENTIONS = ("expert", "expert_k", "rollback", "stronger", "hint", "confirm")
REVISIONS = ("hint", "confirm")
"""Interventions that have the base agent write its reply at the prefix again after an overseer's notice."""


@dataclass(frozen=True)
class UtilityConfig:
    """Prices of the overseer's actions (defaults: the paper's; ``c_hint`` and ``c_confirm``, of interventions
    the paper does not have, are ours) and the ladder's ``k`` and ``r``."""

    w: float = 1.0
    c_intervene: float = 0.05
    c_hint: float = 0.02
    c_confirm: float = 0.01
    c_continue: float = 0.0
    s: float = 0.01
    u_quit: float = 0.0
    k: int = 3
    r: int = 2

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k (expert steps of expert_k) must be at least 1; got {self.k}")
        if self.r < 1:
            raise ValueError(f"r (steps rolled back) must be at least 1; got {self.r}")

    def cost(self, action: str) -> float:
        """``c_a``: what taking ``action`` costs whatever its outcome (``quit`` has none)."""
        if action == "continue":
            return self.c_continue
        if action == "hint":
            return self.c_hint
        if action == "confirm":
            return self.c_confirm
        if action in INTERVENTIONS:
            return self.c_intervene
        if action == "quit":
            return 0.0
        raise ValueError(f"unknown overseer action {action!r}; expected one of {ACTIONS}")

    def utility(self, action: str, success: bool, steps: int) -> float:
        """The realised utility of a branch of ``action`` that ran ``steps`` env steps and ended in ``success``."""
        if action == "quit":
            return self.u_quit
        return self.w * float(success) - self.cost(action) - self.s * steps


def recompute(rows: Iterable[dict[str, Any]], config: UtilityConfig) -> list[dict[str, Any]]:
    """The rows with every branch's ``utility`` re-priced under ``config`` (new dicts; the input is kept)."""
    repriced = []
    for row in rows:
        branches = {action: {**branch, "utility": config.utility(action, bool(branch["success"]), int(branch["steps"]))}
                    for action, branch in row["branches"].items()}
        repriced.append({**row, "branches": branches})
    return repriced
