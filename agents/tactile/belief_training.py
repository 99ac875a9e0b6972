"""Training and evaluating the adaptive agent's ``BeliefModel`` on the native vector env.

Episodes are collected in batches of ``num_envs`` slots of the training split, a third each moved
by the coverage scan, by uniform random moves and by the adaptive policy with the model as it is
(random moves instead for the first ``warmup`` share of the updates, while the model knows
nothing), so the model sees the maps its own policy makes. Each gradient step then draws, per
episode, ``histories`` histories H (the first t touches, or t touches at random; t uniform in
1..T-1) and a touch j of the episode outside H, and trains on

    loss = CE(classify(map_H)) + CE(classify(map_H+j)) + CE(classify(map_all))        # the belief
         + (lookahead(map_H)(pos_j) - CE(classify(map_H+j)).detach())^2                 # the lookahead

with CE the env's normalised loss (cross-entropy / log K). Evaluation plays each policy with the
same model on the same test episodes (same seeds: same digits, poses and starts) and keeps every
episode's per-step score from the env, so curves come with confidence intervals and paired
differences.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from gauntlet.agents.tactile.adaptive import MIN_NEW_AREA, TRAVEL_WEIGHT, AdaptivePolicy, BeliefModel, lookahead_at
from gauntlet.agents.tactile.touchmap import MAP_HALF_M, MAP_PIXELS, TouchMap, gel_background, paste, touch_features
from gauntlet.agents.tactile.training import Batch, load, make_scan, make_vector_env, scan_region
from gauntlet.envs.tactile.env import TactilePerceptionVectorEnv, component_shape
from gauntlet.envs.tactile.simulation import MAX_STEP_M, WORKSPACE_HALF_M

POLICIES = ("scan", "adaptive", "random")


@torch.no_grad()
def play(env: TactilePerceptionVectorEnv, model: nn.Module, policies: list[str], seed: int,
         background: torch.Tensor, family: str, reach_m: float | None = MAX_STEP_M,
         min_new_area: float = MIN_NEW_AREA, lattice: bool = False, travel_weight: float = TRAVEL_WEIGHT,
         over_weight: float | None = None) -> tuple[Batch, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One episode per slot, slot i moved by ``policies[i]``; predictions from the model's belief.

    ``model`` maps touch maps to (class logits, lookahead map): a ``BeliefModel`` or an
    ``adaptive.ClassifierWithLookahead``. ``lattice``: the adaptive policy's candidates are the
    scan's own lattice points first (``adaptive.AdaptivePolicy``).

    Returns the touches 0..T-1 (``Batch``), and per slot and step the env's score (accuracy), its
    normalised loss, the share of the object's region (``training.scan_region``) felt so far and the
    belief's confidence (its highest class probability), ``(B, T)`` each.
    """
    if len(policies) != env.num_envs or not set(policies) <= set(POLICIES):
        raise ValueError(f"need one policy of {POLICIES} per env ({env.num_envs}), got {policies}")
    model.eval()
    observation, info = env.reset(seed=seed)
    targets = torch.from_numpy(np.asarray(info["target"]))
    rng = np.random.default_rng(seed)
    move_dims = component_shape(env.single_action_space, "action")[0]
    scan = make_scan(env, family)
    adaptive = AdaptivePolicy(move_dims, min_new_area, reach_m, scan.points if lattice else None, travel_weight,
                              over_weight)
    scan.reset(observation["sensor_pos"])
    kinds = np.array(policies)
    touches = TouchMap(env.num_envs, background)
    region = _region_mask(family)
    features, positions, scores, losses, coverage, confidence = [], [], [], [], [], []
    for step in range(env.task.step_limit):
        features.append(touch_features(torch.from_numpy(observation["sensor_img"]), background))
        positions.append(torch.from_numpy(observation["sensor_pos"].copy()))
        maps = touches.add(observation["sensor_img"], observation["sensor_pos"])
        coverage.append(((maps[:, -1] > 0) & region).sum(dim=(1, 2)).numpy() / float(region.sum()))
        logits, lookahead = model(maps)
        confidence.append(logits.softmax(dim=1).amax(dim=1).numpy().astype(np.float64))
        moves = rng.uniform(-1.0, 1.0, (env.num_envs, move_dims)).astype(np.float32)
        moves[kinds == "scan"] = scan.act(observation["sensor_pos"])[kinds == "scan"]
        chosen = kinds == "adaptive"
        if chosen.any():
            moves[chosen] = adaptive.act(observation["sensor_pos"][chosen], maps[chosen], lookahead[chosen],
                                         env.task.step_limit - 1 - step)
        observation, _, _, _, info = env.step({"action": moves, "prediction": logits.numpy().astype(np.float32)})
        scores.append(np.asarray(info["stats"]["final_accuracy"], np.float64).copy())
        losses.append(np.asarray(info["loss"], np.float64).copy())
    batch = Batch(torch.stack(features, 1), torch.stack(positions, 1), None, targets)
    return batch, np.stack(scores, 1), np.stack(losses, 1), np.stack(coverage, 1), np.stack(confidence, 1)


