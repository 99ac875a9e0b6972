"""Baseline policies of the Cal-SPI tasks: linear state feedback trained by Augmented Random Search.

A baseline is ``a = clip(W (o - mu) / sigma + b)`` (ARS V2, Mania, Guy & Recht 2018): a linear map of
the observation normalised by the running mean and standard deviation seen during training. ARS is
cheap (a few minutes on one core per domain) and deterministic given its seed, and stopping it
early gives what the issue asks for: a baseline of documented, *middling* quality, which a safe
improvement method can improve on but must not degrade.

The frozen weights live inside the package, in ``gauntlet.envs.calspi.baselines_data``
(``<Domain>.json``, a few KB each, read with ``importlib.resources`` so an installed wheel carries
them) with the command that reproduced them and the return they scored:

    python -m gauntlet.envs.calspi.baselines --domain Hopper

Training stops at the first iteration whose evaluation return reaches the domain's target (or at
the iteration budget), so the baseline is deliberately not the best ARS could do.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from gauntlet.envs.calspi.domains import get_domain
from gauntlet.fileio import write_atomically

BASELINE_PACKAGE = "gauntlet.envs.calspi.baselines_data"
BASELINE_DIR = Path(__file__).resolve().parent / "baselines_data"  # where the training command writes
# Return at which ARS training stops: about a third to a half of what a good policy reaches.
# InvertedPendulum either falls within ~100 steps or balances for all 1000, so its target sits low.
MIDDLING_TARGET = {"InvertedPendulum": 60.0, "Hopper": 1000.0, "HalfCheetah": 1200.0, "Swimmer": 100.0}
# ARS step size alpha and exploration noise nu per domain (the pendulum needs larger gains).
ARS_STEP_NOISE = {"InvertedPendulum": (0.05, 0.1), "Hopper": (0.02, 0.03), "HalfCheetah": (0.02, 0.03),
                  "Swimmer": (0.02, 0.01)}  # Swimmer: the ARS paper's step size and noise


@dataclass
class LinearPolicy:
    """``a = clip(W (o - mu) / sigma + b, low, high)``; works on one observation or a batch."""

    weights: np.ndarray  # (action_dim, obs_dim)
    bias: np.ndarray  # (action_dim,)
    obs_mean: np.ndarray
    obs_std: np.ndarray
    action_low: np.ndarray
    action_high: np.ndarray

    def __call__(self, observations: np.ndarray) -> np.ndarray:
        normalised = (np.asarray(observations, dtype=np.float64) - self.obs_mean) / self.obs_std
        actions = normalised @ self.weights.T + self.bias
        return np.clip(actions, self.action_low, self.action_high)

    def to_dict(self) -> dict[str, Any]:
        return {key: np.asarray(value).tolist() for key, value in vars(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LinearPolicy:
        return cls(**{key: np.asarray(data[key], dtype=np.float64) for key in
                      ("weights", "bias", "obs_mean", "obs_std", "action_low", "action_high")})


def load_baseline(domain: str) -> tuple[LinearPolicy, dict[str, Any]]:
    """The frozen baseline of ``domain`` and its record (training command, measured return)."""
    from importlib import resources

    path = resources.files(BASELINE_PACKAGE).joinpath(f"{get_domain(domain).name}.json")
    if not path.is_file():
        raise FileNotFoundError(f"no baseline for {domain} in {BASELINE_PACKAGE}; build it with "
                                f"`python -m gauntlet.envs.calspi.baselines --domain {domain}`")
    record = json.loads(path.read_text())
    return LinearPolicy.from_dict(record["policy"]), record


class _RunningStats:
    """Welford's running mean and variance of observations (ARS V2's state normalisation)."""

    def __init__(self, size: int):
        self.count, self.mean, self.m2 = 0, np.zeros(size), np.zeros(size)

    def update(self, batch: np.ndarray) -> None:
        for row in batch:
            self.count += 1
            delta = row - self.mean
            self.mean += delta / self.count
            self.m2 += delta * (row - self.mean)

    @property
    def std(self) -> np.ndarray:
        if self.count < 2:
            return np.ones_like(self.mean)
        return np.maximum(np.sqrt(self.m2 / (self.count - 1)), 1e-2)


def policy_return(env: Any, policy: LinearPolicy, seed: int, visited: list[np.ndarray] | None = None) -> float:
    """Undiscounted return of one episode of ``policy`` in ``env`` reset with ``seed``."""
    observation, _ = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        if visited is not None:
            visited.append(observation)
        observation, reward, terminated, truncated, _ = env.step(policy(observation))
        total += float(reward)
        done = terminated or truncated
    return total


def train_ars(domain: str, *, seed: int = 0, iterations: int = 300, directions: int = 8, top: int = 4,
              target: float | None = None, eval_episodes: int = 5) -> tuple[LinearPolicy, dict[str, Any]]:
    """ARS V2-t: ``theta <- theta + alpha / (b sigma_R) sum_k (r(theta + nu d_k) - r(theta - nu d_k)) d_k``
    over the ``top`` best of ``directions`` random directions; stops when the evaluation return
    reaches ``target`` (default ``MIDDLING_TARGET[domain]``)."""
    import gymnasium as gym
    from gymnasium import spaces

    spec = get_domain(domain)
    target = MIDDLING_TARGET[spec.name] if target is None else target
    step_size, noise = ARS_STEP_NOISE[spec.name]
    env = gym.make(spec.gym_id)
    rng = np.random.default_rng(seed)
    # every domain observes and acts in boxes
    observation_space, action_space = cast(spaces.Box, env.observation_space), cast(spaces.Box, env.action_space)
    obs_dim, act_dim = observation_space.shape[0], action_space.shape[0]
    theta = np.zeros((act_dim, obs_dim))
    stats = _RunningStats(obs_dim)
    low, high = action_space.low.astype(np.float64), action_space.high.astype(np.float64)

    def policy_of(matrix: np.ndarray) -> LinearPolicy:
        return LinearPolicy(matrix, np.zeros(act_dim), stats.mean.copy(), stats.std.copy(), low, high)

    episode_seed = seed * 100_000
    history = []
    for iteration in range(iterations):
        deltas = rng.standard_normal((directions, act_dim, obs_dim))
        returns = np.zeros((directions, 2))
        visited: list[np.ndarray] = []
        for k in range(directions):
            for sign_index, sign in enumerate((1.0, -1.0)):
                episode_seed += 1
                returns[k, sign_index] = policy_return(env, policy_of(theta + sign * noise * deltas[k]),
                                                       episode_seed, visited)
        stats.update(np.asarray(visited))
        best = np.argsort(-returns.max(axis=1))[:top]
        sigma_r = returns[best].std() + 1e-8
        theta = theta + step_size / (top * sigma_r) * np.einsum(
            "k,kij->ij", returns[best, 0] - returns[best, 1], deltas[best])
        evaluation = float(np.mean([policy_return(env, policy_of(theta), 10**9 + i) for i in range(eval_episodes)]))
        history.append(evaluation)
        print(f"{spec.name} iteration {iteration}: evaluation return {evaluation:.1f}", flush=True)
        if evaluation >= target:
            break
    env.close()
    return policy_of(theta), {"iterations": len(history), "evaluation_history": history}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Train a Cal-SPI baseline with ARS and freeze it.")
    parser.add_argument("--domain", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    spec = get_domain(args.domain)
    policy, training = train_ars(spec.name, seed=args.seed, iterations=args.iterations)
    import gymnasium as gym

    env = gym.make(spec.gym_id)
    returns = [policy_return(env, policy, 2 * 10**9 + i) for i in range(20)]
    record = {
        "domain": spec.name, "gym_id": spec.gym_id, "algorithm": "ARS V2-t (linear, normalised observations)",
        "command": f"python -m gauntlet.envs.calspi.baselines --domain {spec.name} --seed {args.seed} "
                   f"--iterations {args.iterations}",
        "seed": args.seed, "middling_target": MIDDLING_TARGET[spec.name], "training": training,
        "return_mean": float(np.mean(returns)), "return_std": float(np.std(returns)), "return_episodes": 20,
        "policy": policy.to_dict(),
    }
    out = args.out or BASELINE_DIR / f"{spec.name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(out, json.dumps(record, indent=1))
    print(f"{spec.name}: baseline return {record['return_mean']:.1f} +- {record['return_std']:.1f} "
          f"over 20 episodes; written to {out}")


if __name__ == "__main__":
    main()
