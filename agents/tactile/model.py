"""The perception model: a small CNN over the touch map of an episode.

    map_t = touchmap(touches 0..t)          # the recurrent state: every touch pasted where it was felt
    y_t   = head(CNN(map_t))                # class logits, or the regression target

``y_t`` is the prediction the agent submits with its action at step t: it has seen the touches
0..t. Trained by the env's own normalised loss (cross-entropy / log K, or squared error over the
target variance), so the training loss is the negative of the prediction reward. The map is in
platform coordinates, so a centre of mass or a stroke's position reads straight off it.
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

    def __init__(self, prediction_dim: int, width: int = 32, hidden: int = 256, dropout: float = 0.3):
        super().__init__()
        self.features = nn.Sequential(_block(MAP_CHANNELS, width), _block(width, 2 * width),
                                      _block(2 * width, 4 * width), nn.AdaptiveAvgPool2d(3))
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(dropout), nn.Linear(4 * width * 9, hidden), nn.ReLU(),
                                  nn.Dropout(dropout), nn.Linear(hidden, prediction_dim))
        self.config = {"prediction_dim": prediction_dim, "width": width, "hidden": hidden, "dropout": dropout}
        # Regression: y = mean + scale * raw, so the network works in units of the target's spread
        # (identity for classification logits). Saved with the weights.
        self.register_buffer("target_mean", torch.zeros(prediction_dim))
        self.register_buffer("target_scale", torch.ones(prediction_dim))

    def set_target_scale(self, mean: torch.Tensor, scale: torch.Tensor) -> None:
        self.target_mean.copy_(mean)
        self.target_scale.copy_(scale)

    def forward(self, maps: torch.Tensor) -> torch.Tensor:
        """Maps ``(N, C, P, P)`` -> predictions ``(N, prediction_dim)``."""
        return self.target_mean + self.target_scale * self.head(self.features(maps))
