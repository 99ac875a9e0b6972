"""What the four curiosity envs share: a hidden θ, a history of designs and outcomes, LP rewards.

Each episode draws θ from the prior. An action is a design x_t (a query); the outcome is
y_t ~ p(y | x_t, θ); the observation is the whole history so far. The reward is chosen by
``reward_mode``:

``icl_lp``    the counterfactual-context estimator (``lp.icl_learning_progress``) with the env's
              learner (default: the exact Bayesian learner; any ``InContextLearner`` can be passed) on
              probe queries drawn at reset, with outcomes drawn from p(· | x̃, θ);
``true_lp``   the exact expected LP of the Bayesian learner on the same probes (``lp.true_learning_progress``);
``info_gain`` the expected information gain of the chosen design, I(θ; y_t | x_t, C_{t-1});
``none``      zero.

``info["privileged"]`` carries θ, the design, the outcome and the exact ``true_lp`` at every step
(unless ``record_true_lp=False``, which saves its cost when it is not the reward), plus ``icl_lp`` or
``info_gain`` when that is the reward; the agent never sees it.
"""

from __future__ import annotations

import copy
from abc import abstractmethod
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from gauntlet.envs.curiosity.learners import InContextLearner
from gauntlet.envs.curiosity.lp import icl_learning_progress, true_learning_progress

REWARD_MODES = ("icl_lp", "true_lp", "info_gain", "none")
# Real-valued outcomes are observed in a finite box (an outcome this far out has probability ~0 under
# every prior here); it keeps the observation space checkable.
OUTCOME_BOUND = 1000.0


