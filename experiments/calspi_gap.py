"""Which term of Cal-SPI's certified lower bound blocks switching? A per-domain, per-size decomposition.

At real states of a baseline episode (reset seed 20_000 + seed, never an evaluation start state), the
search's root proposals (the baseline's action a_b and ``--candidates`` perturbations of it, 0.3 of the
half range, as the search draws them) are stepped once in the fitted model. For each action

    Q_hat(a) = r_hat + g V^b(s_hat')                      (g = the search's discount, 0.99)
    A(a)     = Q_hat(a) - Q_hat(a_b)                      (one-step advantage the model finds)

and a+ = argmax of A over the trusted non-baseline actions. The terms of the one-step certified lower
bound LB(a+) = r_hat - b_r + g (V^b(s_hat') - state term - delta_V), at a+:

    model reward   b_r = q_hat (sigma_r + eps)              (Wilks certificate of the ensemble)
    model state    g |grad V^b(s_hat')| . E                  (default first-order term)
    value-aware    g q_VA, global / binned by disagreement   (certificates.ValueAwareBound)
    delta_V        g delta_V (global); g delta_V(s_hat') of a bootstrap ensemble of V^b fits
                   (normalised by its spread, or binned by V_bar)     (certificates.ValueEnsemble)
    delta_TD       Bellman-residual bound (paired rule)
    base offset    Q_hat(a_b) - V^b(s): what the default rule loses by comparing with V^b(s) at the
                   real state rather than with the baseline's own model edge
    horizon        the default search (depth 3 + rollout 4): its total charge Q(a+) - LB(a+) minus the
                   one-step charge, and its own gap LB(a+) - V^b(s)

The real one-step advantage A_real(a+) = r(a+) + g V^b(s'(a+)) - (r(a_b) + g V^b(s'(a_b))) steps the
simulator from the same state (snapshot/restore). Each rule's gap (> 0 would switch) is the best
lower bound minus what it must beat; a rule "switches wrongly" at a state where its gap is > 0 while
A_real(a+) < 0.

    python experiments/calspi_gap.py --smoke
    python experiments/calspi_gap.py --domains HalfCheetah --sizes 200000 --seeds 1 --out DIR

Prints one Markdown table (terms' medians per cell) and the rules' switch rates; writes
``<out>/gap-decomposition.json`` atomically. ``--markdown FILE...`` prints stored results only.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from gauntlet.fileio import write_atomically

HERE = Path(__file__).resolve().parent

TERMS = ("reward_bound", "state_gradient", "value_aware_global", "value_aware_local", "delta_V_global",
         "delta_V_ensemble", "delta_V_binned", "delta_TD", "base_offset", "horizon_extra_charge")
RULES = ("certified", "certified+VA-global", "certified+VA-local", "certified+ensemble-dV+VA-local",
         "certified+binned-dV+VA-local", "paired", "paired+VA-local", "default-search")


def _one_step(planner: Any, value: Any, value_aware: Any, state: np.ndarray, actions: np.ndarray) -> dict[str, Any]:
    """One model step of every action from ``state``: rewards, bounds, next states, value terms."""
    prediction = planner.model.predict(np.repeat(state[None], len(actions), axis=0), actions)
    certificate, std = planner.certificate, planner.model.target_norm.std
    error = certificate.error_bound(prediction.state_disagreement) * std[:-1]  # E after one step, raw units
    trusted = certificate.trusted(prediction.state_disagreement)
    next_values = value(prediction.next_states)
    maybe = planner._maybe_terminal(prediction.next_states, error)
    return {"reward": prediction.rewards, "reward_bound": certificate.error_bound(prediction.reward_disagreement)
            * std[-1], "next": prediction.next_states, "trusted": trusted, "terminal": maybe,
            "value": next_values, "gradient_term": value.lipschitz_term(prediction.next_states, error),
            "va_global": np.full(len(actions), value_aware.global_threshold),
            "va_local": value_aware.binned(value_aware.feature(prediction.state_disagreement))}


def decompose_state(planner: Any, task: Any, state: np.ndarray, actions: np.ndarray, value: Any, value_aware: Any,
                    ensemble: Any, ensemble_aware: Any, discount: float) -> dict[str, Any]:
    """Terms and rule gaps at one real state (the caller has the simulator at ``state``)."""
    single = _one_step(planner, value, value_aware, state, actions)
    mean = _one_step(planner, ensemble, ensemble_aware, state, actions)
    q = single["reward"] + discount * single["value"]
    advantage = q - q[0]
    candidates = np.flatnonzero(single["trusted"][1:]) + 1
    root_value = float(value(state[None])[0])
    # Real one-step lookahead from the same state (snapshot/restore).
    snapshot, q_real = task.snapshot(), []
    for action in actions:
        task.restore(snapshot)
        after, reward, terminated, *_ = task.step(action.astype(task.action_space.dtype))
        q_real.append(reward + (0.0 if terminated else discount * float(value(np.asarray(after)[None])[0])))
    task.restore(snapshot)
    q_real = np.array(q_real)

    def leaf(values: np.ndarray, charge: np.ndarray, maybe: np.ndarray) -> np.ndarray:
        lower = values - charge
        return np.where(maybe, np.minimum(lower, 0.0), lower)

    d_v, d_td = value.error_bound, value.td_error_bound
    lbs = {  # one-step lower bounds of every action, per rule (its own value function)
        "certified": single["reward"] - single["reward_bound"]
        + discount * leaf(single["value"], single["gradient_term"] + d_v, single["terminal"]),
        "certified+VA-global": single["reward"] - single["reward_bound"]
        + discount * leaf(single["value"], single["va_global"] + d_v, single["terminal"]),
        "certified+VA-local": single["reward"] - single["reward_bound"]
        + discount * leaf(single["value"], single["va_local"] + d_v, single["terminal"]),
        "certified+ensemble-dV+VA-local": mean["reward"] - mean["reward_bound"] + discount * leaf(
            mean["value"], mean["va_local"] + ensemble.q_value * (ensemble.spread(mean["next"]) + ensemble.epsilon),
            mean["terminal"]),
        "certified+binned-dV+VA-local": mean["reward"] - mean["reward_bound"] + discount * leaf(
            mean["value"], mean["va_local"] + ensemble.binned(mean["value"]), mean["terminal"]),
    }
    references = {name: root_value for name in lbs}
    references["certified+ensemble-dV+VA-local"] = references["certified+binned-dV+VA-local"] = \
        float(ensemble(state[None])[0])
    def ceiling(values: np.ndarray, charge: np.ndarray, maybe: np.ndarray) -> np.ndarray:
        upper = values + charge
        return np.where(maybe, np.maximum(upper, 0.0), upper)

    upper = {"paired": single["reward"] + single["reward_bound"]
             + discount * ceiling(single["value"], single["gradient_term"], single["terminal"]),
             "paired+VA-local": single["reward"] + single["reward_bound"]
             + discount * ceiling(single["value"], single["va_local"], single["terminal"])}
    lbs["paired"] = single["reward"] - single["reward_bound"] + discount * leaf(
        single["value"], single["gradient_term"], single["terminal"])
    lbs["paired+VA-local"] = single["reward"] - single["reward_bound"] + discount * leaf(
        single["value"], single["va_local"], single["terminal"])
    references["paired"] = float(upper["paired"][0]) + d_td
    references["paired+VA-local"] = float(upper["paired+VA-local"][0]) + d_td
    gaps, chosen = {}, {}
    for name, lb in lbs.items():
        if len(candidates) and single["trusted"][0]:
            best = int(candidates[np.argmax(lb[candidates])])
            gaps[name], chosen[name] = float(lb[best] - references[name]), best
        else:
            gaps[name], chosen[name] = -np.inf, 0
    # The default search (depth 3 + rollout 4, certified rule) from the same state.
    decision = planner.search(state, np.random.default_rng(0))
    gaps["default-search"] = float(decision.best_lower_bound - decision.baseline_value)
    default_charge = float(decision.best_value - decision.best_lower_bound)
    best = int(candidates[np.argmax(advantage[candidates])]) if len(candidates) else 0
    one_step_charge = float(q[best] - lbs["certified"][best]) if best else np.nan
    terms = {"reward_bound": float(single["reward_bound"][best]),
             "state_gradient": float(discount * single["gradient_term"][best]),
             "value_aware_global": float(discount * single["va_global"][best]),
             "value_aware_local": float(discount * single["va_local"][best]),
             "delta_V_global": float(discount * d_v),
             "delta_V_ensemble": float(discount * ensemble.q_value * (ensemble.spread(mean["next"][best:best + 1])[0]
                                                                      + ensemble.epsilon)),
             "delta_V_binned": float(discount * ensemble.binned(mean["value"][best:best + 1])[0]),
             "delta_TD": float(d_td), "base_offset": float(q[0] - root_value),
             "horizon_extra_charge": default_charge - one_step_charge if best and np.isfinite(default_charge)
             else np.nan}
    return {"advantage": float(advantage[best]) if best else np.nan,
            "real_advantage": float(q_real[best] - q_real[0]) if best else np.nan,
            "terms": terms, "gaps": gaps,
            "wrong_switch": {name: bool(gaps[name] > 0 and q_real[chosen[name]] < q_real[0])
                             for name in lbs},
            "default_search_advantage": float(decision.best_value - decision.baseline_value),
            "trusted_candidates": int(len(candidates)), "baseline_trusted": bool(single["trusted"][0])}


def decompose_cell(domain: str, size: int, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    import gymnasium as gym

    from gauntlet.agents.calspi.agent import CalSPIAgent, ModelConfig, split_indices
    from gauntlet.agents.calspi.certificates import ValueAwareBound, ValueEnsemble
    from gauntlet.agents.calspi.value import ValueFitConfig

    agent = CalSPIAgent(domain, size, dataset_seed=seed, seed=seed, p=args.p, gamma=args.gamma, model=args.model,
                        search=args.search)
    fitted, planner, dataset = agent.fitted, agent.planner, agent.task.dataset
    value, discount = fitted.value, planner.config.discount
    config = ModelConfig(**args.model)
    train, validation, held_out = split_indices(len(dataset), config, seed)
    calibration = dataset.subset(held_out)
    value_aware = ValueAwareBound(bins=args.bins).fit(fitted.model, value, calibration.observations,
                                                      calibration.actions, calibration.next_observations,
                                                      p=args.p, gamma=args.gamma)
    ensemble = ValueEnsemble(dataset.observations.shape[1], discount=config.discount, members=args.value_members,
                             seed=seed, config=ValueFitConfig(steps=config.value_steps), bins=args.bins).fit(
        dataset, np.concatenate([train, validation]), held_out, p=args.p, gamma=args.gamma)
    ensemble_aware = ValueAwareBound(bins=args.bins).fit(fitted.model, ensemble, calibration.observations,
                                                         calibration.actions, calibration.next_observations,
                                                         p=args.p, gamma=args.gamma)
    task = gym.make(f"gauntlet/CalSPI-{domain}-v0").unwrapped
    observation, _ = task.reset(seed=20_000 + seed)
    rng = np.random.default_rng([seed, 3])
    low, high = task.action_space.low.astype(float), task.action_space.high.astype(float)
    states = []
    for t in range(args.steps):
        state = np.asarray(observation, dtype=np.float64)
        baseline_action = task.baseline(state)
        if t % args.every == 0:
            noise = planner.config.perturbation * (high - low) / 2 * rng.standard_normal((args.candidates, len(low)))
            actions = np.vstack([baseline_action[None], np.clip(baseline_action + noise, low, high)])
            states.append(decompose_state(planner, task, state, actions, value, value_aware, ensemble,
                                          ensemble_aware, discount))
        observation, _, terminated, truncated, _ = task.step(baseline_action.astype(task.action_space.dtype))
        if terminated or truncated:
            break
    return {"domain": domain, "size": size, "seed": seed, "states": states,
            "certificates": {"q_hat": fitted.certificate.q_hat, "delta_V": value.error_bound,
                             "delta_TD": value.td_error_bound, "q_VA_global": value_aware.global_threshold,
                             "q_VA_bins": value_aware.binned.thresholds.tolist() if value_aware.binned else None,
                             "ensemble_delta_V_global": ensemble.error_bound, "ensemble_q_V": ensemble.q_value,
                             "ensemble_delta_V_bins": ensemble.binned.thresholds.tolist() if ensemble.binned else None}}


def summarise(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Medians of the advantage and of every term per (domain, size) over states and seeds, and each
    rule's switch rate (gap > 0) and wrong-switch rate."""
    summary = []
    for domain, size in sorted({(c["domain"], c["size"]) for c in cells}):
        states = [s for c in cells if c["domain"] == domain and c["size"] == size for s in c["states"]]
        usable = [s for s in states if np.isfinite(s["advantage"])]
        entry: dict[str, Any] = {"domain": domain, "size": size, "seeds": len({c["seed"] for c in cells
                                                                              if c["domain"] == domain
                                                                              and c["size"] == size}),
                                 "states": len(states), "states_with_trusted_alternative": len(usable)}
        if usable:
            entry["advantage_median"] = float(np.median([s["advantage"] for s in usable]))
            entry["advantage_q90"] = float(np.quantile([s["advantage"] for s in usable], 0.9))
            entry["real_advantage_median"] = float(np.median([s["real_advantage"] for s in usable]))
            entry["real_advantage_positive"] = float(np.mean([s["real_advantage"] > 0 for s in usable]))
            entry["terms_median"] = {t: float(np.nanmedian([s["terms"][t] for s in usable])) for t in TERMS
                                     if np.isfinite([s["terms"][t] for s in usable]).any()}
        entry["switch_rate"] = {r: float(np.mean([s["gaps"][r] > 0 for s in states])) for r in RULES}
        entry["gap_median"] = {r: float(np.median([s["gaps"][r] for s in states])) for r in RULES}
        entry["wrong_switch_rate"] = {r: float(np.mean([s["wrong_switch"][r] for s in states]))
                                      for r in RULES if r != "default-search"}
        summary.append(entry)
    return summary


