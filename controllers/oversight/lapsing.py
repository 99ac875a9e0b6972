"""Branchable agents for prefix branching: experts and the lapsing base agents built from them.

A base agent whose every random choice lives in its own state can be snapshotted with the env and
restored, so a branch from prefix ``t`` is the same agent at the same point of its random stream:
restoring then acting reproduces the original actions bit for bit, which is what the protocol's
per-row replay check (``prefix_match``) verifies. ``reseed`` gives the same agent a fresh draw, for
the repeated draws that measure within-action variance.

``LapsingAgent`` is the expert with per-step lapses (a lapse action, a loop over its last one or two
actions, a premature end or answer). How often it lapses is its ``Competence``, which a benchmark
draws per episode from the episode index, so episodes differ and prefixes carry signal about how the
rest will go. ``weakened(expert, ...)`` is the expert that lapses with probability ``1 - strength``:
the weak interventions of the intervention-strength ablation.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

import numpy as np
from gymnasium import spaces

from gauntlet.agent import Agent, AgentOutput
from gauntlet.info_keys import PRIVILEGED

EXPERT_ACTION = "expert_action"
"""The key under ``info["privileged"]`` where an env puts the expert's next action."""
STRONG_DIVISOR = 4.0
"""A ``strong`` base agent lapses this many times less often than the base agent of its episode."""

ActionSampler = Callable[[Any, dict[str, Any], np.random.Generator], Any]
"""``(observation, info, rng) -> action``: how a lapsing agent picks a lapse or premature action."""


@runtime_checkable
class BranchableAgent(Protocol):
    """An agent (``gauntlet.agent.Agent``) whose whole state, RNG included, can be captured and restored."""

    def reset(self, *, seed: int | None, observation_space: spaces.Space, action_space: spaces.Space) -> None: ...

    def act(self, observation: Any, info: dict[str, Any]) -> Any: ...

    def snapshot(self) -> Any: ...

    def restore(self, snapshot: Any) -> None: ...

    def reseed(self, seed: int) -> None: ...


@lru_cache(maxsize=65536)  # a SeedSequence costs tens of microseconds, and branches ask for the same few seeds
def derive_seed(*keys: int) -> int:
    """A seed for the stream named by ``keys`` (e.g. episode, prefix, draw): independent streams per key."""
    return int(np.random.SeedSequence(list(keys)).generate_state(1, np.uint32)[0])


def plain_action(output: Any) -> Any:
    """The action of an agent's ``act`` result (an ``AgentOutput`` or a bare action)."""
    return output.action if type(output) is AgentOutput else output


def privileged_input(expert: Any) -> str | None:
    """The key under ``info["privileged"]`` that ``expert`` acts from (``EXPERT_ACTION`` for the
    ``PrivilegedExpert``, also inside a lapsing or weakened one), or None when it acts from what any env
    shows it. Only an env that puts that key in its info can host the expert: the benchmark's own
    (``Benchmark.make_env``), not an env a run or an evaluation makes from an id or a suite."""
    return getattr(expert, "privileged_key", None)


class StatelessExpert(Agent):
    """An expert whose action is a function of what it is shown: nothing to snapshot, restore or reseed."""

    privileged_key: str | None = None
    """The key under ``info["privileged"]`` it acts from, if any (``privileged_input``)."""

    def snapshot(self) -> None:
        return None

    def restore(self, snapshot: None) -> None:
        """Nothing to restore: the expert keeps no state."""

    def reseed(self, seed: int) -> None:
        """Nothing to reseed: the expert draws nothing at random."""


class PrivilegedExpert(StatelessExpert):
    """The expert an env provides: acts ``info["privileged"]["expert_action"]``."""

    name = "privileged-expert"
    privileged_key = EXPERT_ACTION

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        try:
            return info[PRIVILEGED][EXPERT_ACTION]
        except (KeyError, TypeError):
            raise ValueError(f"this env's info has no [{PRIVILEGED!r}][{EXPERT_ACTION!r}]: the privileged expert "
                             "needs an env that names the expert's next action on every reset and step") from None


