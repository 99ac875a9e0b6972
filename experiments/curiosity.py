"""Reproduces the curiosity results (i)-(iv) of docs/results/curiosity.md: JSON plus one PNG per result.

    python experiments/curiosity.py --size smoke --out experiments/results/curiosity-smoke
    python experiments/curiosity.py --size full  --out experiments/results/curiosity
    python experiments/curiosity.py --size full  --out experiments/results/curiosity --only i   # redo (i)
    python experiments/curiosity.py --size medium --only iii --out experiments/results/curiosity-iii-medium
    python experiments/curiosity.py --size full --only iii --policies curiosity-dad,random-prior --out DIR
    python experiments/curiosity.py --size full --regression-belief-seeds 0,1,2,3,4 --out DIR   # needs (v) in DIR
    python experiments/curiosity.py --size full --belief-seeds 3 --out DIR3   # DIR3/results.json: a copy of DIR's
    python experiments/curiosity.py --merge-belief-seeds DIR3,DIR4 --out DIR   # adds their seeds, redoes the summary

(i)   agreement of ``icl_lp`` with ``true_lp`` as the context grows (non-temporal envs): per context
      size t, the Pearson correlation across episodes and the bias E[icl_lp − true_lp] with 95% CIs.
(ii)  the same estimator in the temporal gridworld: its bias, and how much of it the nuisance term
      (irreducible-entropy change along the trajectory) explains.
(iii) location finding: sPCE (lower) and sNMC (upper) bounds on the total EIG of T = 30 designs,
      per policy, with 95% CIs over histories (DAD's evaluation), including the design network trained
      on summed icl_lp (``gauntlet.agents.curiosity.dad``) and DAD's prior-random baseline. History i
      of every policy shares θ (seeded by i), so differences between policies are paired.
(iv)  rule discovery: queries needed to identify the rule, per policy, against the exact optimum.
(v)   active regression: the exact total information I(w; h_T) each policy gathers, including the
      curious policies trained on ``icl_lp``: PPO (``gauntlet.agents.curiosity.ppo``) and the belief-map
      policy (``gauntlet.agents.curiosity.belief_regression``), the latter for several training seeds
      (``--regression-belief-seeds`` adds them to an existing (v) without rerunning the rest).

(i_meta) is (i) with the transformers meta-trained for location finding and rules (``meta_icl``) as the ICL.

Every episode is seeded from ``--seed`` and its index; the same command gives the same numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from scipy import stats

import gauntlet
from gauntlet.agents.curiosity.policies import (GreedyEIGAgent, GreedyLPAgent, PriorRandomDesignAgent,
                                             RandomDesignAgent, UncertaintySamplingAgent)
from gauntlet.envs.curiosity.bounds import spce_snmc
from gauntlet.envs.curiosity.learners import ParticleLearner
from gauntlet.envs.curiosity.location_finding import SourceIntensity
from gauntlet.envs.curiosity.rule_discovery import optimal_expected_queries, rule_tables
from gauntlet.runner import episode_seed

SIZES: dict[str, dict[str, Any]] = {
    "smoke": {"transformer": "smoke", "ppo": ["smoke"], "dad": "smoke", "belief": "smoke", "regression_episodes": 4,
              "regression_belief": "smoke", "regression_belief_seeds": [0, 1],
              "meta_icl": {"location_finding": "location_finding-smoke", "rules": "rules-smoke"},
              "lf_transformer_episodes": 2, "episodes": 4,
              "lf_agreement_episodes": 2, "lf_horizon": 4, "lf_bound_episodes": 2,
              "lf_particles": 256, "contrastive": 2_000, "rule_bits": 3, "rule_episodes": 4, "dfa_states": 2,
              "grid_episodes": 3, "grid_horizon": 20},
    # (iii) alone at T = 30 with few histories, for a machine without an hour to spare.
    "medium": {"dad": "default", "belief": "default", "lf_horizon": 30, "lf_bound_episodes": 4, "lf_particles": 512,
               "contrastive": 100_000},
    # Histories per policy in (iii): the lookahead policies cost seconds (greedy EIG) to minutes
    # (greedy LP) per history; the others cost only the bound.
    "full": {"transformer": "default", "ppo": ["default"], "dad": "default", "belief": "default",
             "regression_episodes": 50, "regression_belief": "default", "regression_belief_seeds": [0, 1, 2, 3, 4],
             "meta_icl": {"location_finding": "location_finding", "rules": "rules"}, "lf_transformer_episodes": 50,
             "episodes": 200, "lf_agreement_episodes": 20, "lf_horizon": 30,
             "lf_bound_episodes": {"random": 100, "random-prior": 100, "curiosity-dad": 100,
                                   "curiosity-belief": 100, "uncertainty": 30,
                                   "greedy-eig": 30, "curiosity-greedy-lp": 4},
             "lf_particles": 1024, "contrastive": 100_000, "rule_bits": 4, "rule_episodes": 200, "dfa_states": 3,
             "grid_episodes": 200, "grid_horizon": 30},
}
POLICIES = {"random": RandomDesignAgent, "uncertainty": UncertaintySamplingAgent,
            "curiosity-greedy-lp": GreedyLPAgent, "greedy-eig": GreedyEIGAgent}
# The lookahead policies plan with a smaller model on location finding (they evaluate every candidate,
# and greedy LP every imagined outcome, at once); the env they act in keeps the full settings.
LF_PLANNING = {"curiosity-greedy-lp": {"n_particles": 512, "n_probes": 16, "n_outcomes": 2},
               "greedy-eig": {"n_particles": 512}}


# Statistics ------------------------------------------------------------------------------------------
def mean_ci(values: np.ndarray) -> dict[str, float]:
    """Mean and normal 95% confidence interval."""
    values = np.asarray(values, dtype=float)
    half = 1.96 * values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else float("nan")
    return {"mean": float(values.mean()), "ci95": [float(values.mean() - half), float(values.mean() + half)],
            "n": int(len(values))}


def correlation_ci(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """Pearson correlation with a Fisher-z 95% confidence interval."""
    n = len(a)
    if n < 4 or np.std(a) == 0 or np.std(b) == 0:
        return {"r": float("nan"), "ci95": [float("nan"), float("nan")], "n": int(n)}
    r = float(np.corrcoef(a, b)[0, 1])
    z, half = np.arctanh(np.clip(r, -0.999999, 0.999999)), 1.96 / np.sqrt(n - 3)
    return {"r": r, "ci95": [float(np.tanh(z - half)), float(np.tanh(z + half))], "n": int(n)}


# Running episodes ----------------------------------------------------------------------------------------
def run_episodes(env_id: str, agent, n: int, seed: int, **env_kwargs) -> list[gauntlet.Episode]:
    env = gym.make(f"gauntlet/{env_id}", **env_kwargs)
    return [gauntlet.rollout(env, agent, seed=episode_seed(seed, i), record="memory") for i in range(n)]


def lp_table(episodes, key: str) -> np.ndarray:
    return np.array([[step.privileged[key] for step in episode.steps] for episode in episodes])


def agreement(icl: np.ndarray, true: np.ndarray) -> dict[str, Any]:
    """Per context size t (the new point is the t-th): correlation and bias across episodes."""
    per_t = [{"t": t + 1, "correlation": correlation_ci(icl[:, t], true[:, t]),
              "bias": mean_ci(icl[:, t] - true[:, t]), "true_lp": mean_ci(true[:, t])} for t in range(icl.shape[1])]
    return {"per_context_size": per_t, "pooled_correlation": correlation_ci(icl.ravel(), true.ravel()),
            "pooled_bias": mean_ci((icl - true).ravel()),
            "episode_total": {"icl_lp": mean_ci(icl.sum(axis=1)), "true_lp": mean_ci(true.sum(axis=1))}}


def result_i(size: dict[str, Any], seed: int) -> dict[str, Any]:
    results = {}
    random_policy = {"ActiveRegression-v0": {}, "RuleDiscovery-v0": {}}
    for env_id, kwargs in random_policy.items():
        episodes = run_episodes(env_id, RandomDesignAgent(env_id, **kwargs), size["episodes"], seed, **kwargs)
        results[env_id] = {"learner": "exact Bayesian posterior predictive", "probes": "env default",
                           **agreement(lp_table(episodes, "icl_lp"), lp_table(episodes, "true_lp"))}
    # The meta-trained transformer as the ICL; true_lp stays the exact Bayesian learner's.
    from gauntlet.envs.curiosity.transformer import load_transformer_learner

    transformer = load_transformer_learner(size["transformer"])
    episodes = run_episodes("ActiveRegression-v0", RandomDesignAgent("ActiveRegression-v0"), size["episodes"], seed,
                            learner=transformer)
    results["ActiveRegression-v0 (transformer ICL)"] = {
        "learner": f"meta-trained transformer ({size['transformer']} config)", "probes": "env default",
        **agreement(lp_table(episodes, "icl_lp"), lp_table(episodes, "true_lp"))}
    # Location finding with an approximate ICL: a 256-particle learner (its own particles) against the
    # reference posterior of ``lf_particles`` particles.
    reference = {"horizon": size["lf_horizon"], "n_particles": size["lf_particles"]}
    model = gym.make("gauntlet/LocationFinding-v0", **reference).unwrapped
    approximate = ParticleLearner(model.intensity, np.random.default_rng(seed + 1).standard_normal((256, 2, 2)),
                                  noise_std=model.noise_std, design_dim=2)
    episodes = run_episodes("LocationFinding-v0", RandomDesignAgent("LocationFinding-v0", **reference),
                            size["lf_agreement_episodes"], seed, learner=approximate, **reference)
    results["LocationFinding-v0"] = {"learner": "256-particle importance sampler (approximate ICL)",
                                     "reference": f"{size['lf_particles']}-particle importance sampler",
                                     **agreement(lp_table(episodes, "icl_lp"), lp_table(episodes, "true_lp"))}
    return results


def meta_icl_agreement(size: dict[str, Any], seed: int) -> dict[str, Any]:
    """(i) with the transformers meta-trained for location finding and rules (``meta_icl``) as the ICL;
    true_lp stays the env's Bayesian learner's (``lf_particles`` particles; enumeration)."""
    from gauntlet.envs.curiosity.meta_icl import load_meta_learner

    results = {}
    names = size["meta_icl"]
    learner = load_meta_learner(names["location_finding"])
    reference = {"horizon": size["lf_horizon"], "n_particles": size["lf_particles"]}
    episodes = run_episodes("LocationFinding-v0", RandomDesignAgent("LocationFinding-v0", **reference),
                            size["lf_transformer_episodes"], seed, learner=learner, **reference)
    results["LocationFinding-v0 (transformer ICL)"] = {
        "learner": f"meta-trained transformer ({names['location_finding']} config)",
        "reference": f"{size['lf_particles']}-particle importance sampler",
        **agreement(lp_table(episodes, "icl_lp"), lp_table(episodes, "true_lp"))}
    learner = load_meta_learner(names["rules"])
    rules = {"n_bits": learner.config.n_bits, "rule_class": learner.config.rule_class}
    episodes = run_episodes("RuleDiscovery-v0", RandomDesignAgent("RuleDiscovery-v0", **rules), size["episodes"], seed,
                            learner=learner, **rules)
    results["RuleDiscovery-v0 (transformer ICL)"] = {
        "learner": f"meta-trained transformer ({names['rules']} config)", "probes": "env default", **rules,
        **agreement(lp_table(episodes, "icl_lp"), lp_table(episodes, "true_lp"))}
    return results


def result_ii(size: dict[str, Any], seed: int) -> dict[str, Any]:
    kwargs = {"horizon": size["grid_horizon"]}
    episodes = run_episodes("CuriousGridworld-v0", RandomDesignAgent("CuriousGridworld-v0", **kwargs),
                            size["grid_episodes"], seed, **kwargs)
    icl, true = lp_table(episodes, "icl_lp"), lp_table(episodes, "true_lp")
    expected, nuisance = lp_table(episodes, "trajectory_lp_expected"), lp_table(episodes, "nuisance")
    moved = nuisance != 0.0
    return {**agreement(icl, true),
            "expected_estimator_minus_true": mean_ci((expected - true).ravel()),
            "correlation_of_bias_with_nuisance": correlation_ci((expected - true).ravel(), nuisance.ravel()),
            "bias_on_steps_leaving_ice": mean_ci((icl - true)[nuisance > 0]) if (nuisance > 0).any() else None,
            "bias_on_steps_entering_ice": mean_ci((icl - true)[nuisance < 0]) if (nuisance < 0).any() else None,
            "share_of_steps_crossing_the_ice_edge": float(moved.mean())}


def location_policy(name: str, size: dict[str, Any], kwargs: dict[str, Any]):
    """The agent called ``name`` in (iii); the model-based ones plan with the env's own arguments."""
    if name == "random-prior":
        return PriorRandomDesignAgent("LocationFinding-v0")
    if name == "curiosity-dad":
        from gauntlet.agents.curiosity.dad import CuriousDADAgent

        return CuriousDADAgent(size["dad"])
    if name == "curiosity-belief":
        from gauntlet.agents.curiosity.belief import CuriousBeliefAgent

        return CuriousBeliefAgent(size["belief"])
    if name in LF_EXTRA_POLICIES:
        from gauntlet.agents.curiosity.dad import CuriousDADAgent

        return CuriousDADAgent(name.removeprefix("curiosity-dad-"))
    return POLICIES[name]("LocationFinding-v0", **{**kwargs, **LF_PLANNING.get(name, {})})


