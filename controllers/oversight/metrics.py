"""How well an overseer's choices do on branched rows, and the result table of the oversight experiment.

Control regret (the paper's measure): on a test prefix the overseer chooses action ``c``; every
action's realised utility from that identical prefix is known, so the prefix's regret is
``max_a U_a - U_c``. Control regret is its mean over test prefixes; normalised regret divides by the
mean over the same prefixes of ``max_a U_a - min_a U_a`` (0 = the oracle, 1 = as far below the oracle
as the worst action on average). References: the oracle (regret 0) and the fixed policies
``always_<action>``.

A prefix collected with several draws (rows with draw >= 1 rerun every action with fresh randomness)
counts once, with each action's utility averaged over its draws (``prefix_table``): the expected
utility is what an overseer should maximise, and one prefix must not weigh more because it was drawn
again. Uncertainty: percentile bootstrap over episodes (``gauntlet.stats.cluster_bootstrap_ci``), never
over rows, since the prefixes of one episode share its rollouts. Splits are by episode
(``split_by_episode``; ``cross_evaluate`` cross-fits over folds of episodes, for collections too small
to hold out) for the same reason. Each action-conditioned controller is also compared with scalar
routing and the fixed policies prefix by prefix (``comparisons``: the paired regret difference and its CI).
An action kept as a reference (``EvaluationConfig.reference``, the LLM plans' privileged expert) is
reported but never chosen, and the oracle is the best of the other actions.

Calibration of the scalar baseline: ECE with 15 equal-width bins and AUROC (``sklearn``). The count of
``identical_risk_different_action`` measures how much a scalar cannot express.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from gauntlet.controllers.oversight.models import (
    LATENT_RISK,
    STATED_CONFIDENCE,
    ActionConditioned,
    Calibrated,
    RiskScore,
    Row,
    ScalarRouter,
    StatedRisk,
    TwoThresholdRouter,
    actions_in,
    choose_from_scores,
    continue_failed,
    design_matrix,
    failure_data,
    utility_data,
)
from gauntlet.stats import auroc, cluster_bootstrap_ci, expected_calibration_error

# ------------------------------------------------------------------------------------------ prefixes


def prefix_key(row: Row) -> tuple[str, int, int]:
    """A prefix: (benchmark, episode, t). Draws of one prefix share it."""
    return (row["benchmark"], int(row["episode"]), int(row["t"]))


def episode_key(row: Row) -> tuple[str, int]:
    """An episode: (benchmark, episode). All of an episode's rows share its rollouts."""
    return (row["benchmark"], int(row["episode"]))


@dataclass(frozen=True)
class PrefixTable:
    """One entry per prefix: its representative row and its utilities averaged over draws.

    ``rows[i]`` is the prefix's row of lowest draw (its features and ``continue`` label: the features
    are those of the prefix, the same for every draw); ``utilities[i, j]`` the mean of
    ``U_{actions[j]}`` over the prefix's draws; ``episodes[i]`` an integer id of its episode.
    """

    rows: list[Row]
    actions: tuple[str, ...]
    utilities: np.ndarray
    episodes: np.ndarray
    draws: np.ndarray


def prefix_table(rows: Sequence[Row], actions: Sequence[str] | None = None) -> PrefixTable:
    """Group ``rows`` by prefix (see ``PrefixTable``); ``actions`` default to those every row has."""
    actions = tuple(actions) if actions is not None else actions_in(rows)
    groups: dict[tuple[str, int, int], list[Row]] = defaultdict(list)
    for row in rows:
        groups[prefix_key(row)].append(row)
    keys = sorted(groups)
    episode_ids: dict[tuple[str, int], int] = {}
    representatives, utilities, episodes, draws = [], [], [], []
    for key in keys:
        group = sorted(groups[key], key=lambda row: int(row["draw"]))
        representatives.append(group[0])
        utilities.append([np.mean([row["branches"][a]["utility"] for row in group]) for a in actions])
        episodes.append(episode_ids.setdefault(key[:2], len(episode_ids)))
        draws.append(len(group))
    return PrefixTable(rows=representatives, actions=actions,
                       utilities=np.array(utilities, dtype=np.float64).reshape(len(keys), len(actions)),
                       episodes=np.array(episodes, dtype=np.int64), draws=np.array(draws, dtype=np.int64))


