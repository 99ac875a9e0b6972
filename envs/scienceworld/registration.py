"""Registers ScienceWorld-v0 (a string entry point only; nothing heavy is imported)."""

from __future__ import annotations


def register() -> None:
    from gauntlet.registry import register_env

    register_env("ScienceWorld-v0", "gauntlet.envs.scienceworld.env:ScienceWorldEnv", max_episode_steps=60)
