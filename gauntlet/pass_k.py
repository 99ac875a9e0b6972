"""pass@k and pass^k of a task suite from n attempts per task, with bootstrap confidence intervals.

Each task ``t`` was attempted ``n_t`` times and succeeded ``c_t`` times. Both estimators are unbiased
for i.i.d. attempts and average over tasks:

- **pass@k** (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"): the chance that
  at least one of k attempts succeeds,
  ``pass@k = mean_t [1 - C(n_t - c_t, k) / C(n_t, k)]``.
- **pass^k** (Yao et al. 2024, "τ-bench", eq. 1): the chance that all k attempts succeed, the
  reliability an agent needs when the same task comes back k times,
  ``pass^k = mean_t [C(c_t, k) / C(n_t, k)]``.

For k = 1 both are the success rate. pass@k rises with k and pass^k falls. Both are defined for
``k <= n_t`` only, so a suite's table goes up to the fewest attempts any task had.

The confidence interval resamples tasks (not attempts: the attempts at one task are not independent
of each other's task) with ``gauntlet.stats.bootstrap_ci``, with the same seed for every k, so every
bootstrap sample sees the same tasks at every k and the intervals keep the estimators' order in k.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import comb

from gauntlet.stats import BOOTSTRAP_RESAMPLES, bootstrap_ci


def task_pass_at_k(n: int, c: int, k: int) -> float:
    """One task's chance that at least one of ``k`` of its ``n`` attempts (``c`` successful) succeeds."""
    _check(n, c, k)
    return 1.0 - comb(n - c, k) / comb(n, k)


def task_pass_hat_k(n: int, c: int, k: int) -> float:
    """One task's chance that all ``k`` of ``k`` attempts drawn from its ``n`` (``c`` successful) succeed."""
    _check(n, c, k)
    return comb(c, k) / comb(n, k)


def pass_at_k(attempts: Sequence[int], successes: Sequence[int], k: int) -> float:
    """The suite's pass@k: ``task_pass_at_k`` averaged over tasks (task t: ``attempts[t]``, ``successes[t]``)."""
    return _mean([task_pass_at_k(n, c, k) for n, c in _tasks(attempts, successes)])


def pass_hat_k(attempts: Sequence[int], successes: Sequence[int], k: int) -> float:
    """The suite's pass^k: ``task_pass_hat_k`` averaged over tasks (task t: ``attempts[t]``, ``successes[t]``)."""
    return _mean([task_pass_hat_k(n, c, k) for n, c in _tasks(attempts, successes)])


@dataclass(frozen=True)
class PassK:
    """pass@k and pass^k of a suite at one k, each with its bootstrap confidence interval (low, high)."""

    k: int
    pass_at_k: float
    pass_at_k_ci: tuple[float, float]
    pass_hat_k: float
    pass_hat_k_ci: tuple[float, float]


def pass_k_table(attempts: Sequence[int], successes: Sequence[int], *, level: float = 0.95,
                 resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> list[PassK]:
    """pass@k and pass^k for k = 1 .. the fewest attempts of any task, with ``level`` bootstrap CIs over tasks."""
    tasks = _tasks(attempts, successes)
    rows = []
    for k in range(1, min(n for n, _ in tasks) + 1):
        at_k = [task_pass_at_k(n, c, k) for n, c in tasks]
        hat_k = [task_pass_hat_k(n, c, k) for n, c in tasks]
        rows.append(PassK(k=k, pass_at_k=_mean(at_k), pass_at_k_ci=bootstrap_ci(at_k, level, resamples, seed),
                          pass_hat_k=_mean(hat_k), pass_hat_k_ci=bootstrap_ci(hat_k, level, resamples, seed)))
    return rows


def _check(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n:
        raise ValueError(f"a task with {n} attempts cannot have {c} successes")
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and the task's {n} attempts, not {k}")


def _tasks(attempts: Sequence[int], successes: Sequence[int]) -> list[tuple[int, int]]:
    if len(attempts) != len(successes):
        raise ValueError(f"{len(attempts)} attempt counts but {len(successes)} success counts; give one of each "
                         "per task")
    if not attempts:
        raise ValueError("pass@k and pass^k need at least one task")
    return list(zip(attempts, successes, strict=True))


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


__all__ = ["PassK", "pass_at_k", "pass_hat_k", "pass_k_table", "task_pass_at_k", "task_pass_hat_k"]