def split_by_episode(rows: Sequence[Row], test_fraction: float, seed: int) -> tuple[list[Row], list[Row]]:
    """(train, test) rows with no episode in both: every row of an episode goes to one side.

    ``round(test_fraction * episodes)`` episodes (at least one, and at least one left for training when
    there are two or more) are drawn for the test side with ``seed``.
    """
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be between 0 and 1, not {test_fraction}")
    episodes = sorted({episode_key(row) for row in rows})
    if not episodes:
        return [], []
    n_test = min(max(1, round(test_fraction * len(episodes))), max(1, len(episodes) - 1))
    chosen = np.random.default_rng(seed).permutation(len(episodes))[:n_test]
    test_episodes = {episodes[i] for i in chosen}
    train = [row for row in rows if episode_key(row) not in test_episodes]
    test = [row for row in rows if episode_key(row) in test_episodes]
    return train, test


# -------------------------------------------------------------------------------------------- regret


def optimal_actions(utilities: np.ndarray, actions: Sequence[str]) -> list[str]:
    """The best action per prefix (ties: the first in ``actions`` order)."""
    return [actions[j] for j in np.asarray(utilities).argmax(axis=1)]


def regret_per_prefix(utilities: np.ndarray, actions: Sequence[str], chosen: Sequence[str]) -> np.ndarray:
    """``max_a U_a - U_chosen`` per prefix."""
    column = {action: j for j, action in enumerate(actions)}
    picked = np.array([column[action] for action in chosen], dtype=np.int64)
    utilities = np.asarray(utilities)
    return np.asarray(utilities.max(axis=1) - utilities[np.arange(len(picked)), picked])


def regret_spread(utilities: np.ndarray) -> np.ndarray:
    """``max_a U_a - min_a U_a`` per prefix: what is at stake there (normalised regret's denominator)."""
    utilities = np.asarray(utilities)
    return np.asarray(utilities.max(axis=1) - utilities.min(axis=1))


def control_regret(utilities: np.ndarray, actions: Sequence[str], chosen: Sequence[str]) -> float:
    """Mean over prefixes of ``max_a U_a - U_chosen``."""
    return float(regret_per_prefix(utilities, actions, chosen).mean())


def normalised_regret(utilities: np.ndarray, actions: Sequence[str], chosen: Sequence[str]) -> float:
    """Control regret divided by the mean of ``max_a U_a - min_a U_a``; NaN when nothing is at stake."""
    scale = float(regret_spread(utilities).mean())
    return control_regret(utilities, actions, chosen) / scale if scale > 0 else float("nan")


def reference_policies(utilities: np.ndarray, actions: Sequence[str]) -> dict[str, list[str]]:
    """The references' choices: ``oracle`` (the best action, regret 0) and ``always_<action>`` for each."""
    n = np.asarray(utilities).shape[0]
    policies = {"oracle": optimal_actions(utilities, actions)}
    policies.update({f"always_{action}": [action] * n for action in actions})
    return policies


# -------------------------------------------------------------------------------------- calibration


def identical_risk_different_action(risk: np.ndarray, best_actions: Sequence[str], bins: int = 20) -> int:
    """Prefixes whose risk a threshold router cannot tell from others that need a different action.

    Risk in [0, 1] is cut into ``bins`` equal-width bins (as in ``gauntlet.stats.expected_calibration_error``). In each
    bin, the majority optimal action is the most frequent one (ties: the first of them in sorted
    order). The count is the number of prefixes whose optimal action differs from their bin's majority;
    a bin whose prefixes all share one optimal action adds nothing. It is the least number of prefixes
    any rule that sees only the binned risk must route to a suboptimal action.
    """
    risk = np.asarray(risk, dtype=np.float64)
    which = np.minimum((risk * bins).astype(np.int64), bins - 1)
    by_bin: dict[int, Counter[str]] = defaultdict(Counter)
    for b, action in zip(which.tolist(), best_actions):
        by_bin[b][action] += 1
    count = 0
    for counter in by_bin.values():
        majority = max(sorted(counter), key=lambda action: counter[action])
        count += sum(counter.values()) - counter[majority]
    return count


# ------------------------------------------------------------------------------------------ variance


