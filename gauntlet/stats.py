"""The statistics every report of the platform uses, in one place.

Confidence intervals are percentile bootstraps, seeded so a report is reproducible:

* ``bootstrap_ci``: of a mean, resampling the values (episodes of a run, tasks of a suite);
* ``cluster_bootstrap_ci``: of a ratio of sums, resampling whole clusters (the prefixes of one
  episode move together, so an interval never pretends the rows of one episode are independent);
* ``stratified_bootstrap_ci``: of any statistic of scores and 0/1 labels, resampling each class apart
  (every resample has both classes, which AUROC and FPR@TPR need).

* ``macro_mean_ci``: of a mean of group means (a macro average), resampling each group apart.

Paired comparisons: ``sign_test`` (two runs of the same tasks, which one did better task by task).

Detection and calibration: ``auroc`` (the Mann-Whitney form: the chance a random positive scores above
a random negative, ties counted half; NaN with one class), ``fpr_at_tpr`` (the negatives flagged at the
highest threshold that flags the asked share of positives) and ``expected_calibration_error``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

BOOTSTRAP_RESAMPLES = 10_000


def bootstrap_ci(values: Sequence[float] | np.ndarray, level: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (NaN, NaN when there are none)."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        return float("nan"), float("nan")
    if data.size < 2:
        return float(data.mean()), float(data.mean())
    rng = np.random.default_rng(seed)
    # Resample in chunks so many values never need a resamples x n index matrix at once.
    chunk = max(1, 4_000_000 // data.size)
    means = np.concatenate([
        data[rng.integers(0, data.size, size=(min(chunk, resamples - start), data.size))].mean(axis=1)
        for start in range(0, resamples, chunk)])
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return float(low), float(high)


def cluster_bootstrap_ci(values: np.ndarray, clusters: np.ndarray, *, denominators: np.ndarray | None = None,
                         resamples: int = 1000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of ``sum(values) / sum(denominators)`` resampling clusters.

    Each resample draws as many clusters as there are, with replacement, and takes all their entries;
    with ``denominators`` of ones (the default) the statistic is the mean. ``clusters[i]`` names the
    cluster of entry i (an episode id). Resamples whose denominator is 0 are left out.
    """
    values = np.asarray(values, dtype=np.float64)
    denominators = np.ones_like(values) if denominators is None else np.asarray(denominators, dtype=np.float64)
    ids, inverse = np.unique(np.asarray(clusters), return_inverse=True)
    numerator_by_cluster = np.bincount(inverse, weights=values, minlength=len(ids))
    denominator_by_cluster = np.bincount(inverse, weights=denominators, minlength=len(ids))
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(len(ids), np.full(len(ids), 1 / len(ids)), size=resamples)
    with np.errstate(invalid="ignore", divide="ignore"):
        statistics = (counts @ numerator_by_cluster) / (counts @ denominator_by_cluster)
    statistics = statistics[np.isfinite(statistics)]
    if not len(statistics):
        return float("nan"), float("nan")
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(statistics, [tail, 100 - tail])
    return float(low), float(high)


def stratified_bootstrap_ci(statistic: Callable[[np.ndarray, np.ndarray], float], scores: np.ndarray,
                            labels: np.ndarray, *, resamples: int = 1000, level: float = 0.95,
                            seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic(scores, labels)``, resampling the positives
    (``labels == 1``) and the negatives apart, so every resample has both."""
    rng = np.random.default_rng(seed)
    positives, negatives = np.flatnonzero(labels == 1), np.flatnonzero(labels == 0)
    values = []
    for _ in range(resamples):
        picked = np.concatenate([rng.choice(positives, len(positives)), rng.choice(negatives, len(negatives))])
        values.append(statistic(scores[picked], labels[picked]))
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve of ``scores`` for 0/1 ``labels``: the Mann-Whitney U statistic over the
    product of the class sizes (ties count half); NaN when only one class occurs."""
    from scipy.stats import rankdata

    scores, positives = np.asarray(scores, dtype=np.float64), np.asarray(labels) == 1
    n_pos, n_neg = int(positives.sum()), int((~positives).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[positives].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def fpr_at_tpr(scores: np.ndarray, labels: np.ndarray, tpr: float = 0.95) -> float:
    """The share of negatives flagged (score >= threshold) at the highest threshold that flags at least
    ``tpr`` of the positives."""
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels)
    positives = np.sort(scores[labels == 1])
    threshold = positives[int(np.floor(round(1.0 - tpr, 12) * len(positives)))]
    return float((scores[labels == 0] >= threshold).mean())


def expected_calibration_error(probabilities: np.ndarray, labels: np.ndarray, bins: int = 15) -> float:
    """ECE: ``sum_b (n_b / n) * |mean(label in b) - mean(probability in b)|`` over equal-width bins of [0, 1].

    Bin b holds probabilities in ``[b / bins, (b + 1) / bins)``; the last bin also holds 1.0.
    """
    probabilities = np.asarray(probabilities, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.float64)
    which = np.minimum((probabilities * bins).astype(np.int64), bins - 1)
    total = 0.0
    for b in np.unique(which):
        inside = which == b
        total += inside.sum() * abs(labels[inside].mean() - probabilities[inside].mean())
    return float(total / len(probabilities)) if len(probabilities) else float("nan")


def macro_mean_ci(groups: Sequence[Sequence[float]], level: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES,
                  seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of the groups' means (a macro average, e.g. DORA's score over
    its dimensions), resampling each group's values apart, so every resample has every group."""
    if not groups or any(len(values) == 0 for values in groups):
        raise ValueError("macro_mean_ci needs at least one group and a value in each")
    rng = np.random.default_rng(seed)
    means = np.zeros(resamples)
    for values in groups:
        data = np.asarray(values, dtype=np.float64)
        means += data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(means / len(groups), [tail, 1.0 - tail])
    return float(low), float(high)


def sign_test(better: int, worse: int) -> float:
    """The two-sided exact sign test of paired outcomes, ties dropped (scipy's binomial test at p = 1/2 on the
    ``better + worse`` untied pairs; 1.0 with none)."""
    from scipy.stats import binomtest

    if better < 0 or worse < 0:
        raise ValueError(f"counts of pairs must be >= 0; got {better} and {worse}")
    return 1.0 if better + worse == 0 else float(binomtest(better, better + worse, 0.5).pvalue)


__all__ = ["BOOTSTRAP_RESAMPLES", "auroc", "bootstrap_ci", "cluster_bootstrap_ci", "expected_calibration_error",
           "fpr_at_tpr", "macro_mean_ci", "sign_test", "stratified_bootstrap_ci"]

