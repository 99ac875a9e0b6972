"""The learned tactile agent: random exploration, predictions from a trained perception model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from gauntlet.agent import Agent
from gauntlet.agents.tactile.training import load


class LearnedTactileAgent(Agent):
    """Moves the sensor at random and predicts with a ``TouchAggregator`` checkpoint.

    The GRU state carries the touches of the episode; each ``act`` encodes the newest touch and
    submits the model's prediction with the next move. Train a checkpoint with
    ``experiments/tactile_mnist.py``.
    """

    name = "tactile-learned"

    def __init__(self, checkpoint: str | Path):
        self.checkpoint = str(checkpoint)
        self.model, self.metadata = load(checkpoint)

    def config(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint}

    def reset(self, *, seed: int | None, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        expected = action_space["prediction"].shape[0]
        if expected != self.model.config["prediction_dim"]:
            raise ValueError(f"checkpoint {self.checkpoint} predicts {self.model.config['prediction_dim']} values; "
                             f"this env expects {expected}")
        self._rng = np.random.default_rng(seed)
        self._move_shape = action_space["action"].shape
        self._hidden = None

    @torch.no_grad()
    def act(self, observation: Any, info: dict[str, Any]) -> dict[str, np.ndarray]:
        image = torch.from_numpy(np.asarray(observation["sensor_img"], np.float32))[None, None]
        position = torch.from_numpy(np.asarray(observation["sensor_pos"], np.float32))[None, None]
        time_step = torch.tensor([[float(observation["time_step"])]])
        out, self._hidden = self.model(image, position, time_step, self._hidden)
        return {"action": self._rng.uniform(-1.0, 1.0, self._move_shape).astype(np.float32),
                "prediction": out[0, -1].numpy().astype(np.float32)}
