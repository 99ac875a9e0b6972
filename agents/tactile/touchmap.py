"""The touch map: every touch of an episode pasted where it happened on a map of the platform.

The sensor reports where it is (``sensor_pos``: x, y over the workspace, contact height z) and,
in the rotating families, its yaw (``sensor_rot``). Each touch's tactile image is reduced to a
few features per 1.2 x 0.9 mm cell (mean colour change and mean absolute colour change from the
undeformed gel, per channel) and resampled onto a fixed map of the reachable platform, 3 mm per
map pixel, together with a coverage mask and the contact height. The map is the episode's
memory, updated after every touch (the recurrent state of the perception model):

    S_t = S_{t-1} + paste(features_t, pose_t),   N_t = N_{t-1} + paste(1, pose_t)
    map_t = [S_t / max(N_t, 1), min(N_t, 1)]          # mean of the touches that covered a cell

A CNN over ``map_t`` then predicts the target (``model.TouchMapModel``). The paste is bilinear
resampling (``grid_sample``) from map coordinates into sensor coordinates, the sensor's own
geometry: image columns run along its 18.88 mm side (+x), rows from its +y edge down.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch.nn import functional as F

from gauntlet.envs.tactile.sensor import SENSOR_HEIGHT_M, SENSOR_WIDTH_M, SensorConfig, TactileRenderer
from gauntlet.envs.tactile.simulation import WORKSPACE_HALF_M

MAP_HALF_M = 0.048  # the sensing surface reaches x +-4.79 cm, y +-4.76 cm: the map spans +-4.8 cm
MAP_PIXELS = 32  # 3 mm per map pixel: MNIST strokes (7-10 mm wide) span 2-3 pixels, the digit ~24
POOL = 4  # 64 x 64 tactile pixels -> 16 x 16 cells before pasting (anti-aliasing for the 3 mm map)
TOUCH_FEATURES = 6  # mean and mean |.| of the colour change, per channel
MAP_CHANNELS = TOUCH_FEATURES + 2  # + contact height + coverage


def gel_background(image_size: Sequence[int]) -> torch.Tensor:
    """The undeformed gel's image in observation units ([-1, 1]), ``(3, H, W)``: the zero of a touch."""
    height, width = image_size
    renderer = TactileRenderer(SensorConfig((height, width)), 2, 0.1)
    return torch.from_numpy(renderer.background * 2.0 - 1.0).permute(2, 0, 1).float()


def touch_features(images: torch.Tensor, background: torch.Tensor) -> torch.Tensor:
    """Tactile images ``(N, H, W, 3)`` -> per-cell features ``(N, 6, H / POOL, W / POOL)``."""
    change = images.permute(0, 3, 1, 2) - background
    return torch.cat([F.avg_pool2d(change, POOL), F.avg_pool2d(change.abs(), POOL)], dim=1)


