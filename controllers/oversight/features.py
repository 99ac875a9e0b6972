"""The prefix as the overseer sees it (``History``) and the features a controller reads from it.

A ``History`` holds what an overseer may know at step ``t``: observations ``o_0..o_t``, actions
``a_0..a_{t-1}``, rewards, and infos with ``privileged`` removed (ground truth is never shown to an
overseer). The branching protocol builds one while it runs the base episode; an online controller
builds the same from the runner's ``Prefix`` with ``History.from_steps``, so both compute identical
features.

The runner's steps record the observation *after* each step, so a prefix of steps alone does not hold
the reset observation ``o_0`` (``from_steps`` takes it when the caller has it). No feature reads
``o_0`` once ``t > 0``: features of a prefix never depend on whether its builder saw the reset.

Observations are compared through digests of their plain JSON form (numpy arrays, text and dicts
alike), computed once per observation.

``notes[k]`` is what the agent reported about itself with action ``a_k`` (its ``note`` events, merged:
an LLM agent's verbalised confidence, say): a benchmark may read them (``benchmarks.llm``); the
protocol takes them from the agent's output, ``from_steps`` from the recorded step's events.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gauntlet.episode import Step, dumps
from gauntlet.info_keys import PRIVILEGED

if TYPE_CHECKING:  # the protocol is only named in annotations; benchmarks import this module
    from gauntlet.controllers.oversight.benchmarks import Benchmark

GENERIC_FEATURES = ("t", "t_frac", "return_so_far", "last_reward", "positive_rewards", "negative_rewards",
                    "steps_since_positive_reward", "distinct_action_share", "action_repeats", "last_action_run",
                    "longest_action_run", "loop_last_4", "unchanged_observations", "last_observation_unchanged",
                    "revisited_observations")


def digest(value: Any) -> bytes:
    """A short digest of ``value``'s plain JSON form: equal for equal observations or actions."""
    return hashlib.blake2b(dumps(value), digest_size=12).digest()


def visible_info(info: dict[str, Any]) -> dict[str, Any]:
    """``info`` without what an overseer must not see (``privileged``)."""
    return {key: value for key, value in info.items() if key != PRIVILEGED} if PRIVILEGED in info else info


@dataclass
class History:
    """A prefix of an episode: ``observations[k]`` is ``o_k`` (``o_0`` may be None, see the module
    docstring), ``actions[k]`` and ``rewards[k]`` belong to step ``k``, ``infos[k]`` came with ``o_k``."""

    observations: list[Any]
    actions: list[Any]
    rewards: list[float]
    infos: list[dict[str, Any]]
    max_steps: int
    _observation_digests: list[bytes | None] = field(default_factory=list, repr=False)
    _action_digests: list[bytes] = field(default_factory=list, repr=False)
    notes: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not len(self.observations) == len(self.infos) == len(self.actions) + 1 == len(self.rewards) + 1:
            raise ValueError("a History needs one more observation and info than actions and rewards; got "
                             f"{len(self.observations)} observations, {len(self.infos)} infos, "
                             f"{len(self.actions)} actions, {len(self.rewards)} rewards")
        if not self.notes:
            self.notes = [{} for _ in self.actions]
        if len(self.notes) != len(self.actions):
            raise ValueError(f"a History has one notes dict per action; got {len(self.notes)} for "
                             f"{len(self.actions)} actions")
        if not self._observation_digests:
            self._observation_digests = [None if o is None else digest(o) for o in self.observations]
            self._action_digests = [digest(a) for a in self.actions]

    @property
    def t(self) -> int:
        """The number of steps taken: the decision about to be made is step ``t``'s."""
        return len(self.actions)

    @classmethod
    def start(cls, observation: Any, info: dict[str, Any], max_steps: int) -> History:
        """The history at the reset: no step yet."""
        return cls([observation], [], [], [visible_info(info)], max_steps)

    @classmethod
    def from_steps(cls, steps: Sequence[Step], observation: Any, info: dict[str, Any], max_steps: int, *,
                   initial_observation: Any = None) -> History:
        """The history of a runner ``Prefix``: ``History.from_steps(prefix.steps, prefix.observation,
        prefix.info, max_steps)``. ``initial_observation`` is the reset observation if the caller kept
        it (no feature needs it past ``t = 0``, where ``observation`` is it)."""
        if not steps:
            return cls.start(observation, info, max_steps)
        observations = [initial_observation, *(step.observation for step in steps[:-1]), observation]
        # A recorded step's info is the env's (its tool call included) without ``privileged``, which the
        # runner moves to Step.privileged: the infos the protocol's History holds.
        infos = [{}, *(visible_info(step.info) for step in steps[:-1]), visible_info(info)]
        return cls(observations, [step.action for step in steps], [float(step.reward) for step in steps], infos,
                   max_steps, notes=[agent_notes(step.events) for step in steps])

    def append(self, action: Any, reward: float, observation: Any, info: dict[str, Any],
               notes: dict[str, Any] | None = None) -> None:
        """Record one step: ``action`` was taken (the agent noting ``notes``) and the env returned ``reward``,
        ``observation``, ``info``."""
        self.notes.append(dict(notes or {}))
        self.actions.append(action)
        self._action_digests.append(digest(action))
        self.rewards.append(float(reward))
        self.observations.append(observation)
        self._observation_digests.append(digest(observation))
        self.infos.append(visible_info(info))

    def prefix(self, t: int) -> History:
        """The history of the first ``t`` steps (shares the recorded objects, copies the lists)."""
        if not 0 <= t <= self.t:
            raise ValueError(f"a prefix of a {self.t}-step history has 0..{self.t} steps; got {t}")
        return History(self.observations[:t + 1], self.actions[:t], self.rewards[:t], self.infos[:t + 1],
                       self.max_steps, self._observation_digests[:t + 1], self._action_digests[:t], self.notes[:t])

    def observation_digest(self, k: int) -> bytes | None:
        """The digest of ``o_k`` (None for an ``o_0`` the history was built without)."""
        return self._observation_digests[k]

    def action_digest(self, k: int) -> bytes:
        return self._action_digests[k]


