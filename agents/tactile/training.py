"""Training and evaluating the perception model on the native vector env.

The exploration policy (``scan.CoverageScan``) does not depend on the model, so episodes are
collected in batches of ``num_envs`` and each batch feeds ``reuse`` gradient steps; every
gradient step trains on ``steps_per_episode`` touch maps per episode (always the last one, whose
prediction the final-step score measures, plus earlier ones drawn at random, so the model
predicts well after any number of touches). Random placements of the objects give fresh
augmentation every batch. Evaluation plays the agent's own loop (scan moves, the model's
prediction after every touch) on the test split and reads the env's own per-step scores, so
every reported figure is what the env measured.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch

from gauntlet.agents.tactile.model import TouchMapModel, bin_centres, yaw_bin
from gauntlet.agents.tactile.scan import CoverageScan
from gauntlet.agents.tactile.touchmap import TouchMap, episode_maps, gel_background, touch_features
from gauntlet.envs.tactile.env import TactilePerceptionVectorEnv, component_shape

# Where each family's object can lie (half extents, m): MNIST digits are 10 x 10 cm squares whose
# ink spans about 7 cm, placed within +-1 cm and +-22.5 degrees; other scenes use the whole reach.
MNIST_REGION_M = (0.0375, 0.040)
FULL_REGION_M = (0.0475, 0.0475)


def scan_region(family: str) -> tuple[float, float]:
    return MNIST_REGION_M if family.startswith("TactileMNIST") else FULL_REGION_M


@dataclass
class TrainingLog:
    losses: list[float] = field(default_factory=list)  # normalised loss per update (sampled steps)


def make_vector_env(family: str, split: str, num_envs: int, objects_per_split: int | None
                    ) -> TactilePerceptionVectorEnv:
    """The family's native vector env, through the registry.

    Families without object splits (one object set, random poses) use their only env for both;
    evaluation then differs from training by its seeds alone.
    """
    import gauntlet  # noqa: F401 - registers the gauntlet/ envs

    env_id = f"gauntlet/{family}-{split}-v0"
    if env_id not in gym.registry:
        env_id = f"gauntlet/{family}-v0"
    # every tactile family registers TactilePerceptionVectorEnv as its vector entry point
    env = gym.make_vec(env_id, num_envs=num_envs, objects_per_split=objects_per_split)
    return cast(TactilePerceptionVectorEnv, env)


def make_scan(env: TactilePerceptionVectorEnv, family: str) -> CoverageScan:
    return CoverageScan(env.task.step_limit, scan_region(family), component_shape(env.single_action_space, "action")[0])


@dataclass
class Batch:
    """Episodes of the scan policy: touch features ``(B, T, 6, h, w)``, poses, targets."""

    features: torch.Tensor
    positions: torch.Tensor  # (B, T, 3)
    rotations: torch.Tensor | None  # (B, T, 2)
    targets: torch.Tensor  # (B,) classes or (B, d)


def collect(env: TactilePerceptionVectorEnv, scan: CoverageScan, seed: int, background: torch.Tensor) -> Batch:
    """One scan episode per slot; keeps the touches 0..T-1 (the ones predictions are made from)."""
    observation, info = env.reset(seed=seed)
    targets = torch.from_numpy(np.asarray(info["target"]))
    prediction = np.zeros((env.num_envs,) + component_shape(env.single_action_space, "prediction"), np.float32)
    scan.reset(observation["sensor_pos"])
    features, positions, rotations = [], [], []
    for _ in range(env.task.step_limit):
        features.append(touch_features(torch.from_numpy(observation["sensor_img"]), background))
        positions.append(torch.from_numpy(observation["sensor_pos"].copy()))
        if "sensor_rot" in observation:
            rotations.append(torch.from_numpy(observation["sensor_rot"].copy()))
        moves = scan.act(observation["sensor_pos"])
        observation, *_ = env.step({"action": moves, "prediction": prediction})
    return Batch(torch.stack(features, 1), torch.stack(positions, 1),
                 torch.stack(rotations, 1) if rotations else None, targets)


def normalised_loss(out: torch.Tensor, targets: torch.Tensor, kind: str, variance: torch.Tensor | None) -> torch.Tensor:
    """The env's prediction loss, averaged over the batch (the negative prediction reward)."""
    if kind == "classification":
        return torch.nn.functional.cross_entropy(out, targets) / np.log(out.shape[-1])
    if variance is None:
        raise ValueError(f"a {kind} loss is normalised by the target variance, and none was given")
    return (((out - targets) ** 2) / variance).mean()