class CuriosityEnv(gym.Env):
    """Base class; subclasses define the prior, the likelihood, the design space and the probes."""

    metadata = {"render_modes": []}
    design_dim: int
    exact_learner: InContextLearner

    def __init__(self, *, horizon: int, reward_mode: str, learner: InContextLearner | None, n_probes: int,
                 design_low: np.ndarray, design_high: np.ndarray, outcome_low: float, outcome_high: float,
                 record_true_lp: bool = True):
        if reward_mode not in REWARD_MODES:
            raise ValueError(f"reward_mode must be one of {REWARD_MODES}; got {reward_mode!r}")
        if horizon < 1 or n_probes < 1:
            raise ValueError(f"horizon and n_probes must be >= 1; got {horizon} and {n_probes}")
        self.horizon = int(horizon)
        self.reward_mode = reward_mode
        self.n_probes = int(n_probes)
        self.record_true_lp = record_true_lp
        self.learner = learner if learner is not None else self.exact_learner
        if self.learner.design_dim != self.design_dim:
            raise ValueError(f"the learner takes designs of dimension {self.learner.design_dim}; this env's "
                             f"designs have dimension {self.design_dim}")
        if self.learner.max_context < self.horizon:
            raise ValueError(f"the learner's maximum context ({self.learner.max_context}) is shorter than the "
                             f"horizon ({self.horizon})")
        low = np.broadcast_to(np.asarray(design_low, np.float32), (self.horizon, self.design_dim))
        high = np.broadcast_to(np.asarray(design_high, np.float32), (self.horizon, self.design_dim))
        self.observation_space = spaces.Dict({
            "designs": spaces.Box(low.copy(), high.copy(), dtype=np.float32),
            "outcomes": spaces.Box(outcome_low, outcome_high, (self.horizon,), dtype=np.float32),
            "steps": spaces.Discrete(self.horizon + 1),
            **self._extra_observation_spaces(),
        })
        self._theta: Any = None
        self._designs = np.zeros((self.horizon, self.design_dim))
        self._outcomes = np.zeros(self.horizon)
        self._steps = 0
        self._probe_x = np.zeros((self.n_probes, self.design_dim))
        self._probe_y = np.zeros(self.n_probes)

    # What each env defines -------------------------------------------------------------------------
    @abstractmethod
    def _draw_theta(self, rng: np.random.Generator) -> Any:
        """A hidden parameter from the prior."""

    @abstractmethod
    def design_of(self, action: Any) -> np.ndarray:
        """The design vector ``(D,)`` of an action; ``ValueError`` naming the action space if invalid."""

    @abstractmethod
    def _truth(self, designs: np.ndarray):
        """p(y | x, θ) at ``designs (M, D)`` as a predictive of batch shape (1, M)."""

    @abstractmethod
    def draw_probe_designs(self, rng: np.random.Generator) -> np.ndarray:
        """``(n_probes, D)`` probe designs from the probe distribution q."""

    @abstractmethod
    def information_gain(self, design: np.ndarray) -> float:
        """I(θ; y | x, C) of ``design`` given the current history (exact, or estimated where documented)."""

    @abstractmethod
    def theta_json(self) -> Any:
        """θ as plain JSON data, for ``info['privileged']``."""

    def _extra_observation_spaces(self) -> dict[str, spaces.Space]:
        return {}

    def _extra_observation(self) -> dict[str, Any]:
        return {}

    # The episode ------------------------------------------------------------------------------------
    @property
    def context(self) -> tuple[np.ndarray, np.ndarray]:
        """The history ``(designs (t, D), outcomes (t,))``."""
        return self._designs[: self._steps].copy(), self._outcomes[: self._steps].copy()

    def load_history(self, observation: dict[str, Any]) -> None:
        """Set the history from an observation of this env, for a model of it that a policy plans with."""
        steps = int(observation["steps"])
        self._designs[:] = np.asarray(observation["designs"], dtype=np.float64)
        self._outcomes[:] = np.asarray(observation["outcomes"], dtype=np.float64)
        self._steps = steps
        self._load_extra_observation(observation)

    def _load_extra_observation(self, observation: dict[str, Any]) -> None:
        """Counterpart of ``_extra_observation`` for ``load_history``."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._theta = self._draw_theta(self.np_random)
        self._designs[:] = 0.0
        self._outcomes[:] = 0.0
        self._steps = 0
        self._probe_x = self.draw_probe_designs(self.np_random)
        self._probe_y = self._truth(self._probe_x).sample(self.np_random)[0]
        return self._observation(), {"privileged": {"theta": self.theta_json()}}

    def step(self, action: Any):
        if self._theta is None:
            raise RuntimeError("call reset() before step()")
        if self._steps >= self.horizon:
            raise RuntimeError(f"the episode ended after {self.horizon} designs; call reset()")
        design = self.design_of(action)
        outcome = float(self._truth(design[None])
                        .sample(self.np_random)[0, 0])
        privileged = {"theta": self.theta_json(), "design": design.tolist(), "outcome": outcome}
        # The exact LP is recorded unless switched off; the estimator and the EIG when they are the reward.
        if self.record_true_lp or self.reward_mode == "true_lp":
            privileged["true_lp"] = self.true_lp(design, outcome)
        if self.reward_mode == "icl_lp":
            privileged["icl_lp"] = self.icl_lp(design, outcome)
        if self.reward_mode == "info_gain":
            privileged["info_gain"] = self.information_gain(design)
        reward = 0.0 if self.reward_mode == "none" else privileged[self.reward_mode]
        self._designs[self._steps] = design
        self._outcomes[self._steps] = outcome
        self._steps += 1
        self._after_step(outcome)
        terminated = self._steps >= self.horizon
        return self._observation(), float(reward), terminated, False, {"privileged": privileged}

    def _after_step(self, outcome: float) -> None:
        """Hook for envs whose state moves with the outcome (the gridworld)."""

    def _context_batch(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self._designs[None], self._outcomes[None], (np.arange(self.horizon) < self._steps)[None]

    def icl_lp(self, design: np.ndarray, outcome: float) -> float:
        """Equation (ICL-LP) of ``lp`` with this env's learner and probes, for a new point (design, outcome)."""
        context_x, context_y, mask = self._context_batch()
        return float(icl_learning_progress(self.learner, context_x, context_y, mask, design[None],
                                           np.array([outcome]), self._probe_x[None], self._probe_y[None])[0])

    def true_lp(self, design: np.ndarray, outcome: float) -> float:
        """Equation (true LP) of ``lp``: the exact learner, probe outcomes integrated under θ."""
        context_x, context_y, mask = self._context_batch()
        return float(true_learning_progress(self.exact_learner, context_x, context_y, mask, design[None],
                                            np.array([outcome]), self._probe_x[None],
                                            self._truth(self._probe_x))[0])

    def _observation(self) -> dict[str, Any]:
        return {"designs": self._designs.astype(np.float32), "outcomes": self._outcomes.astype(np.float32),
                "steps": self._steps, **self._extra_observation()}

    # Branchable ---------------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """Everything that decides the future: θ, history, probes and the RNG state (picklable)."""
        return copy.deepcopy({"theta": self._theta, "designs": self._designs, "outcomes": self._outcomes,
                              "steps": self._steps, "probe_x": self._probe_x, "probe_y": self._probe_y,
                              "rng": self.np_random.bit_generator.state, "extra": self._extra_state()})

    def restore(self, snapshot: dict[str, Any]) -> None:
        state = copy.deepcopy(snapshot)
        self._theta = state["theta"]
        self._designs, self._outcomes, self._steps = state["designs"], state["outcomes"], state["steps"]
        self._probe_x, self._probe_y = state["probe_x"], state["probe_y"]
        self.np_random.bit_generator.state = state["rng"]
        self._restore_extra(state["extra"])

    def _extra_state(self) -> Any:
        return None

    def _restore_extra(self, state: Any) -> None:
        """Counterpart of ``_extra_state``."""


def check_box_design(action: Any, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """A Box design as float64, or ``ValueError`` naming the expected shape and bounds."""
    try:
        design = np.asarray(action, dtype=np.float64).reshape(np.shape(low))
    except (TypeError, ValueError):
        raise ValueError(f"a design must be an array of shape {np.shape(low)} in [{low.tolist()}, {high.tolist()}]; "
                         f"got {action!r}") from None
    if not np.isfinite(design).all() or (design < low).any() or (design > high).any():
        raise ValueError(f"a design must be a finite array of shape {np.shape(low)} in "
                         f"[{low.tolist()}, {high.tolist()}]; got {design.tolist()}")
    return design


def check_discrete_action(action: Any, n: int) -> int:
    """A Discrete(n) action as int, or ``ValueError`` naming the space."""
    if isinstance(action, (bool, np.bool_)) or np.ndim(action) != 0:
        raise ValueError(f"the action must be an integer in Discrete({n}); got {action!r}")
    try:
        value = float(action)
    except (TypeError, ValueError):
        raise ValueError(f"the action must be an integer in Discrete({n}); got {action!r}") from None
    if not np.isfinite(value) or value != int(value) or not 0 <= value < n:
        raise ValueError(f"the action must be an integer in Discrete({n}); got {action!r}")
    return int(value)