def within_action_variance(rows: Sequence[Row], actions: Sequence[str] | None = None) -> dict[str, Any]:
    """How much one action's utility varies between draws of the same prefix.

    Only prefixes with repeat draws (some row with draw >= 1) count. Per action: ``within`` is the mean
    over those prefixes of the sample variance of its utility across draws; ``between`` the variance
    across those prefixes of its draw-averaged utility, for scale (within much smaller than between
    means the prefix decides most of the outcome).
    """
    repeated = {prefix_key(row) for row in rows if int(row["draw"]) >= 1}
    chosen_rows = [row for row in rows if prefix_key(row) in repeated]
    if not chosen_rows:
        return {"prefixes": 0, "actions": {}}
    actions = tuple(actions) if actions is not None else actions_in(chosen_rows)
    groups: dict[tuple[str, int, int], list[Row]] = defaultdict(list)
    for row in chosen_rows:
        groups[prefix_key(row)].append(row)
    per_action = {}
    for action in actions:
        draws = [np.array([row["branches"][action]["utility"] for row in group]) for group in groups.values()]
        per_action[action] = {
            "within": float(np.mean([d.var(ddof=1) for d in draws if len(d) > 1])),
            "between": float(np.var([d.mean() for d in draws])),
        }
    return {"prefixes": len(groups), "actions": per_action}


# -------------------------------------------------------------------------------------- evaluation


@dataclass(frozen=True)
class EvaluationConfig:
    """What ``evaluate`` fits and reports.

    The scalar baseline's risk model is fitted on ``1 - calibration_fraction`` of the training episodes;
    the rest (the calibration split) fits Platt and isotonic recalibration and tunes every router's
    threshold, on risk the model did not see in training (a forest's in-sample probabilities are
    overconfident, and a threshold tuned on them would sit in the wrong place). The action-conditioned
    models need no held-out split and are fitted on all training rows.
    """

    calibration_fraction: float = 0.3
    intervention: str = "expert"
    """The scalar routers' intervention."""
    reference: tuple[str, ...] = ()
    """Actions measured only as references (the LLM plans' privileged expert): no overseer chooses them,
    the oracle is the best of the other actions, and each is reported as ``reference_<action>``, its
    regret against that oracle (negative where it beats every action an overseer has)."""
    risk_kind: Literal["rf", "logistic"] = "rf"
    controller_kinds: tuple[Literal["rf", "gbr"], ...] = ("rf", "gbr")
    dispersion: float | None = None
    """The controllers' dispersion penalty; None tunes it on the calibration split from ``dispersion_grid``
    (as the routers' thresholds are tuned there), then refits on all training rows."""
    dispersion_grid: tuple[float, ...] = (0.0, 0.25, 0.5, 1.0, 2.0)
    n_boot: int = 1000
    confidence: float = 0.95
    risk_bins: int = 20
    ece_bins: int = 15
    n_jobs: int = 1
    trees: int | None = None
    """Trees of every random forest (the risk score's and the ``rf`` controller's); None: the paper's 200.
    The boosted controller keeps its own size."""

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> EvaluationConfig:
        """From a JSON-like mapping (lists become tuples); unknown keys are a ``ValueError``."""
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown evaluation settings {unknown}; known are {sorted(known)}")
        settings: dict[str, Any] = {key: tuple(value) if isinstance(value, list) else value
                                    for key, value in values.items()}
        return cls(**settings)