LF_POLICY_NAMES = ("random", "random-prior", "uncertainty", "curiosity-greedy-lp", "greedy-eig", "curiosity-dad",
                   "curiosity-belief")
# Run only when asked for with --policies (their weights take minutes to build): the other training configs.
LF_EXTRA_POLICIES = ("curiosity-dad-wide", "curiosity-dad-sharp", "curiosity-dad-contrastive",
                     "curiosity-dad-contrastive-sharp")


def result_iii(size: dict[str, Any], seed: int, policies: list[str] | None = None,
               earlier: dict[str, Any] | None = None) -> dict[str, Any]:
    """sPCE/sNMC per policy; ``policies`` reruns a subset and keeps the others from ``earlier``."""
    kwargs = lf_kwargs(size)
    results = {name: value for name, value in (earlier or {}).items()
               if name in LF_POLICY_NAMES + LF_EXTRA_POLICIES}
    for name in policies or LF_POLICY_NAMES:
        count = size["lf_bound_episodes"]
        count = count["curiosity-dad" if name in LF_EXTRA_POLICIES else name] if isinstance(count, dict) else count
        results[name] = history_bounds(location_policy(name, size, kwargs), count, size, seed, kwargs)
        print(f"(iii) {name}: {count} histories, sPCE {results[name]['spce']['mean']:.3f} in "
              f"{results[name]['seconds']:.0f} s", file=sys.stderr)
    results["contrastive_samples_L"] = size["contrastive"]
    results["max_spce_log_L_plus_1"] = float(np.log(size["contrastive"] + 1))
    return with_paired_differences(results)


