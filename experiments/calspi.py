"""Cal-SPI experiments: does gated, calibrated search improve the baseline offline without degrading it?

Across domains x dataset sizes x seeds, compares the baseline, Cal-SPI, the same search without the
gate (greedy switch), a MOPO-style uncertainty penalty (greedy switch), and behaviour cloning. Seed
``s`` draws dataset ``s`` and fits ensemble ``s``; Cal-SPI and its two search ablations share that
fitted ensemble, so they differ only in the search. Every method is evaluated on the same start
states (evaluation seeds 10_000 + k).

Metrics per (domain, size, method): mean true return over seeds with a 95 % t-interval; probability
of being worse than the baseline by more than ``margin`` (5 % of |baseline return|); worst-seed
(CVaR at 1/seeds) return; fraction of decisions that switched; and, for the certificate, its
empirical coverage on fresh transitions: ``draws`` disjoint calibration sets of fresh baseline-with-
noise transitions each give a Wilks threshold, whose coverage is measured on a separate fresh test
set; the certificate holds if coverage >= p in at least a fraction gamma of draws. The agent's own
fitted certificate (calibrated on its dataset's held-out split) is also measured on those fresh
transitions, which come from new episodes (a mild shift from the dataset's own episodes).

    python experiments/calspi.py --smoke                       # seconds; what the tests run
    python experiments/calspi.py --domains Hopper --sizes 2000 10000 --seeds 5 --max-steps 100
    python experiments/calspi.py --domains Hopper --sizes 10000 --methods baseline calspi \
        --search '{"switching": "paired"}'                    # the paired root rule (planner docstring)
    python experiments/calspi.py --domains Hopper --sizes 10000 --seeds 1 --diagnose 200
        # gap diagnostics: unpaired vs paired rule at the same real states, nothing else run

Writes ``<out>/results.json`` (atomically) and ``<out>/returns-<domain>.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from gauntlet.fileio import write_atomically

METHODS = ("baseline", "calspi", "calspi-tight", "no-gate", "mopo", "bc")
HERE = Path(__file__).resolve().parent


def t_interval(values: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    from scipy import stats

    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return float(values.mean()), float(values.mean())
    half = stats.t.ppf(0.5 + confidence / 2, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    return float(values.mean() - half), float(values.mean() + half)


def evaluate(task: Any, agent: Any, *, episodes: int, max_steps: int,
             start_seed: int = 10_000) -> tuple[float, float | None, list[float], list[float]]:
    """Mean true return over evaluation episodes (reset seeds ``start_seed + k``), the fraction of
    decisions that switched, the certified gap LB(a+) - baseline value of every decision that had a
    trusted alternative, and each episode's return."""
    import gymnasium as gym

    import gauntlet

    env = gym.make(f"gauntlet/CalSPI-{task.domain.name}-v0", max_episode_steps=max_steps)
    returns, switches, gaps = [], [], []
    for k in range(episodes):
        episode = gauntlet.rollout(env, agent, seed=start_seed + k)
        returns.append(episode.total_reward)
        decisions = [event.data for step in episode.steps for event in step.events if event.kind == "decision"]
        switches += [d["switched"] for d in decisions]
        gaps += [d["best_lower_bound"] - d["baseline_value"] for d in decisions
                 if np.isfinite(d["best_lower_bound"] - d["baseline_value"])]
    return float(np.mean(returns)), (float(np.mean(switches)) if switches else None), gaps, returns


def certificate_coverage(agent: Any, *, draws: int, calibration_size: int, test_size: int, seed: int) -> dict[str, Any]:
    """Empirical coverage of Wilks thresholds from ``draws`` disjoint fresh calibration sets."""
    from gauntlet.agents.calspi.calibration import calibrate, nonconformity_scores
    from gauntlet.envs.calspi.datasets import collect

    model, certificate = agent.fitted.model, agent.fitted.certificate
    fresh = collect(agent.domain, draws * calibration_size + test_size, seed=1_000_000 + seed)
    prediction = model.predict(fresh.observations, fresh.actions)
    targets = model.normalised_targets(fresh.observations, fresh.next_observations, fresh.rewards)
    scores = nonconformity_scores(targets, prediction.normalised_mean, prediction.disagreement)
    order = np.random.default_rng(seed).permutation(len(scores))
    test = scores[order[draws * calibration_size:]]
    coverages = []
    for d in range(draws):
        calibration = order[d * calibration_size:(d + 1) * calibration_size]
        threshold = calibrate(scores[calibration], prediction.state_disagreement[calibration],
                              p=certificate.p, gamma=certificate.gamma).q_hat
        coverages.append(float((test <= threshold).mean()))
    covering_p = float(np.mean(np.array(coverages) >= certificate.p))
    return {"coverages": coverages, "fraction_of_draws_covering_p": covering_p,
            "coverage_of_fitted_threshold": float((test <= certificate.q_hat).mean()),
            "p": certificate.p, "gamma": certificate.gamma, "calibration_size": calibration_size,
            "test_size": test_size}


