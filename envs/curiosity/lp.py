"""Learning progress from counterfactual contexts: the ``icl_lp`` estimator and the exact ``true_lp``.

Learning progress (LP) of step t is how much the new observation (x_t, y_t) improves the world
model's predictions. With an in-context learner p(y | x, C) there is no parameter update: the
improvement is read off the learner's prediction errors with and without the new point in its
context. On probe queries (x̃_j, ỹ_j), j = 1..M, with weights q_j (default 1/M):

    icl_lp_t = Σ_j q_j [ ℓ(ỹ_j | x̃_j, C_{t-1}) − ℓ(ỹ_j | x̃_j, C_{t-1} ∪ {(x_t, y_t)}) ],   ℓ = −log p   (ICL-LP)

Both contexts go through the learner in one batched call (the second context is the first with one
more row unmasked), so the reward costs one forward pass of 2B contexts.

The *true* LP replaces the sampled probe outcomes by their distribution under the hidden parameter θ
and the learner by the exact Bayesian posterior predictive p*:

    true_lp_t = E_{x̃ ~ q} E_{ỹ ~ p(· | x̃, θ)} [ log p*(ỹ | x̃, C_t) − log p*(ỹ | x̃, C_{t-1}) ]          (true LP)

For the exact learner, icl_lp is an unbiased Monte Carlo estimate of true_lp (the probe outcomes are
drawn from p(· | x̃, θ)), and it equals true_lp exactly when the probes enumerate every outcome with
weight q(x̃) p(ỹ | x̃, θ) (tested).
"""

from __future__ import annotations

import numpy as np

from gauntlet.envs.curiosity.learners import InContextLearner


def counterfactual_contexts(context_x: np.ndarray, context_y: np.ndarray, context_mask: np.ndarray,
                            new_x: np.ndarray, new_y: np.ndarray):
    """The batch ``[C_{t-1}; C_{t-1} ∪ {(x_t, y_t)}]`` of 2B contexts (the new point is one extra row)."""
    batch = context_x.shape[0]
    full_x = np.concatenate([context_x, np.asarray(new_x, dtype=np.float64)[:, None, :]], axis=1)
    full_y = np.concatenate([context_y, np.asarray(new_y, dtype=np.float64)[:, None]], axis=1)
    without = np.concatenate([context_mask, np.zeros((batch, 1), dtype=bool)], axis=1)
    with_new = np.concatenate([context_mask, np.ones((batch, 1), dtype=bool)], axis=1)
    return (np.concatenate([full_x, full_x]), np.concatenate([full_y, full_y]),
            np.concatenate([without, with_new]))


def icl_learning_progress(learner: InContextLearner, context_x: np.ndarray, context_y: np.ndarray,
                          context_mask: np.ndarray | None, new_x: np.ndarray, new_y: np.ndarray,
                          probe_x: np.ndarray, probe_y: np.ndarray, probe_weights: np.ndarray | None = None
                          ) -> np.ndarray:
    """Equation (ICL-LP) for a batch of B contexts; returns ``(B,)``.

    Shapes: ``context_x (B, N, D)``, ``context_y (B, N)``, ``context_mask (B, N)`` or None,
    ``new_x (B, D)``, ``new_y (B,)``, ``probe_x (B, M, D)``, ``probe_y (B, M)``, ``probe_weights (B, M)``
    (default uniform).
    """
    context_x = np.asarray(context_x, dtype=np.float64)
    batch = context_x.shape[0] if context_x.ndim == 3 else -1
    if context_mask is None:
        context_mask = np.ones(np.shape(context_y), dtype=bool)
    new_x, new_y = np.asarray(new_x, dtype=np.float64), np.asarray(new_y, dtype=np.float64)
    probe_x, probe_y = np.asarray(probe_x, dtype=np.float64), np.asarray(probe_y, dtype=np.float64)
    if new_x.shape != (batch, learner.design_dim) or new_y.shape != (batch,):
        raise ValueError(f"new_x must have shape (B, D) = ({batch}, {learner.design_dim}) and new_y (B,) = "
                         f"({batch},); got {new_x.shape} and {new_y.shape}")
    if probe_x.ndim != 3 or probe_y.shape != probe_x.shape[:2]:
        raise ValueError(f"probe_x must have shape (B, M, D) and probe_y (B, M); got {probe_x.shape} and "
                         f"{probe_y.shape}")
    if probe_weights is None:
        probe_weights = np.full(probe_y.shape, 1.0 / probe_y.shape[1])
    both_x, both_y, both_mask = counterfactual_contexts(context_x, np.asarray(context_y, dtype=np.float64),
                                                        np.asarray(context_mask, dtype=bool), new_x, new_y)
    predictive = learner.predict(both_x, both_y, np.concatenate([probe_x, probe_x]), both_mask)
    loss = -predictive.log_prob(np.concatenate([probe_y, probe_y]))  # (2B, M)
    return np.sum(probe_weights * (loss[:batch] - loss[batch:]), axis=1)


def true_learning_progress(exact_learner: InContextLearner, context_x: np.ndarray, context_y: np.ndarray,
                           context_mask: np.ndarray | None, new_x: np.ndarray, new_y: np.ndarray,
                           probe_x: np.ndarray, probe_truth, probe_weights: np.ndarray | None = None) -> np.ndarray:
    """Equation (true LP): ``probe_truth`` is p(· | x̃, θ) at the probes (a predictive of batch (B, M))."""
    context_x = np.asarray(context_x, dtype=np.float64)
    batch, probes = probe_x.shape[:2]
    if context_mask is None:
        context_mask = np.ones(np.shape(context_y), dtype=bool)
    if probe_weights is None:
        probe_weights = np.full((batch, probes), 1.0 / probes)
    both_x, both_y, both_mask = counterfactual_contexts(context_x, np.asarray(context_y, dtype=np.float64),
                                                        np.asarray(context_mask, dtype=bool), new_x, new_y)
    predictive = exact_learner.predict(both_x, both_y, np.concatenate([probe_x, probe_x]), both_mask)
    expected = predictive.expected_log_prob(_stack_truth(probe_truth))  # (2B, M)
    return np.sum(probe_weights * (expected[batch:] - expected[:batch]), axis=1)


def _stack_truth(truth):
    """The truth predictive repeated for the two halves of the counterfactual batch."""
    fields = {name: np.concatenate([value, value]) for name, value in vars(truth).items()
              if isinstance(value, np.ndarray)}
    return type(truth)(**fields)
