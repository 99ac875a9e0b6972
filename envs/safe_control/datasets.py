"""Offline datasets of the Cal-SPI tasks: transitions collected by the baseline with exploration noise.

A dataset is D4RL's flat format (``observations``, ``actions``, ``rewards``, ``next_observations``,
``terminals``, ``timeouts``), built deterministically into the data cache by ``ensure_built`` and
stored as one ``.npz``:

    dataset = load_dataset("Hopper", size=10_000, seed=0)          # builds on first use
    gauntlet data build calspi-dataset --config '{"domain": "Hopper", "size": 10000}'
    python -m gauntlet.envs.safe_control.datasets          # every domain at 2k, 10k, 50k, 200k

Collection: episodes of ``a = clip(pi_b(s) + noise_std * (high - low) / 2 * N(0, I))`` with the
frozen baseline ``pi_b``, episode ``i`` reset with seed ``seed * 1_000_003 + i``, until ``size``
transitions (the last episode is cut, and its last transition marked as a timeout).
``export_episodes`` writes a dataset as Gauntlet Episode records, one per dataset episode.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gauntlet.envs.safe_control.domains import get_domain

DATASET_VERSION = "1"
DATASET_SIZES = (2_000, 10_000, 50_000, 200_000)
DEFAULT_NOISE_STD = 0.1
FIELDS = ("observations", "actions", "rewards", "next_observations", "terminals", "timeouts")


@dataclass(frozen=True)
class OfflineDataset:
    """Flat transitions in D4RL's layout; ``validate`` checks shapes and finiteness."""

    observations: np.ndarray  # (n, obs_dim)
    actions: np.ndarray  # (n, act_dim)
    rewards: np.ndarray  # (n,)
    next_observations: np.ndarray  # (n, obs_dim)
    terminals: np.ndarray  # (n,) bool: the env terminated after this transition
    timeouts: np.ndarray  # (n,) bool: the episode was cut after this transition

    def __len__(self) -> int:
        return len(self.rewards)

    @property
    def episode_ends(self) -> np.ndarray:
        return self.terminals | self.timeouts

    def validate(self, obs_dim: int | None = None, act_dim: int | None = None) -> OfflineDataset:
        """Raise ``ValueError`` naming the field and the expected shape unless the dataset is usable."""
        n = len(self.rewards)
        obs_dim = self.observations.shape[-1] if obs_dim is None else obs_dim
        act_dim = self.actions.shape[-1] if act_dim is None else act_dim
        expected = {"observations": (n, obs_dim), "actions": (n, act_dim), "rewards": (n,),
                    "next_observations": (n, obs_dim), "terminals": (n,), "timeouts": (n,)}
        for name, shape in expected.items():
            value = getattr(self, name)
            if value.shape != shape:
                raise ValueError(f"dataset field {name!r} has shape {value.shape}, expected {shape} "
                                 f"(n={n} transitions, obs_dim={obs_dim}, act_dim={act_dim})")
            if value.dtype != bool and not np.isfinite(value).all():
                bad = int((~np.isfinite(value)).any(axis=tuple(range(1, value.ndim))).sum())
                raise ValueError(f"dataset field {name!r} has NaN or infinite values in {bad} of {n} "
                                 "transitions; drop or repair them before training")
        if n == 0:
            raise ValueError("dataset is empty: at least one transition is needed")
        return self

    def subset(self, indices: np.ndarray) -> OfflineDataset:
        return OfflineDataset(*(getattr(self, name)[indices] for name in FIELDS))

    def save(self, path: Path) -> None:
        """Write the dataset as one ``.npz`` atomically."""
        scratch = path.with_name(f".{path.name}.tmp")
        with open(scratch, "wb") as handle:
            np.savez(handle, **{name: getattr(self, name) for name in FIELDS})
        os.replace(scratch, path)

    @classmethod
    def load(cls, path: Path) -> OfflineDataset:
        with np.load(path) as data:
            missing = [name for name in FIELDS if name not in data.files]
            if missing:
                raise ValueError(f"{path} is not a Cal-SPI dataset: missing fields {missing} (expected {FIELDS})")
            dataset = cls(**{name: data[name] for name in FIELDS})
        return dataset.validate()


