"""What the overseer learns from branched rows: per-action utility regressors and the scalar risk baseline.

A row (``gauntlet.controllers.oversight.protocol``) is one prefix with the realised utility of every
overseer action run from that identical prefix. Two ways of turning prefix features into a decision:

- ``ActionConditioned`` (what the paper proposes): one regressor per action estimates the action's
  utility ``U_a(x)``; the controller takes ``argmax_a [mean_a(x) - lambda * std_a(x)]``, the std being
  the dispersion of the ensemble's members (trees of a forest, or bagged boosted models), so an action
  whose utility the model is unsure of needs a larger estimated gain to be chosen. ``quit`` is not
  learned: its utility is the constant ``U_quit``.
- ``RiskScore`` -> ``Calibrated`` -> ``ScalarRouter`` (what the paper argues against): one number, the
  probability that the episode fails if the base agent continues, recalibrated or not, and a threshold
  above which one fixed intervention is taken.

The models follow scikit-learn's conventions: ``fit(X, y)`` on features ``X`` (one row per prefix) and
targets ``y``, then ``predict``, ``predict_proba`` or ``decision_function`` on new features.
``utility_data(rows)`` and ``failure_data(rows)`` build ``X``, ``y`` and the feature names from branched
rows (``model.fit(*utility_data(rows))``); feature matrices come from ``design_matrix`` with stable,
sorted feature names. A trained model is saved with those names, the utility configuration and the
benchmark (``save_model``/``load_model``) so an online controller computes the same columns.
"""

from __future__ import annotations

import dataclasses
import io
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any, Literal, Protocol, overload

import joblib  # type: ignore[import-untyped]  # joblib ships no type information
import numpy as np
from sklearn.ensemble import GradientBoostingRegressor, RandomForestClassifier, RandomForestRegressor
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from gauntlet.controllers.oversight.utility import ACTIONS, UtilityConfig
from gauntlet.fileio import write_atomically

Row = Mapping[str, Any]

MODEL_FILE_FORMAT = "gauntlet-oversight-model"
MODEL_FILE_VERSION = 1
"""Version of the saved model dict; ``load_model`` refuses a file written under another version."""

# The paper's forest: 200 trees, depth 6, min leaf 2.
RF_DEFAULTS = {"n_estimators": 200, "max_depth": 6, "min_samples_leaf": 2}
# The boosted variant: shallow trees and a learning rate that suit boosting (deep boosted trees overfit
# a few thousand rows); dispersion from ``GBR_BAGS`` such models fitted on bootstrap resamples.
GBR_DEFAULTS = {"n_estimators": 100, "max_depth": 3, "min_samples_leaf": 2}
GBR_BAGS = 5
GBR_LEARNING_RATE = 0.1
GBR_SUBSAMPLE = 0.8

# Scores are turned into logits for Platt scaling; a forest's probabilities of exactly 0 or 1 are
# clipped to this distance from the ends so their logits stay finite (and still ordered).
_LOGIT_EPS = 1e-6
# A threshold is searched over at most this many candidate cut points (order statistics of the scores).
_MAX_CUTS = 512


# ---------------------------------------------------------------------------------------------- data


def design_matrix(rows: Sequence[Row], feature_names: Sequence[str] | None = None) -> tuple[np.ndarray, list[str]]:
    """The feature matrix of ``rows`` (one row per prefix row) and its column names.

    Without ``feature_names`` the columns are the sorted union of the rows' feature names, so the same
    rows give the same columns in any order. With them (a trained model's names), exactly those
    columns: a feature a row lacks is 0, as ``prefix_features`` defines missing features, and a feature
    the model never saw is dropped.
    """
    names = sorted({name for row in rows for name in row["features"]}) if feature_names is None \
        else list(feature_names)
    column = {name: j for j, name in enumerate(names)}
    X = np.zeros((len(rows), len(names)), dtype=np.float64)
    for i, row in enumerate(rows):
        for name, value in row["features"].items():
            j = column.get(name)
            if j is not None:
                X[i, j] = float(value)
    return X, names


