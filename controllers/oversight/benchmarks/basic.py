"""Two small benchmarks for prefix branching: ``corridor`` (closed form, for tests) and ``taxi``
(Gymnasium's Taxi with an expert trained by tabular Q-learning).

``corridor``: a line of ``length`` cells; the base agent moves right with probability ``1 - p_e``
and otherwise stays; the expert always moves right. ``p_e`` is drawn per episode from the episode
index and shown in every ``info`` as ``lapse_rate`` (the episode's public difficulty label), so the
state an overseer needs (position, steps left, ``p_e``) is in its prefix features and
``corridor_expected_utilities`` gives the exact expected utility of every overseer action: the
branching rows' means must converge to it and a trained controller must recover its argmax.

``taxi``: ``Taxi-v4`` (Taxi-v3's dynamics with the stochastic options fixed; ``Taxi-v3`` itself no
longer makes). The expert is a Q-table learned by tabular Q-learning on the env's own transition
table, seeded and cached with ``gauntlet.datacache`` (``TAXI_EXPERT``); the base agent lapses into
random actions, loops, and premature drop-offs (an illegal drop-off is Taxi's premature answer).
Taxi branches through ``gauntlet.branching.branchable`` with the ``attributes`` strategy (its state
is a few plain attributes and its RNG: a snapshot costs tens of microseconds, where a deep copy of
the env, transition table included, costs milliseconds).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.envs.registration import EnvSpec
from gymnasium.utils import RecordConstructorArgs

from gauntlet.branching import branchable
from gauntlet.controllers.oversight.features import History
from gauntlet.controllers.oversight.lapsing import (BranchableAgent, Competence, LapsingAgent, PrivilegedExpert,
                                                    StatelessExpert, competence_ranges, derive_seed, weakened)
from gauntlet.controllers.oversight.utility import LADDER, UtilityConfig
from gauntlet.datacache import ensure_built
from gauntlet.info_keys import PRIVILEGED, SUCCESS

# Streams of ``derive_seed(benchmark seed, ...)``.
_EPISODE_SEED, _AGENT_SEED, _EXPERT_SEED, _HELD_OUT_SEED = 0, 1, 2, 3


# The corridor ----------------------------------------------------------------------------------
STAY, RIGHT = 0, 1


class CorridorEnv(gym.Env[np.int64, np.int64]):
    """A walk to the end of a corridor.

    ## Description
    The agent starts at cell 0 of a corridor of ``length`` cells beyond the start and must reach cell
    ``length``. A test benchmark for prefix branching: every quantity an overseer needs has a closed form.

    ## Action Space
    ``Discrete(2)``: 0 stay, 1 move one cell right.

    ## Observation Space
    ``Discrete(length + 1)``: the agent's cell.

    ## Rewards
    1 on reaching the end, 0 otherwise.

    ## Starting State
    Cell 0.

    ## Episode End
    Terminates at cell ``length`` (``info["success"]`` True); truncates after ``max_steps`` steps.

    ## Arguments
    ``length`` (10), ``max_steps`` (20), ``lapse_rate`` (0.0): the episode's difficulty label, copied
    into every ``info`` as ``lapse_rate`` (the env's dynamics do not use it). ``info["privileged"]
    ["expert_action"]`` is always 1.

    ## Version History
    * v0: initial version.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, length: int = 10, max_steps: int = 20, lapse_rate: float = 0.0):
        if length < 1 or max_steps < 1:
            raise ValueError(f"length and max_steps must be at least 1; got {length} and {max_steps}")
        self.length, self.max_steps, self.lapse_rate = length, max_steps, lapse_rate
        self.observation_space = spaces.Discrete(length + 1)
        self.action_space = spaces.Discrete(2)
        self.position = 0
        self.elapsed = 0

    def _info(self) -> dict[str, Any]:
        return {"lapse_rate": self.lapse_rate, SUCCESS: self.position == self.length,
                PRIVILEGED: {"expert_action": RIGHT}}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.position, self.elapsed = 0, 0
        return np.int64(self.position), self._info()

    def step(self, action: Any):
        if not self.action_space.contains(action):
            raise ValueError(f"action must be in {self.action_space} (0 stay, 1 right); got {action!r}")
        self.position += int(action)
        self.elapsed += 1
        terminated = self.position == self.length
        truncated = not terminated and self.elapsed >= self.max_steps
        return np.int64(self.position), float(terminated), terminated, truncated, self._info()

    def snapshot(self) -> tuple[int, int, dict[str, Any]]:
        return self.position, self.elapsed, dict(self.np_random.bit_generator.state)

    def restore(self, snapshot: tuple[int, int, dict[str, Any]]) -> None:
        self.position, self.elapsed, rng = snapshot
        self.np_random.bit_generator.state = dict(rng)


