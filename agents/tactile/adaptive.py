"""An adaptive exploration policy: touch where the learned belief expects to learn the most.

The coverage scan (``scan.CoverageScan``) tours a fixed lattice whatever the touches say. This
policy chooses every next touch from the touches so far, by a one-step lookahead on the env's own
loss. One network (``BeliefModel``) over the touch map ``map_t`` (``touchmap``) has two heads on a
shared convolutional trunk:

    logits_t  = classify(trunk(map_t))          # the belief over classes after touches 0..t
    L_t(c)    = lookahead(trunk(map_t))(c)      # predicted loss of the belief after one more touch centred at c

``L_t(c)`` is a learned estimate of the expected posterior loss E[-log p(y | touches 0..t, touch at c)]
/ log K, the quantity an information-gain policy minimises (the env's reward is its negative).
It is trained by regression on real touches: for a history H of an episode's touches and a touch
j of the same episode that is not in H, the target is the classifier's normalised cross-entropy
of the true class on the map of H + {j} (detached), read at j's position on the lookahead map.

Policy (``AdaptivePolicy``): among the points of a 5 mm grid over the workspace that the sensor
reaches in one move (3 cm) and whose footprint adds at least ``min_new_area`` of uncovered area
(a static object repeats what it said, so a touch on covered ground is wasted), move to the one
with the lowest ``L_t(c)``. The first touch is at the episode's random start, as for the scan.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn
from torch.nn import functional as F

from gauntlet.agent import Agent
from gauntlet.agents.tactile.model import TouchMapModel
from gauntlet.agents.tactile.touchmap import MAP_CHANNELS, MAP_HALF_M, MAP_PIXELS, TouchMap, gel_background
from gauntlet.envs.tactile.env import component_shape
from gauntlet.envs.tactile.sensor import SENSOR_HEIGHT_M, SENSOR_WIDTH_M
from gauntlet.envs.tactile.simulation import MAX_STEP_M, WORKSPACE_HALF_M

GRID_M = 0.005  # candidate touch points: a 5 mm grid over the workspace
MIN_NEW_AREA = 0.3  # a candidate's footprint must add this share of uncovered area (if any candidate does)


def _block(inputs: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(inputs, outputs, 3, padding=1), nn.BatchNorm2d(outputs), nn.ReLU(),
                         nn.MaxPool2d(2))


class BeliefModel(nn.Module):
    """Touch map ``(N, C, 32, 32)`` -> class logits ``(N, K)`` and a lookahead loss map ``(N, 1, 8, 8)``.

    The classifier is ``model.TouchMapModel``'s (three conv blocks, pooled to 3 x 3, an MLP). The
    lookahead head reads the 8 x 8 features of the second block (1.2 cm cells), the 4 x 4 ones of
    the third (upsampled) and their global mean (where the object is, what it looks like so far),
    and gives one predicted loss per cell; ``lookahead_at`` interpolates it at touch positions.
    """

    def __init__(self, num_classes: int, width: int = 32, hidden: int = 256, dropout: float = 0.3):
        super().__init__()
        self.block1, self.block2 = _block(MAP_CHANNELS, width), _block(width, 2 * width)
        self.block3 = _block(2 * width, 4 * width)
        self.classify = nn.Sequential(nn.AdaptiveAvgPool2d(3), nn.Flatten(), nn.Dropout(dropout),
                                      nn.Linear(4 * width * 9, hidden), nn.ReLU(), nn.Dropout(dropout),
                                      nn.Linear(hidden, num_classes))
        self.lookahead = nn.Sequential(nn.Conv2d(2 * width + 8 * width, 2 * width, 1), nn.ReLU(),
                                       nn.Conv2d(2 * width, 1, 1))
        self.config = {"num_classes": num_classes, "width": width, "hidden": hidden, "dropout": dropout}

    def init_from(self, scan_model: TouchMapModel) -> None:
        """Start from a scan-trained ``model.TouchMapModel`` classifier (same trunk and classifier layers)."""
        features, head = scan_model.features, scan_model.head
        pairs: list[tuple[nn.Module, nn.Module]] = [(self.block1, features[0]), (self.block2, features[1]),
                                                    (self.block3, features[2]), (self.classify[3], head[2]),
                                                    (self.classify[6], head[5])]
        for mine, theirs in pairs:
            mine.load_state_dict(theirs.state_dict())

    def forward(self, maps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mid = self.block2(self.block1(maps))  # (N, 2w, 8, 8)
        deep = self.block3(mid)  # (N, 4w, 4, 4)
        spread = F.interpolate(deep, size=mid.shape[-2:], mode="nearest")
        overall = deep.mean(dim=(2, 3), keepdim=True).expand(-1, -1, *mid.shape[-2:])
        return self.classify(deep), self.lookahead(torch.cat([mid, spread, overall], dim=1))


def map_grid(points_m: torch.Tensor) -> torch.Tensor:
    """Platform points (m) ``(N, M, 2)`` -> ``grid_sample`` coordinates ``(N, 1, M, 2)`` of the touch map."""
    return torch.stack([points_m[..., 0] / MAP_HALF_M, -points_m[..., 1] / MAP_HALF_M], dim=-1)[:, None]


def lookahead_at(lookahead: torch.Tensor, points_m: torch.Tensor) -> torch.Tensor:
    """The lookahead map ``(N, 1, h, w)`` read at points (m) ``(N, M, 2)`` -> ``(N, M)``."""
    return F.grid_sample(lookahead, map_grid(points_m), mode="bilinear", padding_mode="border",
                         align_corners=False)[:, 0, 0]


def new_area(coverage: torch.Tensor, points_m: torch.Tensor) -> torch.Tensor:
    """Share of a sensor footprint centred at each point (``(N, M, 2)``, m) not yet covered: ``(N, M)``.

    ``coverage`` is the map's coverage channel ``(N, 1, P, P)``; the footprint is approximated by
    its axis-aligned box (the MNIST sensor does not turn).
    """
    pixel = 2 * MAP_HALF_M / MAP_PIXELS
    rows = 2 * int(round(SENSOR_HEIGHT_M / pixel / 2)) + 1
    cols = 2 * int(round(SENSOR_WIDTH_M / pixel / 2)) + 1
    box = F.avg_pool2d(coverage, (rows, cols), stride=1, padding=(rows // 2, cols // 2), count_include_pad=True)
    return 1.0 - F.grid_sample(box, map_grid(points_m), mode="bilinear", padding_mode="border",
                               align_corners=False)[:, 0, 0]


def candidate_points() -> np.ndarray:
    """The candidate touch centres (m) ``(M, 2)``: a ``GRID_M`` grid over the workspace."""
    xs = np.arange(-WORKSPACE_HALF_M[0], WORKSPACE_HALF_M[0] + 1e-9, GRID_M)
    ys = np.arange(-WORKSPACE_HALF_M[1], WORKSPACE_HALF_M[1] + 1e-9, GRID_M)
    return np.array([(x, y) for y in ys for x in xs])


class AdaptivePolicy:
    """Batched: ``act(positions, maps, lookahead)`` -> moves ``(B, move_dims)`` to the chosen touches."""

    def __init__(self, move_dims: int = 2, min_new_area: float = MIN_NEW_AREA, reach_m: float | None = MAX_STEP_M):
        self.points = torch.from_numpy(candidate_points()).float()
        self.move_dims = move_dims
        self.min_new_area = min_new_area
        self.reach_m = reach_m  # None: any point of the workspace (the sensor heads there, touching on the way)

    def choose(self, positions: np.ndarray, maps: torch.Tensor, lookahead: torch.Tensor) -> torch.Tensor:
        """The next touch centre (m) ``(B, 2)`` of each episode, from its current ``sensor_pos`` and belief."""
        here = torch.from_numpy(np.asarray(positions, np.float32)[:, :2]) * torch.from_numpy(
            WORKSPACE_HALF_M.astype(np.float32))
        points = self.points.expand(len(here), -1, -1)
        score = lookahead_at(lookahead, points)
        reach = float("inf") if self.reach_m is None else self.reach_m * (1 - 1e-4)
        reachable = torch.linalg.norm(points - here[:, None], dim=-1) <= reach
        fresh = new_area(maps[:, -1:], points) >= self.min_new_area
        allowed = reachable & fresh
        allowed = torch.where(allowed.any(dim=1, keepdim=True), allowed, reachable)
        best = torch.where(allowed, score, torch.full_like(score, float("inf"))).argmin(dim=1)
        return self.points[best]

    def act(self, positions: np.ndarray, maps: torch.Tensor, lookahead: torch.Tensor) -> np.ndarray:
        here = np.asarray(positions, np.float64)[:, :2] * WORKSPACE_HALF_M
        target = self.choose(positions, maps, lookahead).double().numpy()
        moves = np.zeros((len(here), self.move_dims), np.float32)
        offset = (target - here) / MAX_STEP_M
        norms = np.maximum(1.0, np.hypot(offset[:, 0], offset[:, 1]))
        moves[:, :2] = offset / norms[:, None]
        return moves


class AdaptiveTactileAgent(Agent):
    """Chooses each touch by the lookahead of a ``BeliefModel`` checkpoint and predicts with its belief.

    Train a checkpoint with ``experiments/tactile.py --adaptive``.
    """

    name = "tactile-adaptive"

    def __init__(self, checkpoint: str | Path):
        from gauntlet.agents.tactile.belief_training import load_belief

        self.checkpoint = str(checkpoint)
        self.model, self.metadata = load_belief(checkpoint)

    def config(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint}

    def reset(self, *, seed: int | None, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        expected = component_shape(action_space, "prediction")[0]
        if expected != self.model.config["num_classes"]:
            raise ValueError(f"checkpoint {self.checkpoint} predicts {self.model.config['num_classes']} classes; "
                             f"this env expects {expected}")
        self._policy = AdaptivePolicy(component_shape(action_space, "action")[0])
        self._map = TouchMap(1, gel_background(component_shape(observation_space, "sensor_img")[:2]))

    @torch.no_grad()
    def act(self, observation: Any, info: dict[str, Any]) -> dict[str, np.ndarray]:
        position = np.asarray(observation["sensor_pos"], np.float32)[None]
        maps = self._map.add(np.asarray(observation["sensor_img"], np.float32)[None], position)
        logits, lookahead = self.model(maps)
        return {"action": self._policy.act(position, maps, lookahead)[0],
                "prediction": logits[0].numpy().astype(np.float32)}
