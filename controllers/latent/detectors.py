"""Detectors of a broken instruction hierarchy: the chaos score (AEO, reconstructed) and four baselines.

Every detector follows scikit-learn's conventions, with ``X`` a sequence of ``Example``s (an example's
hidden states, ``gauntlet.controllers.latent.hidden.SequenceStates``, and for the text baseline its
texts) and ``y`` 1 where the response broke its system prompt's rule (or the text carries an
injection), 0 where it complied:

- ``fit(X, y=None)`` returns the detector; the one-class detectors (``aeo``, ``mahalanobis``) model
  the compliant examples only, and ``y=None`` means every example is compliant;
- ``score_samples(X)``: the detector's score, higher meaning more likely a violation (the chaos
  score, a distance, a probability). scikit-learn's outlier detectors count the other way round
  (lower is more abnormal); every score here rises with the violation;
- ``threshold_``: set by ``fit`` to the ``GATE_QUANTILE`` of the compliant training examples'
  scores (5 % false alarms on data the detector saw); a fitted file may replace it;
- ``decision_function(X) = score_samples(X) - threshold_``: above 0 is flagged, as a scikit-learn
  classifier's decision function is above 0 for its positive class;
- ``predict(X)``: 1 (flagged) where ``decision_function`` is above 0, else 0.

Anything with ``fit`` and ``decision_function`` over such examples is a detector to the study, the
``gauntlet latent`` commands and the fitted-detector file: a scikit-learn classifier on features of
the examples drops in, e.g. ``make_pipeline(FunctionTransformer(response_means, kw_args={"layer":
12}), LogisticRegression())``.

**AEO, as reconstructed here** (the paper's text and code are not public; its abstract says: compliant
generations concentrate in a low-variability region of latent space, violations scatter; a chaos score
measures the entropic divergence between the compliant manifold and the generation). What we built:

1. The compliant manifold is a probabilistic-PCA Gaussian fitted to the *response-token* states of
   compliant generations only (asymmetric: violations are never modelled): mean ``mu``, the top ``k``
   principal directions ``V`` with variances ``lambda_1..k``, and one isotropic variance ``sigma2`` for
   the remaining ``d - k`` directions (the mean of the discarded eigenvalues). Tokens are whitened:
   ``z = diag(lambda)^-1/2 V^T (x - mu)``, and the residual ``r = x - mu - V V^T (x - mu)``.
2. A generation is the Gaussian of its own tokens: in the subspace, mean ``m`` and covariance ``S``
   (shrunk towards the manifold's, ``S = (1 - a) S_hat + a I`` with ``a = k / (n + k)``, because a reply
   has few tokens); outside it, an isotropic variance ``rho * sigma2`` with ``rho = mean ||r||^2 /
   ((d - k) sigma2)``.
3. The chaos score is the relative entropy (KL divergence) of the generation's Gaussian from the
   manifold's, which the PPCA structure splits in two:
   ``KL = 1/2 [tr S + m^T m - k - ln det S] + 1/2 (d - k) [rho - 1 - ln rho]``.
   It is zero for a generation distributed exactly as compliant ones, grows with a shifted mean
   (the reply is about something else), a wider spread (chaos) or a narrower one, and with energy off
   the manifold.

**Baselines**: ``mahalanobis`` (training-free OOD on hidden states, as LCF: the mean response state's
Mahalanobis distance to the compliant mean under a Ledoit-Wolf covariance, fitted on compliant
examples only); ``probe`` (logistic regression on the mean response state, both labels);
``tasktracker`` (logistic regression on the activation delta of the prompt's end over the state before
the lower-priority text: TaskTracker); ``text`` (logistic regression on sentence embeddings of the
lower-priority text and of the response, ``gauntlet.controllers.latent.embeddings``: the non-latent
baseline). Supervised detectors standardise their inputs and use L2-regularised logistic regression
with ``C = 0.1``, fixed in advance, not tuned on test data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from gauntlet.controllers.latent.hidden import SequenceStates

# Principal directions kept for the compliant manifold, at most (fewer when there are fewer tokens).
MANIFOLD_RANK = 32
PROBE_C = 0.1
# The gate flags what scores above this quantile of compliant examples: 5 % false alarms where it was set.
GATE_QUANTILE = 0.95


@dataclass(frozen=True)
class Example:
    """One generation as the detectors see it: its hidden states, the lower-priority text it was given and
    its response text."""

    states: SequenceStates
    external_text: str = ""
    response_text: str = ""


class Detector(Protocol):
    """What the study, the ``gauntlet latent`` commands and the fitted-detector file ask of a detector."""

    def fit(self, X: Sequence[Example], y: np.ndarray | None = None) -> Any: ...

    def decision_function(self, X: Sequence[Example]) -> np.ndarray: ...


def response_means(X: Sequence[Example], layer: int) -> np.ndarray:
    """Each example's mean response state at ``layer``, ``(len(X), hidden)``: features a scikit-learn
    estimator can take (``FunctionTransformer(response_means, kw_args={"layer": layer})``)."""
    return np.stack([example.states.response_mean(layer) for example in X]).astype(np.float64)


def _labels(X: Sequence[Example], y: np.ndarray | None) -> np.ndarray:
    if y is None:
        return np.zeros(len(X), dtype=int)
    y = np.asarray(y)
    if len(y) != len(X):
        raise ValueError(f"{len(y)} labels for {len(X)} examples")
    return y


def _compliant(X: Sequence[Example], y: np.ndarray) -> list[Example]:
    kept = [example for example, bad in zip(X, y, strict=True) if not bad]
    if len(kept) < 2:
        raise ValueError(f"{len(kept)} compliant examples; a compliant manifold needs at least 2")
    return kept


class _Gated:
    """``decision_function`` and ``predict`` from a detector's ``score_samples`` and its ``threshold_``."""

    threshold_: float

    def score_samples(self, X: Sequence[Example]) -> np.ndarray:
        raise NotImplementedError

    def _set_threshold(self, X: Sequence[Example], y: np.ndarray) -> None:
        compliant = [example for example, bad in zip(X, y, strict=True) if not bad]
        self.threshold_ = float(np.quantile(self.score_samples(compliant), GATE_QUANTILE)) if compliant else 0.0

    def decision_function(self, X: Sequence[Example]) -> np.ndarray:
        return self.score_samples(X) - self.threshold_

    def predict(self, X: Sequence[Example]) -> np.ndarray:
        return (self.decision_function(X) > 0).astype(int)