def agent_notes(events: Sequence[Any]) -> dict[str, Any]:
    """What an agent noted about itself in one step: the data of its ``note`` events, merged in order."""
    notes: dict[str, Any] = {}
    for event in events:
        if getattr(event, "kind", None) == "note" and isinstance(event.data, dict):
            notes.update(event.data)
    return notes


def _runs(keys: Sequence[bytes]) -> tuple[int, int, int]:
    """(repeats of the previous element, length of the last run, longest run) of ``keys``."""
    repeats, run, longest = 0, 0, 0
    for k, key in enumerate(keys):
        run = run + 1 if k and key == keys[k - 1] else 1
        repeats += k > 0 and key == keys[k - 1]
        longest = max(longest, run)
    return repeats, run, longest


def generic_features(history: History) -> dict[str, float]:
    """Features every benchmark shares (``GENERIC_FEATURES``), from rewards, action and observation digests."""
    t, rewards = history.t, history.rewards
    actions = [history.action_digest(k) for k in range(t)]
    # o_1..o_t only (see the module docstring): observations the runner's steps record.
    seen = [history.observation_digest(k) for k in range(1, t + 1)]
    repeats, last_run, longest = _runs(actions)
    since_positive = next((t - 1 - k for k in range(t - 1, -1, -1) if rewards[k] > 0), t)
    loop = t >= 4 and actions[-1] == actions[-3] and actions[-2] == actions[-4]
    unchanged = sum(seen[k] == seen[k - 1] for k in range(1, len(seen)))
    return {
        "t": float(t),
        "t_frac": t / history.max_steps,
        "return_so_far": float(sum(rewards)),
        "last_reward": rewards[-1] if rewards else 0.0,
        "positive_rewards": float(sum(r > 0 for r in rewards)),
        "negative_rewards": float(sum(r < 0 for r in rewards)),
        "steps_since_positive_reward": float(since_positive),
        "distinct_action_share": len(set(actions)) / t if t else 0.0,
        "action_repeats": float(repeats),
        "last_action_run": float(last_run),
        "longest_action_run": float(longest),
        "loop_last_4": float(loop),
        "unchanged_observations": float(unchanged),
        "last_observation_unchanged": float(len(seen) >= 2 and seen[-1] == seen[-2]),
        "revisited_observations": float(len(seen) - len(set(seen))),
    }


def prefix_features(history: History, benchmark: Benchmark) -> dict[str, float]:
    """The generic features plus ``benchmark.features(history)``, sorted by name.

    A benchmark feature may not reuse a generic feature's name: the two would silently disagree.
    """
    features = generic_features(history)
    own = benchmark.features(history)
    clash = sorted(set(own) & set(features))
    if clash:
        raise ValueError(f"benchmark {benchmark.name!r} features reuse generic feature names {clash}")
    features.update({name: float(value) for name, value in own.items()})
    return dict(sorted(features.items()))
