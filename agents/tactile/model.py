"""The perception model: a small CNN encodes each touch, a GRU aggregates the touches of an episode.

    touch_t = [CNN(sensor_img_t), sensor_pos_t, time_step_t]
    h_t     = GRU(h_{t-1}, MLP(touch_t))
    y_t     = head(h_t)        # class logits, or the regression target

``y_t`` is the prediction the agent submits with its action at step t: it has seen the touches
0..t. Trained by the env's own normalised loss at every step (cross-entropy, or squared error
over the target variance), so the training loss is the negative of the prediction reward.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class TouchEncoder(nn.Module):
    """64 x 64 (or any size; pooled to 32 x 32) tactile RGB image -> feature vector."""

    def __init__(self, features: int = 128):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(3, 16, 5, stride=2, padding=2), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU())
        self.project = nn.Linear(64 * 4 * 4, features)

    def forward(self, images: torch.Tensor) -> torch.Tensor:  # (B, H, W, 3) in [-1, 1]
        x = F.adaptive_avg_pool2d(images.permute(0, 3, 1, 2), 32)
        return F.relu(self.project(self.conv(x).flatten(1)))


class TouchAggregator(nn.Module):
    """CNN per touch + GRU over touches -> a prediction after every touch."""

    def __init__(self, prediction_dim: int, features: int = 128, hidden: int = 256):
        super().__init__()
        self.encoder = TouchEncoder(features)
        self.touch = nn.Sequential(nn.Linear(features + 4, hidden), nn.ReLU())
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.head = nn.Linear(hidden, prediction_dim)
        self.config = {"prediction_dim": prediction_dim, "features": features, "hidden": hidden}

    def forward(self, images: torch.Tensor, positions: torch.Tensor, time_steps: torch.Tensor,
                hidden: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """images (B, T, H, W, 3), positions (B, T, 3), time_steps (B, T) -> predictions (B, T, P), h."""
        batch, steps = images.shape[:2]
        encoded = self.encoder(images.reshape(batch * steps, *images.shape[2:])).reshape(batch, steps, -1)
        touches = self.touch(torch.cat([encoded, positions, time_steps[..., None]], dim=-1))
        out, hidden = self.gru(touches, hidden)
        return self.head(out), hidden
