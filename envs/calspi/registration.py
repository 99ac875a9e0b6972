"""Registers the Cal-SPI task envs and their dataset builder (light: string entry points only)."""

from __future__ import annotations

DOMAIN_NAMES = ("InvertedPendulum", "Hopper", "HalfCheetah", "Swimmer")


def register() -> None:
    from gauntlet.registry import register_env, registry

    for domain in DOMAIN_NAMES:
        register_env(f"CalSPI-{domain}-v0", "gauntlet.envs.calspi.tasks:CalSPITaskEnv",
                     max_episode_steps=1000, kwargs={"domain": domain})
    registry.add("data", "calspi-dataset", "gauntlet.envs.calspi.datasets:build_dataset",
                 "Cal-SPI offline dataset: baseline + exploration noise (config: domain, size[, seed, noise_std])",
                 version="1")
