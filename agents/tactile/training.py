"""Training and evaluating the perception model on the native vector env.

Exploration is random (uniform moves in the unit disc, the ``tactile-random`` agent's policy), so
trajectories do not depend on the model and one batched rollout of ``num_envs`` episodes feeds one
gradient step on all their touches at once. Evaluation submits the model's predictions to the env
and reads the env's own per-step scores (accuracy or error), so every reported figure is what the
env measured.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from gauntlet.agents.tactile.model import TouchAggregator


@dataclass
class TrainingLog:
    losses: list[float] = field(default_factory=list)  # normalised loss per update (all steps)


def make_vector_env(family: str, split: str, num_envs: int, objects_per_split: int | None) -> gym.vector.VectorEnv:
    """The family's native vector env, through the registry.

    Families without object splits (one object set, random poses) use their only env for both;
    evaluation then differs from training by its seeds alone.
    """
    import gauntlet  # noqa: F401 - registers the gauntlet/ envs

    env_id = f"gauntlet/{family}-{split}-v0"
    if env_id not in gym.registry:
        env_id = f"gauntlet/{family}-v0"
    return gym.make_vec(env_id, num_envs=num_envs, objects_per_split=objects_per_split)


def _tensors(observations: list[dict[str, np.ndarray]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Stack T batched observations into (B, T, ...) tensors."""
    images = torch.from_numpy(np.stack([o["sensor_img"] for o in observations], axis=1))
    positions = torch.from_numpy(np.stack([o["sensor_pos"] for o in observations], axis=1))
    time_steps = torch.from_numpy(np.stack([o["time_step"] for o in observations], axis=1))
    return images, positions, time_steps


def random_moves(rng: np.random.Generator, num_envs: int, dims: int) -> np.ndarray:
    """Uniform moves (and turns, for rotating sensors) in [-1, 1]."""
    return rng.uniform(-1.0, 1.0, (num_envs, dims)).astype(np.float32)


def collect(env: gym.vector.VectorEnv, seed: int, rng: np.random.Generator,
            predict: Callable[[list[dict[str, np.ndarray]]], np.ndarray] | None = None
            ) -> tuple[list[dict[str, np.ndarray]], np.ndarray, np.ndarray]:
    """One episode in every slot: observations o_0..o_{T-1}, targets, and the env's per-step scores.

    ``predict(observations so far) -> (B, P)`` gives the submitted predictions (zeros if None).
    """
    observation, info = env.reset(seed=seed)
    targets = info["target"]
    task = env.task
    prediction_dim = env.single_action_space["prediction"].shape[0]
    move_dims = env.single_action_space["action"].shape[0]
    observations, scores = [observation], []
    for t in range(task.step_limit):
        prediction = predict(observations) if predict else np.zeros((env.num_envs, prediction_dim), np.float32)
        observation, _, terminated, _, info = env.step({"action": random_moves(rng, env.num_envs, move_dims),
                                                           "prediction": prediction})
        key = "final_accuracy" if task.kind == "classification" else "final_error"
        scores.append(info["stats"][key].copy())
        if t < task.step_limit - 1:
            observations.append(observation)
    return observations, targets, np.stack(scores, axis=1)


def normalised_loss(model_out: torch.Tensor, targets: torch.Tensor, kind: str, variance: torch.Tensor | None) -> torch.Tensor:
    """The env's prediction loss, averaged over batch and steps (the negative prediction reward)."""
    batch, steps, dim = model_out.shape
    if kind == "classification":
        flat_targets = targets[:, None].expand(batch, steps).reshape(-1)
        return torch.nn.functional.cross_entropy(model_out.reshape(-1, dim), flat_targets) / np.log(dim)
    return (((model_out - targets[:, None, :]) ** 2) / variance).mean()


def train(family: str = "TactileMNIST", *, updates: int = 300, num_envs: int = 64, seed: int = 0,
          objects_per_split: int | None = None, learning_rate: float = 1e-3,
          progress: Callable[[int, float], None] | None = None) -> tuple[TouchAggregator, TrainingLog]:
    """Train a perception model on the training split with random exploration."""
    torch.manual_seed(seed)
    env = make_vector_env(family, "train", num_envs, objects_per_split)
    task = env.task
    model = TouchAggregator(env.single_action_space["prediction"].shape[0])
    optimiser = torch.optim.Adam(model.parameters(), lr=learning_rate)
    variance = None if task.target_variance is None else torch.tensor(task.target_variance, dtype=torch.float32)
    rng = np.random.default_rng(seed)
    log = TrainingLog()
    for update in range(updates):
        observations, targets, _ = collect(env, seed * 1_000_003 + update * num_envs, rng)
        images, positions, time_steps = _tensors(observations)
        target = torch.from_numpy(targets)
        out, _ = model(images, positions, time_steps)
        loss = normalised_loss(out, target if task.kind == "classification" else target.float(), task.kind, variance)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        log.losses.append(float(loss.detach()))
        if progress:
            progress(update, log.losses[-1])
    return model, log


@torch.no_grad()
def evaluate(model: TouchAggregator | None, family: str = "TactileMNIST", split: str = "test", *,
             episodes: int = 256, num_envs: int = 64, seed: int = 10_000,
             objects_per_split: int | None = None) -> np.ndarray:
    """Per-step scores (accuracy or error) the env measured, averaged over episodes: shape (T,).

    ``model=None`` evaluates the blind baseline (uniform logits / zero prediction, random moves).
    """
    env = make_vector_env(family, split, num_envs, objects_per_split)
    rng = np.random.default_rng(seed)
    if model is not None:
        model.eval()

    def predict(observations):
        images, positions, time_steps = _tensors(observations)
        out, _ = model(images, positions, time_steps)
        return out[:, -1].numpy().astype(np.float32)

    curves = []
    for batch in range(max(1, episodes // num_envs)):
        _, _, scores = collect(env, seed + batch * num_envs, rng, predict if model is not None else None)
        curves.append(scores)
    return np.concatenate(curves).mean(axis=0)


def save(model: TouchAggregator, path: Path, **metadata: Any) -> None:
    """Write a checkpoint atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(path.suffix + ".tmp")
    torch.save({"state_dict": model.state_dict(), "config": model.config, **metadata}, scratch)
    os.replace(scratch, path)


def load(path: str | Path) -> tuple[TouchAggregator, dict[str, Any]]:
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    model = TouchAggregator(**checkpoint["config"])
    model.load_state_dict(checkpoint["state_dict"])
    model.eval()
    return model, {key: value for key, value in checkpoint.items() if key not in ("state_dict", "config")}
