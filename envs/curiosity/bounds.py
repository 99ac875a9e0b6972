"""sPCE and sNMC: lower and upper bounds on the total information a design policy gathers.

For a policy π and histories h_T = (ξ_1, y_1, ..., ξ_T, y_T), the total expected information gain
I_T(π) = E[log p(h_T | θ_0) − log p(h_T | π)] has no closed form (Foster et al. 2021, DAD, eq. 7-8).
With L contrastive samples θ_1..θ_L ~ p(θ), drawn afresh for each history:

    sPCE = E[ log p(h_T|θ_0) − log( (1/(L+1)) Σ_{l=0}^{L} p(h_T|θ_l) ) ]  <= I_T(π)     (sequential PCE)
    sNMC = E[ log p(h_T|θ_0) − log( (1/L)     Σ_{l=1}^{L} p(h_T|θ_l) ) ]  >= I_T(π)     (sequential NMC)

The expectation is over θ_0 ~ p(θ) and h_T from the policy in the env (the recorded episodes);
sPCE cannot exceed log(L + 1). DAD reports both with L = 1e5 for location finding.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import logsumexp


def history_log_likelihood(mean_function: Callable[[np.ndarray, np.ndarray], np.ndarray], designs: np.ndarray,
                           outcomes: np.ndarray, thetas: np.ndarray, noise_std: float) -> np.ndarray:
    """log p(h_T | θ) up to the constant shared by every θ: designs ``(T, D)`` -> ``(P,)`` for thetas ``(P, ...)``."""
    means = mean_function(designs, thetas)  # (T, P)
    return -0.5 * np.sum((outcomes[:, None] - means) ** 2, axis=0) / noise_std ** 2


def spce_snmc(mean_function: Callable[[np.ndarray, np.ndarray], np.ndarray], designs: np.ndarray,
              outcomes: np.ndarray, true_thetas: np.ndarray, *, noise_std: float,
              sample_prior: Callable[[np.random.Generator, int], np.ndarray], n_contrastive: int,
              rng: np.random.Generator, chunk: int = 8192) -> dict[str, np.ndarray]:
    """Per-history terms of sPCE and sNMC for histories ``designs (E, T, D)``, ``outcomes (E, T)``.

    Returns ``{"spce": (E,), "snmc": (E,)}``; their means are the bounds, and their spread gives the
    confidence interval over histories.
    """
    if designs.ndim != 3 or outcomes.shape != designs.shape[:2] or len(true_thetas) != len(designs):
        raise ValueError(f"designs must be (E, T, D), outcomes (E, T) and true_thetas (E, ...); got "
                         f"{designs.shape}, {outcomes.shape} and {np.shape(true_thetas)}")
    spce, snmc = np.empty(len(designs)), np.empty(len(designs))
    for e in range(len(designs)):
        primary = history_log_likelihood(mean_function, designs[e], outcomes[e], true_thetas[e][None], noise_std)[0]
        parts = []
        for start in range(0, n_contrastive, chunk):
            thetas = sample_prior(rng, min(chunk, n_contrastive - start))
            parts.append(logsumexp(history_log_likelihood(mean_function, designs[e], outcomes[e], thetas,
                                                          noise_std)))
        contrastive = logsumexp(parts)  # log Σ_{l=1}^{L} p(h_T | θ_l)
        spce[e] = primary - (np.logaddexp(primary, contrastive) - np.log(n_contrastive + 1))
        snmc[e] = primary - (contrastive - np.log(n_contrastive))
    return {"spce": spce, "snmc": snmc}