def corridor_spec(length: int, max_steps: int, lapse_rate: float) -> EnvSpec:
    """The spec ``gymnasium.make`` builds a corridor from (so ``gauntlet.fork`` can rebuild one)."""
    return EnvSpec(id="OversightCorridor-v0", entry_point=f"{__name__}:CorridorEnv",
                   kwargs={"length": length, "max_steps": max_steps, "lapse_rate": lapse_rate})


def _stay(observation: Any, info: dict[str, Any], rng: np.random.Generator) -> int:
    return STAY


@lru_cache(maxsize=4096)
def _walk(distance: int, budget: int, p_first: float, first: int, p_then: float) -> tuple[float, float]:
    """(P(success), E[steps]) of a walker ``distance`` cells from the end with ``budget`` steps left,
    who stays with probability ``p_first`` for its next ``first`` steps and ``p_then`` after them.

    The DP: V(0, n) = (1, 0); V(d, 0) = (0, 0); V(d, n) = (1 - p) V(d - 1, n - 1) + p V(d, n - 1),
    each step adding one to the expected steps.
    """
    if distance == 0:
        return 1.0, 0.0
    if budget == 0:
        return 0.0, 0.0
    p = p_first if first > 0 else p_then
    moved = _walk(distance - 1, budget - 1, p_first, max(first - 1, 0), p_then)
    stayed = _walk(distance, budget - 1, p_first, max(first - 1, 0), p_then) if p > 0 else (0.0, 0.0)
    return ((1 - p) * moved[0] + p * stayed[0], 1.0 + (1 - p) * moved[1] + p * stayed[1])


def corridor_expected_utilities(*, position: int, back_position: int, t: int, lapse_rate: float, length: int,
                                max_steps: int, config: UtilityConfig,
                                expert_strength: float = 1.0) -> dict[str, float]:
    """The exact expected utility of every overseer action at a corridor prefix.

    ``position`` is the agent's cell at step ``t``, ``back_position`` its cell at ``max(0, t - r)``
    (where ``rollback`` returns to), ``lapse_rate`` the base agent's ``p_e``; the stronger agent stays
    with ``p_e / 4`` and the expert with ``1 - expert_strength``.
    """
    budget, distance = max_steps - t, length - position
    p_expert = 1.0 - expert_strength
    outcomes = {
        "continue": _walk(distance, budget, lapse_rate, 0, lapse_rate),
        "expert": _walk(distance, budget, p_expert, 0, p_expert),
        "expert_k": _walk(distance, budget, p_expert, config.k, lapse_rate),
        "rollback": _walk(length - back_position, budget, lapse_rate, 0, lapse_rate),
        "stronger": _walk(distance, budget, lapse_rate / 4.0, 0, lapse_rate / 4.0),
    }
    utilities = {"quit": config.u_quit}
    for action, (p_success, steps) in outcomes.items():
        utilities[action] = config.w * p_success - config.cost(action) - config.s * steps
    return {action: utilities[action] for action in LADDER}