def evaluate(train_rows: Sequence[Row], test_rows: Sequence[Row],
             config: EvaluationConfig | Mapping[str, Any] | None = None, *, seed: int) -> dict[str, Any]:
    """The result table on ``test_rows`` of overseers trained on ``train_rows`` (disjoint episodes).

    Methods (each with regret, normalised regret, their bootstrap CIs over test episodes, mean utility
    and the share of each chosen action): ``oracle`` and ``always_<action>``; the scalar routers
    ``scalar_raw``, ``scalar_platt`` and ``scalar_isotonic`` (threshold re-tuned after recalibration),
    ``scalar_platt_raw_threshold`` and ``scalar_isotonic_raw_threshold`` (the raw score's tuned threshold
    applied to the recalibrated score, as a deployed threshold would be if the score were recalibrated
    under it), ``scalar_two_threshold`` (raw; quit above the second cut); where the rows carry the
    agent's verbalised confidence (``STATED_CONFIDENCE``), ``scalar_confidence`` and
    ``scalar_confidence_platt`` (routing on 1 - that confidence alone, raw and recalibrated); where they
    carry the latent monitor's score (``LATENT_RISK``), ``scalar_latent`` and ``scalar_latent_platt``; and
    ``action_conditioned_<kind>``. Also: ECE and AUROC of the raw and recalibrated risk on the test
    prefixes, the tuned thresholds, the identical-risk count per scalar and the within-action variance
    of the test rows.
    """
    config = _config(config)
    if not train_rows or not test_rows:
        raise ValueError("evaluate needs training rows and test rows")
    shared = set(map(episode_key, train_rows)) & set(map(episode_key, test_rows))
    if shared:
        raise ValueError(f"{len(shared)} episodes are in both the training and the test rows "
                         f"(e.g. {sorted(shared)[0]}); split with split_by_episode")
    actions = _checked_actions([*train_rows, *test_rows], config)
    full_test = test_rows
    train_rows, test_rows = drop_actions(train_rows, config.reference), drop_actions(test_rows, config.reference)
    fold = _fit_and_choose(train_rows, test_rows, actions, config, seed)
    summary = _summary(fold.table, fold.choices, fold.risk, test_rows, config, seed)
    summary["methods"].update(_reference_results(full_test, fold.table, config, seed))
    for name, slope in fold.slopes.items():
        summary["calibration"][name]["slope"] = slope
    return {
        **summary,
        "n_train_rows": len(train_rows),
        "thresholds": fold.thresholds, "dispersion": fold.dispersion,
        "config": dataclasses.asdict(config), "seed": seed,
    }


def split_into_folds(rows: Sequence[Row], folds: int, seed: int) -> list[list[Row]]:
    """``folds`` groups of rows with every episode in exactly one: the episodes, shuffled with ``seed``, are
    dealt round-robin, so fold sizes differ by at most one episode."""
    episodes = sorted({episode_key(row) for row in rows})
    if folds < 2:
        raise ValueError(f"cross-validation needs 2 or more folds, not {folds}")
    if folds > len(episodes):
        raise ValueError(f"{folds} folds need {folds} or more episodes; the rows hold {len(episodes)}: "
                         "use fewer folds or collect more episodes")
    order = np.random.default_rng(seed).permutation(len(episodes))
    fold_of = {episodes[i]: position % folds for position, i in enumerate(order)}
    groups: list[list[Row]] = [[] for _ in range(folds)]
    for row in rows:
        groups[fold_of[episode_key(row)]].append(row)
    return groups


def cross_evaluate(rows: Sequence[Row], folds: int, config: EvaluationConfig | Mapping[str, Any] | None = None, *,
                   seed: int) -> dict[str, Any]:
    """``evaluate`` cross-fitted over ``folds`` folds of episodes: every episode is a test episode once.

    For small collections (a few dozen LLM episodes), where one held-out split leaves a handful of test
    episodes. Each fold's overseers are trained on the other folds exactly as ``evaluate`` trains them
    (risk score, recalibration, thresholds and dispersion penalty fitted anew), and choose on that fold's
    prefixes; every method's regret, its bootstrap CI over episodes and its calibration are then measured
    on all prefixes together, each decided by the overseer that never saw its episode. Thresholds and
    penalties are listed per fold (``folds_detail``). The identical-risk count pools the folds' risk
    scores, which come from different fits: read it as the count a router of each fold's kind faces.
    """
    config = _config(config)
    if not rows:
        raise ValueError("cross_evaluate needs rows")
    actions = _checked_actions(rows, config)
    full_rows, deployable = rows, drop_actions(rows, config.reference)
    groups = split_into_folds(deployable, folds, seed)
    smallest_train = min(len({episode_key(row) for row in rows}) - len({episode_key(row) for row in group})
                         for group in groups)
    if smallest_train < 2:
        raise ValueError(f"with {folds} folds a fold trains on {smallest_train} episode; the scalar baseline needs "
                         "2 or more: use fewer folds or collect more episodes")
    results = []
    for test_rows in groups:
        held_out = {episode_key(row) for row in test_rows}
        train_rows = [row for row in deployable if episode_key(row) not in held_out]
        results.append(_fit_and_choose(train_rows, test_rows, actions, config, seed))
    table = prefix_table(deployable, actions)
    keys = [prefix_key(row) for row in table.rows]
    shared_methods = [name for name in results[0].choices if all(name in fold.choices for fold in results)]
    shared_scores = [name for name in results[0].risk if all(name in fold.risk for fold in results)]
    choice_by_key: dict[str, dict[tuple[str, int, int], str]] = {name: {} for name in shared_methods}
    risk_by_key: dict[str, dict[tuple[str, int, int], float]] = {name: {} for name in shared_scores}
    for fold in results:
        fold_keys = [prefix_key(row) for row in fold.table.rows]
        for name in shared_methods:
            choice_by_key[name].update(zip(fold_keys, fold.choices[name]))
        for name in shared_scores:
            risk_by_key[name].update(zip(fold_keys, fold.risk[name].tolist()))
    choices = {name: [choice_by_key[name][key] for key in keys] for name in shared_methods}
    risk = {name: np.array([risk_by_key[name][key] for key in keys]) for name in shared_scores}
    summary = _summary(table, choices, risk, deployable, config, seed)
    summary["methods"].update(_reference_results(full_rows, table, config, seed))
    return {
        **summary,
        "folds": folds,
        "folds_detail": [{"test_episodes": int(len(np.unique(fold.table.episodes))),
                          "test_prefixes": len(fold.table.rows),
                          "thresholds": fold.thresholds, "dispersion": fold.dispersion,
                          "platt_slopes": fold.slopes} for fold in results],
        "config": dataclasses.asdict(config), "seed": seed,
    }


