"""Registers the curiosity design policies (string entry points only)."""

from __future__ import annotations


def register() -> None:
    from gauntlet.registry import registry

    module = "gauntlet.agents.curious.policies"
    registry.add("agent", "curious-random", f"{module}:RandomDesignAgent",
                 "uniform designs from a curiosity env's candidate set (config: env_id=...)")
    registry.add("agent", "curious-uncertainty", f"{module}:UncertaintySamplingAgent",
                 "the candidate design with the largest predictive variance/entropy (config: env_id=...)")
    registry.add("agent", "curious-greedy-lp", f"{module}:GreedyLPAgent",
                 "the candidate with the largest expected icl_lp, from the learner's own predictions "
                 "(config: env_id=...)")
    registry.add("agent", "curious-ppo", "gauntlet.agents.curious.ppo:CuriousPPOAgent",
                 "PPO policy trained on ActiveRegression-v0's icl_lp reward (config: config=default|smoke)")
    registry.add("agent", "curious-greedy-eig", f"{module}:GreedyEIGAgent",
                 "the candidate design with the largest expected information gain (config: env_id=...)")
    registry.add("demo", "curiosity", "gauntlet.agents.curious.demo:run_demo",
                 "a curious policy's designs on location finding beside a random policy's (saved plot)")
