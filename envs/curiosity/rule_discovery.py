"""RuleDiscovery-v0: identify a hidden Boolean rule (a conjunction of literals or a small DFA) by querying inputs."""

from __future__ import annotations

import itertools
from functools import cache
from typing import Any

import numpy as np
from gymnasium import spaces

from gauntlet.envs.curiosity.base import CuriosityEnv, check_discrete_action
from gauntlet.envs.curiosity.learners import EnumerationLearner, InContextLearner
from gauntlet.envs.curiosity.predictive import CategoricalPredictive

IDENTIFIED = 1.0 - 1e-9


def all_inputs(n_bits: int) -> np.ndarray:
    """Every input as a bit vector, row i is the binary expansion of i (most significant bit first)."""
    return np.array(list(itertools.product((0, 1), repeat=n_bits)), dtype=np.float64)


def conjunctions(n_bits: int) -> np.ndarray:
    """Truth tables ``(3^n, 2^n)`` of every conjunction of literals: each bit absent, x_i, or ¬x_i."""
    inputs = all_inputs(n_bits).astype(bool)
    tables = []
    for literals in itertools.product((0, 1, 2), repeat=n_bits):
        value = np.ones(len(inputs), dtype=bool)
        for bit, literal in enumerate(literals):
            if literal == 1:
                value &= inputs[:, bit]
            elif literal == 2:
                value &= ~inputs[:, bit]
        tables.append(value)
    return np.array(tables)


def dfa_rules(n_bits: int, n_states: int) -> np.ndarray:
    """Distinct truth tables ``(R, 2^n)`` of the DFAs with at most ``n_states`` states over {0, 1}.

    A DFA reads the input's bits (most significant first) from state 0 with transitions
    δ: states × {0, 1} → states and accepts if it ends in an accepting state. Every (δ, accepting
    set) is enumerated; DFAs computing the same function on n-bit strings are one rule, kept in
    first-enumerated order, so the prior is uniform over functions (as for conjunctions).
    """
    bits = all_inputs(n_bits).astype(np.int64)
    tables, seen = [], set()
    for transitions in itertools.product(range(n_states), repeat=2 * n_states):
        delta = np.array(transitions).reshape(n_states, 2)
        state = np.zeros(len(bits), dtype=np.int64)
        for position in range(n_bits):
            state = delta[state, bits[:, position]]
        for accepting in itertools.product((False, True), repeat=n_states):
            table = np.array(accepting)[state]
            key = table.tobytes()
            if key not in seen:
                seen.add(key)
                tables.append(table)
    return np.array(tables)


RULE_CLASSES = ("conjunction", "dfa")


def rule_tables(rule_class: str, n_bits: int, dfa_states: int = 3) -> np.ndarray:
    """The hypothesis class's truth tables; ``ValueError`` naming the classes for an unknown one."""
    if rule_class == "conjunction":
        return conjunctions(n_bits)
    if rule_class == "dfa":
        return dfa_rules(n_bits, dfa_states)
    raise ValueError(f"rule_class must be one of {RULE_CLASSES}; got {rule_class!r}")


class BitsToIndex:
    """Maps bit-vector designs ``(..., n)`` to input indices (picklable, unlike a lambda)."""

    def __init__(self, n_bits: int):
        self.powers = 2 ** np.arange(n_bits - 1, -1, -1)

    def __call__(self, designs: np.ndarray) -> np.ndarray:
        return (np.rint(designs).astype(np.int64) * self.powers).sum(axis=-1)


def optimal_expected_queries(truth_tables: np.ndarray) -> float:
    """The least expected number of queries that identifies a uniformly drawn rule (noise-free).

    Dynamic programming over version spaces V (the rules consistent with the answers so far):
        Q(V) = 0 if |V| = 1,   else 1 + min_x Σ_y (|V_{x,y}| / |V|) Q(V_{x,y})
    over inputs x that split V. Exact, exponential in general; fine for a few bits.
    """
    n_rules = len(truth_tables)
    columns = [int("".join("1" if truth_tables[h, x] else "0" for h in range(n_rules)), 2)
               for x in range(truth_tables.shape[1])]

    @cache
    def queries(version_space: int) -> float:
        size = version_space.bit_count()
        if size == 1:
            return 0.0
        best = np.inf
        for column in columns:
            positive = version_space & column
            negative = version_space & ~column
            if positive and negative:
                best = min(best, 1.0 + (positive.bit_count() * queries(positive)
                                        + negative.bit_count() * queries(negative)) / size)
        return best

    return queries((1 << n_rules) - 1)