def _region_mask(family: str) -> torch.Tensor:
    """Map pixels ``(P, P)`` inside the region where the family's object can lie (``training.scan_region``)."""
    half_x, half_y = scan_region(family)
    coords = (torch.arange(MAP_PIXELS, dtype=torch.float32) + 0.5) / MAP_PIXELS * 2 * MAP_HALF_M - MAP_HALF_M
    return (coords[:, None].abs() <= half_y) & (coords[None, :].abs() <= half_x)


def subset_maps(pasted: torch.Tensor, covered: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """Touch maps of chosen touch subsets: ``pasted`` ``(B, T, C-1, P, P)``, ``covered`` ``(B, T, 1, P, P)``,
    ``masks`` ``(B, K, T)`` (1 = the touch is in the subset) -> ``(B * K, C, P, P)``.

    The map of a subset is the touch map's update equation summed over the subset's touches.
    """
    sums = torch.einsum("btchw,bkt->bkchw", pasted, masks)
    counts = torch.einsum("btchw,bkt->bkchw", covered, masks)
    maps = torch.cat([sums / counts.clamp(min=1.0), counts.clamp(max=1.0)], dim=2)
    return maps.reshape(-1, *maps.shape[2:])


def draw_histories(batch: int, length: int, histories: int, generator: torch.Generator
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Masks ``(B, K, T)`` of histories (a prefix or a random subset of t touches, t in 1..T-1) and one
    touch outside each history ``(B, K)``."""
    sizes = torch.randint(1, length, (batch, histories, 1), generator=generator)
    order = torch.arange(length).expand(batch, histories, length)
    shuffled = torch.rand(batch, histories, length, generator=generator).argsort(dim=-1).argsort(dim=-1)
    prefix = torch.rand(batch, histories, 1, generator=generator) < 0.5
    ranks = torch.where(prefix, order, shuffled)
    masks = (ranks < sizes).float()
    outside = torch.rand(batch, histories, length, generator=generator) - 2.0 * masks
    return masks, outside.argmax(dim=-1)


def train_belief(family: str = "TactileMNIST", *, updates: int = 400, num_envs: int = 48, seed: int = 0,
                 objects_per_split: int | None = None, learning_rate: float = 2e-3, reuse: int = 4,
                 histories: int = 4, warmup: float = 0.25, init: str | Path | None = None,
                 progress: Callable[[int, float, float], None] | None = None
                 ) -> tuple[BeliefModel, dict[str, list[float]]]:
    """Train a ``BeliefModel`` (classifier + lookahead) on the training split; see the module docstring.

    ``init``: a ``training.save`` checkpoint of the same family whose trunk and classifier start the
    model (the lookahead head always starts fresh).
    """
    torch.manual_seed(seed)
    env = make_vector_env(family, "train", num_envs, objects_per_split)
    task = env.task
    if task.kind != "classification" or task.sensor_rotates:
        raise ValueError(f"the adaptive agent is built for classification families without a turning sensor; "
                         f"{family} is {task.kind}{' with a turning sensor' if task.sensor_rotates else ''}")
    background = gel_background(component_shape(env.single_observation_space, "sensor_img")[:2])
    model = BeliefModel(int(task.num_classes))
    if init is not None:  # warm start: the trunk and classifier of a scan-trained checkpoint
        scan_model, metadata = load(init)
        if metadata.get("family") != family or scan_model.config["prediction_dim"] != task.num_classes:
            raise ValueError(f"{init} is a {metadata.get('family')} checkpoint; {family} needs its own")
        model.init_from(scan_model)
    optimiser = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimiser, max_lr=learning_rate, total_steps=max(updates, 2),
                                                   pct_start=0.1)
    generator = torch.Generator().manual_seed(seed)
    log: dict[str, list[float]] = {"classify": [], "lookahead": []}
    length, log_k = task.step_limit, float(np.log(task.num_classes))
    thirds = [("scan", "random", "adaptive")[i * 3 // num_envs] for i in range(num_envs)]
    for update in range(updates):
        if update % reuse == 0:
            policies = [p if p != "adaptive" or update >= warmup * updates else "random" for p in thirds]
            batch, *_ = play(env, model, policies, seed * 1_000_003 + update * num_envs, background, family)
            flat_pasted, flat_covered = paste(batch.features.reshape(num_envs * length, *batch.features.shape[2:]),
                                              batch.positions.reshape(num_envs * length, -1))
            pasted = flat_pasted.reshape(num_envs, length, *flat_pasted.shape[1:])
            covered = flat_covered.reshape(num_envs, length, *flat_covered.shape[1:])
            touch_xy = batch.positions[..., :2] * torch.from_numpy(WORKSPACE_HALF_M.astype(np.float32))
        model.train()
        masks, extra = draw_histories(num_envs, length, histories, generator)
        grown = masks + F.one_hot(extra, length).float()
        everything = torch.ones(num_envs, 1, length)
        maps = torch.cat([subset_maps(pasted, covered, masks), subset_maps(pasted, covered, grown),
                          subset_maps(pasted, covered, everything)])
        logits, lookahead = model(maps)
        targets = torch.cat([batch.targets.repeat_interleave(histories)] * 2 + [batch.targets])
        losses = F.cross_entropy(logits, targets, reduction="none") / log_k
        count = num_envs * histories
        where = touch_xy[torch.arange(num_envs)[:, None], extra].reshape(count, 1, 2)
        predicted = lookahead_at(lookahead[:count], where)[:, 0]
        lookahead_loss = F.mse_loss(predicted, losses[count:2 * count].detach())
        classify_loss = losses.mean()
        optimiser.zero_grad()
        (classify_loss + lookahead_loss).backward()
        optimiser.step()
        schedule.step()
        log["classify"].append(float(classify_loss.detach()))
        log["lookahead"].append(float(lookahead_loss.detach()))
        if progress:
            progress(update, log["classify"][-1], log["lookahead"][-1])
    model.eval()
    return model, log


def evaluate_policies(model: nn.Module, family: str = "TactileMNIST", *, episodes: int = 512,
                      num_envs: int = 64, seed: int = 10_000, objects_per_split: int | None = None,
                      policies: tuple[str, ...] = POLICIES, reach_m: float | None = MAX_STEP_M,
                      min_new_area: float = MIN_NEW_AREA, lattice: bool = False,
                      travel_weight: float = TRAVEL_WEIGHT, over_weight: float | None = None,
                      split: str = "test"
                      ) -> dict[str, dict[str, np.ndarray]]:
    """Per-episode, per-step scores, losses, region covered and confidence ``(episodes, T)`` of each policy
    on the test split (``split="train"``: training objects, for choosing settings without looking at
    the test split).

    Every policy plays the same episodes (same seeds: same objects, poses and starting points)
    with the same model's predictions.
    """
    env = make_vector_env(family, split, num_envs, objects_per_split)
    background = gel_background(component_shape(env.single_observation_space, "sensor_img")[:2])
    out: dict[str, dict[str, np.ndarray]] = {}
    for policy in policies:
        scores, losses, covered, confident = [], [], [], []
        for batch in range(max(1, episodes // num_envs)):
            _, score, loss, cover, confidence = play(env, model, [policy] * num_envs, seed + batch * num_envs,
                                                     background, family, reach_m, min_new_area, lattice,
                                                     travel_weight, over_weight)
            scores.append(score)
            losses.append(loss)
            covered.append(cover)
            confident.append(confidence)
        out[policy] = {"score": np.concatenate(scores), "loss": np.concatenate(losses),
                       "coverage": np.concatenate(covered), "confidence": np.concatenate(confident)}
    return out


def save_belief(model: BeliefModel, path: Path, **metadata: Any) -> None:
    """Write a checkpoint atomically (weights in half precision)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(path.suffix + ".tmp")
    state = {key: value.half() if value.is_floating_point() else value for key, value in model.state_dict().items()}
    torch.save({"state_dict": state, "config": model.config, "kind": "belief", **metadata}, scratch)
    os.replace(scratch, path)


def load_belief(path: str | Path) -> tuple[BeliefModel, dict[str, Any]]:
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    if checkpoint.get("kind") != "belief":
        raise ValueError(f"{path} is not an adaptive agent's checkpoint (train one with experiments/tactile.py "
                         "--adaptive)")
    model = BeliefModel(**checkpoint["config"])
    model.load_state_dict({key: value.float() if value.is_floating_point() else value
                           for key, value in checkpoint["state_dict"].items()})
    model.eval()
    return model, {key: value for key, value in checkpoint.items() if key not in ("state_dict", "config")}