class CorridorBenchmark:
    """The corridor benchmark (see the module docstring); ``p_e`` of episode ``e`` is uniform in ``lapse_range``."""

    name = "corridor"
    has_stronger = True

    def __init__(self, *, length: int = 10, max_steps: int = 20, lapse_range: tuple[float, float] = (0.0, 0.6),
                 seed: int = 0):
        low, high = lapse_range
        if not 0.0 <= low <= high <= 1.0:
            raise ValueError(f"lapse_range must be (low, high) with 0 <= low <= high <= 1; got {lapse_range}")
        self.length, self.max_steps, self.lapse_range, self.seed = length, max_steps, (low, high), seed

    def lapse_rate(self, episode: int) -> float:
        return Competence.draw(episode, seed=self.seed, p_lapse=self.lapse_range).p_lapse

    def make_env(self, episode: int) -> gym.Env:
        return gym.make(corridor_spec(self.length, self.max_steps, self.lapse_rate(episode)))

    def episode_seed(self, episode: int) -> int:
        return derive_seed(self.seed, _EPISODE_SEED, episode)

    def make_agent(self, episode: int, strength: str = "base") -> BranchableAgent:
        competence = Competence(self.lapse_rate(episode)).for_strength(strength)
        return LapsingAgent(PrivilegedExpert(), _stay, seed=derive_seed(self.seed, _AGENT_SEED, episode),
                            p_lapse=competence.p_lapse)

    def make_expert(self, strength: float = 1.0) -> BranchableAgent:
        return weakened(PrivilegedExpert(), _stay, strength, seed=derive_seed(self.seed, _EXPERT_SEED))

    def success(self, info: dict[str, Any]) -> bool:
        return bool(info.get(SUCCESS, False))

    def features(self, history: History) -> dict[str, float]:
        position = int(history.observations[-1])
        return {"position": float(position), "distance_left": float(self.length - position),
                "lapse_rate": float(history.infos[-1]["lapse_rate"])}

    def episode_meta(self, episode: int) -> dict[str, Any]:
        return {"lapse_rate": self.lapse_rate(episode), "length": self.length}

    def expected_utilities(self, history: History, config: UtilityConfig,
                           expert_strength: float = 1.0) -> dict[str, float]:
        """``corridor_expected_utilities`` at the prefix ``history`` (one the protocol built: it has ``o_0``)."""
        back = max(0, history.t - config.r)
        return corridor_expected_utilities(
            position=int(history.observations[-1]), back_position=int(history.observations[back]), t=history.t,
            lapse_rate=float(history.infos[-1]["lapse_rate"]), length=self.length, max_steps=self.max_steps,
            config=config, expert_strength=expert_strength)


def corridor(**options: Any) -> CorridorBenchmark:
    """The corridor benchmark (options: ``length``, ``max_steps``, ``lapse_range``, ``seed``)."""
    return CorridorBenchmark(**options)


# Taxi ------------------------------------------------------------------------------------------
TAXI_ID = "Taxi-v4"
TAXI_EXPERT = "oversight-taxi-expert"
TAXI_EXPERT_VERSION = "1"
TAXI_EXPERT_EPISODES = 20_000
"""Q-learning episodes of the default expert: enough for its greedy policy to be optimal from every start."""
TAXI_ACTIONS = 6
TAXI_MAX_STEPS = 40
"""The taxi episode budget: the longest optimal Taxi episode takes 18 steps."""
HELD_OUT_EPISODES = 1000
DROPOFF = 5
_TAXI_LOCATIONS = ((0, 0), (0, 4), (4, 0), (4, 3))


class TaxiOutcome(gym.Wrapper, RecordConstructorArgs):
    """Adds ``info["success"]`` to Taxi's steps: an episode succeeds when it terminates (a passenger
    dropped off at the destination is Taxi's only way to terminate)."""

    def __init__(self, env: gym.Env):
        RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)

    def step(self, action: Any):
        observation, reward, terminated, truncated, info = self.env.step(action)
        return observation, reward, terminated, truncated, {**info, SUCCESS: bool(terminated)}


def decode_taxi(state: int) -> tuple[int, int, int, int]:
    """(taxi row, taxi column, passenger location 0-3 or 4 in the taxi, destination 0-3) of a Taxi state."""
    state, destination = divmod(int(state), 4)
    state, passenger = divmod(state, 5)
    row, column = divmod(state, 5)
    return row, column, passenger, destination


