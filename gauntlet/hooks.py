"""Hooks: the seams where monitors and controllers watch an agent while it acts.

``Monitor.observe(step) -> scores`` is called after every step; its scores are recorded in the
step's ``events`` with the time they cost. ``Controller.decide(prefix, candidates) -> Decision`` is
called before every step with the episode so far and the agent's proposed action(s); it lets the
step go ahead (``continue``) or names one intervention. The runner carries out two interventions
itself: ``replace_action`` (take ``decision.action`` instead; when that is an ``AgentOutput``, e.g.
an agent's revised proposal, the step records its action, messages and events) and ``halt`` (end the
episode, truncated). Other names are recorded, and the controller is expected to have acted on the env
(for example by branching it) before it returns.

Every decision is recorded as a ``decision`` event, and every intervention also as an
``intervention`` event, in the events of the step decided about. A halt's step never happens, so
the halting call's events go to the last step taken, which is marked truncated; a halt before the
first step puts them in ``Outcome.events`` and sets the outcome's ``truncated`` metric. The episode
file holds all of this exactly as the returned Episode does (``gauntlet.runner`` says how).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel

from gauntlet.episode import Step

RUNNER_INTERVENTIONS = ("replace_action", "halt")


class Decision(BaseModel):
    """A controller's verdict on the next step."""

    kind: Literal["continue", "intervene"] = "continue"
    intervention: str | None = None
    action: Any = None
    reason: str = ""
    scores: dict[str, float] = {}

    @classmethod
    def proceed(cls, reason: str = "") -> Decision:
        return cls(kind="continue", reason=reason)

    @classmethod
    def intervene(cls, intervention: str, *, action: Any = None, reason: str = "",
                  scores: dict[str, float] | None = None) -> Decision:
        return cls(kind="intervene", intervention=intervention, action=action, reason=reason,
                   scores=scores or {})


@dataclass
class Prefix:
    """The episode so far, as a controller sees it.

    ``env`` is Branchable (``snapshot``/``restore``; ``gauntlet.fork`` for an independent copy), so a
    controller can try candidate continuations before it decides. ``agent`` can be asked for
    further candidates. The runner puts the agent's whole output for the step being decided (an
    ``AgentOutput``: its messages and events, e.g. the model calls that wrote the proposal) in
    ``extra["proposal"]``, where the agent returned one.
    """

    steps: list[Step]
    observation: Any
    info: dict[str, Any]
    env: Any
    agent: Any
    seed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Monitor(Protocol):
    """Scores each step (e.g. a latent-state probe); returns named scores."""

    name: str

    def observe(self, step: Step) -> dict[str, float]: ...


@runtime_checkable
class Controller(Protocol):
    """Decides, before each step, whether the agent's proposal goes ahead."""

    name: str

    def decide(self, prefix: Prefix, candidates: list[Any]) -> Decision: ...