@dataclass
class ChaosScore(_Gated):
    """AEO's chaos score as reconstructed (module doc): relative entropy of a generation's response-token
    distribution from a PPCA Gaussian of compliant generations' tokens, at one layer."""

    layer: int
    rank: int = MANIFOLD_RANK
    name: str = "aeo"
    mean: np.ndarray = field(init=False, repr=False)
    directions: np.ndarray = field(init=False, repr=False)   # (d, k)
    variances: np.ndarray = field(init=False, repr=False)    # (k,)
    residual_variance: float = field(init=False)

    def fit(self, X: Sequence[Example], y: np.ndarray | None = None) -> ChaosScore:
        y = _labels(X, y)
        tokens = np.concatenate([example.states.response[self.layer] for example in _compliant(X, y)])
        tokens = tokens.astype(np.float64)
        self.mean = tokens.mean(axis=0)
        centred = tokens - self.mean
        # The covariance's eigen-decomposition through the SVD of the centred tokens (n may be < d).
        _, singular, vt = np.linalg.svd(centred, full_matrices=False)
        eigen = singular ** 2 / max(len(tokens) - 1, 1)
        dim = tokens.shape[1]
        k = min(self.rank, len(eigen) - 1, dim - 1)
        self.directions, self.variances = vt[:k].T, np.maximum(eigen[:k], 1e-8)
        # PPCA's noise variance: the mean variance of the discarded directions (zeros included: d > n).
        self.residual_variance = max(float(eigen[k:].sum()) / (dim - k), 1e-8)
        self._set_threshold(X, y)
        return self

    def divergence(self, tokens: np.ndarray) -> float:
        """KL(generation || compliant manifold) for one generation's ``(n, d)`` response-token states."""
        centred = tokens.astype(np.float64) - self.mean
        projected = centred @ self.directions
        z = projected / np.sqrt(self.variances)
        k, n, dim = z.shape[1], z.shape[0], tokens.shape[1]
        m = z.mean(axis=0)
        sample = np.cov(z, rowvar=False, bias=True) if n > 1 else np.zeros((k, k))
        shrink = k / (n + k)
        covariance = (1 - shrink) * sample + shrink * np.eye(k)
        _, logdet = np.linalg.slogdet(covariance)
        inside = 0.5 * (np.trace(covariance) + m @ m - k - logdet)
        residual = centred - projected @ self.directions.T
        rho = max(float((residual ** 2).sum(axis=1).mean()) / ((dim - k) * self.residual_variance), 1e-12)
        outside = 0.5 * (dim - k) * (rho - 1 - np.log(rho))
        return float(inside + outside)

    def score_samples(self, X: Sequence[Example]) -> np.ndarray:
        return np.array([self.divergence(example.states.response[self.layer]) for example in X])


