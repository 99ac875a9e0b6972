"""Tighter certificates for the root switch, as options of the default rule (the default is unchanged).

The certified lower bound of a one-step path is

    LB(a) = r_hat - b_r + gamma (V^b(s_hat') - |grad V^b(s_hat')| . E - delta_V)

and three of its terms are replaced here by calibrated alternatives, each a Wilks order statistic
(``calibration.wilks_order_statistic``) of a nonconformity score on the held-out split:

(a) Bootstrap ensemble of baseline-value fits (``ValueEnsemble``): K fits of V^b on bootstrap
    resamples of the training split, mean V_bar and spread sigma_V. Normalised value score

        score_i = |V_bar(s_i) - G_i| / (sigma_V(s_i) + eps_V)                   (normalised value score)
        delta_V(s) = q_V * (sigma_V(s) + eps_V)                                 (ensemble value bound)

    with q_V the Wilks threshold: a state-dependent delta_V, small where the fits agree, certified
    with the same (p, gamma) semantics as the global one (G is still one noisy return).

(b) Value-aware nonconformity score (``ValueAwareBound``): the value error a model step causes,
    scored directly instead of through the first-order term |grad V^b| . E:

        score_i = |V^b(s'_i) - V^b(s_hat'_i)|                                    (value-aware score)

    on held-out transitions (s_i, a_i, s'_i), s_hat' the elites' mean prediction. With probability
    >= gamma a fraction >= p of one-step value errors lie below the threshold. For one model step
    it is exact; along a path of h steps the planner sums the per-step bounds (the value-space
    analogue of the state gate's triangle inequality, an assumption stated, not estimated).

(c) Local (Mondrian) calibration (``LocalThreshold``): the calibration points are cut into
    equal-count bins of a feature (the model's disagreement for (b), V_bar(s) for (a)); each bin gets
    its own Wilks threshold. Scores in one bin are exchangeable with a new point in that bin, so the
    certificate holds per bin (conditionally on the bin), not only on average over the data.
    Bins hold at least ``min_per_bin`` points; with too little data it falls back to one bin.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gauntlet.agents.calspi.calibration import min_calibration_size, wilks_order_statistic
from gauntlet.agents.calspi.value import BaselineValue, ValueFitConfig, returns_to_go


def wilks_threshold(scores: np.ndarray, p: float, gamma: float) -> float:
    """X_(k): the Wilks upper tolerance bound of ``scores`` at coverage p, confidence gamma."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 1 or not np.isfinite(scores).all():
        raise ValueError("calibration scores must be a finite 1-D array")
    rank = wilks_order_statistic(len(scores), p, gamma)
    return float(np.sort(scores)[rank - 1])