def _config(config: EvaluationConfig | Mapping[str, Any] | None) -> EvaluationConfig:
    if config is None:
        return EvaluationConfig()
    return config if isinstance(config, EvaluationConfig) else EvaluationConfig.from_mapping(config)


def _checked_actions(rows: Sequence[Row], config: EvaluationConfig) -> tuple[str, ...]:
    """The actions an overseer may choose: those every row has, but the references."""
    actions = actions_in(rows)
    missing = [action for action in config.reference if action not in actions]
    if missing:
        raise ValueError(f"the reference actions {missing} are not among the rows' actions {list(actions)}")
    if config.intervention in config.reference:
        raise ValueError(f"the scalar routers' intervention {config.intervention!r} is a reference, which no "
                         "overseer chooses: route to another action")
    actions = tuple(action for action in actions if action not in config.reference)
    if config.intervention not in actions:
        raise ValueError(f"the scalar routers' intervention {config.intervention!r} is not among the rows' "
                         f"actions {list(actions)}")
    return actions


def drop_actions(rows: Sequence[Row], actions: Iterable[str]) -> list[dict[str, Any]]:
    """Copies of ``rows`` without the branches of ``actions``: what an overseer that cannot take those
    actions is trained and measured on."""
    dropped = set(actions)
    return [{**row, "branches": {action: branch for action, branch in row["branches"].items()
                                 if action not in dropped}} for row in rows]


def _reference_results(rows: Sequence[Row], table: PrefixTable, config: EvaluationConfig,
                       seed: int) -> dict[str, dict[str, Any]]:
    """``reference_<action>`` for each reference: always taking it, against the oracle of ``table`` (the
    prefixes of ``rows`` over the actions an overseer has)."""
    if not config.reference:
        return {}
    full = prefix_table(rows, (*table.actions, *config.reference))
    if [prefix_key(row) for row in full.rows] != [prefix_key(row) for row in table.rows]:
        raise ValueError("the reference rows and the evaluated prefixes differ")  # a bug, not bad input
    best = table.utilities.max(axis=1)
    results = {}
    for j, action in enumerate(config.reference, start=len(table.actions)):
        utilities = full.utilities[:, j]
        results[f"reference_{action}"] = _scored(best - utilities, utilities, table, {action: 1.0}, config, seed)
    return results


@dataclass(frozen=True)
class _Fold:
    """What overseers trained on one side chose on the other: ``table`` the test prefixes, ``choices`` per
    method aligned with them, ``risk`` every scalar score's value on them."""

    table: PrefixTable
    choices: dict[str, list[str]]
    risk: dict[str, np.ndarray]
    thresholds: dict[str, Any]
    dispersion: dict[str, float]
    slopes: dict[str, float]
    """The Platt slope of each Platt-recalibrated score."""