def competence_ranges(p_lapse: tuple[float, float], p_loop: tuple[float, float],
                      p_premature: tuple[float, float]) -> dict[str, tuple[float, float]]:
    """The per-episode probability ranges a lapsing benchmark draws ``Competence`` from, checked: each
    ``(low, high)`` within [0, 1], and the upper ends summing to at most 1 (one lapse kind per step)."""
    ranges = {"p_lapse": p_lapse, "p_loop": p_loop, "p_premature": p_premature}
    if any(not 0.0 <= low <= high <= 1.0 for low, high in ranges.values()):
        raise ValueError(f"each probability range must be (low, high) with 0 <= low <= high <= 1; got {ranges}")
    if sum(high for _, high in ranges.values()) > 1.0:
        raise ValueError(f"the ranges' upper ends must sum to at most 1; got {ranges}")
    return ranges


@dataclass(frozen=True)
class Competence:
    """How often a lapsing agent lapses per step: a lapse action, a loop, a premature end or answer."""

    p_lapse: float
    p_loop: float = 0.0
    p_premature: float = 0.0

    @classmethod
    def draw(cls, episode: int, *, seed: int, p_lapse: tuple[float, float],
             p_loop: tuple[float, float] = (0.0, 0.0), p_premature: tuple[float, float] = (0.0, 0.0)) -> Competence:
        """The competence of episode ``episode``: each probability uniform in its ``(low, high)`` range,
        drawn from a stream keyed by ``(seed, episode)`` so an episode always gets the same one."""
        rng = np.random.default_rng([seed, episode])
        return cls(*(float(rng.uniform(low, high)) for low, high in (p_lapse, p_loop, p_premature)))

    def for_strength(self, strength: str) -> Competence:
        """This competence for a base agent of ``strength``: ``base`` as is, ``strong`` lapsing
        ``STRONG_DIVISOR`` times less often."""
        if strength == "base":
            return self
        if strength == "strong":
            return Competence(self.p_lapse / STRONG_DIVISOR, self.p_loop / STRONG_DIVISOR,
                              self.p_premature / STRONG_DIVISOR)
        raise ValueError(f"strength must be 'base' or 'strong'; got {strength!r}")


@dataclass(frozen=True)
class LapsingSnapshot:
    """Everything a ``LapsingAgent`` keeps: its RNG, its last actions, the loop it is in, its expert's state."""

    rng: dict[str, Any]
    recent: tuple[Any, ...]
    loop: tuple[Any, ...]
    loop_left: int
    expert: Any


