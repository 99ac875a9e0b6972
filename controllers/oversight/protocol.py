"""The branching protocol: one base episode, every overseer action run from the identical prefix.

``collect_episode(benchmark, episode, ...)`` runs the base agent's episode once, snapshotting the
coupled state at each prefix it needs (env snapshot, agent snapshot, observation, info, history).
For every sampled prefix ``t`` and every overseer action it restores that state and runs the action's
branch to the end, producing one row per (prefix, draw) with the realised success, steps and utility
of each action (``gauntlet.controllers.oversight.utility``).

Branches are simulations compared in memory, never recorded as episodes, so they are a plain
env/agent loop (as ``gauntlet.agents.llm.branching.AgentEpisode.step`` is) rather than the runner's
``rollout``: the runner's loop exists to record steps, run hooks and write files, and a branch needs
none of it. A branch from prefix ``t`` costs one restore, whatever ``t`` (for envs that snapshot
natively or by attributes; envs that branch by replay pay their own replay inside ``restore``).

Draws. Draw 0 of ``continue`` restores the base agent with its own RNG, so it must reproduce the
original episode's suffix exactly: its actions, rewards, termination flags and observation digests
are compared with the original's (the row's ``prefix_match``; collection reports the match rate).
Draws ``d >= 1`` reseed the base agent from ``(episode seed, t, d)``; every action of one draw uses
the same seed (common random numbers, so the differences between actions carry less noise). The
expert is reseeded from its own stream per (t, d) (it draws only when weakened). ``rollback`` always
draws afresh, at draw 0 too: with the agent's own draw it would only replay the original. A greedy
agent draws nothing, so a fresh draw replays the original too (the first LLM rows: every rollback
branch was the ``continue`` branch with ``r`` fewer steps of budget). On a benchmark with
``rollback_notice`` (the LLM benchmarks) the restored agent is therefore told which calls were
undone: it proposes its next action, and ``benchmark.revise("rollback", ..., undone=calls)`` has it
write that reply again after a notice naming them, as the revisions below. At ``t = 0`` nothing is
undone and the branch runs as it is.

Agents that hold a conversation (the LLM benchmarks, ``benchmarks.llm``). A benchmark with
``stronger_takes_over`` hands the stronger agent the base agent's own state at the prefix (its
conversation so far), where a stateless or lapsing one starts from its reset. A benchmark with
``base_follows_expert`` asks the base agent at each of ``expert_k``'s expert steps too and runs the
expert's action instead of its proposal, as an online controller's ``replace_action`` does: the agent
then reads each expert call and result as a replaced call of its own, and takes over with the whole
history in its conversation (its proposals are discarded; they cost model calls, not env steps).

Revisions (``hint``, ``confirm``; only for a benchmark with ``revise``, the LLM benchmarks). From the
prefix's state the base agent proposes its action; ``benchmark.revise(action, agent, proposed,
observation, info)`` has it write that reply again after the overseer's notice (a hint shows the
expert's next action; a confirmation request shows the proposal back) and returns the action to run;
the base agent then acts by itself to the end. Draws reseed the base agent as for ``continue``.

Budget. ``benchmark.max_steps`` bounds the whole episode. A branch from ``t`` runs at most
``max_steps - t`` steps; ``rollback`` also gets ``max_steps - t``, since the steps it undoes were
spent. ``steps`` in a row are the env steps a branch ran after the decision.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import numpy as np

from gauntlet.branching import branchable
from gauntlet.controllers.oversight.features import History, agent_notes, digest, prefix_features
from gauntlet.controllers.oversight.lapsing import BranchableAgent, derive_seed, plain_action
from gauntlet.controllers.oversight.utility import ACTIONS, REVISIONS, UtilityConfig

if TYPE_CHECKING:
    from gauntlet.controllers.oversight.benchmarks import Benchmark

Row: TypeAlias = dict[str, Any]
Prefixes: TypeAlias = Literal["all"] | Sequence[int] | int
"""Which prefixes get rows: ``"all"``, an explicit list of ``t``, or a stride (every ``stride``-th ``t``)."""

# Streams of ``derive_seed(episode seed, t, draw, stream)``.
_BASE_STREAM, _EXPERT_STREAM = 0, 1


@dataclass
class CoupledSnapshot:
    """The state of agent and env together between steps ``t - 1`` and ``t``."""

    t: int
    env: Any
    agent: Any
    observation: Any
    info: dict[str, Any]
    history: History


@dataclass(frozen=True)
class Transition:
    """What the replay check compares of one step (the action and observation by digest)."""

    action: bytes
    reward: float
    terminated: bool
    truncated: bool
    observation: bytes

    def same_as(self, other: Transition) -> bool:
        # Rewards compared by bytes, so -0.0 != 0.0 and NaN == NaN: the replay must be bit for bit.
        return (self.action == other.action and self.observation == other.observation
                and self.terminated == other.terminated and self.truncated == other.truncated
                and np.float64(self.reward).tobytes() == np.float64(other.reward).tobytes())


@dataclass
class CollectStats:
    """What collection did and how long it took; pass one to ``collect_episode`` to accumulate."""

    episodes: int = 0
    rows: int = 0
    branches: int = 0
    env_steps: int = 0
    restores: int = 0
    replays_matched: int = 0
    replays: int = 0
    seconds: float = 0.0
    restore_s: float = 0.0
    """Wall time spent restoring coupled snapshots (env and agents), part of ``seconds``."""
    action_s: dict[str, float] = field(default_factory=dict)
    """Wall time by what ran: ``"base"`` (the base episodes) and each overseer action's branches (from the
    restore to the branch's end), part of ``seconds``: where an LLM agent's collection spends its time."""
    per_episode_s: list[float] = field(default_factory=list)

    def add_time(self, part: str, seconds: float) -> None:
        self.action_s[part] = self.action_s.get(part, 0.0) + seconds

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    @property
    def match_rate(self) -> float:
        """The share of prefixes whose ``continue`` draw 0 replayed the original suffix exactly."""
        return self.replays_matched / self.replays if self.replays else 1.0

    def as_dict(self) -> dict[str, Any]:
        return {**{k: v for k, v in asdict(self).items() if k != "per_episode_s"},
                "rows_per_s": self.rows_per_s, "match_rate": self.match_rate}


@dataclass
class _Branch:
    success: bool
    steps: int
    transitions: list[Transition]


def _sampler(prefixes: Prefixes) -> Callable[[int], bool]:
    if prefixes == "all":
        return lambda t: True
    if isinstance(prefixes, (str, bool)):
        raise ValueError(f"prefixes must be 'all', a list of steps or a stride; got {prefixes!r}")
    if isinstance(prefixes, int):
        if prefixes < 1:
            raise ValueError(f"a prefix stride must be at least 1; got {prefixes}")
        return lambda t: t % prefixes == 0
    wanted = frozenset(int(t) for t in prefixes)
    if any(t < 0 for t in wanted):
        raise ValueError(f"prefix steps must be >= 0; got {sorted(wanted)}")
    return wanted.__contains__


class _Episode:
    """One episode's base run, its coupled snapshots, and its branches (see the module docstring)."""

    def __init__(self, benchmark: Benchmark, episode: int, config: UtilityConfig, strength_expert: float,
                 stronger: bool, stats: CollectStats):
        self.benchmark, self.config, self.stats = benchmark, config, stats
        self.max_steps = benchmark.max_steps
        self.seed = benchmark.episode_seed(episode)
        self.env = branchable(benchmark.make_env(episode))
        self.agent = benchmark.make_agent(episode)
        self.expert = benchmark.make_expert(strength_expert)
        self.strong: BranchableAgent | None = benchmark.make_agent(episode, strength="strong") if stronger else None
        self.takes_over = bool(getattr(benchmark, "stronger_takes_over", False))
        self.follows = bool(getattr(benchmark, "base_follows_expert", False))
        self.snapshots: dict[int, CoupledSnapshot] = {}
        self.original: list[Transition] = []
        self.expert_start: Any = None
        self.strong_start: Any = None

    def _reset(self, agent: BranchableAgent) -> None:
        agent.reset(seed=self.seed, observation_space=self.env.observation_space, action_space=self.env.action_space)

    def run_base(self, needed: Callable[[int], bool]) -> tuple[History, bool]:
        """Run the base episode, snapshotting the prefixes ``needed`` asks for; its history and success."""
        started = time.perf_counter()
        try:
            return self._run_base(needed)
        finally:
            self.stats.add_time("base", time.perf_counter() - started)

    def _run_base(self, needed: Callable[[int], bool]) -> tuple[History, bool]:
        observation, info = self.env.reset(seed=self.seed)
        for agent in (self.agent, self.expert, self.strong):
            if agent is not None:
                self._reset(agent)
        # The expert and the stronger agent start every branch from their state at the reset.
        self.expert_start = self.expert.snapshot()
        self.strong_start = self.strong.snapshot() if self.strong is not None else None
        history = History.start(observation, info, self.max_steps)
        terminated = truncated = False
        while not (terminated or truncated) and history.t < self.max_steps:
            if needed(history.t):
                self.snapshots[history.t] = CoupledSnapshot(
                    history.t, self.env.snapshot(), self.agent.snapshot(), copy.deepcopy(observation),
                    copy.deepcopy(info), history.prefix(history.t))
            output = self.agent.act(observation, info)
            action = plain_action(output)
            observation, reward, terminated, truncated, info = self.env.step(action)
            history.append(action, float(reward), observation, info, agent_notes(getattr(output, "events", ())))
            self.original.append(Transition(history.action_digest(history.t - 1), float(reward), bool(terminated),
                                            bool(truncated), history.observation_digest(history.t) or b""))
        self.stats.env_steps += history.t
        return history, self.benchmark.success(info)

    def branch(self, action: str, t: int, draw: int) -> _Branch:
        """Run overseer ``action`` from prefix ``t`` (draw ``draw``) to the end of the episode."""
        started = time.perf_counter()
        try:
            return self._branch(action, t, draw)
        finally:
            self.stats.add_time(action, time.perf_counter() - started)

    def _branch(self, action: str, t: int, draw: int) -> _Branch:
        if action == "quit":
            return _Branch(False, 0, [])
        draw_seed = derive_seed(self.seed, t, draw, _BASE_STREAM)
        start = self.snapshots[max(0, t - self.config.r)] if action == "rollback" else self.snapshots[t]
        restoring = time.perf_counter()
        self.env.restore(start.env)
        self.stats.restores += 1
        base: BranchableAgent = self.agent
        if action == "stronger":
            assert self.strong is not None and self.strong_start is not None
            base = self.strong
            base.restore(start.agent if self.takes_over else self.strong_start)
            base.reseed(draw_seed)
        else:
            self.agent.restore(start.agent)
            if draw > 0 or action == "rollback":
                self.agent.reseed(draw_seed)
        # A greedy agent restored r steps back would only make the same calls again (see the module docstring):
        # where the benchmark says so, it is told which calls were undone, as a revision of its next reply.
        undone = (self.snapshots[t].history.actions[start.t:]
                  if action == "rollback" and getattr(self.benchmark, "rollback_notice", False) else [])
        if action in REVISIONS or undone:
            self.stats.restore_s += time.perf_counter() - restoring
            return self._play(base, start.observation, start.info, 0, self.max_steps - t, record=False,
                              revision=action, undone=undone)
        expert_steps = {"expert": self.max_steps, "expert_k": self.config.k}.get(action, 0)
        if expert_steps:
            self.expert.restore(self.expert_start)
            self.expert.reseed(derive_seed(self.seed, t, draw, _EXPERT_STREAM))
        self.stats.restore_s += time.perf_counter() - restoring
        return self._play(base, start.observation, start.info, expert_steps, self.max_steps - t,
                          record=action == "continue" and draw == 0, follows=self.follows and action == "expert_k")

    def _play(self, base: BranchableAgent, observation: Any, info: dict[str, Any], expert_steps: int, budget: int,
              record: bool, follows: bool = False, revision: str | None = None,
              undone: Sequence[Any] = ()) -> _Branch:
        env_step, transitions = self.env.step, []
        steps, terminated, truncated = 0, False, False
        while steps < budget and not (terminated or truncated):
            if steps < expert_steps:
                if follows:  # the base proposes, the expert's action runs instead (see the module docstring)
                    base.act(observation, info)
                action = plain_action(self.expert.act(observation, info))
            elif revision is not None and steps == 0:
                proposed = base.act(observation, info)
                action = self.benchmark.revise(revision, base, proposed, observation, info,  # type: ignore[attr-defined]
                                               undone=undone)
            else:
                action = plain_action(base.act(observation, info))
            observation, reward, terminated, truncated, info = env_step(action)
            steps += 1
            if record:
                transitions.append(Transition(digest(action), float(reward), bool(terminated), bool(truncated),
                                              digest(observation)))
        self.stats.env_steps += steps
        self.stats.branches += 1
        return _Branch(self.benchmark.success(info), steps, transitions)