def collect(domain: str, size: int, *, seed: int = 0, noise_std: float = DEFAULT_NOISE_STD) -> OfflineDataset:
    """Run the baseline with Gaussian exploration noise until ``size`` transitions are collected."""
    import gymnasium as gym

    from gauntlet.envs.safe_control.baselines import load_baseline

    if size < 1:
        raise ValueError(f"dataset size must be a positive number of transitions, got {size}")
    spec = get_domain(domain)
    policy, _ = load_baseline(spec.name)
    env = gym.make(spec.gym_id)
    rng = np.random.default_rng([seed, size])
    half_range = (env.action_space.high - env.action_space.low) / 2.0
    columns: dict[str, list] = {name: [] for name in FIELDS}
    episode = 0
    while len(columns["rewards"]) < size:
        observation, _ = env.reset(seed=seed * 1_000_003 + episode)
        episode += 1
        done = False
        while not done and len(columns["rewards"]) < size:
            action = policy(observation) + noise_std * half_range * rng.standard_normal(half_range.shape)
            action = np.clip(action, env.action_space.low, env.action_space.high)
            next_observation, reward, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
            cut = not done and len(columns["rewards"]) == size - 1
            for name, value in zip(FIELDS, (observation, action, reward, next_observation, terminated,
                                            truncated or cut), strict=True):
                columns[name].append(value)
            observation = next_observation
    env.close()
    return OfflineDataset(
        observations=np.asarray(columns["observations"], dtype=np.float64),
        actions=np.asarray(columns["actions"], dtype=np.float64),
        rewards=np.asarray(columns["rewards"], dtype=np.float64),
        next_observations=np.asarray(columns["next_observations"], dtype=np.float64),
        terminals=np.asarray(columns["terminals"], dtype=bool),
        timeouts=np.asarray(columns["timeouts"], dtype=bool),
    ).validate()


def build_dataset(folder: Path, *, domain: str, size: int, seed: int = 0,
                  noise_std: float = DEFAULT_NOISE_STD) -> None:
    """Data builder (``gauntlet data build calspi-dataset``): writes ``dataset.npz`` into ``folder``."""
    collect(domain, size, seed=seed, noise_std=noise_std).save(Path(folder) / "dataset.npz")


def load_dataset(domain: str, size: int, *, seed: int = 0, noise_std: float = DEFAULT_NOISE_STD) -> OfflineDataset:
    """The dataset of ``domain`` with ``size`` transitions, built into the cache on first use."""
    from gauntlet.datacache import ensure_built

    # Defaults stay out of the key, so `gauntlet data build calspi-dataset --config '{"domain": ..,
    # "size": ..}'` fills the very entry this function reads.
    params: dict[str, object] = {"domain": get_domain(domain).name, "size": int(size)}
    if seed != 0:
        params["seed"] = int(seed)
    if noise_std != DEFAULT_NOISE_STD:
        params["noise_std"] = float(noise_std)
    folder = ensure_built("calspi-dataset", DATASET_VERSION, build_dataset, params=params)
    return OfflineDataset.load(folder / "dataset.npz")


def export_episodes(dataset: OfflineDataset, path: str | os.PathLike[str], *, env_id: str,
                    run_id: str = "calspi-dataset") -> int:
    """Write ``dataset`` as Gauntlet Episode records (one per dataset episode); returns the count.

    Each episode's header holds the first observation; step ``t`` holds action ``t``, reward ``t`` and
    the next observation, as ``rollout`` records them, so ``load_episodes`` reads the export back.
    """
    from gauntlet.episode import AgentSpec, EpisodeHeader, EpisodeWriter, Outcome

    ends = np.flatnonzero(dataset.episode_ends)
    if len(ends) == 0 or ends[-1] != len(dataset) - 1:
        ends = np.append(ends, len(dataset) - 1)
    start = 0
    with EpisodeWriter(path) as writer:
        for number, end in enumerate(ends):
            writer.begin(EpisodeHeader(run_id=run_id, episode_id=f"{run_id}-{number}", env_id=env_id,
                                       agent=AgentSpec(name="calspi-baseline-with-noise"),
                                       initial_observation=dataset.observations[start]))
            for index, t in enumerate(range(start, end + 1)):
                writer.step(index, dataset.next_observations[t], dataset.actions[t].tolist(),
                            float(dataset.rewards[t]), bool(dataset.terminals[t]), bool(dataset.timeouts[t]), {})
            writer.end(Outcome(score=float(dataset.rewards[start:end + 1].sum())))
            start = end + 1
    return len(ends)


def main(argv: list[str] | None = None) -> None:
    """Build every task's datasets into the cache: ``python -m gauntlet.envs.safe_control.datasets``."""
    import argparse

    from gauntlet.envs.safe_control.domains import DOMAINS

    parser = argparse.ArgumentParser(description="Build the Cal-SPI offline datasets into the data cache.")
    parser.add_argument("--domains", nargs="+", default=sorted(DOMAINS))
    parser.add_argument("--sizes", nargs="+", type=int, default=list(DATASET_SIZES))
    parser.add_argument("--seeds", type=int, default=1, help="dataset seeds 0..N-1")
    args = parser.parse_args(argv)
    for domain in args.domains:
        for size in args.sizes:
            for seed in range(args.seeds):
                data = load_dataset(domain, size, seed=seed)
                print(f"{domain} size={size} seed={seed}: {len(data)} transitions, "
                      f"{int(data.episode_ends.sum())} episodes, mean reward {data.rewards.mean():.3f}", flush=True)


if __name__ == "__main__":
    main()