def train_taxi_expert(*, seed: int = 0, episodes: int = TAXI_EXPERT_EPISODES, alpha: float = 0.5, gamma: float = 0.95,
                      epsilon: float = 0.2, episode_steps: int = 200) -> np.ndarray:
    """A Taxi Q-table learned by tabular Q-learning (epsilon-greedy, ``episodes`` episodes from Taxi's
    start distribution) on the env's own transition table, which ``Taxi-v4`` without rain is a
    deterministic one of. Deterministic in ``seed``.

    Q-learning: Q(s, a) <- Q(s, a) + alpha (r + gamma max_a' Q(s', a') [not terminal] - Q(s, a)).
    """
    taxi: Any = gym.make(TAXI_ID).unwrapped
    transitions = [[taxi.P[s][a] for a in range(TAXI_ACTIONS)] for s in range(len(taxi.P))]
    if any(len(outcomes) != 1 for row in transitions for outcomes in row):
        raise ValueError(f"{TAXI_ID} has stochastic transitions; the expert is trained for the deterministic one")
    table = [[outcomes[0][1:] for outcomes in row] for row in transitions]  # (next state, reward, terminal)
    starts = np.flatnonzero(taxi.initial_state_distrib)
    rng = np.random.default_rng(seed)
    q = np.zeros((len(table), TAXI_ACTIONS))
    for _ in range(episodes):
        state = int(starts[rng.integers(len(starts))])
        for _ in range(episode_steps):
            explore = rng.random() < epsilon
            action = int(rng.integers(TAXI_ACTIONS)) if explore else int(np.argmax(q[state]))
            following, reward, terminal = table[state][action]
            target = reward if terminal else reward + gamma * q[following].max()
            q[state, action] += alpha * (target - q[state, action])
            state = following
            if terminal:
                break
    return q


class QTableExpert(StatelessExpert):
    """Acts greedily on a Q-table (ties to the lowest action)."""

    name = "q-table-expert"

    def __init__(self, q_table: np.ndarray):
        self.q_table = q_table
        self._policy = [int(action) for action in q_table.argmax(axis=1)]

    def act(self, observation: Any, info: dict[str, Any]) -> int:
        return self._policy[int(observation)]


def taxi_success_rate(q_table: np.ndarray, *, episodes: int, max_steps: int, seed: int) -> float:
    """The share of ``episodes`` Taxi episodes (reset seeds from ``seed``'s stream) the greedy expert
    finishes within ``max_steps`` steps, run through the real env."""
    env = TaxiOutcome(gym.make(TAXI_ID))
    expert = QTableExpert(q_table)
    solved = 0
    for episode in range(episodes):
        observation, info = env.reset(seed=derive_seed(seed, episode))
        for _ in range(max_steps):
            observation, _, terminated, truncated, info = env.step(expert.act(observation, info))
            if terminated or truncated:
                break
        solved += bool(info.get(SUCCESS, False))
    env.close()
    return solved / episodes


def build_taxi_expert(folder: Path, seed: int = 0, episodes: int = TAXI_EXPERT_EPISODES) -> None:
    """The ``TAXI_EXPERT`` data builder: ``q_table.npy`` and ``training.json`` (settings and the success
    rate within ``TAXI_MAX_STEPS`` steps over ``HELD_OUT_EPISODES`` episodes whose reset seeds come
    from a stream the benchmark's episodes do not use)."""
    q_table = train_taxi_expert(seed=seed, episodes=episodes)
    np.save(Path(folder) / "q_table.npy", q_table)
    held_out = taxi_success_rate(q_table, episodes=HELD_OUT_EPISODES, max_steps=TAXI_MAX_STEPS,
                                 seed=derive_seed(seed, _HELD_OUT_SEED))
    report = {"seed": seed, "episodes": episodes, "held_out_episodes": HELD_OUT_EPISODES,
              "held_out_max_steps": TAXI_MAX_STEPS, "held_out_success": held_out}
    (Path(folder) / "training.json").write_text(json.dumps(report, indent=1, sort_keys=True))


def taxi_expert_folder(*, seed: int = 0, episodes: int = TAXI_EXPERT_EPISODES) -> Path:
    """The cache folder of the trained expert (``q_table.npy``, ``training.json``), built on first use.

    Only settings that differ from the builder's defaults key the entry, so the default expert is the
    one ``gauntlet data build oversight-taxi-expert`` builds.
    """
    params = {name: value for name, value, default in (("seed", seed, 0), ("episodes", episodes, TAXI_EXPERT_EPISODES))
              if value != default}
    return ensure_built(TAXI_EXPERT, TAXI_EXPERT_VERSION, build_taxi_expert, params=params)


