"""Registers the curiosity design policies (string entry points only)."""

from __future__ import annotations


def register() -> None:
    from gauntlet.registry import registry

    module = "gauntlet.agents.curiosity.policies"
    # The data versions are literals here so that registering imports nothing heavy (torch, SB3);
    # tests check that they equal the modules' DATA_VERSION.
    dad_version, ppo_version, belief_version = "2", "1", "1"
    registry.add("agent", "curiosity-random", f"{module}:RandomDesignAgent",
                 "uniform designs from a curiosity env's candidate set (config: env_id=...)")
    registry.add("agent", "curiosity-uncertainty", f"{module}:UncertaintySamplingAgent",
                 "the candidate design with the largest predictive variance/entropy (config: env_id=...)")
    registry.add("agent", "curiosity-greedy-lp", f"{module}:GreedyLPAgent",
                 "the candidate with the largest expected icl_lp, from the learner's own predictions "
                 "(config: env_id=...)")
    registry.add("agent", "curiosity-ppo", "gauntlet.agents.curiosity.ppo:CuriousPPOAgent",
                 "PPO policy trained on ActiveRegression-v0's icl_lp reward (config: config=default|smoke)")
    registry.add("agent", "curiosity-random-prior", f"{module}:PriorRandomDesignAgent",
                 "location finding: designs from the sources' prior N(0, I), DAD's random baseline")
    registry.add("agent", "curiosity-dad", "gauntlet.agents.curiosity.dad:CuriousDADAgent",
                 "DAD-style design network trained on LocationFinding-v0's summed icl_lp reward "
                 "(config: config=default|smoke)")
    registry.add("data", "curiosity-dad-policy", "gauntlet.agents.curiosity.dad:build",
                 "weights of the curious design network (pathwise gradients on summed icl_lp, location finding)",
                 version=dad_version)
    registry.add("agent", "curiosity-belief", "gauntlet.agents.curiosity.belief:CuriousBeliefAgent",
                 "location finding: a policy over the learner's belief map trained by REINFORCE on the icl_lp "
                 "reward (config: config=default|smoke)")
    registry.add("data", "curiosity-belief-policy", "gauntlet.agents.curiosity.belief:build",
                 "weights of the curious belief-map policy (REINFORCE on icl_lp, location finding)",
                 version=belief_version)
    registry.add("data", "curiosity-ppo-policy", "gauntlet.agents.curiosity.ppo:build_named",
                 "weights of the curious PPO policy (icl_lp on ActiveRegression-v0)", version=ppo_version)
    registry.add("agent", "curiosity-greedy-eig", f"{module}:GreedyEIGAgent",
                 "the candidate design with the largest expected information gain (config: env_id=...)")
    registry.add("demo", "curiosity", "gauntlet.agents.curiosity.demo:run_demo",
                 "the trained curious policy's designs on location finding beside greedy LP and random (saved plot)")