def search_state_coverage(agent: Any, *, max_steps: int, every: int, seed: int) -> dict[str, Any]:
    """Coverage of the fitted certificate at the states the *search* visits: along a Cal-SPI episode in
    the real simulator, every ``every``-th root state is branched (snapshot/restore) and each root
    action the search tried there is stepped for real; the one-step scores of those transitions are
    compared with q_hat, separately for the transitions the gate trusted and for all of them."""
    import gymnasium as gym

    from gauntlet.agents.calspi.calibration import nonconformity_scores

    task = gym.make(f"gauntlet/CalSPI-{agent.domain}-v0").unwrapped
    space, rng = task.action_space, np.random.default_rng([agent.seed, 7])
    observation, _ = task.reset(seed=20_000 + seed)
    states, actions, next_states, rewards, trusted = [], [], [], [], []
    for t in range(max_steps):
        decision = agent.planner.search(np.asarray(observation, dtype=np.float64), rng)
        if t % every == 0:
            snapshot = task.snapshot()
            for action, gate in zip(decision.root_actions, decision.root_trusted, strict=True):
                task.restore(snapshot)
                action = np.clip(action, space.low, space.high).astype(space.dtype)
                after, reward, *_ = task.step(action)
                states.append(observation), actions.append(action), next_states.append(after)
                rewards.append(reward), trusted.append(gate)
            task.restore(snapshot)
        observation, _, terminated, _, _ = task.step(decision.action.astype(space.dtype))
        if terminated:
            break
    states, actions = np.array(states, dtype=np.float64), np.array(actions, dtype=np.float64)
    next_states, rewards, trusted = np.array(next_states, dtype=np.float64), np.array(rewards), np.array(trusted)
    model, certificate = agent.fitted.model, agent.fitted.certificate
    prediction = model.predict(states, actions)
    scores = nonconformity_scores(model.normalised_targets(states, next_states, rewards),
                                  prediction.normalised_mean, prediction.disagreement)
    covered = scores <= certificate.q_hat
    return {"transitions": len(scores), "trusted_transitions": int(trusted.sum()),
            "coverage_all": float(covered.mean()),
            "coverage_trusted": float(covered[trusted].mean()) if trusted.any() else None,
            "root_states": int(np.ceil((t + 1) / every)), "steps": t + 1}