def _fit_and_choose(train_rows: Sequence[Row], test_rows: Sequence[Row], actions: tuple[str, ...],
                    config: EvaluationConfig, seed: int) -> _Fold:
    trained_on = len(set(map(episode_key, train_rows)))
    if trained_on < 2:
        raise ValueError(f"the training rows hold {trained_on} episode; the scalar baseline needs 2 or more (its risk "
                         "score is fitted on some, its threshold tuned on others): collect more episodes")
    test = prefix_table(test_rows, actions)
    choices: dict[str, list[str]] = dict(reference_policies(test.utilities, actions))
    # The scalar baseline: risk on the fit split; recalibration and thresholds on the calibration split.
    fit_rows, calibration_rows = split_by_episode(train_rows, config.calibration_fraction, seed)
    risk = RiskScore(config.risk_kind, seed=seed, n_jobs=config.n_jobs, n_estimators=config.trees).fit(
        *failure_data(fit_rows))
    X_calibration, utilities_calibration, _ = utility_data(calibration_rows, risk.feature_names)
    failed_calibration = continue_failed(calibration_rows)
    scores: dict[str, RiskScore | StatedRisk | Calibrated] = {"raw": risk}
    methods: tuple[Literal["platt", "isotonic"], ...] = ("platt", "isotonic")
    for method in methods:
        scores[method] = Calibrated(risk, method).fit(X_calibration, failed_calibration)
    X_test, _ = design_matrix(test.rows, risk.feature_names)
    thresholds: dict[str, Any] = {}
    raw_router = ScalarRouter(risk, intervention=config.intervention).fit(X_calibration, utilities_calibration)
    for name, score in scores.items():
        router = raw_router if name == "raw" else ScalarRouter(score, intervention=config.intervention).fit(
            X_calibration, utilities_calibration)
        choices[f"scalar_{name}"] = router.choose(X_test)
        thresholds[name] = router.threshold
        if name != "raw":
            fixed = ScalarRouter(score, threshold=raw_router.threshold, intervention=config.intervention)
            choices[f"scalar_{name}_raw_threshold"] = fixed.choose(X_test)
    # The agent's own word, where rows carry it (an LLM's verbalised confidence): routed on alone, raw and
    # Platt-recalibrated, thresholds tuned on the calibration split like the forest's.
    # The same for the latent monitor's score of the last reply, where rows carry it.
    for feature, stem, confidence in ((STATED_CONFIDENCE, "confidence", True), (LATENT_RISK, "latent", False)):
        if feature not in risk.feature_names:
            continue
        stated = StatedRisk(feature, risk.feature_names, confidence=confidence)
        scores[stem] = stated
        scores[f"{stem}_platt"] = Calibrated(stated, "platt").fit(X_calibration, failed_calibration)
        for name in (stem, f"{stem}_platt"):
            router = ScalarRouter(scores[name], intervention=config.intervention).fit(X_calibration,
                                                                                       utilities_calibration)
            choices[f"scalar_{name}"] = router.choose(X_test)
            thresholds[name] = router.threshold
    if "quit" in actions:
        two = TwoThresholdRouter(risk, intervention=config.intervention).fit(X_calibration, utilities_calibration)
        choices["scalar_two_threshold"] = two.choose(X_test)
        thresholds["two_threshold"] = [two.low, two.high]

    dispersions: dict[str, float] = {}
    for kind in config.controller_kinds:
        trees = config.trees if kind == "rf" else None
        dispersion = config.dispersion
        if dispersion is None:
            dispersion = tune_dispersion(kind, fit_rows, calibration_rows, config.dispersion_grid, seed=seed,
                                         n_jobs=config.n_jobs, n_estimators=trees)
            untuned = ActionConditioned(kind, n_estimators=trees, dispersion=0.0, seed=seed,
                                        n_jobs=config.n_jobs).fit(*utility_data(train_rows))
            choices[f"action_conditioned_{kind}_lambda0"] = untuned.choose(
                design_matrix(test.rows, untuned.feature_names)[0])
        dispersions[kind] = dispersion
        model = ActionConditioned(kind, n_estimators=trees, dispersion=dispersion, seed=seed, n_jobs=config.n_jobs)
        model.fit(*utility_data(train_rows))
        choices[f"action_conditioned_{kind}"] = model.choose(design_matrix(test.rows, model.feature_names)[0])

    risk_values = {name: np.asarray(score.predict_risk(X_test), dtype=np.float64) for name, score in scores.items()}
    slopes = {name: score.platt_slope for name, score in scores.items()
              if isinstance(score, Calibrated) and score.method == "platt"}
    return _Fold(table=test, choices=choices, risk=risk_values,
                 thresholds={name: _json_threshold(value) for name, value in thresholds.items()},
                 dispersion=dispersions, slopes=slopes)