def lf_kwargs(size: dict[str, Any]) -> dict[str, Any]:
    return {"horizon": size["lf_horizon"], "n_particles": size["lf_particles"], "record_true_lp": False,
            "reward_mode": "none"}


def history_bounds(agent, count: int, size: dict[str, Any], seed: int, kwargs: dict[str, Any]) -> dict[str, Any]:
    """sPCE/sNMC of ``count`` location-finding histories of ``agent`` (history i seeded by i, as for every policy)."""
    started = time.perf_counter()
    episodes = run_episodes("LocationFinding-v0", agent, count, seed, **kwargs)
    designs = np.array([[step.privileged["design"] for step in e.steps] for e in episodes])
    outcomes = np.array([[step.privileged["outcome"] for step in e.steps] for e in episodes])
    thetas = np.array([e.steps[0].privileged["theta"] for e in episodes])
    bounds = spce_snmc(SourceIntensity(0.1, 1e-4), designs, outcomes, thetas, noise_std=0.5,
                       sample_prior=lambda rng, n: rng.standard_normal((n, 2, 2)),
                       n_contrastive=size["contrastive"], rng=np.random.default_rng(seed))
    return {"histories": count, "spce": mean_ci(bounds["spce"]), "snmc": mean_ci(bounds["snmc"]),
            "spce_per_history": bounds["spce"].tolist(), "snmc_per_history": bounds["snmc"].tolist(),
            "seconds": time.perf_counter() - started,
            "designs_first_episode": designs[0].tolist(), "theta_first_episode": thetas[0].tolist()}


