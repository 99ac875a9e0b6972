"""In-context learners: ``predict(context, queries) -> distribution``, no parameter update.

An in-context learner (ICL) maps a context ``C = {(x_i, y_i)}`` and query designs ``x`` to a
predictive distribution ``p(y | x, C)``. The ideal ICL is the exact Bayesian posterior predictive

    p(y | x, C) = ∫ p(y | x, θ) p(θ | C) dθ,        p(θ | C) ∝ p(θ) Π_i p(y_i | x_i, θ)      (Bayes)

and this module holds it for each env's prior, computed

* in closed form (Bayesian linear-basis regression: Gaussian prior, Gaussian noise),
* by enumeration (finite hypothesis classes: Boolean rules, gridworld dynamics),
* by self-normalised importance sampling with a fixed set of prior particles (location finding,
  where no closed form exists; exact as the number of particles grows).

Shapes, for a batch of B contexts of at most N points and M queries each: ``context_x (B, N, D)``,
``context_y (B, N)``, ``context_mask (B, N)`` (True where a context row is real), ``queries (B, M, D)``.
The mask is what lets the learning-progress estimator evaluate a context with and without its last
point in one batched call.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.special import logsumexp

from gauntlet.envs.curiosity.predictive import (CategoricalPredictive, GaussianMixturePredictive,
                                               GaussianPredictive)


class InContextLearner(ABC):
    """The interface: ``predict(context_x, context_y, queries, context_mask=None) -> distribution``."""

    design_dim: int
    max_context: int

    def predict(self, context_x: np.ndarray, context_y: np.ndarray, queries: np.ndarray,
                context_mask: np.ndarray | None = None) -> Any:
        """The predictive distribution of the outcomes at ``queries`` given each context (batch (B, M))."""
        context_x, context_y, queries, context_mask = self.validate(context_x, context_y, queries, context_mask)
        return self._predict(context_x, context_y, queries, context_mask)

    @abstractmethod
    def _predict(self, context_x: np.ndarray, context_y: np.ndarray, queries: np.ndarray,
                 context_mask: np.ndarray) -> Any:
        """``predict`` on validated arrays."""

    def validate(self, context_x: Any, context_y: Any, queries: Any, context_mask: Any = None):
        """Arrays as float64 with checked shapes; ``ValueError`` naming the expected shapes otherwise."""
        context_x = np.asarray(context_x, dtype=np.float64)
        context_y = np.asarray(context_y, dtype=np.float64)
        queries = np.asarray(queries, dtype=np.float64)
        d = self.design_dim
        if context_x.ndim != 3 or context_x.shape[-1] != d:
            raise ValueError(f"context_x must have shape (B, N, {d}); got {context_x.shape}")
        batch, length = context_x.shape[:2]
        if context_y.shape != (batch, length):
            raise ValueError(f"context_y must have shape (B, N) = ({batch}, {length}); got {context_y.shape}")
        if queries.ndim != 3 or queries.shape[0] != batch or queries.shape[-1] != d:
            raise ValueError(f"queries must have shape (B, M, {d}) with B = {batch}; got {queries.shape}")
        if context_mask is None:
            context_mask = np.ones((batch, length), dtype=bool)
        context_mask = np.asarray(context_mask, dtype=bool)
        if context_mask.shape != (batch, length):
            raise ValueError(f"context_mask must have shape (B, N) = ({batch}, {length}); got {context_mask.shape}")
        longest = int(context_mask.sum(axis=1).max(initial=0))
        if longest > self.max_context:
            raise ValueError(f"context of {longest} points is longer than this learner's maximum of "
                             f"{self.max_context}")
        if not (np.isfinite(context_x[context_mask]).all() and np.isfinite(context_y[context_mask]).all()
                and np.isfinite(queries).all()):
            raise ValueError("context and queries must be finite (no NaN or inf)")
        return context_x, context_y, queries, context_mask


class BayesianLinearLearner(InContextLearner):
    """Exact posterior predictive of Bayesian linear-basis regression (closed form).

    Model: y = φ(x)ᵀw + ε, w ~ N(0, s_w² I), ε ~ N(0, σ²). Posterior (Bishop PRML eq. 3.50-3.51):
        S_N⁻¹ = I / s_w² + ΦᵀΦ / σ²,    m_N = S_N Φᵀ y / σ²
    Predictive (PRML eq. 3.58-3.59): N(φ(x)ᵀ m_N, σ² + φ(x)ᵀ S_N φ(x)).
    """

    def __init__(self, features: Callable[[np.ndarray], np.ndarray], n_features: int, *, weight_std: float,
                 noise_std: float, design_dim: int = 1, max_context: int = 1024):
        self.features = features
        self.n_features = n_features
        self.weight_std = weight_std
        self.noise_std = noise_std
        self.design_dim = design_dim
        self.max_context = max_context

    def posterior(self, context_x: np.ndarray, context_y: np.ndarray, context_mask: np.ndarray):
        """Posterior mean ``(B, F)`` and covariance ``(B, F, F)`` of the weights."""
        phi = self.features(context_x) * context_mask[..., None]  # masked rows contribute nothing
        noise_var = self.noise_std ** 2
        precision = np.eye(self.n_features) / self.weight_std ** 2 + np.einsum("bnf,bng->bfg", phi, phi) / noise_var
        covariance = np.linalg.inv(precision)
        mean = np.einsum("bfg,bg->bf", covariance, np.einsum("bnf,bn->bf", phi, context_y * context_mask)) / noise_var
        return mean, covariance

    def _predict(self, context_x, context_y, queries, context_mask) -> GaussianPredictive:
        mean_w, cov_w = self.posterior(context_x, context_y, context_mask)
        phi = self.features(queries)
        mean = np.einsum("bmf,bf->bm", phi, mean_w)
        variance = np.einsum("bmf,bfg,bmg->bm", phi, cov_w, phi) + self.noise_std ** 2
        return GaussianPredictive(mean, variance)


class EnumerationLearner(InContextLearner):
    """Exact posterior predictive over a finite hypothesis class, by enumeration.

    Designs index a finite set of inputs (``design_index`` maps a design vector to its index) and
    outcomes are categories ``0..K-1``. With the table ``L[h, x, y] = p(y | x, h)`` and prior π:
        p(h | C) ∝ π_h Π_i L[h, x_i, y_i],     p(y | x, C) = Σ_h p(h | C) L[h, x, y].
    """

    def __init__(self, likelihood: np.ndarray, prior: np.ndarray, design_index: Callable[[np.ndarray], np.ndarray],
                 *, design_dim: int, max_context: int = 1024):
        self.likelihood = likelihood
        with np.errstate(divide="ignore"):
            self.log_likelihood = np.log(likelihood)
            self.log_prior = np.log(prior)
        self.design_index = design_index
        self.design_dim = design_dim
        self.max_context = max_context

    def log_posterior(self, context_x: np.ndarray, context_y: np.ndarray, context_mask: np.ndarray) -> np.ndarray:
        """Normalised log posterior over hypotheses, ``(B, H)``; ``ValueError`` for an impossible context."""
        index = self.design_index(context_x)  # (B, N)
        outcome = np.where(context_mask, context_y, 0).astype(np.int64)
        per_point = self.log_likelihood[:, index, outcome]  # (H, B, N)
        per_point = np.where(context_mask[None], per_point, 0.0)
        joint = self.log_prior[:, None] + per_point.sum(axis=-1)  # (H, B)
        normaliser = logsumexp(joint, axis=0)
        if not np.isfinite(normaliser).all():
            raise ValueError("a context has probability zero under every hypothesis of this learner")
        return (joint - normaliser).T

    def information_gain(self, context_x: np.ndarray, context_y: np.ndarray, context_mask: np.ndarray,
                         designs: np.ndarray) -> np.ndarray:
        """I(h; y | x, C) = H(p(y | x, C)) − Σ_h p(h | C) H(p(y | x, h)) for one context and designs ``(M, D)``."""
        posterior = np.exp(self.log_posterior(context_x, context_y, context_mask)[0])  # (H,)
        per_hypothesis = CategoricalPredictive(self.likelihood[:, self.design_index(designs)])  # (H, M, K)
        marginal = CategoricalPredictive(np.einsum("h,hmk->mk", posterior, per_hypothesis.probs))
        return marginal.entropy() - posterior @ per_hypothesis.entropy()

    def _predict(self, context_x, context_y, queries, context_mask) -> CategoricalPredictive:
        posterior = np.exp(self.log_posterior(context_x, context_y, context_mask))  # (B, H)
        table = self.likelihood[:, self.design_index(queries)]  # (H, B, M, K)
        return CategoricalPredictive(np.einsum("bh,hbmk->bmk", posterior, table))


class ParticleLearner(InContextLearner):
    """Posterior predictive by self-normalised importance sampling from the prior.

    Particles θ_1..θ_P ~ p(θ) are drawn once (seeded), so the learner is a deterministic function of
    the context. With Gaussian observation noise σ and mean function μ(x, θ):
        w_p ∝ Π_i N(y_i; μ(x_i, θ_p), σ²),     p(y | x, C) ≈ Σ_p w_p N(y; μ(x, θ_p), σ²)
    which converges to the exact posterior predictive as P grows (the approximation is documented in
    docs/curiosity.md: late in an episode the effective sample size shrinks).
    """

    def __init__(self, mean_function: Callable[[np.ndarray, np.ndarray], np.ndarray], particles: np.ndarray,
                 *, noise_std: float, design_dim: int, max_context: int = 1024):
        self.mean_function = mean_function  # (designs (..., D), particles (P, ...)) -> (..., P)
        self.particles = particles
        self.noise_std = noise_std
        self.design_dim = design_dim
        self.max_context = max_context

    def log_weights(self, context_x: np.ndarray, context_y: np.ndarray, context_mask: np.ndarray) -> np.ndarray:
        """Normalised log importance weights ``(B, P)``."""
        means = self.mean_function(context_x, self.particles)  # (B, N, P)
        log_lik = -0.5 * (context_y[..., None] - means) ** 2 / self.noise_std ** 2
        log_lik = np.where(context_mask[..., None], log_lik, 0.0).sum(axis=1)
        return log_lik - logsumexp(log_lik, axis=-1, keepdims=True)

    def effective_sample_size(self, context_x, context_y, context_mask=None) -> np.ndarray:
        context_x, context_y, _, context_mask = self.validate(context_x, context_y,
                                                              np.zeros((len(context_x), 1, self.design_dim)),
                                                              context_mask)
        log_w = self.log_weights(context_x, context_y, context_mask)
        return np.exp(-logsumexp(2 * log_w, axis=-1))

    def _predict(self, context_x, context_y, queries, context_mask) -> GaussianMixturePredictive:
        return GaussianMixturePredictive(self.log_weights(context_x, context_y, context_mask),
                                         self.mean_function(queries, self.particles), self.noise_std ** 2)
