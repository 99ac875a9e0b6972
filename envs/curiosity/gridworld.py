"""CuriousGridworld-v0: a temporal MDP whose dynamics the learner learns in context (the negative result)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from gymnasium import spaces

from gauntlet.envs.curiosity.base import CuriosityEnv, check_discrete_action
from gauntlet.envs.curiosity.learners import EnumerationLearner, InContextLearner
from gauntlet.envs.curiosity.lp import counterfactual_contexts
from gauntlet.envs.curiosity.predictive import CategoricalPredictive

MOVES = np.array([(-1, 0), (0, 1), (1, 0), (0, -1)])  # up, right, down, left


class TransitionIndex:
    """Maps designs (row, column, action) ``(..., 3)`` to the index (cell · 4 + action)."""

    def __init__(self, width: int):
        self.width = width

    def __call__(self, designs: np.ndarray) -> np.ndarray:
        cells = np.rint(designs[..., 0]).astype(np.int64) * self.width + np.rint(designs[..., 1]).astype(np.int64)
        return cells * 4 + np.rint(designs[..., 2]).astype(np.int64)


class CuriousGridworldEnv(CuriosityEnv):
    """
    ## Description
    A gridworld whose action labels are scrambled: each episode draws a hidden permutation θ of the
    four moves (up, right, down, left), so action a moves in direction θ(a). The left ``ice_columns``
    columns are ice: there the move slips to a uniformly random direction with probability
    ``slip_prob`` (aleatoric noise the learner cannot learn away). Walls keep the agent in place.
    The exact Bayesian learner enumerates the 24 permutations (``EnumerationLearner`` over
    transitions (cell, action) -> next cell).

    Unlike the other curiosity envs, this one is temporal: the next design starts where the last
    outcome left the agent. A trajectory's world model is queried where the agent is, so the
    counterfactual-context estimator here reads its probes off the trajectory:

        icl_lp_t = E_ã[ℓ(ỹ | s_{t-1}, ã, C_{t-1})] − E_ã[ℓ(ỹ' | s_t, ã, C_t)],
        ỹ ~ p(·|s_{t-1}, ã, θ),  ỹ' ~ p(·|s_t, ã, θ)

    with actions ã uniform. Its expectation is true LP plus a nuisance term, the change in the
    irreducible entropy of the transitions between s_{t-1} and s_t (positive when leaving ice,
    negative when entering it, and nonzero even once θ is known). ``true_lp`` uses probes on every
    (cell, action) pair, which no trajectory can provide. ``info["privileged"]`` carries both exact
    expectations: ``trajectory_lp_expected`` and ``nuisance``.

    ## Action Space
    ``Discrete(4)``: the action label (its direction is θ(a), hidden).

    ## Observation Space
    ``Dict``: ``designs`` ``Box(0, [H-1, W-1, 3], (T, 3))`` (row, column, action of each past step),
    ``outcomes`` ``Box(0, H·W − 1, (T,))`` (the cell each step led to, row-major), ``steps``
    ``Discrete(T + 1)``, ``position`` ``Discrete(H·W)`` (the current cell).

    ## Rewards
    ``icl_lp`` (default, the trajectory estimator above), ``true_lp``, ``info_gain`` (exact), ``none``.

    ## Starting State
    The centre cell; θ drawn from ``reset(seed=...)``.

    ## Episode End
    Terminates after T = ``horizon`` steps (default 30).

    ## Arguments
    ``size=5``, ``horizon=30``, ``reward_mode="icl_lp"``, ``learner=None`` (default exact),
    ``n_probes=16`` (trajectory probes per step), ``ice_columns=2``, ``slip_prob=0.5``,
    ``record_true_lp=True`` (False skips the exact LP in ``info`` when it is not the reward).

    ## Version History
    * v0: initial version.
    """

    design_dim = 3
    exact_learner: EnumerationLearner

    def __init__(self, size: int = 5, horizon: int = 30, reward_mode: str = "icl_lp",
                 learner: InContextLearner | None = None, n_probes: int = 16, ice_columns: int = 2,
                 slip_prob: float = 0.5, record_true_lp: bool = True):
        if size < 2 or not 0 <= ice_columns <= size or not 0.0 <= slip_prob <= 1.0:
            raise ValueError(f"need size >= 2, 0 <= ice_columns <= size, 0 <= slip_prob <= 1; got {size}, "
                             f"{ice_columns}, {slip_prob}")
        self.size = size
        self.n_cells = size * size
        self.permutations = np.array(list(itertools.permutations(range(4))))
        self.slip = np.array([slip_prob if cell % size < ice_columns else 0.0 for cell in range(self.n_cells)])
        self.likelihood = self._transition_table()  # L[θ, cell·4 + a, next cell]
        prior = np.full(len(self.permutations), 1.0 / len(self.permutations))
        self.exact_learner = EnumerationLearner(self.likelihood, prior, TransitionIndex(size), design_dim=3)
        self.trajectory_probes = n_probes
        super().__init__(horizon=horizon, reward_mode=reward_mode, learner=learner, n_probes=self.n_cells * 4,
                         design_low=np.zeros(3), design_high=np.array([size - 1, size - 1, 3]),
                         outcome_low=0.0, outcome_high=float(self.n_cells - 1),
                         record_true_lp=record_true_lp)
        self.action_space = spaces.Discrete(4)
        self._position = self._start

    @property
    def _start(self) -> int:
        return (self.size // 2) * self.size + self.size // 2

    def _neighbour(self, cell: int, direction: int) -> int:
        row, col = divmod(cell, self.size)
        new_row, new_col = row + MOVES[direction][0], col + MOVES[direction][1]
        if 0 <= new_row < self.size and 0 <= new_col < self.size:
            return new_row * self.size + new_col
        return cell

    def _transition_table(self) -> np.ndarray:
        table = np.zeros((len(self.permutations), self.n_cells * 4, self.n_cells))
        for h, permutation in enumerate(self.permutations):
            for cell in range(self.n_cells):
                for action in range(4):
                    row = table[h, cell * 4 + action]
                    row[self._neighbour(cell, permutation[action])] += 1.0 - self.slip[cell]
                    for direction in range(4):
                        row[self._neighbour(cell, direction)] += self.slip[cell] / 4
        return table

    # The CuriosityEnv hooks ------------------------------------------------------------------------------
    def _extra_observation_spaces(self) -> dict[str, spaces.Space]:
        return {"position": spaces.Discrete(self.size * self.size)}

    def _extra_observation(self) -> dict[str, Any]:
        return {"position": int(self._position)}

    def _load_extra_observation(self, observation: dict[str, Any]) -> None:
        self._position = int(observation["position"])

    def _extra_state(self) -> int:
        return int(self._position)

    def _restore_extra(self, state: int) -> None:
        self._position = state

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._position = self._start
        return super().reset(seed=seed, options=options)

    def _after_step(self, outcome: float) -> None:
        self._position = int(outcome)

    def _draw_theta(self, rng: np.random.Generator) -> int:
        return int(rng.integers(len(self.permutations)))

    def _cell_design(self, cell: int, action: int) -> np.ndarray:
        return np.array([cell // self.size, cell % self.size, action], dtype=np.float64)

    def design_of(self, action: Any) -> np.ndarray:
        return self._cell_design(self._position, check_discrete_action(action, 4))

    def _truth(self, designs: np.ndarray) -> CategoricalPredictive:
        return CategoricalPredictive(self.likelihood[self._theta, self.exact_learner.design_index(designs)][None])

    def draw_probe_designs(self, rng: np.random.Generator) -> np.ndarray:
        return np.array([self._cell_design(cell, action) for cell in range(self.n_cells) for action in range(4)])

    def information_gain(self, design: np.ndarray) -> float:
        return float(self.exact_learner.information_gain(*self._context_batch(), design[None])[0])

    # The trajectory estimator ------------------------------------------------------------------------------
    def _trajectory_probes(self, cell: int, actions: np.ndarray) -> np.ndarray:
        return np.array([self._cell_design(cell, a) for a in actions])

    def icl_lp(self, design: np.ndarray, outcome: float) -> float:
        """The trajectory estimator (class docstring): probes from s_{t-1} before, from s_t after."""
        actions = self.np_random.integers(4, size=self.trajectory_probes)
        before = self._trajectory_probes(self._position, actions)
        after = self._trajectory_probes(int(outcome), actions)
        y_before = self._truth(before).sample(self.np_random)
        y_after = self._truth(after).sample(self.np_random)
        loss = self._counterfactual_losses(design, outcome, before, after,
                                           lambda predictive: -predictive.log_prob(np.concatenate([y_before, y_after])))
        return float(loss[0].mean() - loss[1].mean())

    def trajectory_lp_expected(self, design: np.ndarray, outcome: float) -> float:
        """E[icl_lp_t] for the exact learner: probe outcomes and actions integrated exactly."""
        actions = np.arange(4)
        before = self._trajectory_probes(self._position, actions)
        after = self._trajectory_probes(int(outcome), actions)
        truth = CategoricalPredictive(np.concatenate([self._truth(before).probs, self._truth(after).probs]))
        loss = self._counterfactual_losses(design, outcome, before, after,
                                           lambda predictive: -predictive.expected_log_prob(truth),
                                           learner=self.exact_learner)
        return float(loss[0].mean() - loss[1].mean())

    def nuisance(self, outcome: float) -> float:
        """E_a H(p(·|s_{t-1}, a, θ)) − E_a H(p(·|s_t, a, θ)): irreducible entropy left behind minus met."""
        actions = np.arange(4)
        before = self._truth(self._trajectory_probes(self._position, actions)).entropy().mean()
        after = self._truth(self._trajectory_probes(int(outcome), actions)).entropy().mean()
        return float(before - after)

    def _counterfactual_losses(self, design, outcome, before, after, loss_of, learner=None) -> np.ndarray:
        """Losses ``(2, M)``: probes ``before`` under C_{t-1}, probes ``after`` under C_t, one batched call."""
        context_x, context_y, mask = self._context_batch()
        both_x, both_y, both_mask = counterfactual_contexts(context_x, context_y, mask, design[None],
                                                            np.array([outcome]))
        predictive = (learner or self.learner).predict(both_x, both_y, np.stack([before, after]), both_mask)
        return loss_of(predictive)

    def step(self, action: Any):
        design = self.design_of(action)
        # Exact diagnostics need the outcome, so they are added after the base step, from a snapshot
        # of the pre-step history (the base step appends the new point).
        context = (self._designs.copy(), self._outcomes.copy(), self._steps, self._position)
        observation, reward, terminated, truncated, info = super().step(action)
        after = (self._designs, self._outcomes, self._steps, self._position)
        self._designs, self._outcomes, self._steps, self._position = context
        outcome = info["privileged"]["outcome"]
        info["privileged"]["trajectory_lp_expected"] = self.trajectory_lp_expected(design, outcome)
        info["privileged"]["nuisance"] = self.nuisance(outcome)
        self._designs, self._outcomes, self._steps, self._position = after
        return observation, reward, terminated, truncated, info

    def theta_json(self) -> list[int]:
        return self.permutations[self._theta].tolist()