def belief_training_seeds(size: dict[str, Any], seed: int, training_seeds: list[int],
                          iii: dict[str, Any]) -> dict[str, Any]:
    """Retrain ``curiosity-belief`` (its config, other training seeds; not cached) and bound its histories.

    Paired differences against prior-random and greedy EIG come from ``iii`` (the same θ per history)."""
    import dataclasses

    from gauntlet.agents.curiosity import belief

    config = belief.CONFIGS[size["belief"]]
    out = {}
    for training_seed in training_seeds:
        network, history = belief.train(dataclasses.replace(config, seed=training_seed))
        agent = belief.CuriousBeliefAgent(size["belief"], network=network)
        count = size["lf_bound_episodes"]
        count = count["curiosity-belief"] if isinstance(count, dict) else count
        row = history_bounds(agent, count, size, seed, lf_kwargs(size))
        mine = np.array(row["spce_per_history"])
        row["training"] = history
        row["paired_difference_minus"] = {
            name: mean_ci(mine[:n] - np.array(iii[name]["spce_per_history"][:n]))
            for name in ("random-prior", "uncertainty", "greedy-eig") if name in iii
            for n in [min(len(mine), len(iii[name]["spce_per_history"]))]}
        out[str(training_seed)] = row
        print(f"(iii) curiosity-belief, training seed {training_seed}: sPCE {row['spce']['mean']:.3f}", file=sys.stderr)
    return out


BELIEF_BASELINES = ("random-prior", "uncertainty", "greedy-eig")


def belief_seed_summary(iii: dict[str, Any], training_seeds: dict[str, Any]) -> dict[str, Any]:
    """sPCE of ``curiosity-belief`` per training seed and averaged over seeds, paired against the baselines.

    Training seed 0 is ``iii["curiosity-belief"]`` (the shipped weights); the others are the rows of
    ``training_seeds`` (``--belief-seeds``). Every seed ran the same histories (history i has the same θ), so the
    mean over seeds is taken per history and its CI is over histories; ``over_seed_means`` is the spread of
    the per-seed means (t interval over seeds)."""
    per_seed = {"0": iii["curiosity-belief"]["spce_per_history"],
                **{key: row["spce_per_history"] for key, row in training_seeds.items()}}
    keys = sorted(per_seed, key=int)
    n = min(len(per_seed[key]) for key in keys)
    mean = np.mean([np.array(per_seed[key][:n]) for key in keys], axis=0)
    baselines = {name: np.array(iii[name]["spce_per_history"]) for name in BELIEF_BASELINES if name in iii}

    def paired(values: np.ndarray) -> dict[str, Any]:
        return {name: mean_ci(values[: len(other)] - other[: len(values)]) for name, other in baselines.items()}

    seed_means = np.array([np.mean(per_seed[key]) for key in keys])
    half = (float(stats.t.ppf(0.975, len(keys) - 1)) * seed_means.std(ddof=1) / np.sqrt(len(keys))
            if len(keys) > 1 else float("nan"))
    return {"training_seeds": [int(key) for key in keys], "histories": n,
            "per_seed": {key: {"spce": mean_ci(per_seed[key]),
                               "paired_difference_minus": paired(np.array(per_seed[key]))} for key in keys},
            "mean_over_seeds": {"spce": mean_ci(mean), "paired_difference_minus": paired(mean)},
            "over_seed_means": {"mean": float(seed_means.mean()), "sd": float(seed_means.std(ddof=1)),
                                "ci95_t": [float(seed_means.mean() - half), float(seed_means.mean() + half)],
                                "n": len(keys)}}


