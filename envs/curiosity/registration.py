"""Registers the curiosity envs (string entry points only; nothing heavy is imported)."""

from __future__ import annotations


def register() -> None:
    from gauntlet.registry import register_env, registry

    module = "gauntlet.envs.curiosity"
    register_env("ActiveRegression-v0", f"{module}.active_regression:ActiveRegressionEnv", max_episode_steps=20)
    register_env("LocationFinding-v0", f"{module}.location_finding:LocationFindingEnv", max_episode_steps=30)
    register_env("RuleDiscovery-v0", f"{module}.rule_discovery:RuleDiscoveryEnv", max_episode_steps=16)
    register_env("CuriousGridworld-v0", f"{module}.gridworld:CuriousGridworldEnv", max_episode_steps=30)
    # The version is a literal so that registering does not import torch; a test checks it equals
    # transformer.DATA_VERSION.
    registry.add("data", "curiosity-regression-icl", f"{module}.transformer:build_named",
                 "weights of the meta-trained transformer ICL for ActiveRegression-v0", version="3")