def markdown(summary: list[dict[str, Any]]) -> str:
    short = {"reward_bound": "b_r", "state_gradient": "gradV.E", "value_aware_global": "VA glob",
             "value_aware_local": "VA local", "delta_V_global": "dV", "delta_V_ensemble": "dV ens",
             "delta_V_binned": "dV bin", "delta_TD": "dTD", "base_offset": "Q(a_b)-V(s)",
             "horizon_extra_charge": "horizon extra"}
    lines = ["| domain | size | states | A(a+) median (q90) | A_real(a+) median (>0) | "
             + " | ".join(short[t] for t in TERMS) + " |", "|" + "---|" * (5 + len(TERMS))]
    for e in summary:
        if "terms_median" not in e:
            lines.append(f"| {e['domain']} | {e['size']:,} | {e['states']} | no trusted alternative |"
                         + " |" * (1 + len(TERMS)))
            continue
        terms = " | ".join(f"{e['terms_median'].get(t, float('nan')):.2f}" for t in TERMS)
        lines.append(f"| {e['domain']} | {e['size']:,} | {e['states_with_trusted_alternative']}/{e['states']} | "
                     f"{e['advantage_median']:.2f} ({e['advantage_q90']:.2f}) | {e['real_advantage_median']:.2f} "
                     f"({e['real_advantage_positive']:.0%}) | {terms} |")
    lines += ["", "| domain | size | " + " | ".join(RULES) + " |", "|" + "---|" * (2 + len(RULES))]
    for e in summary:
        cells = []
        for r in RULES:
            wrong = e["wrong_switch_rate"].get(r)
            cells.append(f"{e['switch_rate'][r]:.0%} / {e['gap_median'][r]:.1f}"
                         + ("" if wrong is None else f" / {wrong:.0%}"))
        lines.append(f"| {e['domain']} | {e['size']:,} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("second table: switch rate (gap > 0) / median gap / wrong-switch rate (gap > 0 and A_real < 0)")
    return "\n".join(lines)


def _write_json(path: Path, data: Any) -> None:
    write_atomically(path, json.dumps(data, indent=1))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domains", nargs="+", default=["InvertedPendulum", "Hopper", "HalfCheetah", "Swimmer"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[10_000])
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--seed-start", type=int, default=0)
    parser.add_argument("--steps", type=int, default=200, help="length of the baseline episode")
    parser.add_argument("--every", type=int, default=10, help="decompose every N-th state")
    parser.add_argument("--candidates", type=int, default=16, help="perturbed actions per state")
    parser.add_argument("--value-members", type=int, default=5, help="bootstrap fits of V^b (certificate (a))")
    parser.add_argument("--bins", type=int, default=10, help="most bins of the local calibration (c)")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--p", type=float, default=0.95)
    parser.add_argument("--gamma", type=float, default=0.95)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (what the tests run)")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "calspi" / "gap")
    parser.add_argument("--markdown", nargs="+", type=Path, metavar="JSON", help="print stored results, run nothing")
    args = parser.parse_args(argv)
    if args.markdown:
        cells = [c for path in args.markdown for c in json.loads(path.read_text())["cells"]]
        summary = summarise(cells)
        print(markdown(summary))
        return {"summary": summary}
    if args.steps < 1 or args.every < 1 or args.candidates < 1 or args.value_members < 2:
        parser.error("--steps, --every and --candidates must be >= 1 and --value-members >= 2")
    args.model, args.search = {"epochs": args.epochs}, {}
    if args.smoke:
        args.domains, args.sizes, args.seeds, args.steps, args.every, args.candidates = \
            ["InvertedPendulum"], [1_000], 1, 20, 5, 4
        args.model = {"members": 3, "elites": 2, "hidden": 32, "layers": 2, "epochs": 3, "value_steps": 50}
        args.search = {"simulations": 8, "wave_size": 8, "max_depth": 2, "rollout_horizon": 2}
        args.value_members, args.bins = 2, 3
    import torch

    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    cells = []
    for domain in args.domains:
        for size in args.sizes:
            for seed in range(args.seed_start, args.seed_start + args.seeds):
                cells.append(decompose_cell(domain, size, seed, args))
                print(f"{domain} size={size} seed={seed}: {len(cells[-1]['states'])} states", flush=True)
                _write_json(args.out / "gap-decomposition.json", {"cells": cells})
    summary = summarise(cells)
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    _write_json(args.out / "gap-decomposition.json", {"config": config, "summary": summary, "cells": cells})
    print(markdown(summary))
    return {"summary": summary, "cells": cells}


if __name__ == "__main__":
    main()