def merge_belief_seeds(results: dict[str, Any], others: list[dict[str, Any]]) -> dict[str, Any]:
    """Add the ``--belief-seeds`` rows of ``others`` (runs on copies of ``results``) and redo the seed summary.

    A run counts only if it has the same size, seed and (iii) baselines, so its paired differences hold."""
    merged = dict(results.get("iii_belief_training_seeds", {}))
    for other in others:
        if (other.get("size"), other.get("seed")) != (results.get("size"), results.get("seed")):
            raise ValueError(f"size/seed {other.get('size')}/{other.get('seed')} differ from "
                             f"{results.get('size')}/{results.get('seed')}")
        for name in (*BELIEF_BASELINES, "curiosity-belief"):
            if other["iii"][name]["spce_per_history"] != results["iii"][name]["spce_per_history"]:
                raise ValueError(f"its (iii) {name} histories differ: it was not run on a copy of these results")
        for key, row in other.get("iii_belief_training_seeds", {}).items():
            if key in merged and merged[key]["spce_per_history"] != row["spce_per_history"]:
                raise ValueError(f"training seed {key} is in both with different sPCE")
            merged[key] = row
    results["iii_belief_training_seeds"] = dict(sorted(merged.items(), key=lambda item: int(item[0])))
    results["iii_belief_seed_summary"] = belief_seed_summary(results["iii"], results["iii_belief_training_seeds"])
    return results


def with_paired_differences(results: dict[str, Any]) -> dict[str, Any]:
    """Add sPCE(trained) − sPCE(other) per history for each trained policy present, paired by history index
    (the same θ): ``paired_spce_difference_curiosity_dad_minus`` and ``..._curiosity_dad_wide_minus``."""
    names = [name for name in LF_POLICY_NAMES + LF_EXTRA_POLICIES if name in results]
    for trained in ("curiosity-dad", "curiosity-belief", *LF_EXTRA_POLICIES):
        if trained not in results:
            continue
        mine = np.array(results[trained]["spce_per_history"])
        results[f"paired_spce_difference_{trained.replace('-', '_')}_minus"] = {
            name: {"histories": min(len(mine), len(other)),
                   **mean_ci(mine[: len(other)] - np.array(other[: len(mine)]))}
            for name in names if name != trained for other in [results[name]["spce_per_history"]]}
    return results


def result_v(size: dict[str, Any], seed: int) -> dict[str, Any]:
    """Active regression: exact total information I(w; h_T) gathered by each policy, PPO included.

    For the Gaussian linear model the per-step ``info_gain`` rewards are exact and sum to I(w; h_T).
    """
    from gauntlet.agents.curiosity.ppo import CuriousPPOAgent

    from gauntlet.agents.curiosity.belief_regression import CuriousRegressionBeliefAgent

    agents = {name: policy("ActiveRegression-v0") for name, policy in POLICIES.items()}
    for config in size["ppo"]:
        agents[f"curiosity-ppo ({config})"] = CuriousPPOAgent(config)
    agents["curiosity-belief-regression"] = CuriousRegressionBeliefAgent(size["regression_belief"])
    results: dict[str, Any] = {}
    for name, agent in agents.items():
        results[name] = mean_ci(regression_information(agent, size, seed))
    results["belief_training_seeds"] = regression_belief_training_seeds(size, seed, size["regression_belief_seeds"])
    return results


def regression_information(agent, size: dict[str, Any], seed: int) -> np.ndarray:
    """Exact I(w; h_T) of each of ``regression_episodes`` episodes (episode i seeded by i, as for every policy)."""
    episodes = run_episodes("ActiveRegression-v0", agent, size["regression_episodes"], seed,
                            reward_mode="info_gain", record_true_lp=False)
    return np.array([episode.outcome.score for episode in episodes])


def regression_belief_training_seeds(size: dict[str, Any], seed: int, training_seeds: list[int]) -> dict[str, Any]:
    """Train ``curiosity-belief-regression`` with each training seed (not cached) and measure I(w; h_T), paired
    (episode i has the same w for every policy) against random designs and greedy EIG (= uncertainty sampling)."""
    import dataclasses

    from gauntlet.agents.curiosity import belief_regression

    import torch

    torch.set_num_threads(1)  # as the data builder: the seed-0 weights equal the registered agent's
    config = belief_regression.CONFIGS[size["regression_belief"]]
    baselines = {name: regression_information(POLICIES[name]("ActiveRegression-v0"), size, seed)
                 for name in ("random", "greedy-eig")}
    out: dict[str, Any] = {"per_seed": {}}
    per_seed = []
    for training_seed in training_seeds:
        network, history = belief_regression.train(dataclasses.replace(config, seed=training_seed))
        scores = regression_information(
            belief_regression.CuriousRegressionBeliefAgent(size["regression_belief"], network=network), size, seed)
        per_seed.append(scores)
        out["per_seed"][str(training_seed)] = {
            "information": mean_ci(scores), "per_episode": scores.tolist(), "training": history,
            "paired_difference_minus": {name: mean_ci(scores - other) for name, other in baselines.items()}}
        print(f"(v) curiosity-belief-regression, training seed {training_seed}: I = {scores.mean():.3f} "
              f"({history['seconds']:.0f} s training)", file=sys.stderr)
    mean_over_seeds = np.mean(per_seed, axis=0)  # per episode, the average over training seeds
    out["mean_over_seeds"] = {"information": mean_ci(mean_over_seeds),
                              "paired_difference_minus": {name: mean_ci(mean_over_seeds - other)
                                                          for name, other in baselines.items()},
                              "seed_means": [float(scores.mean()) for scores in per_seed]}
    out["baselines_per_episode"] = {name: other.tolist() for name, other in baselines.items()}
    return out


