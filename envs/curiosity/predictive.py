"""Predictive distributions: what an in-context learner returns for a batch of queries.

Every distribution has a batch shape ``(B, M)`` (B contexts, M queries per context) and gives
``log_prob(y)`` for outcomes of that shape, plus ``expected_log_prob(truth)``: the expectation of
``log_prob(y)`` when ``y`` is drawn from ``truth`` (the data-generating distribution of the hidden
parameter), computed exactly (Gaussian, categorical) or by Gauss-Hermite quadrature (mixtures).
That expectation is what makes the *true* learning progress computable without sampling.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

_LOG_2PI = float(np.log(2.0 * np.pi))
# Gauss-Hermite nodes for E_{y ~ N(m, s^2)}[g(y)] = (1/sqrt(pi)) sum_i w_i g(m + sqrt(2) s z_i).
_HERMITE_NODES, _HERMITE_WEIGHTS = np.polynomial.hermite.hermgauss(16)


@dataclass
class GaussianPredictive:
    """Independent normals ``N(mean, variance)`` with batch shape ``mean.shape``."""

    mean: np.ndarray
    variance: np.ndarray

    def log_prob(self, y: np.ndarray) -> np.ndarray:
        return -0.5 * (_LOG_2PI + np.log(self.variance) + (y - self.mean) ** 2 / self.variance)

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        return self.mean + np.sqrt(self.variance) * rng.standard_normal(self.mean.shape)

    def entropy(self) -> np.ndarray:
        return 0.5 * (_LOG_2PI + 1.0 + np.log(self.variance))

    def expected_log_prob(self, truth: GaussianPredictive) -> np.ndarray:
        # E_{y ~ N(m0, s0^2)}[log N(y; m, v)] = -1/2 [log 2 pi v + ((m0 - m)^2 + s0^2) / v]
        return -0.5 * (_LOG_2PI + np.log(self.variance)
                       + ((truth.mean - self.mean) ** 2 + truth.variance) / self.variance)


@dataclass
class GaussianMixturePredictive:
    """A mixture of normals with shared variance: weights ``(B, P)``, means ``(B, M, P)``.

    The posterior predictive of a particle (importance-sampling) learner: component p is the
    likelihood under particle p, weighted by that particle's normalised posterior weight.
    """

    log_weights: np.ndarray  # (B, P), normalised: logsumexp over P is 0
    means: np.ndarray  # (B, M, P)
    variance: float

    @property
    def mean(self) -> np.ndarray:
        return np.einsum("bp,bmp->bm", np.exp(self.log_weights), self.means)

    @property
    def total_variance(self) -> np.ndarray:
        weights = np.exp(self.log_weights)[:, None, :]
        second_moment = np.sum(weights * self.means ** 2, axis=-1)
        return second_moment - self.mean ** 2 + self.variance

    def log_prob(self, y: np.ndarray) -> np.ndarray:
        log_components = -0.5 * (_LOG_2PI + np.log(self.variance) + (y[..., None] - self.means) ** 2 / self.variance)
        return logsumexp(self.log_weights[:, None, :] + log_components, axis=-1)

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        batch, queries, _ = self.means.shape
        weights = np.exp(self.log_weights)
        samples = np.empty((batch, queries))
        for b in range(batch):
            component = rng.choice(weights.shape[1], size=queries, p=weights[b] / weights[b].sum())
            samples[b] = self.means[b, np.arange(queries), component]
        return samples + np.sqrt(self.variance) * rng.standard_normal((batch, queries))

    def expected_log_prob(self, truth: GaussianPredictive) -> np.ndarray:
        points = truth.mean[..., None] + np.sqrt(2.0 * truth.variance)[..., None] * _HERMITE_NODES  # (B, M, Q)
        values = np.stack([self.log_prob(points[..., q]) for q in range(points.shape[-1])], axis=-1)
        return values @ _HERMITE_WEIGHTS / np.sqrt(np.pi)


@dataclass
class CategoricalPredictive:
    """Categorical outcomes ``0..K-1``: probabilities of shape ``(B, M, K)``."""

    probs: np.ndarray

    def log_prob(self, y: np.ndarray) -> np.ndarray:
        chosen = np.take_along_axis(self.probs, np.asarray(y, dtype=np.int64)[..., None], axis=-1)[..., 0]
        with np.errstate(divide="ignore"):
            return np.log(chosen)

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        cumulative = np.cumsum(self.probs, axis=-1)
        uniform = rng.random(self.probs.shape[:-1])[..., None]
        return np.minimum((uniform > cumulative).sum(axis=-1), self.probs.shape[-1] - 1)

    def entropy(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(self.probs > 0, self.probs * np.log(self.probs), 0.0)
        return -terms.sum(axis=-1)

    def expected_log_prob(self, truth: CategoricalPredictive) -> np.ndarray:
        # sum_k p_truth(k) log p(k); outcomes impossible under the truth contribute nothing.
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(truth.probs > 0, truth.probs * np.log(self.probs), 0.0)
        return terms.sum(axis=-1)
