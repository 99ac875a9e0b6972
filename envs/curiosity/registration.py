"""Registers the curiosity envs (string entry points only; nothing heavy is imported)."""

from __future__ import annotations

from gauntlet.envs.curiosity.data_versions import META_ICL, META_ICL_VERSION, REGRESSION_ICL, REGRESSION_ICL_VERSION
from gauntlet.envs.curiosity.location_finding_model import LOCATION_FINDING

PACKAGE = "gauntlet.envs.curiosity"


def register() -> None:
    from gauntlet.registry import register_env, registry

    register_env("ActiveRegression-v0", f"{PACKAGE}.active_regression:ActiveRegressionEnv", max_episode_steps=20)
    register_env("LocationFinding-v0", f"{PACKAGE}.location_finding:LocationFindingEnv",
                 max_episode_steps=LOCATION_FINDING.horizon)
    register_env("RuleDiscovery-v0", f"{PACKAGE}.rule_discovery:RuleDiscoveryEnv", max_episode_steps=16)
    register_env("CuriousGridworld-v0", f"{PACKAGE}.gridworld:CuriousGridworldEnv", max_episode_steps=30)
    registry.add("data", REGRESSION_ICL, f"{PACKAGE}.transformer:build_named",
                 "weights of the meta-trained transformer ICL for ActiveRegression-v0", version=REGRESSION_ICL_VERSION)
    registry.add("data", META_ICL, f"{PACKAGE}.meta_icl:build_named",
                 "weights of the meta-trained transformer ICLs for LocationFinding-v0 and RuleDiscovery-v0 "
                 "(config: config=location_finding|rules)", version=META_ICL_VERSION)
