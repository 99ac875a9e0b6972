"""Offline datasets of the Cal-SPI tasks: transitions collected by the baseline with exploration noise.

A dataset is D4RL's flat format (``observations``, ``actions``, ``rewards``, ``next_observations``,
``terminals``, ``timeouts``), built deterministically into the data cache by ``ensure_built`` and
stored as one ``.npz``:

    dataset = load_dataset("Hopper", size=10_000, seed=0)          # builds on first use
    gauntlet data build calspi-dataset --config '{"domain": "Hopper", "size": 10000}'
    python -m gauntlet.envs.calspi.datasets          # every domain at 2k, 10k, 50k, 200k

Collection: episodes of ``a = clip(pi_b(s) + noise_std * (high - low) / 2 * N(0, I))`` with the
frozen baseline ``pi_b``, episode ``i`` reset with seed ``seed * 1_000_003 + i``, until ``size``
transitions (the last episode is cut, and its last transition marked as a timeout).
``export_episodes`` writes a dataset as Gauntlet Episode records, one per dataset episode.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np

from gauntlet.envs.calspi.domains import get_domain

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
    from gymnasium import spaces

    from gauntlet.envs.calspi.baselines import load_baseline

    if size < 1:
        raise ValueError(f"dataset size must be a positive number of transitions, got {size}")
    spec = get_domain(domain)
    policy, _ = load_baseline(spec.name)
    env = gym.make(spec.gym_id)
    action_space = cast(spaces.Box, env.action_space)  # every domain acts in a box
    rng = np.random.default_rng([seed, size])
    half_range = (action_space.high - action_space.low) / 2.0
    columns: dict[str, list] = {name: [] for name in FIELDS}
    episode = 0
    while len(columns["rewards"]) < size:
        observation, _ = env.reset(seed=seed * 1_000_003 + episode)
        episode += 1
        done = False
        while not done and len(columns["rewards"]) < size:
            action = policy(observation) + noise_std * half_range * rng.standard_normal(half_range.shape)
            action = np.clip(action, action_space.low, action_space.high)
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

    parts = _episode_slices(dataset)
    with EpisodeWriter(path) as writer:
        for number, part in enumerate(parts):
            writer.begin(EpisodeHeader(run_id=run_id, episode_id=f"{run_id}-{number}", env_id=env_id,
                                       agent=AgentSpec(name="calspi-baseline-with-noise"),
                                       initial_observation=dataset.observations[part.start]))
            for index, t in enumerate(range(part.start, part.stop)):
                writer.step(index, dataset.next_observations[t], dataset.actions[t].tolist(),
                            float(dataset.rewards[t]), bool(dataset.terminals[t]), bool(dataset.timeouts[t]), {})
            writer.end(Outcome(score=float(dataset.rewards[part].sum())))
    return len(parts)


def _episode_slices(dataset: OfflineDataset) -> list[slice]:
    """One slice per dataset episode; a trailing episode with neither flag (a dataset cut at ``size``) counts too."""
    ends = np.flatnonzero(dataset.episode_ends)
    if len(ends) == 0 or ends[-1] != len(dataset) - 1:
        ends = np.append(ends, len(dataset) - 1)
    return [slice(start, end + 1) for start, end in zip(np.concatenate([[0], ends[:-1] + 1]), ends)]


def export_minari(dataset: OfflineDataset, dataset_id: str, *, env_id: str,
                  datasets_path: str | os.PathLike[str] | None = None, description: str | None = None):
    """Write ``dataset`` as a local Minari dataset (HDF5) called ``dataset_id``; returns the loaded ``MinariDataset``.

    Minari keeps T + 1 observations per episode: an episode's observations are its ``observations``
    followed by its last ``next_observations``. ``terminations`` / ``truncations`` are the dataset's
    ``terminals`` / ``timeouts``; the trailing episode of a dataset cut at its size (neither flag) is
    marked truncated. ``datasets_path`` overrides ``MINARI_DATASETS_PATH`` (default ``~/.minari/datasets``)
    for this call. Nothing is downloaded. Needs ``minari[hdf5]`` (in the ``mujoco`` extra).
    """
    try:
        import minari
        from minari.data_collector import EpisodeBuffer
    except ImportError:
        raise RuntimeError("Minari export needs Minari with HDF5: pip install 'minari[hdf5]>=0.5'") from None
    buffers = []
    for number, part in enumerate(_episode_slices(dataset)):
        truncations = dataset.timeouts[part].copy()
        if not (dataset.terminals[part][-1] or truncations[-1]):
            truncations[-1] = True
        observations = np.concatenate([dataset.observations[part], dataset.next_observations[part][-1:]])
        buffers.append(EpisodeBuffer(id=number, observations=list(observations), actions=list(dataset.actions[part]),
                                     rewards=dataset.rewards[part].tolist(),
                                     terminations=dataset.terminals[part].tolist(), truncations=truncations.tolist()))
    previous = os.environ.get("MINARI_DATASETS_PATH")
    if datasets_path is not None:
        os.environ["MINARI_DATASETS_PATH"] = str(datasets_path)
    try:
        description = description or (f"Cal-SPI offline dataset: the frozen baseline of {env_id} with Gaussian "
                                      f"exploration noise, {len(dataset)} transitions (gauntlet.envs.calspi)")
        return minari.create_dataset_from_buffers(dataset_id, buffers, env=env_id, eval_env=env_id,
                                                  algorithm_name="calspi-baseline-with-noise", author="Gauntlet",
                                                  description=description, data_format="hdf5")
    finally:
        if datasets_path is not None:
            if previous is None:
                os.environ.pop("MINARI_DATASETS_PATH", None)
            else:
                os.environ["MINARI_DATASETS_PATH"] = previous


def main(argv: list[str] | None = None) -> None:
    """Build every task's datasets into the cache: ``python -m gauntlet.envs.calspi.datasets``."""
    import argparse

    from gauntlet.envs.calspi.domains import DOMAINS

    parser = argparse.ArgumentParser(description="Build the Cal-SPI offline datasets into the data cache.")
    parser.add_argument("--domains", nargs="+", default=sorted(DOMAINS))
    parser.add_argument("--sizes", nargs="+", type=int, default=list(DATASET_SIZES))
    parser.add_argument("--seeds", type=int, default=1, help="dataset seeds 0..N-1")
    parser.add_argument("--minari", type=Path, default=None, metavar="DIR",
                        help="also export each dataset as a Minari dataset under DIR "
                             "(id gauntlet/calspi-<domain>-<size>-seed<seed>-v0)")
    args = parser.parse_args(argv)
    for domain in args.domains:
        for size in args.sizes:
            for seed in range(args.seeds):
                data = load_dataset(domain, size, seed=seed)
                print(f"{domain} size={size} seed={seed}: {len(data)} transitions, "
                      f"{int(data.episode_ends.sum())} episodes, mean reward {data.rewards.mean():.3f}", flush=True)
                dataset_id = f"gauntlet/calspi-{domain.lower()}-{size}-seed{seed}-v0"
                if args.minari is not None and (args.minari / dataset_id).exists():
                    print(f"  Minari dataset {dataset_id} already exists under {args.minari}; left as it is")
                elif args.minari is not None:
                    export_minari(data, dataset_id, env_id=DOMAINS[domain].gym_id, datasets_path=args.minari)
                    print(f"  exported as Minari dataset {dataset_id} under {args.minari}", flush=True)


if __name__ == "__main__":
    main()