@dataclass(frozen=True)
class LocalThreshold:
    """Per-bin Wilks thresholds (Mondrian calibration, item (c) of the module docstring)."""

    edges: np.ndarray  # inner bin edges on the feature (len = bins - 1)
    thresholds: np.ndarray  # one Wilks threshold per bin
    counts: np.ndarray  # calibration points per bin
    global_threshold: float

    @classmethod
    def fit(cls, features: np.ndarray, scores: np.ndarray, *, p: float, gamma: float, bins: int = 10,
            min_per_bin: int | None = None) -> LocalThreshold:
        features, scores = np.asarray(features, dtype=np.float64), np.asarray(scores, dtype=np.float64)
        if features.shape != scores.shape or features.ndim != 1:
            raise ValueError("features and scores must be 1-D arrays of the same length")
        if bins < 1:
            raise ValueError(f"bins must be >= 1, got {bins}")
        least = max(min_calibration_size(p, gamma), min_per_bin or 10 * min_calibration_size(p, gamma))
        bins = int(max(1, min(bins, len(scores) // least)))
        edges = np.quantile(features, np.arange(1, bins) / bins) if bins > 1 else np.zeros(0)
        edges = np.unique(edges)  # ties in the feature can merge bins
        labels = np.searchsorted(edges, features, side="right")
        thresholds, counts = [], []
        for b in range(len(edges) + 1):
            member = labels == b
            counts.append(int(member.sum()))
            thresholds.append(wilks_threshold(scores[member], p, gamma))
        return cls(edges=edges, thresholds=np.array(thresholds), counts=np.array(counts),
                   global_threshold=wilks_threshold(scores, p, gamma))

    def __call__(self, features: np.ndarray) -> np.ndarray:
        """The threshold of the bin each feature value falls in."""
        return self.thresholds[np.searchsorted(self.edges, np.asarray(features, dtype=np.float64), side="right")]


class ValueEnsemble:
    """A bootstrap ensemble of V^b fits (item (a)); behaves like ``BaselineValue`` for the planner,
    plus ``local_error_bound(states)`` = delta_V(s)."""

    def __init__(self, obs_dim: int, *, discount: float, members: int = 5, seed: int = 0,
                 config: ValueFitConfig | None = None, local: str = "ensemble", bins: int = 10):
        if members < 2:
            raise ValueError(f"a value ensemble needs at least 2 members, got {members}")
        if local not in ("ensemble", "binned"):
            raise ValueError(f"local must be 'ensemble' or 'binned', got {local!r}")
        self.discount, self.seed, self.local, self.bins = float(discount), int(seed), local, int(bins)
        self.members = [BaselineValue(obs_dim, discount=discount, seed=seed * 1000 + k, config=config)
                        for k in range(members)]
        self.error_bound = float("inf")  # global delta_V of the mean (Wilks of |V_bar - G|)
        self.td_error_bound = float("inf")
        self.scale, self.epsilon = 1.0, 1e-6
        self.q_value = float("inf")  # q_V, the normalised threshold
        self.binned: LocalThreshold | None = None

    def member_values(self, states: np.ndarray) -> np.ndarray:
        return np.stack([member(states) for member in self.members])  # (K, B)

    def __call__(self, states: np.ndarray) -> np.ndarray:
        return self.member_values(states).mean(axis=0)  # V_bar

    def spread(self, states: np.ndarray) -> np.ndarray:
        return self.member_values(states).std(axis=0)  # sigma_V

    def lipschitz_term(self, states: np.ndarray, error: np.ndarray) -> np.ndarray:
        """sum_j |dV_bar/ds_j| error_j, with grad V_bar the mean of the members' gradients."""
        import torch

        gradients = []
        for member in self.members:
            x = member._inputs(states).requires_grad_(True)
            (normalised,) = torch.autograd.grad(member.network(x).sum(), x)
            gradients.append(normalised.numpy().astype(np.float64) * member.value_std / member.obs_std)
        return np.sum(np.abs(np.mean(gradients, axis=0)) * np.atleast_2d(error), axis=-1)

    def td_residuals(self, dataset, indices: np.ndarray) -> np.ndarray:
        following = (1.0 - dataset.terminals[indices].astype(np.float64)) * self(dataset.next_observations[indices])
        return dataset.rewards[indices] + self.discount * following - self(dataset.observations[indices])

    def local_error_bound(self, states: np.ndarray) -> np.ndarray:
        """delta_V(s): q_V (sigma_V(s) + eps_V) ('ensemble') or the Wilks threshold of the V_bar(s)
        bin (``binned``, item (c))."""
        if self.local == "binned":
            assert self.binned is not None
            return self.binned(self(states))
        return self.q_value * (self.spread(states) + self.epsilon)

    def fit(self, dataset, train: np.ndarray, held_out: np.ndarray, *, p: float, gamma: float) -> ValueEnsemble:
        rng = np.random.default_rng([self.seed, 17])
        for member in self.members:  # each member on its own bootstrap resample of the training split
            member.fit(dataset, rng.choice(train, size=len(train), replace=True), held_out, p=p, gamma=gamma)
        # Targets G of the mean: returns-to-go bootstrapped from V_bar where an episode was cut.
        returns = returns_to_go(dataset.rewards, dataset.terminals, dataset.episode_ends,
                                self(dataset.next_observations), self.discount)
        self.returns = returns
        values, spread = self(dataset.observations[held_out]), self.spread(dataset.observations[held_out])
        errors = np.abs(values - returns[held_out])
        self.held_out_errors = errors
        self.error_bound = wilks_threshold(errors, p, gamma)  # global delta_V of V_bar
        self.td_error_bound = wilks_threshold(np.abs(self.td_residuals(dataset, held_out)), p, gamma)
        self.scale = float(max(returns[train].std(), 1e-3))
        self.epsilon = 1e-3 * self.scale
        # (a) normalised value score and its Wilks threshold q_V.
        self.q_value = wilks_threshold(errors / (spread + self.epsilon), p, gamma)
        # (c) binned by V_bar(s).
        self.binned = LocalThreshold.fit(values, errors, p=p, gamma=gamma, bins=self.bins)
        return self


class ValueAwareBound:
    """Item (b): certified one-step value error |V^b(s') - V^b(s_hat')|, global or binned by the
    model's disagreement (item (c))."""

    def __init__(self, *, local: bool = False, bins: int = 10):
        self.local, self.bins = bool(local), int(bins)
        self.global_threshold = float("inf")
        self.binned: LocalThreshold | None = None

    @staticmethod
    def feature(state_disagreement: np.ndarray) -> np.ndarray:
        """The bin feature: the largest normalised state disagreement (what the gate thresholds)."""
        return np.max(np.atleast_2d(state_disagreement), axis=-1)

    @staticmethod
    def scores(model, value, states: np.ndarray, actions: np.ndarray, next_states: np.ndarray) -> np.ndarray:
        """score_i = |V^b(s'_i) - V^b(s_hat'_i)|  (value-aware score)."""
        prediction = model.predict(states, actions)
        return np.abs(value(next_states) - value(prediction.next_states))

    def fit(self, model, value, states: np.ndarray, actions: np.ndarray, next_states: np.ndarray, *,
            p: float, gamma: float) -> ValueAwareBound:
        scores = self.scores(model, value, states, actions, next_states)
        self.held_out_scores = scores
        self.global_threshold = wilks_threshold(scores, p, gamma)
        features = self.feature(model.predict(states, actions).state_disagreement)
        self.binned = LocalThreshold.fit(features, scores, p=p, gamma=gamma, bins=self.bins)
        return self

    def __call__(self, state_disagreement: np.ndarray) -> np.ndarray:
        """The certified one-step value error of each transition."""
        features = self.feature(state_disagreement)
        if self.local:
            assert self.binned is not None
            return self.binned(features)
        return np.full(len(features), self.global_threshold)