def binned_pose_loss(model: TouchMapModel, raw: torch.Tensor, targets: torch.Tensor,
                     variance: torch.Tensor) -> torch.Tensor:
    """A pose model with yaw bins: the mean of three terms, each 1 for a blind guess: the position's
    normalised squared error, the yaw's cross-entropy over the bins / log bins, and the direction's:
    -log of the probability on the half circle around the true heading, / log 2.

    The third term is there because the second alone learns an object's axis but not its direction
    (measured: Toolbox, 300 updates, axis error 3.3 degrees, yet the two ends got equal mass and the
    heading was off by a half turn in half the episodes): splitting the mass evenly between the two
    ends costs the cross-entropy only log 2 of its log bins; here it costs a whole term."""
    scaled = (targets[:, :2] - model.target_mean[:2]) / model.target_scale[:2]
    position = (((raw[:, :2] - scaled) * model.target_scale[:2]) ** 2 / variance[:2]).mean()
    logits = raw[:, 2:]
    yaw = torch.nn.functional.cross_entropy(logits, yaw_bin(targets[:, 2], targets[:, 3], model.yaw_bins))
    centres = bin_centres(model.yaw_bins)
    # cos(centre - true yaw) > 0: the bins within a quarter turn of the true heading
    facing = (torch.cos(centres)[None] * targets[:, 2:3] + torch.sin(centres)[None] * targets[:, 3:4]) > 0
    half = torch.logsumexp(logits.masked_fill(~facing, float("-inf")), dim=1) - torch.logsumexp(logits, dim=1)
    direction = -half.mean()
    return (position + yaw / np.log(model.yaw_bins) + direction / np.log(2)) / 3


def train(family: str = "TactileMNIST", *, updates: int = 300, num_envs: int = 64, seed: int = 0,
          objects_per_split: int | None = None, learning_rate: float = 2e-3, reuse: int = 4,
          steps_per_episode: int = 4, yaw_bins: int = 0, progress: Callable[[int, float], None] | None = None
          ) -> tuple[TouchMapModel, TrainingLog]:
    """Train a perception model on the training split with the coverage-scan policy.

    ``yaw_bins`` (pose families only): predict the yaw as a distribution over that many arcs
    (``model.TouchMapModel``) instead of regressing (cos, sin)."""
    torch.manual_seed(seed)
    env = make_vector_env(family, "train", num_envs, objects_per_split)
    task = env.task
    if yaw_bins and task.target_name != "pose":
        raise ValueError(f"yaw bins are for the pose families (GlyphPose, Toolbox); {family} predicts "
                         f"{task.target_name or 'a class'}")
    scan = make_scan(env, family)
    background = gel_background(component_shape(env.single_observation_space, "sensor_img")[:2])
    model = TouchMapModel(component_shape(env.single_action_space, "prediction")[0], yaw_bins=yaw_bins)
    optimiser = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimiser, max_lr=learning_rate, total_steps=max(updates, 2),
                                                   pct_start=0.1)
    variance = None if task.target_variance is None else torch.tensor(task.target_variance, dtype=torch.float32)
    generator = torch.Generator().manual_seed(seed)
    log = TrainingLog()
    model.train()
    length = task.step_limit
    for update in range(updates):
        if update % reuse == 0:
            batch = collect(env, scan, seed * 1_000_003 + update * num_envs, background)
            if update == 0 and variance is not None:  # regression
                model.set_target_scale(batch.targets.float().mean(0), variance.sqrt())
            # every step's map once per batch; the ``reuse`` updates draw different steps from them
            every_step = torch.arange(length).expand(num_envs, length)
            all_maps = episode_maps(batch.features, batch.positions, batch.rotations, every_step)
            all_maps = all_maps.reshape(num_envs, length, *all_maps.shape[1:])
        earlier = torch.randint(0, length - 1, (num_envs, steps_per_episode - 1), generator=generator)
        steps = torch.cat([earlier, torch.full((num_envs, 1), length - 1)], dim=1)
        maps = all_maps[torch.arange(num_envs)[:, None], steps].reshape(-1, *all_maps.shape[2:])
        targets = batch.targets.repeat_interleave(steps_per_episode, dim=0)
        if yaw_bins and variance is not None:  # pose tasks are regressions: variance is set
            loss = binned_pose_loss(model, model.raw(maps), targets.float(), variance)
        else:
            out = model(maps)
            loss = normalised_loss(out, targets if task.kind == "classification" else targets.float(), task.kind,
                                   variance)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
        log.losses.append(float(loss.detach()))
        if progress:
            progress(update, log.losses[-1])
    model.eval()
    return model, log