def run_cell(domain: str, size: int, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    from gauntlet.agents.calspi.ablations import BaselineAgent, BehaviourCloningAgent
    from gauntlet.agents.calspi.agent import CalSPIAgent, with_certificates, with_variant

    started = time.perf_counter()
    calspi = CalSPIAgent(domain, size, dataset_seed=seed, seed=seed, p=args.p, gamma=args.gamma,
                         model=args.model, search=args.search)
    agents = {"baseline": lambda: BaselineAgent(domain, size, dataset_seed=seed), "calspi": lambda: calspi,
              "no-gate": lambda: with_variant(calspi, "no-gate"), "mopo": lambda: with_variant(calspi, "mopo"),
              "calspi-tight": lambda: with_certificates(calspi, **args.tight),
              "bc": lambda: BehaviourCloningAgent(domain, size, dataset_seed=seed, seed=seed, epochs=args.bc_epochs)}
    start_seed = 10_000 + args.start_stride * seed  # stride 0: every seed starts from the same states
    row: dict[str, Any] = {"domain": domain, "size": size, "seed": seed, "returns": {}, "switch_fraction": {},
                           "episode_returns": {}, "start_seed": start_seed, "search": calspi.search_config(),
                           "model": calspi.model_overrides}
    for method in args.methods:
        agents[method] = agents[method]()  # built only for the methods that run
        mean_return, switched, gaps, episode_returns = evaluate(calspi.task, agents[method], episodes=args.episodes,
                                                                max_steps=args.max_steps, start_seed=start_seed)
        row["episode_returns"][method] = episode_returns
        row["returns"][method] = mean_return
        row["switch_fraction"][method] = switched
        if method == "calspi" and gaps:  # how far the certified bound was from licensing a switch
            row["certified_gap_quantiles"] = dict(zip(("q10", "q50", "q90", "max"),
                                                      np.quantile(gaps, [0.1, 0.5, 0.9, 1.0]).tolist(), strict=True))
    row["certificate"] = calspi.fitted.certificate.as_dict()
    row["coverage"] = certificate_coverage(calspi, draws=args.coverage_draws,
                                           calibration_size=min(calspi.fitted.certificate.n, args.coverage_calibration),
                                           test_size=args.coverage_test, seed=seed)
    if args.search_coverage_steps > 0:
        row["search_coverage"] = search_state_coverage(calspi, max_steps=args.search_coverage_steps,
                                                       every=args.search_coverage_every, seed=seed)
    if calspi.fitted.value is not None:
        row["value_error_bound"] = calspi.fitted.value.error_bound  # delta_V
        row["td_error_bound"] = calspi.fitted.value.td_error_bound  # delta_TD
    row["seconds"] = time.perf_counter() - started
    return row


def gap_diagnostics(domain: str, size: int, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """At real states of a baseline episode (every ``--diagnose-every``-th of ``--diagnose`` steps),
    search with the unpaired rule (LB(a+) vs V^b(s), delta_V in the leaves) and with the paired rule
    (LB(a+) - UB(pi_b(s)) vs delta_TD) from the same rng state, and return both gaps per state,
    gap = LB(a+) - (what it must beat); a switch needs gap > margin (0)."""
    import gymnasium as gym

    from gauntlet.agents.calspi.agent import CalSPIAgent, with_variant

    calspi = CalSPIAgent(domain, size, dataset_seed=seed, seed=seed, p=args.p, gamma=args.gamma,
                         model=args.model, search={**args.search, "switching": "certified"})
    paired = with_variant(calspi, "calspi", {**args.search, "switching": "paired"})
    env = gym.make(f"gauntlet/CalSPI-{domain}-v0", max_episode_steps=args.diagnose)
    observation, _ = env.reset(seed=args.diagnose_seed)  # not an evaluation start state by default
    gaps: dict[str, list[float]] = {"certified": [], "paired": []}
    parts: list[dict[str, float]] = []
    for t in range(args.diagnose):
        if t % args.diagnose_every == 0:
            state = np.asarray(observation, dtype=np.float64)
            old = calspi.planner.search(state, np.random.default_rng([seed, t]))
            new = paired.planner.search(state, np.random.default_rng([seed, t]))
            gaps["certified"].append(old.best_lower_bound - old.baseline_value)
            gaps["paired"].append(new.best_lower_bound - new.baseline_value)
            parts.append({"t": t, "V_b": old.baseline_value, "LB_certified": old.best_lower_bound,
                          "LB_paired": new.best_lower_bound, "UB_baseline": new.baseline_upper_bound,
                          "switched_certified": old.switched, "switched_paired": new.switched})
        observation, _, terminated, truncated, _ = env.step(calspi.task.baseline(observation))
        if terminated or truncated:
            break
    value = calspi.fitted.value

    def quantiles(values: list[float]) -> dict[str, float] | None:
        finite = [v for v in values if np.isfinite(v)]
        return dict(zip(("q10", "q50", "q90", "max"), np.quantile(finite, [0.1, 0.5, 0.9, 1.0]).tolist(),
                        strict=True)) if finite else None

    return {"domain": domain, "size": size, "seed": seed, "delta_V": value.error_bound,
            "delta_TD": value.td_error_bound, "states": len(parts),
            "gap_certified": quantiles(gaps["certified"]), "gap_paired": quantiles(gaps["paired"]),
            "finite_certified": int(np.isfinite(gaps["certified"]).sum()),
            "finite_paired": int(np.isfinite(gaps["paired"]).sum()), "decisions": parts}


def summarise(rows: list[dict[str, Any]], margin_fraction: float) -> list[dict[str, Any]]:
    table = []
    for domain in sorted({r["domain"] for r in rows}):
        for size in sorted({r["size"] for r in rows if r["domain"] == domain}):
            every_seed = [r for r in rows if r["domain"] == domain and r["size"] == size]
            for method in [m for m in METHODS if any(m in r["returns"] for r in every_seed)]:
                # a method run on only some of the cell's seeds is summarised over those seeds, against
                # their baselines ("seeds" says how many)
                cell = [r for r in every_seed if method in r["returns"]]
                baseline = np.array([r["returns"]["baseline"] for r in cell])
                margin = margin_fraction * abs(float(baseline.mean()))
                returns = np.array([r["returns"][method] for r in cell])
                switched = [r["switch_fraction"][method] for r in cell if r["switch_fraction"][method] is not None]
                low, high = t_interval(returns)
                entry = {"domain": domain, "size": size, "method": method, "seeds": len(cell),
                         "mean_return": float(returns.mean()), "ci95": [low, high],
                         "p_worse_than_baseline": float(np.mean(returns < baseline - margin)), "margin": margin,
                         "worst_seed_return": float(returns.min()),
                         "switch_fraction": float(np.mean(switched)) if switched else None}
                episodes = [(r["episode_returns"][method], r["episode_returns"]["baseline"]) for r in cell
                            if "episode_returns" in r and method in r["episode_returns"]]
                if len(episodes) == len(cell):  # paired by start state: the same reset seed for both
                    worse = [int(np.sum(np.array(m) < np.array(b) - margin)) for m, b in episodes]
                    entry["episodes_worse"] = [int(sum(worse)), int(sum(len(m) for m, _ in episodes))]
                if method == "calspi":
                    entry["coverage_holds_fraction"] = float(np.mean(
                        [r["coverage"]["fraction_of_draws_covering_p"] for r in cell]))
                    fitted = [r["coverage"]["coverage_of_fitted_threshold"] for r in cell]
                    entry["fitted_certificate_coverage_min"] = float(np.min(fitted))
                    entry["fitted_certificate_held_fraction"] = float(np.mean(
                        np.array(fitted) >= cell[0]["coverage"]["p"]))
                    searched = [r["search_coverage"] for r in cell if "search_coverage" in r]
                    if searched:  # pooled over seeds: transitions at the states the search visited
                        counts = np.array([c["transitions"] for c in searched])
                        entry["search_coverage_all"] = float(np.sum(counts * [c["coverage_all"] for c in searched])
                                                             / counts.sum())
                        trusted = [(c["trusted_transitions"], c["coverage_trusted"]) for c in searched
                                   if c["coverage_trusted"] is not None]
                        entry["search_coverage_trusted"] = (float(sum(n * c for n, c in trusted)
                                                                  / sum(n for n, _ in trusted)) if trusted else None)
                        entry["search_coverage_transitions"] = int(counts.sum())
                table.append(entry)
    return table


def plot(table: list[dict[str, Any]], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for domain in sorted({e["domain"] for e in table}):
        entries = [e for e in table if e["domain"] == domain]
        sizes = sorted({e["size"] for e in entries})
        figure, axis = plt.subplots(figsize=(6, 3.5))
        methods = [m for m in METHODS if all(any(e["size"] == s and e["method"] == m for e in entries) for s in sizes)]
        width = 0.8 / len(methods)
        for m, method in enumerate(methods):
            rows = [next(e for e in entries if e["size"] == s and e["method"] == method) for s in sizes]
            means = np.array([r["mean_return"] for r in rows])
            errors = np.array([[r["mean_return"] - r["ci95"][0], r["ci95"][1] - r["mean_return"]] for r in rows]).T
            axis.bar(np.arange(len(sizes)) + m * width, means, width, yerr=errors, label=method, capsize=2)
        axis.set_xticks(np.arange(len(sizes)) + 0.4 - width / 2, [f"{s:,}" for s in sizes])
        axis.set_xlabel("dataset size (transitions)")
        axis.set_ylabel("true return (mean, 95% CI over seeds)")
        axis.set_title(f"Cal-SPI-{domain}")
        axis.legend(fontsize=7)
        figure.tight_layout()
        path = out / f"returns-{domain}.png"
        scratch = path.with_name(f".{path.name}.tmp.png")
        figure.savefig(scratch, dpi=110)
        os.replace(scratch, path)
        plt.close(figure)
        paths.append(path)
    return paths


def _write_json(path: Path, data: Any) -> None:
    write_atomically(path, json.dumps(data, indent=1))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domains", nargs="+", default=["InvertedPendulum", "Hopper", "HalfCheetah", "Swimmer"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[2_000, 10_000, 50_000])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--seed-start", type=int, default=0, help="first seed (to split a grid over processes)")
    parser.add_argument("--episodes", type=int, default=2, help="evaluation episodes per seed and method")
    parser.add_argument("--max-steps", type=int, default=1000, help="evaluation episode length")
    parser.add_argument("--start-stride", type=int, default=0,
                        help="seed s evaluates from reset seeds 10_000 + stride * s + k (0: the same start states "
                             "for every seed; e.g. 1000 gives every seed its own start states)")
    parser.add_argument("--model-json", type=json.loads, default={}, metavar="JSON",
                        help='ModelConfig overrides, e.g. \'{"value_members": 5, "value_aware": "local"}\'')
    parser.add_argument("--p", type=float, default=0.95)
    parser.add_argument("--gamma", type=float, default=0.95)
    parser.add_argument("--margin", type=float, default=0.05, help="'worse than baseline' margin, fraction of |return|")
    parser.add_argument("--epochs", type=int, default=20, help="ensemble training epochs")
    parser.add_argument("--bc-epochs", type=int, default=30)
    parser.add_argument("--coverage-draws", type=int, default=10)
    parser.add_argument("--coverage-calibration", type=int, default=500)
    parser.add_argument("--coverage-test", type=int, default=5000)
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=[m for m in METHODS if m != "calspi-tight"],
                        help="methods to evaluate (the baseline is always needed for P(worse))")
    parser.add_argument("--search", type=json.loads, default={}, metavar="JSON",
                        help='search overrides for Cal-SPI and its ablations, e.g. \'{"value_error": 0}\'')
    parser.add_argument("--tight", type=json.loads, metavar="JSON",
                        default={"search": {"state_value_term": "value-aware"}, "value_aware": "local"},
                        help="the calspi-tight method: with_certificates keyword arguments (search options, "
                             "value_members, value_aware, value_local, local_bins)")
    parser.add_argument("--search-coverage-steps", type=int, default=200,
                        help="steps of the extra Cal-SPI episode whose root states are branched (0: skip)")
    parser.add_argument("--search-coverage-every", type=int, default=5)
    parser.add_argument("--diagnose", type=int, default=0, metavar="STEPS",
                        help="instead of the comparison: gap diagnostics (unpaired vs paired root rule) at the real "
                             "states of a STEPS-step baseline episode; writes <out>/gap-diagnostics.json")
    parser.add_argument("--diagnose-every", type=int, default=10)
    parser.add_argument("--diagnose-seed", type=int, default=20_000,
                        help="reset seed of the diagnostic episode (evaluations use 10_000 + k)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: one domain, one size, two seeds")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "calspi")
    parser.add_argument("--markdown", nargs="+", type=Path, metavar="RESULTS_JSON",
                        help="print runs' results.json (or rows.json) as one Markdown table, and run nothing")
    parser.add_argument("--write", action="store_true",
                        help="with --markdown: also write the merged results.json, table.md and figures to --out")
    args = parser.parse_args(argv)
    if args.markdown:
        # results.json of a finished run, or rows.json of one still running (or interrupted).
        loaded = [json.loads(path.read_text()) for path in args.markdown]
        rows, seen = [], set()
        for data in loaded:  # a (domain, size, seed) cell counted once, from the first file that has it
            for row in (data if isinstance(data, list) else data["rows"]):
                if (row["domain"], row["size"], row["seed"]) not in seen:
                    seen.add((row["domain"], row["size"], row["seed"]))
                    rows.append(row)
        table = summarise(rows, args.margin)
        print(markdown_table(table))
        if args.write:  # the merged runs as one results.json, table.md and figures in --out
            args.out.mkdir(parents=True, exist_ok=True)
            _write_json(args.out / "results.json", {"sources": [str(path) for path in args.markdown],
                                                    "table": table, "rows": rows})
            scratch = args.out / ".table.md.tmp"
            scratch.write_text(markdown_table(table) + "\n")
            os.replace(scratch, args.out / "table.md")
            plot(table, args.out)
        return {"table": table}
    if "baseline" not in args.methods or "calspi" not in args.methods:
        parser.error("--methods must include baseline and calspi")
    if not isinstance(args.search, dict):
        parser.error("--search must be a JSON object of SearchConfig fields")
    args.model = {"epochs": args.epochs, **args.model_json}
    if args.smoke:
        args.domains, args.sizes, args.seeds, args.episodes, args.max_steps = ["InvertedPendulum"], [1_000], 2, 1, 20
        args.model = {"members": 3, "elites": 2, "hidden": 32, "layers": 2, "epochs": 3, **args.model_json}
        args.search = {"simulations": 8, "wave_size": 8, "max_depth": 2, "rollout_horizon": 2, **args.search}
        args.bc_epochs, args.coverage_draws, args.coverage_calibration, args.coverage_test = 2, 3, 100, 300
        args.model["value_steps"] = 50
        args.search_coverage_steps, args.search_coverage_every = 10, 5
    args.out.mkdir(parents=True, exist_ok=True)
    if args.diagnose > 0:
        diagnostics = []
        for domain in args.domains:
            for size in args.sizes:
                for seed in range(args.seed_start, args.seed_start + args.seeds):
                    d = gap_diagnostics(domain, size, seed, args)
                    diagnostics.append(d)
                    print(json.dumps({k: v for k, v in d.items() if k != "decisions"}), flush=True)
                    _write_json(args.out / "gap-diagnostics.json", diagnostics)
        return {"diagnostics": diagnostics}
    rows = []
    for domain in args.domains:
        for size in args.sizes:
            for seed in range(args.seed_start, args.seed_start + args.seeds):
                rows.append(run_cell(domain, size, seed, args))
                print(f"{domain} size={size} seed={seed}: " + ", ".join(
                    f"{m} {rows[-1]['returns'][m]:.1f}" for m in args.methods)
                    + f" (calspi switched {rows[-1]['switch_fraction']['calspi']:.1%}, {rows[-1]['seconds']:.0f} s)",
                    flush=True)
                _write_json(args.out / "rows.json", rows)  # progress survives an interrupted run
    table = summarise(rows, args.margin)
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    result = {"config": config, "table": table, "rows": rows}
    _write_json(args.out / "results.json", result)
    figures = plot(table, args.out)
    print_table(table)
    print(f"wrote {args.out / 'results.json'} and {', '.join(str(f) for f in figures)}")
    return result