class RuleDiscoveryEnv(CuriosityEnv):
    """
    ## Description
    Symbolic rule discovery. Each episode draws a rule h uniformly from a finite hypothesis class
    over inputs of ``n_bits`` bits, chosen by ``rule_class``:

    * ``"conjunction"``: the conjunctions of literals (each bit absent, required 1, or required 0:
      3^n rules, all distinct functions);
    * ``"dfa"``: the distinct functions computed by deterministic finite automata with at most
      ``dfa_states`` states reading the bits in order (``dfa_rules``; with 4 bits, 2 states give 18
      rules, e.g. parity or "ends in 1", and 3 states give 666, e.g. "the number of ones is 0 mod 3").

    A design is one of the 2^n inputs; the outcome is h(x), flipped with probability ``flip_prob``
    (default 0: noise-free). The exact posterior is computed by enumeration over the rules
    (``EnumerationLearner``).

    ## Action Space
    ``Discrete(2^n)``: the input to query, as the integer whose binary expansion (most significant
    bit first) is the bit vector.

    ## Observation Space
    ``Dict``: ``designs`` ``Box(0, 1, (T, n))`` (the queried bit vectors, zero-padded), ``outcomes``
    ``Box(0, 1, (T,))`` (the answers), ``steps`` ``Discrete(T + 1)``.

    ## Rewards
    ``icl_lp`` (default), ``true_lp``, ``info_gain`` (exact: H(p(y|x,C)) − E_h H(p(y|x,h))), ``none``.
    Probes for the LP rewards: ``n_probes`` inputs drawn uniformly at reset, answered by h.

    ## Starting State
    Empty history; h and the probes drawn from ``reset(seed=...)``.

    ## Episode End
    Terminates after T = ``horizon`` queries (default 2^n). ``info["privileged"]["identified"]``
    turns true once the posterior puts all its mass (1 − 1e-9) on h.

    ## Arguments
    ``n_bits=4``, ``horizon=None`` (2^n), ``reward_mode="icl_lp"``, ``learner=None`` (default the
    exact enumeration learner), ``n_probes=16``, ``flip_prob=0.0``, ``rule_class="conjunction"``
    (or ``"dfa"``), ``dfa_states=3`` (1..3),
    ``record_true_lp=True`` (False skips the exact LP in ``info`` when it is not the reward).

    ## Version History
    * v0: initial version; ``rule_class="dfa"`` added later (the default class is unchanged).
    """

    exact_learner: EnumerationLearner

    def __init__(self, n_bits: int = 4, horizon: int | None = None, reward_mode: str = "icl_lp",
                 learner: InContextLearner | None = None, n_probes: int = 16, flip_prob: float = 0.0,
                 record_true_lp: bool = True, rule_class: str = "conjunction", dfa_states: int = 3):
        if not 1 <= n_bits <= 8:
            raise ValueError(f"n_bits must be in 1..8; got {n_bits}")
        if not 0.0 <= flip_prob < 0.5:
            raise ValueError(f"flip_prob must be in [0, 0.5); got {flip_prob}")
        if not 1 <= dfa_states <= 3:
            raise ValueError(f"dfa_states must be in 1..3 (the class is enumerated); got {dfa_states}")
        self.n_bits = n_bits
        self.design_dim = n_bits
        self.flip_prob = flip_prob
        self.rule_class = rule_class
        self.inputs = all_inputs(n_bits)
        self.truth_tables = rule_tables(rule_class, n_bits, dfa_states)
        positive = np.where(self.truth_tables, 1.0 - flip_prob, flip_prob)
        self.likelihood = np.stack([1.0 - positive, positive], axis=-1)  # L[h, x, y]
        prior = np.full(len(self.truth_tables), 1.0 / len(self.truth_tables))
        self.exact_learner = EnumerationLearner(self.likelihood, prior, BitsToIndex(n_bits), design_dim=n_bits)
        super().__init__(horizon=horizon or 2 ** n_bits, reward_mode=reward_mode, learner=learner,
                         n_probes=n_probes, design_low=np.zeros(n_bits), design_high=np.ones(n_bits),
                         outcome_low=0.0, outcome_high=1.0, record_true_lp=record_true_lp)
        self.action_space = spaces.Discrete(2 ** n_bits)

    def _draw_theta(self, rng: np.random.Generator) -> int:
        return int(rng.integers(len(self.truth_tables)))

    def design_of(self, action: Any) -> np.ndarray:
        return self.inputs[check_discrete_action(action, 2 ** self.n_bits)]

    def _truth(self, designs: np.ndarray) -> CategoricalPredictive:
        return CategoricalPredictive(self.likelihood[self._theta, self.exact_learner.design_index(designs)][None])

    def draw_probe_designs(self, rng: np.random.Generator) -> np.ndarray:
        return self.inputs[rng.integers(len(self.inputs), size=self.n_probes)]

    def posterior(self) -> np.ndarray:
        """p(h | C) over the rules of the class."""
        context_x, context_y, mask = self._context_batch()
        return np.exp(self.exact_learner.log_posterior(context_x, context_y, mask)[0])

    def information_gain(self, design: np.ndarray) -> float:
        return float(self.exact_learner.information_gain(*self._context_batch(), design[None])[0])

    def step(self, action: Any):
        observation, reward, terminated, truncated, info = super().step(action)
        info["privileged"]["identified"] = bool(self.posterior()[self._theta] >= IDENTIFIED)
        return observation, reward, terminated, truncated, info

    def theta_json(self) -> dict[str, Any]:
        return {"rule": self._theta, "truth_table": self.truth_tables[self._theta].astype(int).tolist()}