def actions_in(rows: Iterable[Row]) -> tuple[str, ...]:
    """The overseer actions every row has a branch for, in ``ACTIONS`` order.

    Only these can be compared on every prefix (``stronger`` exists only where the benchmark has a
    stronger agent; a collection may skip actions), so learners and metrics restrict themselves to them.
    """
    common: set[str] | None = None
    for row in rows:
        present = set(row["branches"])
        common = present if common is None else common & present
    if not common:
        raise ValueError("the rows share no overseer action (no rows, or no branch common to all of them)")
    return tuple(action for action in ACTIONS if action in common)


def utility_matrix(rows: Sequence[Row], actions: Sequence[str]) -> np.ndarray:
    """Realised utilities, shape (rows, actions): entry (i, j) is ``U_{actions[j]}`` on row i, NaN where row i
    has no branch of that action."""
    return np.array([[row["branches"][action]["utility"] if action in row["branches"] else np.nan
                      for action in actions] for row in rows], dtype=np.float64).reshape(len(rows), len(actions))


def continue_failed(rows: Sequence[Row]) -> np.ndarray:
    """1 where the ``continue`` branch failed, else 0: the scalar baseline's label."""
    return np.array([0 if row["branches"]["continue"]["success"] else 1 for row in rows], dtype=np.int64)