def markdown_table(table: list[dict[str, Any]]) -> str:
    lines = ["| domain | dataset | method | seeds | mean return [95% CI] | P(worse than baseline) | worst seed "
             "| switched | Wilks draws with coverage >= p | fitted certificate: coverage >= p (min) "
             "| coverage at search-visited states: trusted / all (transitions) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in table:
        switched = "-" if e["switch_fraction"] is None else f"{e['switch_fraction']:.1%}"
        episodes_worse = (f" ({e['episodes_worse'][0]}/{e['episodes_worse'][1]} episodes)"
                          if "episodes_worse" in e else "")
        coverage = f"{e['coverage_holds_fraction']:.2f} |" if "coverage_holds_fraction" in e else " |"
        if "fitted_certificate_held_fraction" in e:
            coverage += f" {e['fitted_certificate_held_fraction']:.2f} ({e['fitted_certificate_coverage_min']:.3f})"
        if "search_coverage_all" in e:
            trusted = "-" if e["search_coverage_trusted"] is None else f"{e['search_coverage_trusted']:.3f}"
            coverage += f" | {trusted} / {e['search_coverage_all']:.3f} ({e['search_coverage_transitions']:,})"
        else:
            coverage += " |"
        lines.append(f"| {e['domain']} | {e['size']:,} | {e['method']} | {e['seeds']} | {e['mean_return']:.1f} "
                     f"[{e['ci95'][0]:.1f}, {e['ci95'][1]:.1f}] | {e['p_worse_than_baseline']:.2f}{episodes_worse} | "
                     f"{e['worst_seed_return']:.1f} | {switched} | {coverage} |")
    return "\n".join(lines)


def print_table(table: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    view = Table(title="Cal-SPI comparison (true return, 95% t-interval over seeds)")
    for column in ("domain", "size", "method", "seeds", "mean return [95% CI]", "P(worse)", "worst seed",
                   "switched", "coverage holds"):
        view.add_column(column)
    for e in table:
        view.add_row(e["domain"], f"{e['size']:,}", e["method"], str(e["seeds"]),
                     f"{e['mean_return']:.1f} [{e['ci95'][0]:.1f}, {e['ci95'][1]:.1f}]",
                     f"{e['p_worse_than_baseline']:.2f}", f"{e['worst_seed_return']:.1f}",
                     "-" if e["switch_fraction"] is None else f"{e['switch_fraction']:.1%}",
                     f"{e['coverage_holds_fraction']:.2f}" if "coverage_holds_fraction" in e else "")
    Console().print(view)


if __name__ == "__main__":
    main()
