"""LocationFinding-v0: find K hidden sources from noisy log-intensity measurements (the DAD benchmark)."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from scipy.special import logsumexp

from gauntlet.envs.curiosity.base import OUTCOME_BOUND, CuriosityEnv, check_box_design
from gauntlet.envs.curiosity.learners import InContextLearner, ParticleLearner
from gauntlet.envs.curiosity.location_finding_model import (DESIGN_BOUND, LOCATION_FINDING, LocationFindingModel,
                                                            SourceIntensity)
from gauntlet.envs.curiosity.predictive import GaussianPredictive

# SourceIntensity is the env's mean function; importing it from here keeps working.
__all__ = ["LocationFindingEnv", "SourceIntensity", "particle_information_gain"]

_EIG_CHUNK = 16


def particle_information_gain(learner: ParticleLearner, context_x: np.ndarray, context_y: np.ndarray,
                              candidates: np.ndarray, *, n_outer: int, rng: np.random.Generator) -> np.ndarray:
    """I(θ; y | ξ, C) for each candidate ``(M, 2)`` under the particle posterior; returns ``(M,)``.

    Nested Monte Carlo (Foster et al. 2021, DAD, eq. 3, with the particle posterior as the prior):
        EIG(ξ) ≈ (1/S) Σ_s [ log N(y_s; μ(ξ,θ_s), σ²) − log Σ_p w_p N(y_s; μ(ξ,θ_p), σ²) ],
        θ_s ~ p(θ | C) (particles resampled by weight),  y_s ~ N(μ(ξ,θ_s), σ²)
    The same θ_s and noise draws serve every candidate (common random numbers), so candidates are
    compared on equal terms.
    """
    context_x, context_y, candidates, mask = learner.validate(context_x[None], context_y[None], candidates[None])
    log_w = learner.log_weights(context_x, context_y, mask)[0]
    outer = rng.choice(log_w.size, size=n_outer, p=np.exp(log_w))
    noise = learner.noise_std * rng.standard_normal(n_outer)
    sigma2 = learner.noise_std ** 2
    gains = np.empty(candidates.shape[1])
    for start in range(0, gains.size, _EIG_CHUNK):  # chunks bound the (M, S, P) intermediate
        means = learner.mean_function(candidates[0, start:start + _EIG_CHUNK], learner.particles)  # (M, P)
        ys = means[:, outer] + noise  # (M, S)
        log_marginal = logsumexp(-0.5 * (ys[..., None] - means[:, None, :]) ** 2 / sigma2 + log_w, axis=-1)
        # log N(y_s; μ(ξ,θ_s), σ²) = −noise²/(2σ²) + const; the const cancels with the marginal's.
        gains[start:start + _EIG_CHUNK] = np.mean(-0.5 * noise ** 2 / sigma2 - log_marginal, axis=-1)
    return gains


class LocationFindingEnv(CuriosityEnv):
    """
    ## Description
    The location-finding benchmark of Deep Adaptive Design (Foster et al. 2021). K = 2 sources
    θ_k ~ N(0, I₂) hide in the plane. A design ξ_t is a measurement point; the outcome is
        y = log(b + Σ_k 1 / (m + ‖ξ − θ_k‖²)) + N(0, σ²),   b = 0.1, m = 1e-4, σ = 0.5,
    for T = 30 designs (the model, ``LocationFindingModel``, and μ in NumPy and torch live in
    ``location_finding_model.py``, which the curiosity agents train against). The posterior over θ has
    no closed form; the Bayesian learner is self-normalised importance sampling with ``n_particles``
    prior particles drawn once from ``particle_seed`` (``ParticleLearner``), exact as the number of
    particles grows.

    ## Action Space
    ``Box(-1, 1, (2,), float32)``: the measurement point in units of 4, ξ_t = 4 a_t (DAD leaves
    designs unbounded; the square [−4, 4]² holds all but ~1e-4 of each source's prior mass per
    coordinate). Observations and ``info["privileged"]["design"]`` report ξ_t itself.

    ## Observation Space
    ``Dict``: ``designs`` ``Box(-4, 4, (T, 2))``, ``outcomes`` ``Box(-1000, 1000, (T,))``, ``steps``
    ``Discrete(T + 1)`` (rows beyond ``steps`` are zero).

    ## Rewards
    ``icl_lp`` (default), ``true_lp``, ``info_gain`` (EIG of the design under the particle posterior,
    ``particle_information_gain``), ``none``. Probe designs for the LP rewards: ``n_probes`` points
    from N(0, I₂) (where the sources are), clipped to the design box, drawn at reset.

    ## Starting State
    Empty history; θ and the probes drawn from ``reset(seed=...)``.

    ## Episode End
    Terminates after T = ``horizon`` designs (default 30).

    ## Arguments
    ``horizon=30``, ``reward_mode="icl_lp"``, ``learner=None`` (default the particle learner),
    ``n_probes=32``, ``n_sources=2``, ``noise_std=0.5``, ``background=0.1``, ``max_signal=1e-4``,
    ``n_particles=4096``, ``particle_seed=0``, ``n_outer=256`` (outer samples of the EIG reward),
    ``record_true_lp=True`` (False skips the exact LP in ``info`` when it is not the reward).

    ## Version History
    * v0: initial version.
    """

    design_dim = 2

    def __init__(self, horizon: int = LOCATION_FINDING.horizon, reward_mode: str = "icl_lp",
                 learner: InContextLearner | None = None, n_probes: int = 32,
                 n_sources: int = LOCATION_FINDING.n_sources, noise_std: float = LOCATION_FINDING.noise_std,
                 background: float = LOCATION_FINDING.background, max_signal: float = LOCATION_FINDING.max_signal,
                 n_particles: int = 4096, particle_seed: int = 0, n_outer: int = 256, record_true_lp: bool = True):
        self.model = LocationFindingModel(horizon, n_sources, noise_std, background, max_signal)
        self.n_sources = n_sources
        self.noise_std = noise_std
        self.intensity = self.model.intensity
        self.n_outer = n_outer
        particles = np.random.default_rng(particle_seed).standard_normal((n_particles, n_sources, 2))
        self.exact_learner: ParticleLearner = ParticleLearner(self.intensity, particles, noise_std=noise_std,
                                                              design_dim=2)
        self._low, self._high = np.full(2, -DESIGN_BOUND), np.full(2, DESIGN_BOUND)
        super().__init__(horizon=horizon, reward_mode=reward_mode, learner=learner, n_probes=n_probes,
                         design_low=self._low, design_high=self._high,
                         outcome_low=-OUTCOME_BOUND, outcome_high=OUTCOME_BOUND, record_true_lp=record_true_lp)
        self.action_space = spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)

    def _draw_theta(self, rng: np.random.Generator) -> np.ndarray:
        return rng.standard_normal((self.n_sources, 2))

    def design_of(self, action: Any) -> np.ndarray:
        return DESIGN_BOUND * check_box_design(action, -np.ones(2), np.ones(2))

    def _truth(self, designs: np.ndarray) -> GaussianPredictive:
        mean = self.intensity(designs, self._theta[None])[:, 0]
        return GaussianPredictive(mean[None], np.full((1, len(designs)), self.noise_std ** 2))

    def draw_probe_designs(self, rng: np.random.Generator) -> np.ndarray:
        return np.clip(rng.standard_normal((self.n_probes, 2)), -DESIGN_BOUND, DESIGN_BOUND)

    def information_gain(self, design: np.ndarray) -> float:
        # A generator of its own (seeded by the step) so the reward never consumes the env's RNG.
        rng = np.random.default_rng([self._steps, *np.frombuffer(design.tobytes(), np.uint32).tolist()])
        designs, outcomes = self.context
        return float(particle_information_gain(self.exact_learner, designs, outcomes, design[None],
                                               n_outer=self.n_outer, rng=rng)[0])

    def theta_json(self) -> list[list[float]]:
        return self._theta.tolist()