def utility_data(rows: Sequence[Row], feature_names: Sequence[str] | None = None
                 ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``X, y, feature_names`` of ``rows`` for the utility learners (``ActionConditioned`` and the routers).

    ``X`` is ``design_matrix(rows, feature_names)`` (pass a fitted model's ``feature_names`` for its
    columns); ``y`` is ``utility_matrix(rows, ACTIONS)``: ``y[i, j]`` is row i's realised utility of
    ``ACTIONS[j]``, NaN where the row has no branch of that action.
    """
    X, names = design_matrix(rows, feature_names)
    return X, utility_matrix(rows, ACTIONS), names


def failure_data(rows: Sequence[Row], feature_names: Sequence[str] | None = None
                 ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``X, y, feature_names`` of ``rows`` for the risk models (``RiskScore``, ``Calibrated``): ``X`` as in
    ``utility_data``, ``y`` 1 where the ``continue`` branch failed, else 0 (``continue_failed``)."""
    X, names = design_matrix(rows, feature_names)
    return X, continue_failed(rows), names


def _checked(X: np.ndarray, y: np.ndarray, y_columns: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``X`` and ``y`` as float arrays, refused unless they have one row per prefix each (and ``y`` has
    ``y_columns`` columns where given)."""
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or len(X) == 0 or len(y) != len(X):
        raise ValueError(f"fit needs X of shape (prefixes, features) and y with one entry per prefix; got X of "
                         f"shape {X.shape} and y of shape {y.shape}")
    if y_columns is not None and (y.ndim != 2 or y.shape[1] != y_columns):
        raise ValueError(f"y must have one column per overseer action ({y_columns}, ACTIONS); got shape {y.shape}")
    return X, y


def _feature_names(X: np.ndarray, feature_names: Sequence[str] | None) -> list[str]:
    """``feature_names``, checked against X's columns (default ``x0``, ``x1``, ... as scikit-learn names them)."""
    names = [f"x{j}" for j in range(X.shape[1])] if feature_names is None else list(feature_names)
    if len(names) != X.shape[1]:
        raise ValueError(f"X has {X.shape[1]} columns but {len(names)} feature names")
    return names


def _same_columns(model: FeatureModel, feature_names: Sequence[str] | None) -> None:
    """Refuse an ``X`` whose columns (``feature_names``) are not those ``model`` was trained on."""
    if feature_names is not None and list(feature_names) != model.feature_names:
        raise ValueError("X's columns are not those the risk model was trained on; build X with the model's "
                         "feature_names (utility_data(rows, model.feature_names))")


class FeatureModel(Protocol):
    """A trained model whose input columns are ``feature_names`` (what ``save_model`` stores)."""

    @property
    def feature_names(self) -> list[str]: ...


# ------------------------------------------------------------------------------ action-conditioned


class ActionConditioned:
    """Per-action utility regressors on prefix features; chooses ``argmax_a mean_a - dispersion * std_a``.

    ``kind="rf"``: a ``RandomForestRegressor`` per action (the paper's 200 trees, depth 6, min leaf 2);
    ``mean_a`` is the forest's prediction and ``std_a`` the standard deviation of its trees' predictions.
    ``kind="gbr"``: per action, ``GBR_BAGS`` ``GradientBoostingRegressor`` s (100 trees of depth 3 by
    default, learning rate 0.1, row subsample 0.8), each fitted on a bootstrap resample of the rows;
    ``mean_a`` is their mean and ``std_a`` their standard deviation. A single boosted model has no
    ensemble of comparable members (its stages are one additive sum, not independent guesses), so the
    dispersion comes from the bootstrap.

    ``quit`` is never learned: its utility is the constant ``U_quit`` the rows record (``u_quit``), with no
    dispersion. The actions are those every training row has (``actions``); ``predict`` gives their
    estimated utilities, ``decision_function`` the pessimistic ones maximised, and ``choose(X, allowed=...)``
    the chosen action, among ``allowed`` (e.g. the actions an online controller can carry out).
    """

    def __init__(self, kind: Literal["rf", "gbr"] = "rf", *, n_estimators: int | None = None,
                 max_depth: int | None = None, min_samples_leaf: int | None = None, dispersion: float = 0.0,
                 seed: int = 0, n_jobs: int = 1) -> None:
        if kind not in ("rf", "gbr"):
            raise ValueError(f"kind must be 'rf' or 'gbr', not {kind!r}")
        defaults = RF_DEFAULTS if kind == "rf" else GBR_DEFAULTS
        self.kind = kind
        self.n_estimators = n_estimators if n_estimators is not None else defaults["n_estimators"]
        self.max_depth = max_depth if max_depth is not None else defaults["max_depth"]
        self.min_samples_leaf = min_samples_leaf if min_samples_leaf is not None else defaults["min_samples_leaf"]
        self.dispersion = dispersion
        self.u_quit = 0.0
        self.seed = seed
        self.n_jobs = n_jobs
        self.actions: tuple[str, ...] = ()
        self.feature_names: list[str] = []
        self._members: dict[str, list[Any]] = {}

    def fit(self, X: np.ndarray, y: np.ndarray, feature_names: Sequence[str] | None = None) -> ActionConditioned:
        """Fit one regressor per learned action on every row (repeat draws of a prefix included).

        ``X``: prefix features, shape (rows, features), its columns named ``feature_names``; ``y``: realised
        utilities, shape (rows, ``len(ACTIONS)``), column j that of ``ACTIONS[j]``, NaN where a row has no
        branch of it. The actions learned are those with a utility on every row. ``utility_data(rows)``
        gives all three.
        """
        X, y = _checked(X, y, len(ACTIONS))
        self.feature_names = _feature_names(X, feature_names)
        self.actions = tuple(action for j, action in enumerate(ACTIONS) if not np.isnan(y[:, j]).any())
        if not self.actions:
            raise ValueError("the rows share no overseer action (no branch common to all of them)")
        utilities = y[:, [ACTIONS.index(action) for action in self.actions]]
        rng = np.random.default_rng(self.seed)
        self._members = {}
        for j, action in enumerate(self.actions):
            if action == "quit":
                self.u_quit = _constant_quit_utility(utilities[:, j])
                continue
            seed = int(rng.integers(2**31 - 1))
            self._members[action] = self._fit_members(X, utilities[:, j], seed)
        return self

    def _fit_members(self, X: np.ndarray, y: np.ndarray, seed: int) -> list[Any]:
        if self.kind == "rf":
            forest = RandomForestRegressor(n_estimators=self.n_estimators, max_depth=self.max_depth,
                                           min_samples_leaf=self.min_samples_leaf, random_state=seed,
                                           n_jobs=self.n_jobs).fit(X, y)
            return list(forest.estimators_)
        rng = np.random.default_rng(seed)
        members = []
        for _ in range(GBR_BAGS):
            sample = rng.integers(len(y), size=len(y))
            members.append(GradientBoostingRegressor(
                n_estimators=self.n_estimators, max_depth=self.max_depth, min_samples_leaf=self.min_samples_leaf,
                learning_rate=GBR_LEARNING_RATE, subsample=GBR_SUBSAMPLE,
                random_state=int(rng.integers(2**31 - 1))).fit(X[sample], y[sample]))
        return members

    def member_predictions(self, X: np.ndarray) -> dict[str, np.ndarray]:
        """Each learned action's member predictions, shape (members, prefixes)."""
        X = np.asarray(X, dtype=np.float64)
        if self.kind == "rf":
            # A fitted tree's own ``tree_.predict`` on float32 is what the forest's ``predict`` averages,
            # without its per-call input validation (200 trees x every action on every online step).
            X32 = np.ascontiguousarray(X, dtype=np.float32)
            return {action: np.stack([tree.tree_.predict(X32)[:, 0] for tree in members])
                    for action, members in self._members.items()}
        return {action: np.stack([member.predict(X) for member in members])
                for action, members in self._members.items()}

    @overload
    def predict(self, X: np.ndarray, return_std: Literal[True]) -> tuple[np.ndarray, np.ndarray]: ...

    @overload
    def predict(self, X: np.ndarray, return_std: Literal[False] = ...) -> np.ndarray: ...

    def predict(self, X: np.ndarray, return_std: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """Estimated utility of each action, shape (prefixes, ``len(actions)``): the members' mean, and with
        ``return_std=True`` their standard deviation (the dispersion) too, as ``(mean, std)``:
        scikit-learn's convention for a regressor that reports its uncertainty."""
        samples = self.member_predictions(X)
        n = np.asarray(X).shape[0]
        mean = np.empty((n, len(self.actions)))
        std = np.zeros((n, len(self.actions)))
        for j, action in enumerate(self.actions):
            if action == "quit":
                mean[:, j] = self.u_quit
            else:
                mean[:, j] = samples[action].mean(axis=0)
                std[:, j] = samples[action].std(axis=0)
        return (mean, std) if return_std else mean

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """The quantity maximised, per action: ``mean_a - dispersion * std_a`` (a pessimistic utility)."""
        mean, std = self.predict(X, return_std=True)
        return np.asarray(mean - self.dispersion * std)

    def choose(self, X: np.ndarray, allowed: Iterable[str] | None = None) -> list[str]:
        """The chosen action per prefix, among ``allowed`` (default: every learned action)."""
        return choose_from_scores(self.decision_function(X), self.actions, allowed)


def _constant_quit_utility(utilities: np.ndarray) -> float:
    if not np.all(utilities == utilities[0]):
        raise ValueError("the rows' quit utilities differ; quit is worth the constant U_quit of one utility "
                         "configuration (recompute the rows under one config)")
    return float(utilities[0])


def choose_from_scores(scores: np.ndarray, actions: Sequence[str], allowed: Iterable[str] | None = None) -> list[str]:
    """Argmax over the ``allowed`` columns of ``scores`` (ties: the first in ``actions`` order)."""
    if allowed is None:
        columns = list(range(len(actions)))
    else:
        wanted = set(allowed)
        columns = [j for j, action in enumerate(actions) if action in wanted]
        if not columns:
            raise ValueError(f"none of the allowed actions {sorted(wanted)} is among the model's {list(actions)}")
    best = np.asarray(scores)[:, columns].argmax(axis=1)
    return [actions[columns[j]] for j in best]


# --------------------------------------------------------------------------------------- risk score


class _FailureClassifier(ABC):
    """A classifier of whether the ``continue`` branch fails (class 1) from prefix features, in
    scikit-learn's terms: ``predict_proba`` from the risk ``predict_risk``, and ``predict``."""

    @abstractmethod
    def predict_risk(self, X: np.ndarray) -> np.ndarray:
        """P(failure under continue) per prefix."""

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """Shape (prefixes, 2): P(continue succeeds), P(it fails)."""
        risk = self.predict_risk(X)
        return np.column_stack([1.0 - risk, risk])

    def predict(self, X: np.ndarray) -> np.ndarray:
        """1 where failure is the likelier outcome, else 0."""
        return (self.predict_risk(X) > 0.5).astype(np.int64)


class RiskScore(_FailureClassifier):
    """The scalar baseline: P(the episode fails if the base agent continues) from prefix features.

    ``kind="rf"``: a ``RandomForestClassifier`` with the action-conditioned forest's settings;
    ``kind="logistic"``: standardised features and a logistic regression. Trained on the ``continue``
    branch's failure of each row (``failure_data(rows)``).
    """

    def __init__(self, kind: Literal["rf", "logistic"] = "rf", *, seed: int = 0, n_jobs: int = 1,
                 n_estimators: int | None = None) -> None:
        if kind not in ("rf", "logistic"):
            raise ValueError(f"kind must be 'rf' or 'logistic', not {kind!r}")
        if n_estimators is not None and n_estimators < 1:
            raise ValueError(f"a forest needs at least one tree, not {n_estimators}")
        self.kind = kind
        self.n_estimators = n_estimators if n_estimators is not None else RF_DEFAULTS["n_estimators"]
        self.seed = seed
        self.n_jobs = n_jobs
        self.feature_names: list[str] = []
        self._classifier: Any = None
        self._constant: float | None = None

    def fit(self, X: np.ndarray, y: np.ndarray, feature_names: Sequence[str] | None = None) -> RiskScore:
        """Fit on prefix features ``X`` (columns named ``feature_names``) and ``y``, 1 where the ``continue``
        branch failed, else 0 (``failure_data(rows)`` gives all three)."""
        X, labels = _checked(X, y)
        self.feature_names = _feature_names(X, feature_names)
        failed = labels.astype(np.int64)
        # A training split where continue always (or never) fails has one class: the risk is that constant.
        self._constant = float(failed[0]) if len(set(failed.tolist())) == 1 else None
        if self._constant is None:
            if self.kind == "rf":
                settings = {**RF_DEFAULTS, "n_estimators": self.n_estimators}
                self._classifier = RandomForestClassifier(**settings, random_state=self.seed,
                                                          n_jobs=self.n_jobs).fit(X, failed)
            else:
                self._classifier = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(X, failed)
        return self

    def predict_risk(self, X: np.ndarray) -> np.ndarray:
        """P(failure under continue) per prefix."""
        X = np.asarray(X, dtype=np.float64)
        if self._constant is not None:
            return np.full(X.shape[0], self._constant)
        return np.asarray(self._classifier.predict_proba(X)[:, 1], dtype=np.float64)


STATED_CONFIDENCE = "verbal_confidence"
"""The feature an agent's own confidence arrives in (``benchmarks.llm.confidence_features``)."""
LATENT_RISK = "latent_risk"
"""The feature the latent monitor's score of the last reply arrives in, a risk in (0, 1)
(``benchmarks.llm.latent_features``)."""


class StatedRisk(_FailureClassifier):
    """A risk one feature states, untrained: ``1 - X[:, feature]`` for a confidence in [0, 1] (an LLM's
    verbalised confidence, ``benchmarks.llm``), or with ``confidence=False`` the feature itself, a risk in
    [0, 1] (the latent monitor's, ``LATENT_RISK``); recalibrate it with ``Calibrated``."""

    def __init__(self, feature: str, feature_names: Sequence[str], *, confidence: bool = True) -> None:
        if feature not in feature_names:
            raise ValueError(f"no feature {feature!r} among {list(feature_names)}")
        self.feature, self.confidence = feature, confidence
        self.feature_names = list(feature_names)
        self._column = self.feature_names.index(feature)

    def predict_risk(self, X: np.ndarray) -> np.ndarray:
        """The stated risk per prefix (1 - a confidence, or the risk itself), clipped to [0, 1]."""
        column = np.asarray(X, dtype=np.float64)[:, self._column]
        return np.clip(1.0 - column if self.confidence else column, 0.0, 1.0)


class Calibrated(_FailureClassifier):
    """A risk score recalibrated on a calibration split: ``method="platt"`` or ``"isotonic"``.

    Platt: a logistic regression on the logit of the score, ``sigmoid(a * logit(p) + b)``, fitted with
    Platt's (1999) smoothed targets ``(N+ + 1) / (N+ + 2)`` and ``1 / (N- + 2)`` so that a split the score
    separates perfectly still gives a finite slope. With ``a > 0`` (a score that ranks failures above
    successes at all) the map is strictly increasing. Isotonic: ``sklearn``'s ``IsotonicRegression``,
    non-decreasing (it may merge neighbouring scores into one value), clipped outside the fitted range.
    """

    def __init__(self, risk: RiskScore | StatedRisk, method: Literal["platt", "isotonic"] = "platt") -> None:
        if method not in ("platt", "isotonic"):
            raise ValueError(f"method must be 'platt' or 'isotonic', not {method!r}")
        self.risk = risk
        self.method = method
        self._map: Any = None

    @property
    def feature_names(self) -> list[str]:
        return self.risk.feature_names

    def fit(self, X: np.ndarray, y: np.ndarray, feature_names: Sequence[str] | None = None) -> Calibrated:
        """Fit the recalibration map on a split the risk model was not trained on: ``X`` with the risk
        model's columns, ``y`` 1 where ``continue`` failed (``failure_data(rows, risk.feature_names)``)."""
        _same_columns(self, feature_names)
        X, labels = _checked(X, y)
        return self.fit_scores(self.risk.predict_risk(X), labels.astype(np.int64))

    def fit_scores(self, scores: np.ndarray, labels: np.ndarray) -> Calibrated:
        """Fit the map from raw ``scores`` to the 0/1 ``labels`` (1 = failed)."""
        scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels)
        if self.method == "isotonic":
            self._map = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
            self._map.fit(scores, labels)
            return self
        positives, negatives = int(labels.sum()), int(len(labels) - labels.sum())
        target_pos, target_neg = (positives + 1) / (positives + 2), 1 / (negatives + 2)
        targets = np.where(labels == 1, target_pos, target_neg)
        # Soft targets as weighted copies: each score once as class 1 (weight t) and once as class 0 (1 - t).
        z = _logit(scores)[:, None]
        self._map = LogisticRegression(C=1e6, max_iter=1000).fit(
            np.vstack([z, z]), np.r_[np.ones(len(z)), np.zeros(len(z))], sample_weight=np.r_[targets, 1 - targets])
        return self

    @property
    def platt_slope(self) -> float:
        """Platt's ``a``: positive means the recalibration keeps the score's order."""
        if self.method != "platt":
            raise AttributeError("only Platt scaling has a slope")
        return float(self._map.coef_[0, 0])

    def transform(self, scores: np.ndarray) -> np.ndarray:
        """Recalibrated probabilities of raw risk ``scores``."""
        scores = np.asarray(scores, dtype=np.float64)
        if self.method == "isotonic":
            return np.asarray(self._map.predict(scores), dtype=np.float64)
        return np.asarray(self._map.predict_proba(_logit(scores)[:, None])[:, 1], dtype=np.float64)

    def predict_risk(self, X: np.ndarray) -> np.ndarray:
        return self.transform(self.risk.predict_risk(X))


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, _LOGIT_EPS, 1 - _LOGIT_EPS)
    return np.asarray(np.log(p) - np.log1p(-p))


# ------------------------------------------------------------------------------------------ routers


class _RiskRouter(ABC):
    """A rule from one risk number to an overseer action; subclasses say where the cuts are."""

    def __init__(self, risk: RiskScore | StatedRisk | Calibrated, intervention: str) -> None:
        self.risk = risk
        self.intervention = intervention

    @property
    def feature_names(self) -> list[str]:
        return self.risk.feature_names

    @property
    @abstractmethod
    def actions(self) -> tuple[str, ...]:
        """The actions the router can route to."""

    @abstractmethod
    def thresholds(self) -> dict[str, float]:
        """The router's cuts by name (what an online controller records beside the risk)."""

    @abstractmethod
    def route(self, risk: np.ndarray) -> list[str]:
        """The action for each risk value."""

    def choose(self, X: np.ndarray, allowed: Iterable[str] | None = None) -> list[str]:
        """The routed action per prefix; ``allowed`` must include all of the router's actions."""
        if allowed is not None and not set(self.actions) <= set(allowed):
            raise ValueError(f"this router needs the actions {list(self.actions)}; allowed are only "
                             f"{sorted(set(allowed))}")
        return self.route(self.risk.predict_risk(X))

    def _risk_and_utilities(self, X: np.ndarray, y: np.ndarray, feature_names: Sequence[str] | None,
                            actions: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """The risk of each prefix of ``X`` and the utilities of ``actions`` in ``y`` (laid out as ``fit`` takes it)."""
        _same_columns(self, feature_names)
        X, y = _checked(X, y, len(ACTIONS))
        utilities = y[:, [ACTIONS.index(action) for action in actions]]
        missing = [action for j, action in enumerate(actions) if np.isnan(utilities[:, j]).any()]
        if missing:
            raise ValueError(f"the router needs a {missing[0]!r} branch on every row; some rows have none")
        return self.risk.predict_risk(X), utilities


class ScalarRouter(_RiskRouter):
    """Routes on one number: ``risk > threshold`` -> ``intervention``, otherwise ``continue``.

    ``fit`` tunes the threshold on rows to minimise their control regret (equivalently, maximise the
    summed utility of what is routed). Candidate thresholds are the rows' own risk values (and minus
    infinity: intervene everywhere), so the routing of any prefix depends only on how its risk orders
    against the tuning rows' risks: re-tuned after a strictly increasing recalibration, the router
    routes every prefix exactly as before.
    """

    def __init__(self, risk: RiskScore | StatedRisk | Calibrated, threshold: float | None = None,
                 intervention: str = "expert") -> None:
        super().__init__(risk, intervention)
        self.threshold = threshold

    @property
    def actions(self) -> tuple[str, ...]:
        return ("continue", self.intervention)

    def fit(self, X: np.ndarray, y: np.ndarray, feature_names: Sequence[str] | None = None) -> ScalarRouter:
        """Tune the threshold on ``X`` (the risk model's columns) and ``y``, realised utilities with one column
        per action of ``ACTIONS`` (``utility_data(rows, router.feature_names)``)."""
        risk, utilities = self._risk_and_utilities(X, y, feature_names, ("continue", self.intervention))
        self.threshold = tune_threshold(risk, utilities[:, 0], utilities[:, 1])
        return self

    def thresholds(self) -> dict[str, float]:
        if self.threshold is None:
            raise ValueError("the router has no threshold: give one or fit it")
        return {"threshold": float(self.threshold)}

    def route(self, risk: np.ndarray) -> list[str]:
        threshold = self.thresholds()["threshold"]
        return [self.intervention if value > threshold else "continue" for value in np.asarray(risk)]


class TwoThresholdRouter(_RiskRouter):
    """Two cuts on one number: ``continue`` up to ``low``, ``intervention`` up to ``high``, ``quit`` above.

    Both cuts are tuned jointly on rows to minimise regret, over the same candidates as
    ``ScalarRouter`` (so the same invariance under strictly increasing recalibration holds).
    """

    def __init__(self, risk: RiskScore | Calibrated, low: float | None = None, high: float | None = None,
                 intervention: str = "expert") -> None:
        super().__init__(risk, intervention)
        self.low, self.high = low, high

    @property
    def actions(self) -> tuple[str, ...]:
        return ("continue", "quit", self.intervention)

    def fit(self, X: np.ndarray, y: np.ndarray, feature_names: Sequence[str] | None = None) -> TwoThresholdRouter:
        """Tune both cuts on ``X`` and ``y`` as ``ScalarRouter.fit`` takes them."""
        risk, utilities = self._risk_and_utilities(X, y, feature_names, ("continue", self.intervention, "quit"))
        self.low, self.high = tune_two_thresholds(risk, *utilities.T)
        return self

    def thresholds(self) -> dict[str, float]:
        if self.low is None or self.high is None:
            raise ValueError("the router has no thresholds: give them or fit it")
        return {"threshold_low": float(self.low), "threshold_high": float(self.high)}

    def route(self, risk: np.ndarray) -> list[str]:
        cuts = self.thresholds()
        low, high = cuts["threshold_low"], cuts["threshold_high"]
        return ["continue" if value <= low else self.intervention if value <= high else "quit"
                for value in np.asarray(risk)]


def _cut_candidates(scores: np.ndarray) -> np.ndarray:
    """Candidate cut points: minus infinity, then the distinct scores (thinned to order statistics)."""
    distinct = np.unique(scores)
    if len(distinct) > _MAX_CUTS:
        distinct = distinct[np.linspace(0, len(distinct) - 1, _MAX_CUTS).round().astype(int)]
    return np.r_[-np.inf, distinct]


def _cumulative_below(scores: np.ndarray, values: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """For each cut c: the sum of ``values`` over the prefixes with score <= c."""
    order = np.argsort(scores, kind="stable")
    sorted_scores, running = scores[order], np.r_[0.0, np.cumsum(values[order])]
    return np.asarray(running[np.searchsorted(sorted_scores, cuts, side="right")])


def tune_threshold(scores: np.ndarray, u_continue: np.ndarray, u_intervene: np.ndarray) -> float:
    """The threshold maximising summed utility of ``continue`` at score <= t and intervening above.

    Maximising the summed utility of the routed actions is minimising regret (``max_a U`` does not
    depend on the routing). Ties go to the lowest candidate.
    """
    scores = np.asarray(scores, dtype=np.float64)
    cuts = _cut_candidates(scores)
    total = _cumulative_below(scores, u_continue, cuts) + (u_intervene.sum() - _cumulative_below(scores, u_intervene,
                                                                                                  cuts))
    return float(cuts[int(np.argmax(total))])


def tune_two_thresholds(scores: np.ndarray, u_continue: np.ndarray, u_intervene: np.ndarray,
                        u_quit: np.ndarray) -> tuple[float, float]:
    """The cuts ``low <= high`` maximising summed utility of continue | intervene | quit by score.

    Total for cuts (j, k) is ``C(j) + I(k) - I(j) + Q_total - Q(k)`` with C, I, Q the continue, intervene
    and quit utilities summed up to a cut; for each k the best j <= k is a running maximum of ``C - I``,
    so the search is linear.
    """
    scores = np.asarray(scores, dtype=np.float64)
    cuts = _cut_candidates(scores)
    continued, intervened, quitted = (_cumulative_below(scores, u, cuts) for u in (u_continue, u_intervene, u_quit))
    gain = continued - intervened
    best_low = np.maximum.accumulate(gain)
    # Index of the first maximum of ``gain`` up to each k (ties: the lowest cut).
    first = np.zeros(len(cuts), dtype=int)
    for k in range(1, len(cuts)):
        first[k] = k if gain[k] > best_low[k - 1] else first[k - 1]
    total = best_low + intervened + quitted[-1] - quitted
    k = int(np.argmax(total))
    return float(cuts[first[k]]), float(cuts[k])


# -------------------------------------------------------------------------------------------- files


@dataclass(frozen=True)
class ModelFile:
    """A loaded model file: the model and what it needs to run on new prefixes."""

    model: Any
    kind: str
    feature_names: list[str]
    actions: tuple[str, ...]
    utility: UtilityConfig
    benchmark: str
    metadata: dict[str, Any]


def save_model(path: str | Path, model: FeatureModel, *, utility: UtilityConfig, benchmark: str,
               metadata: Mapping[str, Any] | None = None) -> Path:
    """Write ``model`` with its feature names, utility configuration and benchmark name (joblib).

    The file is a versioned dict; ``metadata`` (e.g. training rows, seed, dispersion) is stored as given.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": MODEL_FILE_FORMAT, "version": MODEL_FILE_VERSION, "kind": type(model).__name__,
        "model": model, "feature_names": list(model.feature_names),
        "actions": list(getattr(model, "actions", ())), "utility": dataclasses.asdict(utility),
        "benchmark": benchmark, "metadata": dict(metadata or {}),
        "sklearn_version": package_version("scikit-learn"),
    }
    buffer = io.BytesIO()
    joblib.dump(payload, buffer)
    write_atomically(path, buffer.getvalue())  # a deploy never reads a half-written model
    return path


def load_model(path: str | Path) -> ModelFile:
    """Read a file written by ``save_model``; ``FileNotFoundError``/``ValueError`` say what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no model file at {path}; train one with `gauntlet oversight train`")
    payload = joblib.load(path)
    if not isinstance(payload, dict) or payload.get("format") != MODEL_FILE_FORMAT:
        raise ValueError(f"{path} is not an oversight model file")
    if payload.get("version") != MODEL_FILE_VERSION:
        raise ValueError(f"{path} is an oversight model file of version {payload.get('version')}; this Gauntlet "
                         f"reads version {MODEL_FILE_VERSION}: train the model again")
    return ModelFile(model=payload["model"], kind=payload["kind"], feature_names=list(payload["feature_names"]),
                     actions=tuple(payload["actions"]), utility=UtilityConfig(**payload["utility"]),
                     benchmark=payload["benchmark"],
                     metadata={**payload["metadata"], "sklearn_version": payload["sklearn_version"]})