@dataclass
class MahalanobisScore(_Gated):
    """Training-free OOD: the Mahalanobis distance of the mean response state to compliant examples'."""

    layer: int
    name: str = "mahalanobis"
    estimator: Any = field(init=False, repr=False)

    def fit(self, X: Sequence[Example], y: np.ndarray | None = None) -> MahalanobisScore:
        from sklearn.covariance import LedoitWolf

        y = _labels(X, y)
        self.estimator = LedoitWolf().fit(response_means(_compliant(X, y), self.layer))
        self._set_threshold(X, y)
        return self

    def score_samples(self, X: Sequence[Example]) -> np.ndarray:
        return np.asarray(self.estimator.mahalanobis(response_means(X, self.layer)))


def _logistic() -> Any:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(C=PROBE_C, max_iter=2000))


class _Supervised(_Gated):
    """A logistic regression (``_logistic``) on a detector's features; its score is the probability of a
    violation."""

    model: Any

    def _features(self, X: Sequence[Example]) -> np.ndarray:
        raise NotImplementedError

    def fit(self, X: Sequence[Example], y: np.ndarray | None = None) -> Any:
        if y is None or len(set(np.asarray(y).tolist())) < 2:
            raise ValueError("a supervised detector needs both compliant and violating examples to fit")
        y = _labels(X, y)
        self.model = _logistic().fit(self._features(X), y)
        self._set_threshold(X, y)
        return self

    def score_samples(self, X: Sequence[Example]) -> np.ndarray:
        return np.asarray(self.model.predict_proba(self._features(X))[:, 1])


@dataclass
class LinearProbe(_Supervised):
    """Logistic regression on the mean response state (both labels)."""

    layer: int
    name: str = "probe"
    model: Any = field(init=False, repr=False)

    def _features(self, X: Sequence[Example]) -> np.ndarray:
        return response_means(X, self.layer)


@dataclass
class TaskTracker(_Supervised):
    """Logistic regression on the activation delta the lower-priority text caused (TaskTracker)."""

    layer: int
    name: str = "tasktracker"
    model: Any = field(init=False, repr=False)

    def _features(self, X: Sequence[Example]) -> np.ndarray:
        return np.stack([example.states.delta(self.layer) for example in X])


@dataclass
class TextClassifier(_Supervised):
    """Logistic regression on sentence embeddings of the lower-priority text and the response."""

    embed: Any  # texts -> (n, dim) array, e.g. ``embeddings.SentenceEncoder().encode``
    name: str = "text"
    layer: int | None = None
    model: Any = field(init=False, repr=False)

    def _features(self, X: Sequence[Example]) -> np.ndarray:
        external = self.embed([example.external_text for example in X])
        response = self.embed([example.response_text for example in X])
        return np.concatenate([external, response], axis=1)


LATENT_DETECTORS = {"aeo": ChaosScore, "mahalanobis": MahalanobisScore, "probe": LinearProbe,
                    "tasktracker": TaskTracker}


__all__ = ["GATE_QUANTILE", "LATENT_DETECTORS", "ChaosScore", "Detector", "Example", "LinearProbe", "MahalanobisScore",
           "TaskTracker", "TextClassifier", "response_means"]