@torch.no_grad()
def evaluate(model: TouchMapModel | None, family: str = "TactileMNIST", split: str = "test", *,
             episodes: int = 256, num_envs: int = 64, seed: int = 10_000,
             objects_per_split: int | None = None, random_moves: bool = False) -> np.ndarray:
    """Per-step scores (accuracy or error) the env measured, averaged over episodes: shape (T,).

    With a model: the learned agent's loop (scan moves, the model's prediction after every touch);
    ``random_moves=True`` swaps the scan for uniform random moves (an ablation of the policy).
    ``model=None``: the blind baseline (uniform random moves, uniform logits / zero prediction).
    """
    env = make_vector_env(family, split, num_envs, objects_per_split)
    task = env.task
    scan = make_scan(env, family)
    rng = np.random.default_rng(seed)
    background = gel_background(component_shape(env.single_observation_space, "sensor_img")[:2])
    prediction_shape = (num_envs,) + component_shape(env.single_action_space, "prediction")
    key = "final_accuracy" if task.kind == "classification" else "final_error"
    curves = []
    for batch in range(max(1, episodes // num_envs)):
        observation, _ = env.reset(seed=seed + batch * num_envs)
        scan.reset(observation["sensor_pos"])
        touches = TouchMap(num_envs, background)
        scores = []
        for _ in range(task.step_limit):
            if model is None or random_moves:
                moves = rng.uniform(-1.0, 1.0, (num_envs,) + component_shape(env.single_action_space, "action"))
            else:
                moves = scan.act(observation["sensor_pos"])
            if model is None:
                prediction = np.zeros(prediction_shape, np.float32)
            else:
                maps = touches.add(observation["sensor_img"], observation["sensor_pos"], observation.get("sensor_rot"))
                prediction = model(maps).numpy().astype(np.float32)
            observation, _, _, _, info = env.step({"action": moves.astype(np.float32), "prediction": prediction})
            scores.append(info["stats"][key].copy())
        curves.append(np.stack(scores, axis=1))
    return np.concatenate(curves).mean(axis=0)


@torch.no_grad()
def final_predictions(model: TouchMapModel | None, family: str, split: str = "test", *, episodes: int = 256,
                      num_envs: int = 64, seed: int = 30_000, objects_per_split: int | None = None
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each episode's final prediction, its target and its object's index in the family's object set,
    ``(episodes, P)``, ``(episodes,)`` or ``(episodes, d)``, and ``(episodes,)``.

    The learned agent's loop (scan moves, the model's prediction after every touch); ``model=None``:
    random moves and the blind prediction (zeros), as ``evaluate``. For scores the env's single
    figure does not give (a pose task's position and yaw errors apart).
    """
    env = make_vector_env(family, split, num_envs, objects_per_split)
    scan = make_scan(env, family)
    rng = np.random.default_rng(seed)
    background = gel_background(component_shape(env.single_observation_space, "sensor_img")[:2])
    prediction_shape = (num_envs,) + component_shape(env.single_action_space, "prediction")
    predictions, targets, objects = [], [], []
    for batch in range(max(1, episodes // num_envs)):
        observation, info = env.reset(seed=seed + batch * num_envs)
        targets.append(np.asarray(info["target"]).copy())
        objects.append(env.sim.state.object_index.copy())
        scan.reset(observation["sensor_pos"])
        touches = TouchMap(num_envs, background)
        prediction = np.zeros(prediction_shape, np.float32)
        for _ in range(env.task.step_limit):
            if model is None:
                moves = rng.uniform(-1.0, 1.0, (num_envs,) + component_shape(env.single_action_space, "action"))
            else:
                moves = scan.act(observation["sensor_pos"])
                maps = touches.add(observation["sensor_img"], observation["sensor_pos"], observation.get("sensor_rot"))
                prediction = model(maps).numpy().astype(np.float32)
            observation, *_ = env.step({"action": moves.astype(np.float32), "prediction": prediction})
        predictions.append(prediction.copy())
    return np.concatenate(predictions), np.concatenate(targets), np.concatenate(objects)


def save(model: TouchMapModel, path: Path, **metadata: Any) -> None:
    """Write a checkpoint atomically (weights in half precision: the file stays small)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(path.suffix + ".tmp")
    state = {key: value.half() if value.is_floating_point() else value for key, value in model.state_dict().items()}
    torch.save({"state_dict": state, "config": model.config, **metadata}, scratch)
    os.replace(scratch, path)


def load(path: str | Path) -> tuple[TouchMapModel, dict[str, Any]]:
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    model = TouchMapModel(**checkpoint["config"])
    model.load_state_dict({key: value.float() if value.is_floating_point() else value
                           for key, value in checkpoint["state_dict"].items()})
    model.eval()
    return model, {key: value for key, value in checkpoint.items() if key not in ("state_dict", "config")}
