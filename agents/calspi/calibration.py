"""Calibration of ensemble disagreement with a Wilks tolerance bound (the Cal-SPI certificate).

Nonconformity score of a held-out transition (s, a, s', r) under the elite ensemble:

    score_i = || (y_i - mu(s_i, a_i)) / (sigma(s_i, a_i) + eps) ||_inf          (nonconformity score)

where y = (s' - s, r), mu is the elites' mean prediction and sigma their disagreement (the standard
deviation of the elites' means). For n exchangeable scores, the k-th order statistic X_(k) covers
a fraction F(X_(k)) ~ Beta(k, n - k + 1) of the score distribution, so

    P(F(X_(k)) >= p) = P(Binomial(n, p) <= k - 1)                                (Wilks 1941)

and the threshold is the smallest k with that probability >= gamma. The certificate: "with
probability >= gamma over the calibration draw, at least a fraction p of one-step errors at states
like the calibration states satisfy |error_j| <= q_hat * (sigma_j + eps) in every coordinate j".
The largest order statistic (k = n) needs 1 - p^n >= gamma, i.e. n >= log(1 - gamma) / log(p): 59 for
p = gamma = 0.95.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

DISAGREEMENT_FLOOR = 1e-6


def _check_probability(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and 0.0 < float(value) < 1.0):
        raise ValueError(f"{name} must be a probability strictly between 0 and 1, got {value!r}")


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(Binomial(n, p) <= k), summed in log space (exact up to float rounding)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    log_terms = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                 + i * math.log(p) + (n - i) * math.log1p(-p) for i in range(k + 1)]
    peak = max(log_terms)
    return min(1.0, math.exp(peak) * sum(math.exp(t - peak) for t in log_terms))


def min_calibration_size(p: float, gamma: float) -> int:
    """Smallest n for which a Wilks bound at coverage ``p`` and confidence ``gamma`` exists.

    Even the largest of n scores covers a fraction >= p only with probability 1 - p^n, so
    n >= log(1 - gamma) / log(p) (59 for p = gamma = 0.95).
    """
    _check_probability("coverage p", p)
    _check_probability("confidence gamma", gamma)
    n = max(1, math.ceil(math.log(1.0 - gamma) / math.log(p)))
    while 1.0 - p**n < gamma:  # guard the ceiling against rounding on exact boundaries
        n += 1
    while n > 1 and 1.0 - p ** (n - 1) >= gamma:
        n -= 1
    return n


def wilks_order_statistic(n: int, p: float, gamma: float) -> int:
    """The rank k (1-based) of the smallest order statistic of ``n`` scores that is an upper
    tolerance bound at coverage ``p`` with confidence ``gamma``: min k with
    P(Binomial(n, p) <= k - 1) >= gamma. Raises ``ValueError`` saying how much data is needed."""
    needed = min_calibration_size(p, gamma)
    if n < needed:
        raise ValueError(f"too little calibration data: {n} held-out transitions, but coverage p={p} at "
                         f"confidence gamma={gamma} needs at least {needed}")
    # P(Binomial(n, p) <= k - 1) grows with k; search the smallest k reaching gamma.
    low, high = 1, n
    while low < high:
        middle = (low + high) // 2
        if binomial_cdf(middle - 1, n, p) >= gamma:
            high = middle
        else:
            low = middle + 1
    return low


def nonconformity_scores(targets: np.ndarray, mean: np.ndarray, disagreement: np.ndarray) -> np.ndarray:
    """score_i = max_j |y_ij - mu_ij| / (sigma_ij + eps)   (nonconformity score)."""
    return np.max(np.abs(targets - mean) / (disagreement + DISAGREEMENT_FLOOR), axis=-1)


@dataclass(frozen=True)
class Certificate:
    """The calibrated one-step error certificate of an ensemble model.

    ``error_bound(sigma) = q_hat * (sigma + eps)`` bounds every coordinate of the one-step error
    (state delta and reward) with coverage ``p`` at confidence ``gamma``; ``tolerance`` is the
    largest certified state-error bound the gated search trusts.
    """

    p: float
    gamma: float
    n: int
    rank: int
    q_hat: float
    tolerance: float

    def error_bound(self, disagreement: np.ndarray) -> np.ndarray:
        """The certified per-coordinate error bound ``q_hat * (sigma + eps)``."""
        return self.q_hat * (disagreement + DISAGREEMENT_FLOOR)

    def trusted(self, state_disagreement: np.ndarray) -> np.ndarray:
        """Gate: a transition is trusted when its certified state-error bound (max over coordinates,
        in normalised state units) is within the tolerance."""
        return self.error_bound(state_disagreement).max(axis=-1) <= self.tolerance

    def as_dict(self) -> dict[str, float | int]:
        return {"p": self.p, "gamma": self.gamma, "n": self.n, "rank": self.rank, "q_hat": self.q_hat,
                "tolerance": self.tolerance}


def calibrate(scores: np.ndarray, state_disagreement: np.ndarray, *, p: float, gamma: float,
              tolerance_quantile: float = 0.9) -> Certificate:
    """The Wilks threshold q_hat = X_(k) of the held-out ``scores``, and the gate's tolerance.

    The tolerance is the ``tolerance_quantile`` quantile of the certified state-error bounds at the
    calibration transitions themselves: a search node is trusted when the model is at least as sure
    there as it is on most of the data it was calibrated on.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 1 or not np.isfinite(scores).all():
        raise ValueError("calibration scores must be a finite 1-D array")
    rank = wilks_order_statistic(len(scores), p, gamma)
    q_hat = float(np.sort(scores)[rank - 1])  # X_(k), the k-th smallest score
    bounds = q_hat * (np.asarray(state_disagreement) + DISAGREEMENT_FLOOR)
    tolerance = float(np.quantile(bounds.max(axis=-1), tolerance_quantile))
    return Certificate(p=float(p), gamma=float(gamma), n=len(scores), rank=rank, q_hat=q_hat, tolerance=tolerance)