def sensor_pose(positions: torch.Tensor, rotations: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Observed ``sensor_pos`` ``(N, 3)`` (and ``sensor_rot`` ``(N, 2)``) -> centre (m) ``(N, 2)``, yaw ``(N,)``."""
    half = torch.as_tensor(WORKSPACE_HALF_M, dtype=torch.float32)
    centre = positions[:, :2] * half
    if rotations is None:
        return centre, torch.zeros(len(positions))
    return centre, torch.atan2(rotations[:, 1], rotations[:, 0])


_MAP_COORDS = (torch.arange(MAP_PIXELS, dtype=torch.float32) + 0.5) / MAP_PIXELS * 2 * MAP_HALF_M - MAP_HALF_M


def paste(features: torch.Tensor, positions: torch.Tensor, rotations: torch.Tensor | None = None
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """Resample touches onto the map: features + contact height ``(N, C + 1, P, P)``, coverage ``(N, 1, P, P)``.

    Map rows run from +y down and columns along +x, like the tactile image. For a map pixel at
    world (X, Y): local (u, v) = R(-yaw) (X - x_s, Y - y_s); it samples the image at
    (u / (W / 2), -v / (H / 2)) in ``grid_sample``'s [-1, 1] units, and is covered iff both lie in [-1, 1].
    """
    centre, yaw = sensor_pose(positions, rotations)
    ys = -_MAP_COORDS  # row 0 is the +y edge
    dx = _MAP_COORDS[None, None, :] - centre[:, 0, None, None]  # (N, 1, P)
    dy = ys[None, :, None] - centre[:, 1, None, None]  # (N, P, 1)
    cos, sin = torch.cos(yaw)[:, None, None], torch.sin(yaw)[:, None, None]
    u = cos * dx + sin * dy
    v = -sin * dx + cos * dy
    grid = torch.stack([u / (SENSOR_WIDTH_M / 2), -v / (SENSOR_HEIGHT_M / 2)], dim=-1)  # (N, P, P, 2)
    covered = ((grid.abs() <= 1.0).all(dim=-1)).float()[:, None]
    sampled = F.grid_sample(features, grid, mode="bilinear", padding_mode="border", align_corners=False)
    height = (positions[:, 2, None, None, None] + 1.0).expand(-1, 1, MAP_PIXELS, MAP_PIXELS)  # 0 = platform floor
    return torch.cat([sampled, height], dim=1) * covered, covered


def episode_maps(features: torch.Tensor, positions: torch.Tensor, rotations: torch.Tensor | None,
                 steps: torch.Tensor) -> torch.Tensor:
    """Touch maps of batched episodes at chosen steps: ``features`` ``(B, T, 6, h, w)`` (``touch_features``),
    ``positions`` ``(B, T, 3)``, ``rotations`` ``(B, T, 2)`` or None, ``steps`` ``(B, K)`` -> ``(B * K, C, P, P)``.

    The map of step t holds touches 0..t (the cumulative sums of the update equation above).
    """
    batch, length = features.shape[:2]
    flat_rot = None if rotations is None else rotations.reshape(batch * length, -1)
    pasted, covered = paste(features.reshape(batch * length, *features.shape[2:]),
                            positions.reshape(batch * length, -1), flat_rot)
    sums = pasted.reshape(batch, length, *pasted.shape[1:]).cumsum(dim=1)
    counts = covered.reshape(batch, length, *covered.shape[1:]).cumsum(dim=1)
    index = steps[:, :, None, None, None]
    sums = sums.gather(1, index.expand(-1, -1, *sums.shape[2:]))
    counts = counts.gather(1, index.expand(-1, -1, *counts.shape[2:]))
    maps = torch.cat([sums / counts.clamp(min=1.0), counts.clamp(max=1.0)], dim=2)
    return maps.reshape(-1, *maps.shape[2:])


class TouchMap:
    """The running map of one batch of episodes, touch by touch (what the agent keeps between steps)."""

    def __init__(self, batch: int, background: torch.Tensor):
        self.background = background
        self.sums = torch.zeros(batch, MAP_CHANNELS - 1, MAP_PIXELS, MAP_PIXELS)
        self.counts = torch.zeros(batch, 1, MAP_PIXELS, MAP_PIXELS)

    def add(self, images: np.ndarray, positions: np.ndarray, rotations: np.ndarray | None = None) -> torch.Tensor:
        """Paste one touch per episode (``(B, H, W, 3)``, ``(B, 3)``) and return the maps ``(B, C, P, P)``."""
        rot = None if rotations is None else torch.from_numpy(np.asarray(rotations, np.float32))
        pasted, covered = paste(touch_features(torch.from_numpy(np.asarray(images, np.float32)), self.background),
                                torch.from_numpy(np.asarray(positions, np.float32)), rot)
        self.sums += pasted
        self.counts += covered
        return torch.cat([self.sums / self.counts.clamp(min=1.0), self.counts.clamp(max=1.0)], dim=1)