def _summary(table: PrefixTable, choices: Mapping[str, Sequence[str]], risk: Mapping[str, np.ndarray],
             test_rows: Sequence[Row], config: EvaluationConfig, seed: int) -> dict[str, Any]:
    labels = continue_failed(table.rows)
    best = optimal_actions(table.utilities, table.actions)
    calibration = {name: {"ece": expected_calibration_error(values, labels, config.ece_bins),
                          "auroc": auroc(values, labels)} for name, values in risk.items()}
    identical = {name: identical_risk_different_action(values, best, config.risk_bins) for name, values in risk.items()}
    methods = {name: _method_result(table, chosen, config, seed) for name, chosen in choices.items()}
    return {
        "actions": list(table.actions),
        "n_test_rows": len(test_rows), "n_test_prefixes": len(table.rows),
        "n_test_episodes": int(len(np.unique(table.episodes))),
        "methods": methods,
        "comparisons": _comparisons(table, choices, methods, config, seed),
        "calibration": calibration,
        "identical_risk_different_action": {"bins": config.risk_bins, "prefixes": len(table.rows), **identical},
        "within_action_variance": within_action_variance(test_rows, table.actions),
    }


def _comparisons(table: PrefixTable, choices: Mapping[str, Sequence[str]], methods: Mapping[str, Mapping[str, Any]],
                 config: EvaluationConfig, seed: int) -> dict[str, dict[str, Any]]:
    """Each action-conditioned controller against the scalar routing and the fixed policies, paired.

    The difference of the two methods' regret on each prefix, averaged, with its bootstrap CI over
    episodes (both decided the same prefixes, so the pairing removes what the prefixes share; an interval
    below 0 means the controller had less regret). Against: ``scalar_raw`` (the paper's scalar router),
    the scalar router and the fixed policy with the least regret on these prefixes (chosen after seeing
    them, which favours them, so a controller that still wins is not flattered).
    """
    def regret_of(name: str) -> np.ndarray:
        return regret_per_prefix(table.utilities, table.actions, choices[name])

    def least(prefix: str) -> str | None:
        names = [name for name in methods if name.startswith(prefix)]
        return min(names, key=lambda name: methods[name]["regret"]) if names else None

    rivals = {"scalar_raw": "scalar_raw" if "scalar_raw" in methods else None,
              "best_scalar": least("scalar_"), "best_fixed": least("always_")}
    comparisons: dict[str, dict[str, Any]] = {}
    for controller in (name for name in methods if name.startswith("action_conditioned_")):
        for role, rival in rivals.items():
            if rival is None:
                continue
            difference = regret_of(controller) - regret_of(rival)
            low, high = cluster_bootstrap_ci(difference, table.episodes, resamples=config.n_boot,
                                             level=config.confidence, seed=seed)
            comparisons[f"{controller} vs {role}"] = {"rival": rival, "regret_difference": float(difference.mean()),
                                                     "ci": [low, high]}
    return comparisons


def comparison_lines(result: Mapping[str, Any]) -> str:
    """The paired comparisons of an ``evaluate`` result, a line each."""
    level = f"{100 * result['config']['confidence']:g}% CI"
    return "\n".join(f"- {name} ({part['rival']}): regret difference {part['regret_difference']:+.3f} "
                     f"[{level} {part['ci'][0]:+.3f}, {part['ci'][1]:+.3f}]"
                     for name, part in result.get("comparisons", {}).items())


def tune_dispersion(kind: Literal["rf", "gbr"], fit_rows: Sequence[Row], calibration_rows: Sequence[Row],
                    grid: Sequence[float], *, seed: int, n_jobs: int = 1, n_estimators: int | None = None) -> float:
    """The dispersion penalty of ``grid`` with the least regret on the calibration rows, for a controller
    fitted on ``fit_rows`` (ties go to the smaller penalty)."""
    if not grid:
        raise ValueError("the dispersion grid is empty")
    model = ActionConditioned(kind, n_estimators=n_estimators, seed=seed, n_jobs=n_jobs).fit(*utility_data(fit_rows))
    table = prefix_table(calibration_rows, model.actions)
    mean, std = model.predict(design_matrix(table.rows, model.feature_names)[0], return_std=True)
    regrets = [(control_regret(table.utilities, model.actions,
                               choose_from_scores(mean - penalty * std, model.actions)), penalty)
               for penalty in sorted(grid)]
    return min(regrets, key=lambda pair: pair[0])[1]


