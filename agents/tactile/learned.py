"""The learned tactile agent: a coverage scan to explore, a touch-map CNN to predict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from gauntlet.agent import Agent
from gauntlet.agents.tactile.scan import CoverageScan
from gauntlet.agents.tactile.touchmap import TouchMap, gel_background
from gauntlet.agents.tactile.training import load, scan_region
from gauntlet.envs.tactile.env import component_shape


class LearnedTactileAgent(Agent):
    """Scans the object's region (``scan.CoverageScan``) and predicts with a ``TouchMapModel`` checkpoint.

    The touch map carries the touches of the episode; each ``act`` pastes the newest touch,
    submits the model's prediction from the map and moves towards the next scan point. Train a
    checkpoint with ``experiments/tactile.py`` (it records the family and step limit the
    scan is planned for).
    """

    name = "tactile-learned"

    def __init__(self, checkpoint: str | Path):
        self.checkpoint = str(checkpoint)
        self.model, self.metadata = load(checkpoint)
        if "family" not in self.metadata or "step_limit" not in self.metadata:
            raise ValueError(f"checkpoint {self.checkpoint} lacks its family and step limit; "
                             "train one with experiments/tactile.py")

    def config(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint}

    def reset(self, *, seed: int | None, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        expected = component_shape(action_space, "prediction")[0]
        if expected != self.model.config["prediction_dim"]:
            raise ValueError(f"checkpoint {self.checkpoint} predicts {self.model.config['prediction_dim']} values; "
                             f"this env expects {expected}")
        self._scan = CoverageScan(int(self.metadata["step_limit"]), scan_region(str(self.metadata["family"])),
                                  component_shape(action_space, "action")[0])
        self._background = gel_background(component_shape(observation_space, "sensor_img")[:2])
        self._map: TouchMap | None = None

    @torch.no_grad()
    def act(self, observation: Any, info: dict[str, Any]) -> dict[str, np.ndarray]:
        position = np.asarray(observation["sensor_pos"], np.float32)[None]
        if self._map is None:  # first touch of the episode: plan the tour from here
            self._map = TouchMap(1, self._background)
            self._scan.reset(position)
        rotation = observation.get("sensor_rot")
        maps = self._map.add(np.asarray(observation["sensor_img"], np.float32)[None], position,
                             None if rotation is None else np.asarray(rotation, np.float32)[None])
        return {"action": self._scan.act(position)[0], "prediction": self.model(maps)[0].numpy().astype(np.float32)}