def rule_class_result(size: dict[str, Any], seed: int, **rules: Any) -> dict[str, Any]:
    """Queries until the posterior is certain, per policy, for one hypothesis class of RuleDiscovery-v0."""
    bits = size["rule_bits"]
    results: dict[str, Any] = {}
    for name, policy in POLICIES.items():
        episodes = run_episodes("RuleDiscovery-v0", policy("RuleDiscovery-v0", n_bits=bits, **rules),
                                size["rule_episodes"], seed, n_bits=bits, reward_mode="none", **rules)
        # An episode that never identifies its rule (a policy may repeat a query) counts as T + 1.
        counts = [next((i + 1 for i, s in enumerate(e.steps) if s.privileged["identified"]), len(e.steps) + 1)
                  for e in episodes]
        results[name] = {**mean_ci(np.array(counts)),
                         "not_identified_within_T": int(sum(c > len(e.steps) for c, e in zip(counts, episodes)))}
    tables = rule_tables(rules.get("rule_class", "conjunction"), bits, rules.get("dfa_states", 3))
    results["optimal_expected"] = optimal_expected_queries(tables)
    results["information_lower_bound_log2_H"] = float(np.log2(len(tables)))
    results["n_rules"] = len(tables)
    results["n_bits"] = bits
    return results


def result_iv(size: dict[str, Any], seed: int) -> dict[str, Any]:
    """Conjunctions (the top-level keys) and small DFAs (under ``"dfa"``)."""
    results = rule_class_result(size, seed)
    results["dfa"] = {"dfa_states": size["dfa_states"],
                      **rule_class_result(size, seed, rule_class="dfa", dfa_states=size["dfa_states"])}
    return results


# Output ---------------------------------------------------------------------------------------------------
def write_json_atomic(path: Path, data: Any) -> None:
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as handle:
        json.dump(data, handle, indent=1)
    os.replace(handle.name, path)


def save_figure_atomic(figure, path: Path) -> None:
    scratch = path.with_name(f".{path.stem}.tmp.png")
    figure.savefig(scratch, dpi=110, bbox_inches="tight")
    os.replace(scratch, path)


