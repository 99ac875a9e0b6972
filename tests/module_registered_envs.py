"""Envs that exist only once this module is imported: what a Gymnasium ``module:Name-v0`` id names.

``gymnasium.make("tests.module_registered_envs:ModuleCartPole-v0")`` imports this module, whose import
registers the ids below, then makes the env. Both are Gymnasium's CartPole under other ids: one with an
entry point given as a string, one (namespaced) with the class itself.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

MODULE = __name__
PLAIN_ID = "ModuleCartPole-v0"
NAMESPACED_ID = "GauntletModuleTest/CartPole-v0"
MODULE_IDS = (f"{MODULE}:{PLAIN_ID}", f"{MODULE}:{NAMESPACED_ID}")
"""The ``module:Name-v0`` ids of the two envs."""
IMPORT_ROOT = str(Path(__file__).resolve().parents[1])
"""The folder a process needs on ``PYTHONPATH`` to import this module (the console script does not look
in its working directory)."""

if PLAIN_ID not in gym.registry:
    gym.register(id=PLAIN_ID, entry_point="gymnasium.envs.classic_control.cartpole:CartPoleEnv",
                 max_episode_steps=200)
if NAMESPACED_ID not in gym.registry:
    gym.register(id=NAMESPACED_ID, entry_point=CartPoleEnv, max_episode_steps=200)