class LapsingAgent(Agent):
    """The expert with lapses. Each step, one uniform draw decides what the agent does:

    - with ``p_premature``: a premature end or answer, ``premature_action(observation, info, rng)``;
    - with ``p_lapse``: a lapse action, ``lapse_actions(observation, info, rng)``;
    - with ``p_loop`` (once it has acted): a loop, repeating its last one or two actions for
      ``loop_len`` steps (the loop's own steps draw nothing);
    - otherwise the expert's action.

    The expert is asked only on the steps it acts, so it must choose from the ``(observation, info)``
    it is shown (experts here are stateless or keep only their RNG, which the snapshot covers).
    ``reset(seed=s)`` restarts the RNG from ``(seed, s)``, so the same agent on the same episode seed
    acts the same in the runner and in the branching protocol.
    """

    name = "lapsing"

    def __init__(self, expert: BranchableAgent, lapse_actions: ActionSampler, *, seed: int, p_lapse: float,
                 p_loop: float = 0.0, loop_len: int = 3, p_premature: float = 0.0,
                 premature_action: ActionSampler | None = None):
        for label, p in (("p_lapse", p_lapse), ("p_loop", p_loop), ("p_premature", p_premature)):
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"{label} must be a probability in [0, 1]; got {p}")
        if p_lapse + p_loop + p_premature > 1.0:
            raise ValueError(f"p_lapse + p_loop + p_premature must be at most 1; got {p_lapse + p_loop + p_premature}")
        if loop_len < 1:
            raise ValueError(f"loop_len must be at least 1; got {loop_len}")
        if p_premature > 0.0 and premature_action is None:
            raise ValueError("p_premature > 0 needs a premature_action (this benchmark has none: use p_premature=0)")
        self.expert = expert
        self.lapse_actions = lapse_actions
        self.premature_action = premature_action
        self.seed = seed
        self.p_lapse, self.p_loop, self.p_premature, self.loop_len = p_lapse, p_loop, p_premature, loop_len
        self._rng = np.random.default_rng(seed)
        self._recent: tuple[Any, ...] = ()
        self._loop: tuple[Any, ...] = ()
        self._loop_left = 0

    @property
    def privileged_key(self) -> str | None:
        """What its expert acts from (``privileged_input``): the lapsing agent needs it on the steps the expert acts."""
        return privileged_input(self.expert)

    def config(self) -> dict[str, Any]:
        return {"seed": self.seed, "p_lapse": self.p_lapse, "p_loop": self.p_loop, "loop_len": self.loop_len,
                "p_premature": self.p_premature, "expert": getattr(self.expert, "name", type(self.expert).__name__)}

    def reset(self, *, seed: int | None, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        self._rng = np.random.default_rng(self.seed if seed is None else [self.seed, seed])
        self._recent, self._loop, self._loop_left = (), (), 0
        self.expert.reset(seed=seed, observation_space=observation_space, action_space=action_space)

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        if self._loop_left > 0:
            action = self._loop[(self.loop_len - self._loop_left) % len(self._loop)]
            self._loop_left -= 1
        else:
            u = self._rng.random()
            if u < self.p_premature and self.premature_action is not None:
                action = self.premature_action(observation, info, self._rng)
            elif u < self.p_premature + self.p_lapse:
                action = self.lapse_actions(observation, info, self._rng)
            elif u < self.p_premature + self.p_lapse + self.p_loop and self._recent:
                period = 1 if len(self._recent) < 2 else int(self._rng.integers(1, 3))
                self._loop = self._recent[-period:]
                action, self._loop_left = self._loop[0], self.loop_len - 1
            else:
                action = plain_action(self.expert.act(observation, info))
        self._recent = (*self._recent[-1:], action)
        return action

    def snapshot(self) -> LapsingSnapshot:
        return LapsingSnapshot(rng=copy.deepcopy(dict(self._rng.bit_generator.state)),
                               recent=copy.deepcopy(self._recent), loop=copy.deepcopy(self._loop),
                               loop_left=self._loop_left,
                               expert=self.expert.snapshot())

    def restore(self, snapshot: LapsingSnapshot) -> None:
        self._rng.bit_generator.state = copy.deepcopy(snapshot.rng)
        self._recent, self._loop = copy.deepcopy(snapshot.recent), copy.deepcopy(snapshot.loop)
        self._loop_left = snapshot.loop_left
        self.expert.restore(snapshot.expert)

    def reseed(self, seed: int) -> None:
        """A fresh random draw from here on (its own and its expert's); the loop it is in, if any, goes on."""
        self._rng = np.random.default_rng(seed)
        self.expert.reseed(derive_seed(seed, 1))


def weakened(expert: BranchableAgent, lapse_actions: ActionSampler, strength: float, *, seed: int) -> BranchableAgent:
    """The expert at ``strength`` in [0, 1]: with probability ``1 - strength`` per step it takes a lapse
    action instead (the expert itself at strength 1)."""
    if not 0.0 <= strength <= 1.0:
        raise ValueError(f"expert strength must be in [0, 1]; got {strength}")
    if strength == 1.0:
        return expert
    return LapsingAgent(expert, lapse_actions, seed=seed, p_lapse=1.0 - strength)