def plot(results: dict[str, Any], out: Path) -> list[Path]:
    """``agreement_and_bias.png`` when (i) and (ii) are present; ``policies.png`` for (iii)-(v) present."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    if "i" in results and "ii" in results:
        paths.append(plot_agreement(results, out / "agreement_and_bias.png", plt))
    if any(key in results for key in ("iii", "iv", "v")):
        paths.append(plot_policies(results, out / "policies.png", plt))
    return paths


def plot_agreement(results: dict[str, Any], path: Path, plt) -> Path:
    figure, axes = plt.subplots(1, 2, figsize=(11, 4))
    for env_id, data in {**results["i"], **results.get("i_meta", {}),
                         "CuriousGridworld-v0 (temporal)": results["ii"]}.items():
        rows = data["per_context_size"]
        t = [row["t"] for row in rows]
        axes[0].plot(t, [row["correlation"]["r"] for row in rows], marker=".", label=env_id)
        bias = [row["bias"]["mean"] for row in rows]
        low, high = zip(*(row["bias"]["ci95"] for row in rows))
        axes[1].plot(t, bias, marker=".", label=env_id)
        axes[1].fill_between(t, low, high, alpha=0.2)
    axes[0].set(xlabel="context size t", ylabel="corr(icl_lp, true_lp) across episodes", title="(i)/(ii) agreement")
    axes[1].set(xlabel="context size t", ylabel="E[icl_lp − true_lp] (nats), 95% CI", title="(i)/(ii) bias")
    axes[1].axhline(0, color="k", lw=0.5)
    axes[0].legend(fontsize=7)
    save_figure_atomic(figure, path)
    plt.close(figure)
    return path


def plot_policies(results: dict[str, Any], path: Path, plt) -> Path:
    """One panel per result present among (iii) location finding, (iv) rules, (v) regression."""
    panels = [key for key in ("iii", "iv", "v") if key in results]
    figure, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    for axis, key in zip(axes[0], panels):
        if key == "iii":
            names = [name for name in LF_POLICY_NAMES + LF_EXTRA_POLICIES if name in results["iii"]]
            for offset, bound in ((-0.1, "spce"), (0.1, "snmc")):
                means = [results["iii"][n][bound]["mean"] for n in names]
                errors = [means[i] - results["iii"][n][bound]["ci95"][0] for i, n in enumerate(names)]
                axis.errorbar(np.arange(len(names)) + offset, means, yerr=errors, fmt="o", capsize=4, label=bound)
            axis.set_xticks(range(len(names)), names, rotation=20)
            axis.set(ylabel="total EIG bound (nats), 95% CI", title="(iii) location finding, T = 30")
            axis.legend()
        elif key == "iv":
            classes = [("conjunctions", results["iv"])] + ([("DFAs", results["iv"]["dfa"])]
                                                           if "dfa" in results["iv"] else [])
            names = [name for name in POLICIES if name in results["iv"]]
            width = 0.8 / len(classes)
            for index, (label, data) in enumerate(classes):
                means = [data[n]["mean"] for n in names]
                errors = [means[i] - data[n]["ci95"][0] for i, n in enumerate(names)]
                where = np.arange(len(names)) + (index - (len(classes) - 1) / 2) * width
                bars = axis.bar(where, means, width, yerr=errors, capsize=4, label=label)
                axis.hlines(data["optimal_expected"], -0.5, len(names) - 0.5, color=bars[0].get_facecolor(),
                            ls="--", label=f"{label}: optimal (DP)")
            axis.set_xticks(np.arange(len(names)), names)
            axis.set(ylabel="queries to identify the rule",
                     title=f"(iv) rule discovery, {results['iv']['n_bits']} bits")
            axis.tick_params(axis="x", labelrotation=20)
            axis.legend(fontsize=7)
        else:
            names = [name for name in results["v"] if "mean" in results["v"][name]]
            means = [results["v"][n]["mean"] for n in names]
            errors = [means[i] - results["v"][n]["ci95"][0] for i, n in enumerate(names)]
            axis.bar(names, means, yerr=errors, capsize=4, color="tab:blue")
            axis.set(ylabel="exact I(w; h_T) (nats), 95% CI", title="(v) active regression, T = 20")
            axis.tick_params(axis="x", labelrotation=30)
    save_figure_atomic(figure, path)
    plt.close(figure)
    return path


# (iii) first: it is the longest, and (i) then finds the transformer's weights already built.
RESULTS = {"iii": result_iii, "iv": result_iv, "ii": result_ii, "i": result_i, "i_meta": meta_icl_agreement,
           "v": result_v}


def run(size_name: str, out: Path, seed: int = 0, only: list[str] | None = None,
        policies: list[str] | None = None) -> dict[str, Any]:
    """Run the results at ``size_name``; write ``results.json`` and the PNGs into ``out``.

    ``only`` runs a subset and keeps the other results of an earlier run with the same size and seed
    in ``out`` (if any); ``policies`` does the same for the policies of (iii). Figures are drawn
    for the results present.
    """
    if size_name not in SIZES:
        raise ValueError(f"size must be one of {sorted(SIZES)}; got {size_name!r}")
    unknown = set(only or []) - set(RESULTS)
    if unknown:
        raise ValueError(f"results must be among {sorted(RESULTS)}; got {sorted(unknown)}")
    unknown_policies = set(policies or []) - set(LF_POLICY_NAMES + LF_EXTRA_POLICIES)
    if unknown_policies:
        raise ValueError(f"(iii) policies must be among {list(LF_POLICY_NAMES + LF_EXTRA_POLICIES)}; "
                         f"got {sorted(unknown_policies)}")
    size = SIZES[size_name]
    if size_name == "medium" and set(only or RESULTS) != {"iii"}:
        raise ValueError("size 'medium' holds result (iii) only: use --size medium --only iii")
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"size": size_name, "seed": seed, "config": size}
    previous = out / "results.json"
    if only and previous.is_file():
        earlier = json.loads(previous.read_text())
        if (earlier.get("size"), earlier.get("seed")) == (size_name, seed):
            results.update({key: earlier[key] for key in (*RESULTS, "iii_belief_training_seeds",
                                                          "iii_belief_seed_summary") if key in earlier})
    for key, function in RESULTS.items():
        if only and key not in only:
            continue
        started = time.perf_counter()
        if key == "iii":
            results[key] = result_iii(size, seed, policies, results.get("iii") if policies else None)
        else:
            results[key] = function(size, seed)
        print(f"result ({key}) done in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    if policies and previous.is_file():
        # Several ``--policies`` runs may share ``out``: merge with what the others wrote meanwhile.
        latest = json.loads(previous.read_text())
        if (latest.get("size"), latest.get("seed")) == (size_name, seed) and "iii" in latest:
            kept = {name: value for name, value in latest["iii"].items() if name not in policies}
            results["iii"] = with_paired_differences({**kept, **{name: results["iii"][name] for name in policies}})
    results["figures"] = [str(path) for path in plot(results, out)]
    write_json_atomic(out / "results.json", results)
    return results


def published_result(out: Path, size: str, result: str, flag: str) -> tuple[Path, dict[str, Any]]:
    """``out/results.json`` and its contents, which must hold ``result`` at ``size`` for ``flag`` to add to it."""
    previous = out / "results.json"
    results = json.loads(previous.read_text()) if previous.is_file() else {}
    if result not in results or results.get("size") != size:
        raise SystemExit(f"error: {flag} needs result ({result}) at size {size} in {previous}; run --only {result} "
                         "first")
    return previous, results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="smoke")
    parser.add_argument("--out", type=Path, default=Path("experiments/results/curiosity"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=None, help="comma-separated subset of i,i_meta,ii,iii,iv,v (others kept)")
    parser.add_argument("--policies", default=None,
                        help=f"comma-separated subset of the (iii) policies {','.join(LF_POLICY_NAMES)} (others kept)")
    parser.add_argument("--belief-seeds", default=None, metavar="SEEDS",
                        help="comma-separated training seeds: retrain curiosity-belief with each and add their (iii) "
                             "bounds to OUT/results.json (needs (iii) there)")
    parser.add_argument("--merge-belief-seeds", default=None, metavar="DIRS",
                        help="comma-separated folders of --belief-seeds runs made on copies of OUT/results.json: add "
                             "their training seeds to OUT/results.json and redo the seed summary")
    parser.add_argument("--regression-belief-seeds", default=None, metavar="SEEDS",
                        help="comma-separated training seeds: train curiosity-belief-regression with each and add "
                             "its (v) rows to OUT/results.json (needs (v) there)")
    parser.add_argument("--replot", action="store_true",
                        help="only redraw the figures from OUT/results.json (and recompute (iii)'s paired differences)")
    args = parser.parse_args(argv)
    if args.replot:
        results = json.loads((args.out / "results.json").read_text())
        if "iii" in results:  # the paired differences are recomputed from the stored per-history terms
            results["iii"] = with_paired_differences(results["iii"])
            write_json_atomic(args.out / "results.json", results)
        print("\n".join(str(path) for path in plot(results, args.out)))
        return
    if args.regression_belief_seeds:
        previous, results = published_result(args.out, args.size, "v", "--regression-belief-seeds")
        seeds = [int(value) for value in args.regression_belief_seeds.split(",")]
        trained = regression_belief_training_seeds(SIZES[args.size], results["seed"], seeds)
        if "0" in trained["per_seed"]:  # training seed 0 is the registered agent's config: the same weights
            results["v"]["curiosity-belief-regression"] = trained["per_seed"]["0"]["information"]
        results["v"]["belief_training_seeds"] = trained
        results["config"] = {**results.get("config", {}), **SIZES[args.size]}
        results["figures"] = [str(path) for path in plot(results, args.out)]
        write_json_atomic(previous, results)
        return
    if args.belief_seeds:
        previous, results = published_result(args.out, args.size, "iii", "--belief-seeds")
        seeds = [int(value) for value in args.belief_seeds.split(",")]
        results["iii_belief_training_seeds"] = {
            **results.get("iii_belief_training_seeds", {}),
            **belief_training_seeds(SIZES[args.size], results["seed"], seeds, results["iii"])}
        results = merge_belief_seeds(results, [])  # sorts the seeds and redoes the summary
        write_json_atomic(previous, results)
        return
    if args.merge_belief_seeds:
        paths = [args.out / "results.json", *(Path(d) / "results.json" for d in args.merge_belief_seeds.split(","))]
        missing = [str(path) for path in paths if not path.is_file()]
        if missing:
            parser.error(f"--merge-belief-seeds: no results.json in {', '.join(missing)}; "
                         "run --belief-seeds there first")
        results, *others = (json.loads(path.read_text()) for path in paths)
        if "iii" not in results or "curiosity-belief" not in results["iii"]:
            parser.error(f"--merge-belief-seeds needs result (iii) with curiosity-belief in {paths[0]}")
        try:
            results = merge_belief_seeds(results, others)
        except (KeyError, ValueError) as error:
            parser.error(f"--merge-belief-seeds: {error!s}; rerun --belief-seeds on a copy of {paths[0]}")
        write_json_atomic(paths[0], results)
        summary = results["iii_belief_seed_summary"]
        rows = {**summary["per_seed"], "mean": summary["mean_over_seeds"]}
        print("training seed | sPCE | " + " | ".join(f"minus {name}" for name in BELIEF_BASELINES))
        for key, row in rows.items():
            cells = [row["spce"], *(row["paired_difference_minus"][name] for name in BELIEF_BASELINES)]
            texts = [f"{cell['mean']:{'+' if i else ''}.2f} [{cell['ci95'][0]:.2f}, {cell['ci95'][1]:.2f}]"
                     for i, cell in enumerate(cells)]
            print(" | ".join([key, *texts]))
        return
    try:
        results = run(args.size, args.out, args.seed, args.only.split(",") if args.only else None,
                      args.policies.split(",") if args.policies else None)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    summary = {key: results[key] for key in ("iii", "iv", "v") if key in results}
    print(json.dumps(summary, indent=1, default=str)[:4000])


if __name__ == "__main__":
    main()
