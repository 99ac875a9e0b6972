"""ActiveRegression-v0: choose where to measure an unknown function with a Bayesian linear-basis prior."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from gauntlet.envs.curiosity.base import OUTCOME_BOUND, CuriosityEnv, check_box_design
from gauntlet.envs.curiosity.learners import BayesianLinearLearner, InContextLearner
from gauntlet.envs.curiosity.predictive import GaussianPredictive


class RBFFeatures:
    """φ_k(x) = exp(−(x − c_k)² / (2 ℓ²)) for centres c_k evenly spaced on [−1, 1]."""

    def __init__(self, n_features: int, length_scale: float):
        self.centres = np.linspace(-1.0, 1.0, n_features)
        self.length_scale = length_scale

    def __call__(self, designs: np.ndarray) -> np.ndarray:
        return np.exp(-0.5 * ((designs[..., :1] - self.centres) / self.length_scale) ** 2)


class ActiveRegressionEnv(CuriosityEnv):
    """
    ## Description
    Active learning of a 1-D function. Each episode draws weights w ~ N(0, s_w² I) of
    f_w(x) = Σ_k w_k φ_k(x) with Gaussian radial basis functions φ_k (centres evenly spaced on
    [−1, 1], length scale ℓ). The agent picks query points x_t; it observes y_t = f_w(x_t) + ε,
    ε ~ N(0, σ²). The posterior over w is Gaussian and exact (``BayesianLinearLearner``).

    ## Action Space
    ``Box(-1, 1, (1,), float32)``: the query point x_t.

    ## Observation Space
    ``Dict``: ``designs`` ``Box(-1, 1, (T, 1))`` (queries so far, zero-padded), ``outcomes``
    ``Box(-1000, 1000, (T,))`` (their outcomes, zero-padded), ``steps`` ``Discrete(T + 1)`` (how many
    rows are real).

    ## Rewards
    By ``reward_mode`` (see ``gauntlet.envs.curiosity.base``): ``icl_lp`` (default), ``true_lp``,
    ``info_gain`` (exact here: ½ log(1 + φ(x)ᵀ S φ(x) / σ²)), ``none``. Probe queries for the LP
    rewards: ``n_probes`` points uniform on [−1, 1], drawn at reset, outcomes drawn from f_w + noise.

    ## Starting State
    Empty history; w and the probes drawn from ``reset(seed=...)``.

    ## Episode End
    Terminates after T = ``horizon`` queries (default 20).

    ## Arguments
    ``horizon=20``, ``reward_mode="icl_lp"``, ``learner=None`` (any ``InContextLearner`` with
    ``design_dim == 1``; default the exact Bayesian learner), ``n_probes=64``, ``n_features=8``,
    ``length_scale=0.3``, ``weight_std=1.0``, ``noise_std=0.2``,
    ``record_true_lp=True`` (False skips the exact LP in ``info`` when it is not the reward).
    ``info["privileged"]``: ``theta`` (w), ``true_lp``, and ``icl_lp`` / ``info_gain`` when they are
    the reward.

    ## Version History
    * v0: initial version.
    """

    design_dim = 1
    exact_learner: BayesianLinearLearner

    def __init__(self, horizon: int = 20, reward_mode: str = "icl_lp", learner: InContextLearner | None = None,
                 n_probes: int = 64, n_features: int = 8, length_scale: float = 0.3, weight_std: float = 1.0,
                 noise_std: float = 0.2, record_true_lp: bool = True):
        self.features = RBFFeatures(n_features, length_scale)
        self.weight_std = weight_std
        self.noise_std = noise_std
        self.exact_learner = BayesianLinearLearner(self.features, n_features, weight_std=weight_std,
                                                   noise_std=noise_std, design_dim=1)
        super().__init__(horizon=horizon, reward_mode=reward_mode, learner=learner, n_probes=n_probes,
                         design_low=np.array([-1.0]), design_high=np.array([1.0]),
                         outcome_low=-OUTCOME_BOUND, outcome_high=OUTCOME_BOUND,
                         record_true_lp=record_true_lp)
        self.action_space = spaces.Box(-1.0, 1.0, (1,), dtype=np.float32)
        self._low, self._high = np.array([-1.0]), np.array([1.0])

    def _draw_theta(self, rng: np.random.Generator) -> np.ndarray:
        return self.weight_std * rng.standard_normal(self.features.centres.size)

    def design_of(self, action: Any) -> np.ndarray:
        return check_box_design(action, self._low, self._high)

    def _truth(self, designs: np.ndarray) -> GaussianPredictive:
        mean = self.features(designs) @ self._theta
        return GaussianPredictive(mean[None], np.full((1, len(designs)), self.noise_std ** 2))

    def draw_probe_designs(self, rng: np.random.Generator) -> np.ndarray:
        return rng.uniform(-1.0, 1.0, (self.n_probes, 1))

    def information_gain(self, design: np.ndarray) -> float:
        # I(w; y | x, C) = ½ log(1 + φ(x)ᵀ S_N φ(x) / σ²) for a Gaussian posterior N(m_N, S_N).
        context_x, context_y, mask = self._context_batch()
        _, covariance = self.exact_learner.posterior(context_x, context_y, mask)
        phi = self.features(design[None])[0]
        return float(0.5 * np.log1p(phi @ covariance[0] @ phi / self.noise_std ** 2))

    def theta_json(self) -> list[float]:
        return self._theta.tolist()
