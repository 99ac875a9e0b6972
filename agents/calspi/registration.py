"""Registers Cal-SPI and its comparison agents (light: string entry points only)."""

from __future__ import annotations


def register() -> None:
    from gauntlet.registry import registry

    registry.add("agent", "calspi", "gauntlet.agents.calspi.agent:CalSPIAgent",
                 "Cal-SPI: calibrated, gated tree search switching from the baseline only with a certificate "
                 "(config: domain, dataset_size[, p, gamma, seed, variant, search, model])")
    registry.add("agent", "calspi-baseline", "gauntlet.agents.calspi.ablations:BaselineAgent",
                 "the frozen baseline policy of a Cal-SPI task (config: domain)")
    registry.add("agent", "calspi-bc", "gauntlet.agents.calspi.ablations:BehaviourCloningAgent",
                 "behaviour cloning on a Cal-SPI dataset (config: domain, dataset_size[, seed])")
    registry.add("demo", "calspi", "gauntlet.agents.calspi.demo:run_demo",
                 "a short Cal-SPI episode on a MuJoCo task, and how often it switched from the baseline")