def collect_episode(benchmark: Benchmark, episode: int, *, config: UtilityConfig | None = None,
                    actions: Sequence[str] = ACTIONS, draws: int = 1, prefixes: Prefixes = "all",
                    strength_expert: float = 1.0, stats: CollectStats | None = None) -> list[Row]:
    """The branched rows of ``benchmark``'s episode ``episode``: one per sampled prefix ``t`` (of the base
    episode's ``0..T-1``) and draw, each with every action's branch (see the module docstring).

    ``stronger`` is branched only where ``benchmark.has_stronger``, ``hint`` and ``confirm`` only where the
    benchmark can ``revise`` a reply. The replay check runs at every
    sampled prefix even when ``continue`` is not among ``actions``. ``stats`` (if given) accumulates
    counts and wall time, for rows/s and the replay match rate.
    """
    config = config or UtilityConfig()
    unknown = sorted(set(actions) - set(ACTIONS))
    if unknown:
        raise ValueError(f"unknown overseer actions {unknown}; expected some of {ACTIONS}")
    if draws < 1:
        raise ValueError(f"draws must be at least 1; got {draws}")
    chosen = [a for a in ACTIONS if a in actions and (a != "stronger" or benchmark.has_stronger)
              and (a not in REVISIONS or hasattr(benchmark, "revise"))]
    stats = stats if stats is not None else CollectStats()
    started = time.perf_counter()
    sampled = _sampler(prefixes)
    rollback = "rollback" in chosen
    r = config.r

    def needed(t: int) -> bool:
        # Rollback from t restores the snapshot of max(0, t - r).
        return sampled(t) or (rollback and (sampled(t + r) or (t == 0 and any(sampled(s) for s in range(r)))))

    run = _Episode(benchmark, episode, config, strength_expert, "stronger" in chosen, stats)
    try:
        history, base_success = run.run_base(needed)
        base_length = history.t
        meta_of = getattr(benchmark, "episode_meta", None)
        meta = {"max_steps": benchmark.max_steps, "has_stronger": benchmark.has_stronger,
                **(meta_of(episode) if meta_of is not None else {})}
        rows: list[Row] = []
        for t in range(base_length):
            if not sampled(t):
                continue
            features = prefix_features(run.snapshots[t].history, benchmark)
            check = run.branch("continue", t, 0)
            prefix_match = _matches(check.transitions, run.original[t:])
            stats.replays += 1
            stats.replays_matched += prefix_match
            for draw in range(draws):
                branches = {}
                for action in chosen:
                    result = check if action == "continue" and draw == 0 else run.branch(action, t, draw)
                    branches[action] = {"success": bool(result.success), "steps": result.steps,
                                        "utility": config.utility(action, result.success, result.steps)}
                rows.append({"benchmark": benchmark.name, "episode": episode, "seed": run.seed, "t": t, "draw": draw,
                             "features": dict(features), "branches": branches, "prefix_match": prefix_match,
                             "base_success": bool(base_success), "base_length": base_length,
                             "expert_strength": strength_expert, "benchmark_meta": dict(meta)})
    finally:
        run.env.close()
    elapsed = time.perf_counter() - started
    stats.episodes += 1
    stats.rows += len(rows)
    stats.seconds += elapsed
    stats.per_episode_s.append(elapsed)
    return rows


def _matches(replayed: list[Transition], original: list[Transition]) -> bool:
    return len(replayed) == len(original) and all(a.same_as(b) for a, b in zip(replayed, original, strict=True))
