"""The MuJoCo domains of the Cal-SPI tasks and what a model-based planner must know about each.

``is_terminal(next_observations)`` is the env's own termination rule written on observations
(batched, numpy), as model-based offline RL does (MBPO/MOPO "static" termination functions): the
planner learns dynamics and reward, not the rule the env states in its documentation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


def _never_terminal(next_observations: np.ndarray) -> np.ndarray:
    return np.zeros(len(next_observations), dtype=bool)


def _pendulum_terminal(next_observations: np.ndarray) -> np.ndarray:
    # InvertedPendulum-v5: the episode ends when the pole angle (obs[1]) leaves [-0.2, 0.2] rad.
    return ~(np.isfinite(next_observations).all(axis=1) & (np.abs(next_observations[:, 1]) <= 0.2))


def _hopper_terminal(next_observations: np.ndarray) -> np.ndarray:
    # Hopper-v5 is_healthy: state (obs[1:]) within +-100, height obs[0] > 0.7, |angle obs[1]| < 0.2.
    height, angle = next_observations[:, 0], next_observations[:, 1]
    state_ok = (np.abs(next_observations[:, 1:]) < 100.0).all(axis=1)
    healthy = state_ok & (height > 0.7) & (np.abs(angle) < 0.2)
    return ~healthy


@dataclass(frozen=True)
class Domain:
    """One MuJoCo domain: its Gymnasium id, episode length and termination rule."""

    name: str
    gym_id: str
    max_episode_steps: int
    is_terminal: Callable[[np.ndarray], np.ndarray]


DOMAINS: dict[str, Domain] = {
    "InvertedPendulum": Domain("InvertedPendulum", "InvertedPendulum-v5", 1000, _pendulum_terminal),
    "Hopper": Domain("Hopper", "Hopper-v5", 1000, _hopper_terminal),
    "HalfCheetah": Domain("HalfCheetah", "HalfCheetah-v5", 1000, _never_terminal),
    "Swimmer": Domain("Swimmer", "Swimmer-v5", 1000, _never_terminal),
}


def get_domain(name: str) -> Domain:
    """The domain called ``name``; a ``ValueError`` lists the known ones."""
    try:
        return DOMAINS[name]
    except KeyError:
        raise ValueError(f"unknown Cal-SPI domain {name!r}; expected one of {sorted(DOMAINS)}") from None
