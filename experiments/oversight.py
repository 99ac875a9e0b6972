"""Reproduces the prefix-branching oversight results of docs/results/oversight.md ("Calibration Is Not Control").

    python experiments/oversight.py --size smoke --out experiments/results/oversight-smoke
    python experiments/oversight.py --size full  --out experiments/results/oversight
    python experiments/oversight.py --size full  --out experiments/results/oversight --only taxi,textworld

Per benchmark (corridor, taxi, textworld, scienceworld, chem, disaster; each with its lapsing base agent
and its expert):

1. **Rows.** Branched rows (every overseer action from every sampled prefix, to the end) collected
   with ``gauntlet oversight collect``'s machinery into ``<work>/<benchmark>`` (resumable: a killed
   experiment picks up where it stopped), at every expert strength of the ablation. Rows/s and the
   replay match rate are recorded.
2. **Offline table.** Episodes split 70/30 (no shared rollouts; the LLM plans cross-fit over folds of
   episodes instead, and keep the privileged expert as a reference no overseer chooses); on the test
   prefixes: regret of the scalar routers (raw, Platt, isotonic; thresholds re-tuned; and the raw
   threshold kept), the action-conditioned controllers (random forest as the paper, bagged boosting),
   oracle and the always-<action> references, with bootstrap CIs over episodes; ECE/AUROC of the risk
   score before and after recalibration; the identical-risk / different-optimal-action count.
3. **Intervention-strength ablation.** The same table per expert strength (a weaker expert is a weaker
   intervention; the paper says the gain should shrink).
4. **Branch cost.** One restore plus one step from the coupled snapshot at t = 5 and t = 50, timed in
   the same run: O(1) restores keep the ratio near 1; replay-based branching (tool suites, ScienceWorld)
   grows with t.
5. **Online.** The controllers trained on the training episodes, deployed through the runner on
   held-out episodes: utility of no oversight vs scalar routing vs the action-conditioned controller.

The ``llm`` sizes (``llm-smoke``, ``llm``) run the same sections on the benchmarks whose base agent is
the offline LLM agent (``llm-textworld``, ``llm-disaster``, ``llm-chem``: every episode a real model
trajectory, every branch real decoding), with the interventions that are not an oracle (``stronger``:
the 1.5B takes over the 0.5B's conversation; ``hint``; ``confirm``; ``rollback``; ``quit``) and the
privileged ``expert`` kept as a reference; the scalar routers escalate to ``stronger``. The scalar
baselines there add the model's verbalised confidence and the latent monitor's score. Branch cost is not
run on them (a branch's cost is its model calls, which the collection times by part). Online, the
controllers deployed are trained without the reference's branches (``reference``), so they choose among
what a deployment has: ``continue``, ``quit``, ``stronger``, ``hint`` and ``confirm`` (``rollback`` is not
carried out online).
``--options`` merges into every benchmark's options, e.g. to swap the models:

    python experiments/oversight.py --size llm --out experiments/results/oversight-llm --only llm-textworld
    python experiments/oversight.py --size llm-smoke --out /tmp/ov --options '{"model": "offline:small"}'

Everything is seeded (``--seed``); the same command gives the same rows and the same tables.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import gauntlet  # noqa: F401  (registers the gauntlet/ envs)
from gauntlet.controllers.oversight.benchmarks import get_benchmark
from gauntlet.controllers.oversight.collect import CollectSpec, collect, load_rows
from gauntlet.controllers.oversight.metrics import (EvaluationConfig, comparison_lines, cross_evaluate, drop_actions,
                                                    evaluate, evaluate_by_strength, markdown_table, split_by_episode,
                                                    tune_dispersion)
from gauntlet.controllers.oversight.models import (ActionConditioned, RiskScore, ScalarRouter, failure_data, save_model,
                                                   utility_data)
from gauntlet.controllers.oversight.online import compare_online, held_out_episodes
from gauntlet.controllers.oversight.utility import LADDER, UtilityConfig
from gauntlet.errors import UserError
from gauntlet.fileio import write_atomically

# Per benchmark and size: base episodes, prefix stride, expert strengths, held-out online episodes,
# benchmark options. Sizes are set so the full run fits a 2-core machine in about two hours.
PLANS: dict[str, dict[str, dict[str, Any]]] = {
    "smoke": {
        "corridor": {"episodes": 16, "stride": 1, "strengths": [1.0, 0.5], "online": 3,
                     "options": {"length": 6, "max_steps": 12}, "n_boot": 100, "controller_kinds": ["rf"]},
        "taxi": {"episodes": 12, "stride": 3, "strengths": [1.0], "online": 2, "options": {}, "n_boot": 100,
                 "controller_kinds": ["rf"]},
    },
    "full": {
        "corridor": {"episodes": 600, "stride": 1, "strengths": [1.0, 0.6, 0.3], "online": 200, "options": {}},
        "taxi": {"episodes": 400, "stride": 1, "strengths": [1.0, 0.6, 0.3], "online": 200, "options": {}},
        # The text and tool benchmarks branch at about 1 row/s on 2 cores (docs/results/oversight.md):
        # sized to finish in under an hour together, so their tables are small and their CIs wide.
        # Game 22: TextWorld's own planner (its policy_commands, the expert) grew past 6 GB in 10 minutes
        # on a state a lapsing agent reached; skipped wherever a plan reaches it, and reported.
        "textworld": {"episodes": 48, "skip": [22], "stride": 2, "strengths": [1.0], "online": 8, "options": {}},
        "chem": {"episodes": 48, "stride": 2, "strengths": [1.0], "online": 8, "options": {}},
        # Storage-tank tasks excluded: one seg_storage_tanks call takes ~4 s, which every replayed prefix repeats.
        "disaster": {"episodes": 64, "stride": 2, "strengths": [1.0], "online": 8,
                     "options": {"exclude": ["storage_tank_count", "largest_tank_radius"]}},
        "scienceworld": {"episodes": 8, "stride": 4, "strengths": [1.0], "online": 0, "options": {}},
    },
}

LLM_ACTIONS = ("continue", "quit", "expert", "rollback", "stronger", "hint", "confirm")
"""What the LLM plans branch: every intervention that is not an oracle, the privileged expert as a reference
(``expert_k`` left out: with the expert already there it is one more oracle row per prefix)."""
LLM_MODELS = {"model": "offline:small", "strong_model": "offline", "latent": "shipped", "exact": True}
"""The 0.5B as base agent, the 1.5B as the stronger model, the latent score Gauntlet ships (fitted on the
0.5B) as a baseline; greedy decoding (the benchmarks' default) in the exact mode, so a branch's outcome
does not depend on what its process ran before (``benchmarks/llm.py``: without it, 3 of 8 of the smoke
plan's stronger branches went another way)."""
_LLM = {"strengths": [1.0], "online": 8, "actions": LLM_ACTIONS, "intervention": "stronger", "branch_cost": False,
        "reference": ["expert"], "folds": 5}
"""``folds``: the offline table is cross-fitted over that many folds of episodes (at most one an episode), so
every collected game is a test game once; a 70/30 split of a few dozen LLM games tests a handful."""
PLANS["llm-smoke"] = {
    # One-room games with a two-command quest and a four-step budget: 4 episodes, a few rows each.
    "llm-textworld": {**_LLM, "episodes": 4, "stride": 2, "n_boot": 100, "controller_kinds": ["rf"], "online": 1,
                      "options": {**LLM_MODELS, "nb_rooms": 1, "nb_objects": 2, "quest_length": 2, "max_steps": 4}},
}
PLANS["llm"] = {
    # A row (a prefix, branched 7 ways) is 7 real model continuations: about 4 min of one core on these
    # games, about 20 on a disaster task, with the prefix cache on (docs/oversight.md); the exact mode the
    # plans use took 2.4 times as long on the smoke plan (3.9 when it read every prompt whole), so the plan's
    # ~400 rows are about five days of a 2-core machine. Every benchmark resumes where it stopped.
    "llm-textworld": {**_LLM, "episodes": 48, "stride": 4,
                      "options": {**LLM_MODELS, "nb_rooms": 3, "nb_objects": 6, "quest_length": 4, "max_steps": 12}},
    "llm-disaster": {**_LLM, "episodes": 40, "stride": 3,
                     "options": {**LLM_MODELS, "exclude": ["storage_tank_count", "largest_tank_radius"]}},
    "llm-chem": {**_LLM, "episodes": 24, "stride": 4, "options": dict(LLM_MODELS)},
}


def online_episodes(name: str, plan: dict[str, Any]) -> range:
    """Held-out episodes for the online comparison (``held_out_episodes``), clear of the collected ones."""
    return held_out_episodes(name, plan["options"], plan["online"], collected=plan["episodes"])


def branch_cost(name: str, options: dict[str, Any], *, ts: tuple[int, ...] = (5, 50), repeats: int = 30,
                max_episodes: int = 20) -> dict[str, Any]:
    """Seconds for one restore plus one step from the coupled snapshot at each ``t`` (same run, same env).

    Uses the first base episode that lasts past ``max(ts)`` (the benchmark's budget is lifted for it where
    the benchmark takes a ``max_steps`` option, and its base agent made to lapse often where it takes
    ``p_lapse``, so that long episodes are common); ``None`` when no episode is long enough.
    """
    from gauntlet.branching import branchable
    from gauntlet.controllers.oversight.lapsing import plain_action

    longest = max(ts)
    bench = None
    lapse_prone = {"p_lapse": (0.6, 0.9), "p_loop": (0.0, 0.05), "p_premature": (0.0, 0.0)}
    for extra in ({"max_steps": longest + 10, **lapse_prone}, {"max_steps": longest + 10}, {}):
        try:
            bench = get_benchmark(name, **{**options, **extra})
            break
        except (TypeError, ValueError):  # an option the benchmark does not take, or ranges it refuses
            continue
    assert bench is not None
    for episode in range(max_episodes):
        env = bench.make_env(episode)
        env = env if hasattr(env, "snapshot") else branchable(env)
        agent = bench.make_agent(episode)
        try:
            observation, info = env.reset(seed=bench.episode_seed(episode))
            agent.reset(seed=bench.episode_seed(episode), observation_space=env.observation_space,
                        action_space=env.action_space)
            snapshots: dict[int, Any] = {}
            actions: dict[int, Any] = {}
            ended = False
            for t in range(longest + 1):
                if t in ts:
                    snapshots[t] = env.snapshot()  # type: ignore[attr-defined]
                action = plain_action(agent.act(observation, info))
                actions[t] = action
                observation, _, terminated, truncated, info = env.step(action)
                if terminated or truncated:
                    ended = True
                    break
            if ended:
                continue
            # Interleaved rounds, the median round per t: one warm-up or a busy moment does not decide it.
            rounds: dict[int, list[float]] = {t: [] for t in ts}
            for _ in range(5):
                for t in ts:
                    started = time.perf_counter()
                    for _ in range(repeats):
                        env.restore(snapshots[t])  # type: ignore[attr-defined]
                        env.step(actions[t])
                    rounds[t].append((time.perf_counter() - started) / repeats)
            seconds = {t: float(np.median(rounds[t])) for t in ts}
            return {"episode": episode, "repeats": repeats, "seconds": {str(t): s for t, s in seconds.items()},
                    "ratio": seconds[longest] / seconds[min(ts)]}
        finally:
            env.close()
    return {"episode": None, "reason": f"no base episode of the first {max_episodes} lasted {longest} steps"}


def train_controllers(rows: list[dict[str, Any]], folder: Path, benchmark: str, config: UtilityConfig,
                      seed: int, intervention: str = "expert") -> tuple[Path, Path]:
    """The deployable controllers, trained on the training episodes only (as ``gauntlet oversight train``)."""
    fit_rows, calibration_rows = split_by_episode(rows, 0.3, seed)
    dispersion = tune_dispersion("rf", fit_rows, calibration_rows, EvaluationConfig().dispersion_grid, seed=seed)
    model = ActionConditioned("rf", dispersion=dispersion, seed=seed).fit(*utility_data(rows))
    risk = RiskScore("rf", seed=seed).fit(*failure_data(fit_rows))
    router = ScalarRouter(risk, intervention=intervention).fit(*utility_data(calibration_rows, risk.feature_names))
    ac = save_model(folder / f"{benchmark}-controller.joblib", model, utility=config, benchmark=benchmark)
    scalar = save_model(folder / f"{benchmark}-controller.scalar.joblib", router, utility=config, benchmark=benchmark)
    return ac, scalar


def run_benchmark(name: str, plan: dict[str, Any], out: Path, work: Path, *, seed: int, workers: int) -> dict[str, Any]:
    config = UtilityConfig()
    episodes = tuple(e for e in range(plan["episodes"]) if e not in plan.get("skip", ()))
    spec = CollectSpec(benchmark=name, episodes=episodes, options=plan["options"],
                       config=config, actions=tuple(plan.get("actions", LADDER)), draws=1,
                       prefixes="all" if plan["stride"] == 1 else plan["stride"], strengths=tuple(plan["strengths"]))
    print(f"[{name}] collecting {len(spec.jobs())} jobs into {work / name}", flush=True)
    collected = collect(spec, work / name, workers=workers)
    rows = load_rows(work / name)
    stats = collected.stats
    result: dict[str, Any] = {
        "plan": plan, "rows": len(rows),
        "collection": {"rows_per_s_wall": collected.rows_per_s, "wall_s": collected.wall_s,
                       "jobs_run": collected.jobs_run, "jobs_resumed": collected.jobs_resumed,
                       "workers": workers, **stats.as_dict(),
                       # Every job's counts and seconds, the earlier runs' of a resumed collection too.
                       "all_jobs": collected.all_stats.as_dict(), "jobs_unmeasured": collected.jobs_unmeasured},
        "replay_match_rate": float(np.mean([row["prefix_match"] for row in rows])),
    }
    # The smoke size fits only the forest controller: the bagged boosted one is most of its time.
    evaluation_config = EvaluationConfig(n_boot=plan.get("n_boot", 1000),
                                         controller_kinds=tuple(plan.get("controller_kinds", ("rf", "gbr"))),
                                         intervention=plan.get("intervention", "expert"),
                                         reference=tuple(plan.get("reference", ())))
    full_strength = [row for row in rows if row["expert_strength"] == max(plan["strengths"])]
    train, test = split_by_episode(full_strength, 0.3, seed)
    if plan.get("folds"):
        folds = min(plan["folds"], len({row["episode"] for row in full_strength}))
        print(f"[{name}] evaluating on {len(full_strength)} rows cross-fitted over {folds} folds", flush=True)
        result["offline"] = cross_evaluate(full_strength, folds, evaluation_config, seed=seed)
    else:
        print(f"[{name}] evaluating on {len(test)} test rows", flush=True)
        result["offline"] = evaluate(train, test, evaluation_config, seed=seed)
    if len(plan["strengths"]) > 1:
        train_all, test_all = split_by_episode(rows, 0.3, seed)
        result["ablation"] = {strength: {"regret": {method: part["methods"][method]["regret"]
                                                    for method in part["methods"]},
                                         "gain_over_best_fixed": _gain(part)}
                              for strength, part in evaluate_by_strength(train_all, test_all, evaluation_config,
                                                                         seed=seed).items()}
    not_run = {"episode": None, "reason": "not run: a branch's cost is its model calls (wall s by part)"}
    result["branch_cost"] = branch_cost(name, plan["options"]) if plan.get("branch_cost", True) else not_run
    if plan["online"]:
        models = out / "models"
        models.mkdir(parents=True, exist_ok=True)
        # A reference (the LLM plans' privileged expert) is measured offline, never deployed.
        reference = set(plan.get("reference", ()))
        deployable = drop_actions(train, reference)
        ac, scalar = train_controllers(deployable, models, name, config, seed, plan.get("intervention", "expert"))
        print(f"[{name}] online on {plan['online']} held-out episodes", flush=True)
        result["online"] = compare_online(name, ac, online_episodes(name, plan),
                                          plan["options"], scalar_model=scalar, seed=seed)
    return result


def _gain(evaluation: dict[str, Any]) -> dict[str, float]:
    """Regret of the best fixed policy (always-<action>) minus the controller's: what branching bought."""
    methods = evaluation["methods"]
    fixed = min(method["regret"] for name, method in methods.items() if name.startswith("always_"))
    return {name: fixed - method["regret"] for name, method in methods.items()
            if name.startswith(("action_conditioned", "scalar_raw"))}


def summary_markdown(results: dict[str, Any]) -> str:
    lines = ["# Oversight results", ""]
    for name, result in results["benchmarks"].items():
        offline = result["offline"]
        lines += [f"## {name}", "",
                  f"{result['rows']} rows, replay match {result['replay_match_rate']:.4f}, "
                  f"{result['collection']['rows_per_s_wall']:.3g} rows/s on {result['collection']['workers']} "
                  f"worker(s); {offline['n_test_prefixes']} test prefixes in {offline['n_test_episodes']} episodes"
                  + (f" (cross-fitted over {offline['folds']} folds)." if "folds" in offline else "."),
                  "", markdown_table(offline), "", comparison_lines(offline)]
        collection = result["collection"]
        every = collection.get("all_jobs") or {}
        by_part = every.get("action_s") or collection.get("action_s") or {}
        if by_part:
            unmeasured = collection.get("jobs_unmeasured", 0)
            lines.append("- wall s by part (every job in the folder"
                         + (f"; {unmeasured} earlier jobs not timed" if unmeasured else "") + "): "
                         + ", ".join(f"{part} {seconds:.0f}" for part, seconds in by_part.items()))
        for score, values in offline["calibration"].items():
            lines.append(f"- risk {score}: ECE {values['ece']:.3f}, AUROC {values['auroc']:.3f}")
        identical = offline["identical_risk_different_action"]
        lines.append(f"- identical risk (raw, {identical['bins']} bins) but a different optimal action: "
                     f"{identical['raw']} of {identical['prefixes']} prefixes")
        cost = result["branch_cost"]
        if cost.get("episode") is not None:
            lines.append(f"- branch cost (restore + 1 step): t=5 {1e3 * cost['seconds']['5']:.3f} ms, "
                         f"t=50 {1e3 * cost['seconds']['50']:.3f} ms, ratio {cost['ratio']:.2f}")
        if "ablation" in result:
            for strength, part in result["ablation"].items():
                gains = ", ".join(f"{k} {v:+.3f}" for k, v in part["gain_over_best_fixed"].items())
                lines.append(f"- expert strength {strength}: regret reduction vs best fixed policy: {gains}")
        if "online" in result:
            for method, summary in result["online"]["methods"].items():
                low, high = summary["ci"]
                lines.append(f"- online {method}: utility {summary['mean_utility']:.3f} [{low:.3f}, {high:.3f}], "
                             f"success {summary['success_rate']:.3f}, intervened {summary['intervention_rate']:.3f}")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(PLANS), default="smoke")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=None, help="Row folders (default: OUT/rows; resumable).")
    parser.add_argument("--only", default=None, help="Comma-separated benchmarks of the plan to run.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--options", default=None,
                        help="A JSON object merged into every benchmark's options (e.g. other models).")
    args = parser.parse_args(argv)
    plans = PLANS[args.size]
    extra: dict[str, Any] = {}
    if args.options is not None:
        try:
            extra = json.loads(args.options)
        except json.JSONDecodeError as error:
            print(f"error: --options is not JSON ({error.msg} at character {error.pos}); give a JSON object",
                  file=sys.stderr)
            return 2
        if not isinstance(extra, dict):
            print("error: --options must be a JSON object such as '{\"model\": \"offline:small\"}'", file=sys.stderr)
            return 2
    plans = {name: {**plan, "options": {**plan["options"], **extra}} for name, plan in plans.items()}
    names = list(plans) if args.only is None else [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in names if name not in plans]
    if unknown:
        print(f"error: {', '.join(unknown)} not in the {args.size} plan ({', '.join(plans)})", file=sys.stderr)
        return 2
    for name in names:  # a misspelt or refused option fails here in one line, before any episode
        try:
            get_benchmark(name, **plans[name]["options"])
        except (TypeError, ValueError, UserError) as error:
            print(f"error: benchmark {name}: {error}", file=sys.stderr)
            return 2
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    work = args.work or out / "rows"
    results_file = out / "oversight.json"
    results: dict[str, Any] = json.loads(results_file.read_text()) if results_file.exists() else {}
    results.update({"size": args.size, "seed": args.seed, "utility": UtilityConfig().__dict__})
    results.setdefault("benchmarks", {})
    for name in names:
        started = time.perf_counter()
        results["benchmarks"][name] = run_benchmark(name, plans[name], out, work, seed=args.seed,
                                                    workers=args.workers)
        results["benchmarks"][name]["seconds"] = time.perf_counter() - started
        write_atomically(results_file, json.dumps(results, indent=2, default=float))
    write_atomically(out / "oversight.md", summary_markdown(results))
    print(summary_markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
