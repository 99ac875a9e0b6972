"""The perception model: a small CNN over the touch map of an episode.

    map_t = touchmap(touches 0..t)          # the recurrent state: every touch pasted where it was felt
    y_t   = head(CNN(map_t))                # class logits, or the regression target

``y_t`` is the prediction the agent submits with its action at step t: it has seen the touches
0..t. Trained by the env's own normalised loss (cross-entropy / log K, or squared error over the
target variance), so the training loss is the negative of the prediction reward. The map is in
platform coordinates, so a centre of mass or a stroke's position reads straight off it.

Pose tasks (x, y, cos, sin) can instead predict the yaw as a distribution over ``yaw_bins`` equal
arcs of the circle (trained by ``training.binned_pose_loss``): an object's two equally likely ends
stay apart as modes rather than averaging to a short (cos, sin). The submitted heading is the most
probable arc, refined by the probability-weighted circular mean of it and its two neighbours.
"""

from __future__ import annotations

import torch
from torch import nn

from gauntlet.agents.tactile.touchmap import MAP_CHANNELS


def _block(inputs: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(inputs, outputs, 3, padding=1), nn.BatchNorm2d(outputs), nn.ReLU(),
                         nn.MaxPool2d(2))


class TouchMapModel(nn.Module):
    """32 x 32 touch map -> prediction. Three conv blocks (32 -> 4 pixels), pooled to 3 x 3, an MLP head."""

    target_mean: torch.Tensor  # buffers, registered in __init__
    target_scale: torch.Tensor

    def __init__(self, prediction_dim: int, width: int = 32, hidden: int = 256, dropout: float = 0.3,
                 yaw_bins: int = 0):
        super().__init__()
        if yaw_bins and (prediction_dim != 4 or yaw_bins < 8):
            raise ValueError(f"yaw_bins needs a pose prediction (x, y, cos, sin) and at least 8 bins; got "
                             f"prediction_dim {prediction_dim}, yaw_bins {yaw_bins}")
        outputs = 2 + yaw_bins if yaw_bins else prediction_dim
        self.features = nn.Sequential(_block(MAP_CHANNELS, width), _block(width, 2 * width),
                                      _block(2 * width, 4 * width), nn.AdaptiveAvgPool2d(3))
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(dropout), nn.Linear(4 * width * 9, hidden), nn.ReLU(),
                                  nn.Dropout(dropout), nn.Linear(hidden, outputs))
        self.config = {"prediction_dim": prediction_dim, "width": width, "hidden": hidden, "dropout": dropout,
                       "yaw_bins": yaw_bins}
        self.yaw_bins = yaw_bins
        # Regression: y = mean + scale * raw, so the network works in units of the target's spread
        # (identity for classification logits). Saved with the weights.
        self.register_buffer("target_mean", torch.zeros(prediction_dim))
        self.register_buffer("target_scale", torch.ones(prediction_dim))

    def set_target_scale(self, mean: torch.Tensor, scale: torch.Tensor) -> None:
        self.target_mean.copy_(mean)
        self.target_scale.copy_(scale)

    def raw(self, maps: torch.Tensor) -> torch.Tensor:
        """Maps ``(N, C, P, P)`` -> the head's outputs: in target-spread units, then the yaw logits if binned."""
        return self.head(self.features(maps))

    def predict(self, raw: torch.Tensor) -> torch.Tensor:
        """The head's outputs -> the env's prediction ``(N, prediction_dim)``."""
        if not self.yaw_bins:
            return self.target_mean + self.target_scale * raw
        position = self.target_mean[:2] + self.target_scale[:2] * raw[:, :2]
        return torch.cat([position, heading_of(raw[:, 2:])], dim=1)

    def forward(self, maps: torch.Tensor) -> torch.Tensor:
        """Maps ``(N, C, P, P)`` -> predictions ``(N, prediction_dim)``."""
        return self.predict(self.raw(maps))


def bin_centres(bins: int) -> torch.Tensor:
    """Yaw at the centre of each of ``bins`` equal arcs of (-pi, pi], ``(bins,)``."""
    return -torch.pi + (torch.arange(bins, dtype=torch.float32) + 0.5) * (2 * torch.pi / bins)


def yaw_bin(cos: torch.Tensor, sin: torch.Tensor, bins: int) -> torch.Tensor:
    """The arc a heading (cos, sin) falls in, ``(N,)`` int64 in [0, bins)."""
    fraction = (torch.atan2(sin, cos) + torch.pi) / (2 * torch.pi)
    return (fraction * bins).long().clamp(0, bins - 1)


def heading_of(logits: torch.Tensor) -> torch.Tensor:
    """Yaw logits ``(N, bins)`` -> unit heading ``(N, 2)`` (cos, sin): the most probable arc and its two
    neighbours, their centres averaged on the circle with the probabilities as weights."""
    bins = logits.shape[1]
    probabilities = torch.softmax(logits, dim=1)
    top = probabilities.argmax(dim=1, keepdim=True)
    window = (top + torch.arange(-1, 2)) % bins  # (N, 3)
    weights = probabilities.gather(1, window)
    angles = bin_centres(bins)[window]
    vector = torch.stack([(weights * torch.cos(angles)).sum(1), (weights * torch.sin(angles)).sum(1)], dim=1)
    return vector / vector.norm(dim=1, keepdim=True)
