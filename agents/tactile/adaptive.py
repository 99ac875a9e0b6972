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

Lattice candidates (``lattice=``, ``candidates="lattice"`` in the agent's config): the one-step
rule above covers too little of the digit (the class needs most strokes, and a one-step lookahead
cannot value a touch that completes the digit several touches later). So the candidates become the
coverage scan's own lattice points whose footprint is still unfelt, and the scan's coverage is kept
as a constraint while the order follows the belief: with ``m`` moves left, a candidate c costs

    over(c)  = max(0, moves(here -> c) + moves(nearest-neighbour tour of the other unfelt points from c) - m)
    cost(c)  = L_t(c) + travel_weight * (moves(here -> c) - 1)

and the policy takes the lowest cost among the candidates with the least ``over(c)`` (the choices
that still let it feel every lattice point in the moves left, if any do), or, with a finite
``over_weight``, the lowest ``cost(c) + over_weight * over(c)``. ``moves(p -> q)`` counts capped
moves (3 cm), so a far lattice point is reached over several moves, touching on the way. Once every
lattice point is felt it falls back to the grid rule.
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
from gauntlet.agents.tactile.scan import scan_lattice
from gauntlet.agents.tactile.touchmap import MAP_CHANNELS, MAP_HALF_M, MAP_PIXELS, TouchMap, gel_background
from gauntlet.agents.tactile.training import load, scan_region
from gauntlet.envs.tactile.env import component_shape
from gauntlet.envs.tactile.sensor import SENSOR_HEIGHT_M, SENSOR_WIDTH_M
from gauntlet.envs.tactile.simulation import MAX_STEP_M, WORKSPACE_HALF_M

GRID_M = 0.005  # candidate touch points: a 5 mm grid over the workspace
MIN_NEW_AREA = 0.3  # a candidate's footprint must add this share of uncovered area (if any candidate does)
LATTICE_UNFELT = 0.5  # a lattice point is still a candidate while this share of its footprint is unfelt
CANDIDATES = ("grid", "lattice")
TRAVEL_WEIGHT = 0.05  # lattice candidates: added to the predicted loss per extra move needed to get there


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


class ClassifierWithLookahead(nn.Module):
    """A ``BeliefModel``'s lookahead with another classifier's logits: ``maps -> (logits, lookahead)``.

    The belief model's own classifier is fine-tuned on the mixed maps of its training and loses
    0.02-0.04 of the scan's accuracy; the scan-trained ``model.TouchMapModel`` is not, so the
    policy can steer by the lookahead and predict with the scan classifier.
    """

    def __init__(self, belief: BeliefModel, classifier: TouchMapModel):
        super().__init__()
        self.belief, self.classifier = belief, classifier
        self.config = {**belief.config, "classifier": classifier.config}

    def forward(self, maps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.classifier(maps), self.belief(maps)[1]


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


def moves_between(start_m: np.ndarray, end_m: np.ndarray) -> np.ndarray:
    """Capped moves (``MAX_STEP_M`` each) from ``start_m`` to ``end_m`` (m, ``(..., 2)``)."""
    return np.ceil(np.linalg.norm(np.asarray(end_m) - np.asarray(start_m), axis=-1) / (MAX_STEP_M * (1 - 1e-4)))


def tour_moves(start_m: np.ndarray, points_m: np.ndarray) -> float:
    """Capped moves of the nearest-neighbour tour from ``start_m`` through every one of ``points_m`` ``(n, 2)``."""
    here, left, total = start_m, np.asarray(points_m), 0.0
    while len(left):
        nearest = int(np.argmin(np.sum((left - here) ** 2, axis=1)))
        total += float(moves_between(here, left[nearest]))
        here, left = left[nearest], np.delete(left, nearest, axis=0)
    return total


class AdaptivePolicy:
    """Batched: ``act(positions, maps, lookahead, moves_left)`` -> moves ``(B, move_dims)`` to the chosen touches.

    ``lattice`` (m, ``(L, 2)``, the coverage scan's ``scan.scan_lattice``): candidates are its
    unfelt points first, see the module docstring; ``over_weight=None`` makes keeping the lattice
    coverage a hard constraint (whenever it can be kept).
    """

    def __init__(self, move_dims: int = 2, min_new_area: float = MIN_NEW_AREA, reach_m: float | None = MAX_STEP_M,
                 lattice: np.ndarray | None = None, travel_weight: float = TRAVEL_WEIGHT,
                 over_weight: float | None = None):
        self.points = torch.from_numpy(candidate_points()).float()
        self.move_dims = move_dims
        self.min_new_area = min_new_area
        self.reach_m = reach_m  # None: any point of the workspace (the sensor heads there, touching on the way)
        self.lattice = None if lattice is None else np.asarray(lattice, np.float64)
        self.travel_weight = travel_weight
        self.over_weight = over_weight

    def choose(self, positions: np.ndarray, maps: torch.Tensor, lookahead: torch.Tensor,
               moves_left: int | None = None) -> torch.Tensor:
        """The next touch centre (m) ``(B, 2)`` of each episode, from its current ``sensor_pos`` and belief.

        ``moves_left``: the moves whose touches still count (lattice candidates; None: no budget).
        """
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
        target = self.points[best]
        if self.lattice is None:
            return target
        lattice = torch.from_numpy(self.lattice).float().expand(len(here), -1, -1)
        unfelt = (new_area(maps[:, -1:], lattice) >= LATTICE_UNFELT).numpy()
        predicted = lookahead_at(lookahead, lattice).double().numpy()
        for b in np.flatnonzero(unfelt.any(axis=1)):
            target[b] = torch.from_numpy(self._lattice_choice(here[b].double().numpy(), np.flatnonzero(unfelt[b]),
                                                              predicted[b], moves_left))
        return target

    def _lattice_choice(self, here: np.ndarray, unfelt: np.ndarray, predicted: np.ndarray,
                        moves_left: int | None) -> np.ndarray:
        """The chosen unfelt lattice point of one episode (m)."""
        lattice = self.lattice
        assert lattice is not None
        first = moves_between(here, lattice[unfelt])
        cost = predicted[unfelt] + self.travel_weight * (first - 1)
        if moves_left is not None:
            over = np.array([max(0.0, first[k] + tour_moves(lattice[c], lattice[np.delete(unfelt, k)]) - moves_left)
                             for k, c in enumerate(unfelt)])
            if self.over_weight is None:
                cost = np.where(over == over.min(), cost, np.inf)
            else:
                cost = cost + self.over_weight * over
        return lattice[unfelt[int(np.argmin(cost))]]

    def act(self, positions: np.ndarray, maps: torch.Tensor, lookahead: torch.Tensor,
            moves_left: int | None = None) -> np.ndarray:
        here = np.asarray(positions, np.float64)[:, :2] * WORKSPACE_HALF_M
        target = self.choose(positions, maps, lookahead, moves_left).double().numpy()
        moves = np.zeros((len(here), self.move_dims), np.float32)
        offset = (target - here) / MAX_STEP_M
        norms = np.maximum(1.0, np.hypot(offset[:, 0], offset[:, 1]))
        moves[:, :2] = offset / norms[:, None]
        return moves


class AdaptiveTactileAgent(Agent):
    """Chooses each touch by the lookahead of a ``BeliefModel`` checkpoint and predicts with its belief.

    ``candidates="lattice"`` takes the coverage scan's lattice points first, in the order the
    lookahead gives while keeping the scan's coverage (module docstring); ``classifier=PATH``
    predicts with a scan-trained ``model.TouchMapModel`` checkpoint of the same family instead of
    the belief model's own classifier. Train a checkpoint with ``experiments/tactile.py --adaptive``.
    """

    name = "tactile-adaptive"

    def __init__(self, checkpoint: str | Path, candidates: str = "grid", classifier: str | Path | None = None):
        from gauntlet.agents.tactile.belief_training import load_belief

        if candidates not in CANDIDATES:
            raise ValueError(f"candidates={candidates!r}: give one of {CANDIDATES}")
        self.checkpoint, self.candidates = str(checkpoint), candidates
        self.classifier = None if classifier is None else str(classifier)
        belief, self.metadata = load_belief(checkpoint)
        self.model: nn.Module = belief
        if classifier is not None:
            scan_model, scan_metadata = load(classifier)
            if scan_metadata.get("family") != self.metadata.get("family"):
                raise ValueError(f"classifier {classifier} is a {scan_metadata.get('family')} checkpoint; "
                                 f"{checkpoint} is {self.metadata.get('family')}")
            self.model = ClassifierWithLookahead(belief, scan_model)
        self.num_classes = int(belief.config["num_classes"])

    def config(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint, "candidates": self.candidates, "classifier": self.classifier}

    def reset(self, *, seed: int | None, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        expected = component_shape(action_space, "prediction")[0]
        if expected != self.num_classes:
            raise ValueError(f"checkpoint {self.checkpoint} predicts {self.num_classes} classes; "
                             f"this env expects {expected}")
        self._step_limit = int(self.metadata["step_limit"])
        lattice = (scan_lattice(self._step_limit, scan_region(str(self.metadata["family"])))
                   if self.candidates == "lattice" else None)
        self._policy = AdaptivePolicy(component_shape(action_space, "action")[0], lattice=lattice)
        self._map = TouchMap(1, gel_background(component_shape(observation_space, "sensor_img")[:2]))
        self._touches = 0

    @torch.no_grad()
    def act(self, observation: Any, info: dict[str, Any]) -> dict[str, np.ndarray]:
        position = np.asarray(observation["sensor_pos"], np.float32)[None]
        maps = self._map.add(np.asarray(observation["sensor_img"], np.float32)[None], position)
        self._touches += 1
        logits, lookahead = self.model(maps)
        moves_left = max(0, self._step_limit - self._touches)
        return {"action": self._policy.act(position, maps, lookahead, moves_left)[0],
                "prediction": logits[0].numpy().astype(np.float32)}