def _method_result(table: PrefixTable, chosen: Sequence[str], config: EvaluationConfig, seed: int) -> dict[str, Any]:
    regrets = regret_per_prefix(table.utilities, table.actions, chosen)
    column = {action: j for j, action in enumerate(table.actions)}
    utilities = table.utilities[np.arange(len(chosen)), [column[action] for action in chosen]]
    counts = Counter(chosen)
    shares = {action: counts[action] / len(chosen) for action in table.actions if counts[action]}
    return _scored(regrets, utilities, table, shares, config, seed)


def _scored(regrets: np.ndarray, utilities: np.ndarray, table: PrefixTable, shares: dict[str, float],
            config: EvaluationConfig, seed: int) -> dict[str, Any]:
    """A method's row of the table from its regret and utility on each prefix of ``table``."""
    spread = regret_spread(table.utilities)

    def interval(denominators: np.ndarray | None = None) -> list[float]:
        return list(cluster_bootstrap_ci(regrets, table.episodes, denominators=denominators,
                                         resamples=config.n_boot, level=config.confidence, seed=seed))

    scale = float(spread.mean())
    return {
        "regret": float(regrets.mean()),
        "regret_ci": interval(),
        "normalised_regret": float(regrets.mean()) / scale if scale > 0 else float("nan"),
        "normalised_regret_ci": interval(spread),
        "mean_utility": float(utilities.mean()),
        "action_share": shares,
    }


def _json_threshold(value: Any) -> Any:
    """Thresholds for a JSON table: minus infinity (intervene on every prefix) becomes None."""
    if isinstance(value, list):
        return [_json_threshold(v) for v in value]
    return float(value) if value is not None and np.isfinite(value) else None


def evaluate_by_strength(train_rows: Sequence[Row], test_rows: Sequence[Row],
                         config: EvaluationConfig | Mapping[str, Any] | None = None, *,
                         seed: int) -> dict[str, dict[str, Any]]:
    """``evaluate`` separately for each ``expert_strength`` the rows were collected with.

    The intervention-strength ablation: a weaker expert makes every intervention worth less, so the
    action-conditioned controller's gain over the references should shrink with it. Keys are the
    strengths as strings (JSON keys), in increasing order.
    """
    groups = _group(train_rows, lambda row: float(row["expert_strength"]))
    tests = _group(test_rows, lambda row: float(row["expert_strength"]))
    return {str(strength): evaluate(groups[strength], tests[strength], config, seed=seed)
            for strength in sorted(groups) if strength in tests}


def cross_evaluate_by_strength(rows: Sequence[Row], folds: int,
                               config: EvaluationConfig | Mapping[str, Any] | None = None, *,
                               seed: int) -> dict[str, dict[str, Any]]:
    """``cross_evaluate`` separately for each ``expert_strength`` (as ``evaluate_by_strength``)."""
    groups = _group(rows, lambda row: float(row["expert_strength"]))
    return {str(strength): cross_evaluate(groups[strength], folds, config, seed=seed) for strength in sorted(groups)}


def _group(rows: Iterable[Row], key: Callable[[Row], float]) -> dict[float, list[Row]]:
    groups: dict[float, list[Row]] = defaultdict(list)
    for row in rows:
        groups[key(row)].append(row)
    return groups


def markdown_table(result: Mapping[str, Any]) -> str:
    """The methods of an ``evaluate`` result as a Markdown table (regret and normalised regret with CIs)."""
    level = f"{100 * result['config']['confidence']:g}% CI"
    lines = [f"| method | regret [{level}] | normalised regret [{level}] | mean utility |", "|---|---|---|---|"]
    for name, method in result["methods"].items():
        low, high = method["regret_ci"]
        n_low, n_high = method["normalised_regret_ci"]
        lines.append(f"| {name} | {method['regret']:.3f} [{low:.3f}, {high:.3f}] | "
                     f"{method['normalised_regret']:.3f} [{n_low:.3f}, {n_high:.3f}] | {method['mean_utility']:.3f} |")
    return "\n".join(lines)
