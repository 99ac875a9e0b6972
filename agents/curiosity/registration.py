"""Registers the curiosity design policies and their weights' builders (string targets only: registering
imports neither torch nor SB3; the builders' versions come from the torch-free ``data_versions``)."""

from __future__ import annotations

from gauntlet.agents.curiosity.data_versions import (BELIEF_POLICY, BELIEF_POLICY_VERSION, DAD_POLICY,
                                                     DAD_POLICY_VERSION, PPO_POLICY, PPO_POLICY_VERSION,
                                                     REGRESSION_BELIEF_POLICY, REGRESSION_BELIEF_POLICY_VERSION)

PACKAGE = "gauntlet.agents.curiosity"


def register() -> None:
    from gauntlet.registry import registry

    registry.add("agent", "curiosity-random", f"{PACKAGE}.policies:RandomDesignAgent",
                 "uniform designs from a curiosity env's candidate set (config: env_id=...)")
    registry.add("agent", "curiosity-uncertainty", f"{PACKAGE}.policies:UncertaintySamplingAgent",
                 "the candidate design with the largest predictive variance/entropy (config: env_id=...)")
    registry.add("agent", "curiosity-greedy-lp", f"{PACKAGE}.policies:GreedyLPAgent",
                 "the candidate with the largest expected icl_lp, from the learner's own predictions "
                 "(config: env_id=...)")
    registry.add("agent", "curiosity-greedy-eig", f"{PACKAGE}.policies:GreedyEIGAgent",
                 "the candidate design with the largest expected information gain (config: env_id=...)")
    registry.add("agent", "curiosity-random-prior", f"{PACKAGE}.policies:PriorRandomDesignAgent",
                 "location finding: designs from the sources' prior N(0, I), DAD's random baseline")
    registry.add("agent", "curiosity-ppo", f"{PACKAGE}.ppo:CuriousPPOAgent",
                 "PPO policy trained on ActiveRegression-v0's icl_lp reward (config: config=default|smoke)")
    registry.add("data", PPO_POLICY, f"{PACKAGE}.ppo:build_named",
                 "weights of the curious PPO policy (icl_lp on ActiveRegression-v0)", version=PPO_POLICY_VERSION)
    registry.add("agent", "curiosity-dad", f"{PACKAGE}.dad:CuriousDADAgent",
                 "DAD-style design network trained on LocationFinding-v0's summed icl_lp reward "
                 "(config: config=default|smoke)")
    registry.add("data", DAD_POLICY, f"{PACKAGE}.dad:build",
                 "weights of the curious design network (pathwise gradients on summed icl_lp, location finding)",
                 version=DAD_POLICY_VERSION)
    registry.add("agent", "curiosity-belief", f"{PACKAGE}.belief:CuriousBeliefAgent",
                 "location finding: a policy over the learner's belief map trained by REINFORCE on the icl_lp "
                 "reward (config: config=default|smoke)")
    registry.add("data", BELIEF_POLICY, f"{PACKAGE}.belief:build",
                 "weights of the curious belief-map policy (REINFORCE on icl_lp, location finding)",
                 version=BELIEF_POLICY_VERSION)
    registry.add("agent", "curiosity-belief-regression", f"{PACKAGE}.belief_regression:CuriousRegressionBeliefAgent",
                 "active regression: a policy over the exact learner's belief map trained by REINFORCE on the "
                 "icl_lp reward (config: config=default|smoke)")
    registry.add("data", REGRESSION_BELIEF_POLICY, f"{PACKAGE}.belief_regression:build",
                 "weights of the curious belief-map policy for active regression (REINFORCE on icl_lp)",
                 version=REGRESSION_BELIEF_POLICY_VERSION)
    registry.add("demo", "curiosity", f"{PACKAGE}.demo:run_demo",
                 "the trained curious policy's designs on location finding beside greedy LP and random (saved plot)")