def taxi_expert_table(*, seed: int = 0, episodes: int = TAXI_EXPERT_EPISODES) -> np.ndarray:
    """The trained expert's Q-table."""
    return np.load(taxi_expert_folder(seed=seed, episodes=episodes) / "q_table.npy")


def _random_action(observation: Any, info: dict[str, Any], rng: np.random.Generator) -> int:
    return int(rng.integers(TAXI_ACTIONS))


def _dropoff(observation: Any, info: dict[str, Any], rng: np.random.Generator) -> int:
    return DROPOFF


class TaxiBenchmark:
    """The taxi benchmark (see the module docstring): the episode's competence is drawn uniformly
    from ``p_lapse``, ``p_loop`` and ``p_premature`` ranges."""

    name = "taxi"
    has_stronger = True

    def __init__(self, *, max_steps: int = TAXI_MAX_STEPS, seed: int = 0, p_lapse: tuple[float, float] = (0.0, 0.6),
                 p_loop: tuple[float, float] = (0.0, 0.15), p_premature: tuple[float, float] = (0.0, 0.1),
                 loop_len: int = 4, expert_seed: int = 0, expert_episodes: int = TAXI_EXPERT_EPISODES):
        self.max_steps, self.seed, self.loop_len = max_steps, seed, loop_len
        self.ranges = competence_ranges(p_lapse, p_loop, p_premature)
        self.q_table = taxi_expert_table(seed=expert_seed, episodes=expert_episodes)

    def competence(self, episode: int) -> Competence:
        return Competence.draw(episode, seed=self.seed, **self.ranges)

    def make_env(self, episode: int) -> gym.Env:
        return branchable(TaxiOutcome(gym.make(TAXI_ID)), "attributes")

    def episode_seed(self, episode: int) -> int:
        return derive_seed(self.seed, _EPISODE_SEED, episode)

    def make_agent(self, episode: int, strength: str = "base") -> BranchableAgent:
        competence = self.competence(episode).for_strength(strength)
        return LapsingAgent(QTableExpert(self.q_table), _random_action,
                            seed=derive_seed(self.seed, _AGENT_SEED, episode), p_lapse=competence.p_lapse,
                            p_loop=competence.p_loop, loop_len=self.loop_len, p_premature=competence.p_premature,
                            premature_action=_dropoff)

    def make_expert(self, strength: float = 1.0) -> BranchableAgent:
        return weakened(QTableExpert(self.q_table), _random_action, strength,
                        seed=derive_seed(self.seed, _EXPERT_SEED))

    def success(self, info: dict[str, Any]) -> bool:
        return bool(info.get(SUCCESS, False))

    def features(self, history: History) -> dict[str, float]:
        row, column, passenger, destination = decode_taxi(history.observations[-1])
        carrying = passenger == 4
        target = _TAXI_LOCATIONS[destination if carrying else passenger]
        to_target = abs(row - target[0]) + abs(column - target[1])
        rest = 0 if carrying else sum(abs(a - b) for a, b in zip(target, _TAXI_LOCATIONS[destination], strict=True))
        return {"passenger_in_taxi": float(carrying), "manhattan_to_target": float(to_target),
                "manhattan_to_go": float(to_target + rest),
                "illegal_actions": float(sum(r <= -10 for r in history.rewards))}

    def episode_meta(self, episode: int) -> dict[str, Any]:
        competence = self.competence(episode)
        return {"p_lapse": competence.p_lapse, "p_loop": competence.p_loop, "p_premature": competence.p_premature}


def taxi(**options: Any) -> TaxiBenchmark:
    """The taxi benchmark (options: ``max_steps``, ``seed``, ``p_lapse``/``p_loop``/``p_premature`` ranges,
    ``loop_len``, ``expert_seed``, ``expert_episodes``)."""
    return TaxiBenchmark(**options)
