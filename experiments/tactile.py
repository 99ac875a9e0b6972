"""Train the learned tactile agent and evaluate it on the test split: accuracy/error by step.

    python experiments/tactile.py [--family TactileMNIST] [--updates 1200] [--num-envs 64]
                                        [--reuse 4] [--eval-episodes 512] [--out runs/tactile]

Trains the perception model (a CNN over the touch map, ``gauntlet.agents.tactile.model``) on the
training split with the coverage-scan exploration policy (``gauntlet.agents.tactile.scan``), then
evaluates the learned agent (scan + model) and the blind random baseline on the test split with
the env's own per-step scores. Writes ``<out>/<family>.json`` (curves, training losses, settings),
``<out>/<family>.png`` (curve by step) and ``<out>/<family>.pt`` (checkpoint). ``--smoke`` runs a
tiny version (used by the tests). ``--check-agent N`` trains nothing: it plays N test episodes of
the registered ``tactile-learned`` agent with ``<out>/<family>.pt`` in the single env (one episode
at a time, through ``gauntlet.rollout``, the saved half-precision weights) and prints its
final-step score, an independent check of the batched evaluation; with ``--random-moves`` it also
evaluates that checkpoint with uniform random moves instead of the scan (the policy's ablation).
``--check-scores N`` evaluates ``<out>/<family>.pt`` against the blind baseline with 95% intervals
(pose tasks: position error in mm and yaw error in degrees apart).

``--adaptive --seed S [--init CHECKPOINT]`` trains the adaptive agent (``agents/tactile/adaptive.py``:
a belief model whose lookahead head chooses the next touch) and compares it with the coverage scan
on the same test episodes, accuracy by touches with 95% intervals; ``--adaptive --checkpoint PATH``
only evaluates a saved adaptive checkpoint. ``--candidates lattice`` has that policy order the
scan's own lattice points by its lookahead (keeping the scan's coverage), ``--classifier PATH`` makes
every policy predict with a scan-trained checkpoint, and ``--seed S`` then picks the set of test
episodes; it also reports the stopping rule (declare the class once the belief is confident enough:
accuracy against touches used, paired against the scan's last touch). ``--adaptive --lattice-report
--classifier PATH`` evaluates nothing: it summarises those lattice runs across the belief checkpoints'
training seeds and the test sets, with each seed's stopping threshold chosen on its training-object
run (``--eval-split train``) before the test files are read.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from gauntlet.fileio import write_atomically

CLASSIFICATION_FAMILIES = {"TactileMNIST", "Starstruck", "Glyphs"}
TEST_SEED, TEST_SEED_STRIDE = 10_000, 100_000  # --adaptive --checkpoint --seed S plays episodes from 10,000 + 100,000 S


def run(family: str, updates: int, num_envs: int, eval_episodes: int, out: Path, seed: int = 0,
        objects_per_split: int | None = None, threads: int = 1, reuse: int = 4, yaw_bins: int = 0) -> dict[str, Any]:
    import torch

    from gauntlet.agents.tactile import training

    # One thread by default: on a few busy cores, torch's thread pool contends with itself and the envs.
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    start = time.perf_counter()
    model, log = training.train(family, updates=updates, num_envs=num_envs, seed=seed,
                                objects_per_split=objects_per_split, reuse=reuse, yaw_bins=yaw_bins,
                                progress=lambda u, loss: print(f"update {u + 1}/{updates}: loss {loss:.3f}", flush=True)
                                if (u + 1) % 10 == 0 or u == 0 else None)
    train_s = time.perf_counter() - start
    eval_envs = min(num_envs, eval_episodes)
    learned = training.evaluate(model, family, "test", episodes=eval_episodes, num_envs=eval_envs,
                                objects_per_split=objects_per_split)
    baseline = training.evaluate(None, family, "test", episodes=eval_episodes, num_envs=eval_envs,
                                 objects_per_split=objects_per_split)
    metric = "accuracy" if family in CLASSIFICATION_FAMILIES else "error"
    import gymnasium as gym

    split = "test" if f"gauntlet/{family}-test-v0" in gym.registry else "all objects, held-out seeds"
    result = {"family": family, "metric": metric, "split": split, "updates": updates, "num_envs": num_envs,
              "reuse": reuse, "yaw_bins": yaw_bins, "episodes_trained": -(-updates // reuse) * num_envs,
              "eval_episodes": (eval_episodes // eval_envs) * eval_envs,
              "objects_per_split": objects_per_split, "seed": seed, "train_seconds": train_s,
              "learned_by_step": learned.tolist(), "random_by_step": baseline.tolist(),
              "final_step": {"learned": float(learned[-1]), "random": float(baseline[-1])},
              "training_loss": log.losses}
    out.mkdir(parents=True, exist_ok=True)
    training.save(model, out / f"{family}.pt", family=family, step_limit=len(learned))
    _write_json(out / f"{family}.json", result)
    _plot(result, out / f"{family}.png")
    print(f"{family}: final-step {split} {metric} learned {learned[-1]:.3f}, random {baseline[-1]:.3f} "
          f"({result['episodes_trained']} training episodes, {train_s:.0f} s); wrote {out}")
    return result


def _curve(values: np.ndarray) -> dict[str, list[float]]:
    """Mean over episodes and its 95% normal-approximation interval, per step, of ``values`` ``(n, T)``."""
    mean = values.mean(axis=0)
    half = 1.96 * values.std(axis=0, ddof=1) / np.sqrt(len(values)) if len(values) > 1 else np.zeros_like(mean)
    return {"mean": mean.tolist(), "low": (mean - half).tolist(), "high": (mean + half).tolist()}


def run_adaptive(family: str, updates: int, num_envs: int, eval_episodes: int, out: Path, seed: int = 0,
                 objects_per_split: int | None = None, threads: int = 1, reuse: int = 4,
                 init: Path | None = None, learning_rate: float = 2e-3, histories: int = 4,
                 policies: tuple[str, ...] = ("scan", "adaptive", "random")) -> dict[str, Any]:
    """Train the adaptive agent's belief model (one seed) and compare its policies on the same test episodes.

    Writes ``<out>/<family>-adaptive-seed<seed>.{json,pt}`` and refreshes the seeds' summary
    ``<out>/<family>-adaptive.{json,png}`` from every seed file in ``out``.
    """
    import torch

    from gauntlet.agents.tactile import belief_training

    torch.set_num_threads(threads)
    start = time.perf_counter()
    model, log = belief_training.train_belief(
        family, updates=updates, num_envs=num_envs, seed=seed, objects_per_split=objects_per_split, reuse=reuse,
        init=init, learning_rate=learning_rate, histories=histories,
        progress=lambda u, c, a: print(f"update {u + 1}/{updates}: classify {c:.3f}, lookahead {a:.3f}", flush=True)
        if (u + 1) % 10 == 0 or u == 0 else None)
    train_s = time.perf_counter() - start
    eval_envs = min(64, eval_episodes)
    played = belief_training.evaluate_policies(model, family, episodes=eval_episodes, num_envs=eval_envs,
                                               objects_per_split=objects_per_split, policies=policies)
    scan, adaptive = played["scan"]["score"], played["adaptive"]["score"]
    scan_final = float(scan[:, -1].mean())
    result = {"family": family, "seed": seed, "updates": updates, "num_envs": num_envs, "reuse": reuse,
              "episodes_trained": -(-updates // reuse) * num_envs, "eval_episodes": len(scan),
              "objects_per_split": objects_per_split, "train_seconds": train_s, "learning_rate": learning_rate,
              "histories": histories, "init": None if init is None else {"path": str(init), "sha256": _sha256(init)},
              "accuracy_by_touches": {name: _curve(value["score"]) for name, value in played.items()},
              "loss_by_touches": {name: _curve(value["loss"]) for name, value in played.items()},
              "region_covered_by_touches": {name: _curve(value["coverage"]) for name, value in played.items()},
              "adaptive_minus_scan": _curve(adaptive - scan),
              "scan_final": scan_final, "adaptive_final": float(adaptive[:, -1].mean()),
              "touches_for_scan_final": _touches_to_reach(adaptive, scan_final),
              "training_loss": log}
    out.mkdir(parents=True, exist_ok=True)
    belief_training.save_belief(model, out / f"{family}-adaptive-seed{seed}.pt", family=family,
                                step_limit=scan.shape[1], seed=seed)
    _write_json(out / f"{family}-adaptive-seed{seed}.json", result)
    summary = summarise_adaptive(family, out)
    difference = result["adaptive_minus_scan"]
    print(f"{family} seed {seed} ({result['episodes_trained']} training episodes, {train_s:.0f} s), "
          f"{len(scan)} test episodes, accuracy by touches (same episodes):")
    print("touches  " + "  ".join(f"{t:>5d}" for t in range(1, scan.shape[1] + 1)))
    for name in played:
        print(f"{name:8s} " + "  ".join(f"{v:5.3f}" for v in result["accuracy_by_touches"][name]["mean"]))
    print("adapt-scan " + " ".join(f"{m:+.3f}[{lo:+.3f},{hi:+.3f}]" for m, lo, hi in
                                   zip(difference["mean"], difference["low"], difference["high"]))[:2000])
    print(f"adaptive reaches the scan's final accuracy ({scan_final:.3f} at {scan.shape[1]} touches) at "
          f"{result['touches_for_scan_final']} touches; seeds so far: {summary['seeds']}")
    return result


def _touches_to_reach(scores: np.ndarray, target: float) -> int | None:
    """The fewest touches at which the mean of ``scores`` ``(episodes, T)`` reaches ``target`` (None: never)."""
    reached = [t + 1 for t in range(scores.shape[1]) if scores[:, t].mean() >= target]
    return reached[0] if reached else None


# belief confidence at which the agent declares its class; above 1: never, it uses every touch
STOP_THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.925, 0.95, 0.97, 0.98, 0.99, 0.995, 0.999, 1.01)


def stopping_rule(scores: np.ndarray, confidence: np.ndarray, thresholds: tuple[float, ...] = STOP_THRESHOLDS,
                  scan_final: np.ndarray | None = None) -> list[dict[str, Any]]:
    """Accuracy against touches used when the agent declares its class as soon as its belief's highest
    probability reaches a threshold (else after the last touch): per threshold, the mean touches used
    and the accuracy of the declared classes with its 95% interval. ``scores``, ``confidence``:
    ``(episodes, T)`` (the env's per-step score and the belief's confidence after touches 0..t);
    ``scan_final`` ``(episodes,)``: the scan's last-touch score on the same episodes, which adds the
    paired difference ``minus_scan_final`` (declared minus scan, 95% interval)."""
    rows = []
    length = scores.shape[1]
    for threshold in thresholds:
        sure = confidence >= threshold
        stop = np.where(sure.any(axis=1), sure.argmax(axis=1), length - 1)
        declared = scores[np.arange(len(scores)), stop]
        row = {"threshold": threshold, "touches": float((stop + 1).mean()), "accuracy": _interval(declared)}
        if scan_final is not None:
            row["minus_scan_final"] = _interval(declared - scan_final)
        rows.append(row)
    return rows


def choose_threshold(rows: list[dict[str, Any]], target: float) -> float:
    """The stopping protocol's threshold, chosen on training objects: the smallest threshold of ``rows``
    (``stopping_rule`` on training episodes) whose declared accuracy reaches ``target`` (the scan's
    last-touch accuracy on the same episodes); if none does, the largest (1.01: never stop early)."""
    reaching = [row["threshold"] for row in rows if row["accuracy"][0] >= target]
    return min(reaching) if reaching else max(row["threshold"] for row in rows)


def evaluate_adaptive(family: str, checkpoint: Path, eval_episodes: int, out: Path, reach: str,
                      policies: tuple[str, ...] = ("scan", "adaptive"), min_new_area: float | None = None,
                      candidates: str = "grid", classifier: Path | None = None, seed: int = 0,
                      objects_per_split: int | None = None, split: str = "test", over_weight: float | None = None
                      ) -> dict[str, Any]:
    """Evaluate a saved adaptive checkpoint only; ``reach='any'`` lets the policy pick any workspace point
    (it heads there, touching on the way) instead of the points one move reaches. Writes
    ``<out>/<checkpoint stem>-reach-<reach>[-new-<min_new_area>].json``.

    ``candidates='lattice'``: the adaptive policy orders the scan's lattice points by its lookahead
    (``adaptive.AdaptivePolicy``); ``classifier``: every policy predicts with this scan-trained
    checkpoint (the lookahead stays the adaptive checkpoint's); ``seed`` picks the set of test episodes
    (seed 0: the episodes of the training runs' evaluation). Writes
    ``<out>/<checkpoint stem>-lattice[-with-<classifier stem>]-test<seed>.json`` and the summary of
    every test seed there, ``<out>/<checkpoint stem>-lattice[-with-<classifier stem>].{json,png}``;
    ``split='train'`` plays training objects instead (``...-train<seed>.json``, no summary), to choose
    settings such as the stopping threshold without looking at the test split. ``over_weight``: the
    lattice rule's soft coverage constraint instead of the hard one (``adaptive.AdaptivePolicy``;
    ``...-over-<w>-...`` in the file names).
    """
    import torch

    from gauntlet.agents.tactile import belief_training
    from gauntlet.agents.tactile.adaptive import LATTICE_UNFELT, MIN_NEW_AREA, TRAVEL_WEIGHT, ClassifierWithLookahead
    from gauntlet.agents.tactile.training import load
    from gauntlet.envs.tactile.simulation import MAX_STEP_M

    torch.set_num_threads(1)
    belief = belief_training.load_belief(checkpoint)[0]
    model = belief if classifier is None else ClassifierWithLookahead(belief, load(classifier)[0])
    played = belief_training.evaluate_policies(model, family, episodes=eval_episodes, num_envs=min(64, eval_episodes),
                                               seed=TEST_SEED + TEST_SEED_STRIDE * seed,
                                               objects_per_split=objects_per_split, split=split,
                                               policies=policies, reach_m=None if reach == "any" else MAX_STEP_M,
                                               min_new_area=MIN_NEW_AREA if min_new_area is None else min_new_area,
                                               lattice=candidates == "lattice", over_weight=over_weight)
    if candidates == "lattice":
        stem = (f"{checkpoint.stem}-lattice" + ("" if over_weight is None else f"-over-{over_weight:g}")
                + ("" if classifier is None else f"-with-{classifier.stem}"))
        name = f"{stem}-{split}{seed}"
    else:
        name = f"{checkpoint.stem}-reach-{reach}" + ("" if min_new_area is None else f"-new-{min_new_area:g}")
    scan, adaptive = played["scan"]["score"], played["adaptive"]["score"]
    result = {"family": family, "checkpoint": str(checkpoint), "sha256": _sha256(checkpoint), "reach": reach,
              "min_new_area": MIN_NEW_AREA if min_new_area is None else min_new_area, "candidates": candidates,
              "lattice_rule": {"travel_weight": TRAVEL_WEIGHT, "over_weight": over_weight, "unfelt": LATTICE_UNFELT},
              "classifier": None if classifier is None else {"path": str(classifier), "sha256": _sha256(classifier)},
              "split": split, "seed": seed, "episode_seeds_from": TEST_SEED + TEST_SEED_STRIDE * seed,
              "eval_episodes": len(scan),
              "accuracy_by_touches": {name: _curve(value["score"]) for name, value in played.items()},
              "region_covered_by_touches": {name: _curve(value["coverage"]) for name, value in played.items()},
              "adaptive_minus_scan": _curve(adaptive - scan),
              "scan_final": float(scan[:, -1].mean()), "adaptive_final": float(adaptive[:, -1].mean()),
              "touches_for_scan_final": _touches_to_reach(adaptive, float(scan[:, -1].mean())),
              "scan_touches_for_own_final": _touches_to_reach(scan, float(scan[:, -1].mean())),
              "stopping_rule": {name: stopping_rule(value["score"], value["confidence"], scan_final=scan[:, -1])
                                for name, value in played.items()}}
    out.mkdir(parents=True, exist_ok=True)
    _write_json(out / f"{name}.json", result)
    if candidates == "lattice" and split == "test":
        summarise_adaptive(family, out, runs_glob=f"{stem}-test*.json", summary_stem=stem)
    touches = len(result["adaptive_minus_scan"]["mean"])
    print(f"{family}, {checkpoint}, adaptive reach {reach}, candidates {candidates}, "
          f"{result['eval_episodes']} {split} episodes from seed {result['episode_seeds_from']} (same episodes):")
    print("touches          " + "  ".join(f"{t:>5d}" for t in range(1, touches + 1)))
    for name in played:
        print(f"{name:8s} accuracy " + "  ".join(f"{v:5.3f}" for v in result["accuracy_by_touches"][name]["mean"]))
        print(f"{name:8s} covered  " + "  ".join(f"{v:5.3f}" for v in
                                                 result["region_covered_by_touches"][name]["mean"]))
    print(f"adaptive reaches the scan's final accuracy ({result['scan_final']:.3f} at {touches} touches) at "
          f"{result['touches_for_scan_final']} touches")
    for name, rows in result["stopping_rule"].items():
        print(f"{name:8s} stop when confident: " + "  ".join(
            f"p>={row['threshold']:g}: {row['touches']:.1f} touches, {row['accuracy'][0]:.3f}" for row in rows))
    return result


REPORT_TOUCHES = (1, 2, 3, 4, 6, 8, 10, 11, 12, 14, 15, 16)  # the touch counts the lattice report tabulates


def _at_touches(curve: dict[str, list[float]]) -> list[list[float]]:
    return [[curve[key][t - 1] for key in ("mean", "low", "high")] for t in REPORT_TOUCHES]


def _stop_row(rows: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
    return next(row for row in rows if row["threshold"] == threshold)


def lattice_seeds_report(family: str, out: Path, classifier: str) -> dict[str, Any]:
    """The lattice rule across the belief checkpoints' training seeds and the test sets, with the
    stopping threshold chosen on training objects.

    Reads ``<out>/<family>-adaptive-seed<k>-lattice-with-<classifier>-{train0,test<S>}.json``
    (``evaluate_adaptive``; one ``train0`` file per seed ``k``, which fixes that seed's threshold by
    ``choose_threshold`` before any test file is read), and writes
    ``<out>/<family>-adaptive-lattice-with-<classifier>-seeds.json``: per seed and test set the paired
    difference at ``REPORT_TOUCHES``, ``touches_for_scan_final`` and the stopping rule at the frozen
    threshold for the adaptive policy, for the scan at the same threshold and for the scan at its own
    threshold (chosen by the same protocol on the scan's training rows); the mean over seeds per test set.
    """
    pattern = re.compile(rf"{re.escape(family)}-adaptive-seed(\d+)-lattice-with-{re.escape(classifier)}"
                         r"-(train|test)(\d+)\.json")
    files: dict[int, dict[str, dict[str, Any]]] = {}
    for path in sorted(out.iterdir()):
        match = pattern.fullmatch(path.name)
        if match:
            files.setdefault(int(match[1]), {})[f"{match[2]}{match[3]}"] = json.loads(path.read_text())
    seeds = sorted(k for k, runs in files.items() if any(name.startswith("test") for name in runs))
    missing = [k for k in seeds if "train0" not in files[k]]
    if not seeds or missing:
        raise ValueError(f"no lattice runs with classifier {classifier} in {out}" if not seeds else
                         f"seed(s) {missing} have no -train0.json: run --candidates lattice --eval-split train "
                         "--seed 0 with their checkpoints first")
    report: dict[str, Any] = {
        "family": family, "classifier": classifier, "touches": list(REPORT_TOUCHES),
        "protocol": "per belief seed, the smallest threshold of the grid whose declared accuracy on the "
                    "training-object episodes (train0) reaches the scan's 16-touch accuracy on the same "
                    "episodes (none: 1.01, never stop early); the scan's own threshold by the same rule on its "
                    "training rows; second rule (threshold_keep): the smallest threshold whose declared accuracy "
                    "on train0 reaches the policy's own 16-touch accuracy there (stopping costs nothing); "
                    "frozen, then read on the test sets",
        "seeds": {}, "mean_over_seeds": {}}
    for k in seeds:
        train = files[k]["train0"]
        threshold = choose_threshold(train["stopping_rule"]["adaptive"], train["scan_final"])
        scan_threshold = choose_threshold(train["stopping_rule"]["scan"], train["scan_final"])
        threshold_keep = choose_threshold(train["stopping_rule"]["adaptive"], train["adaptive_final"])
        entry: dict[str, Any] = {
            "threshold": threshold, "scan_threshold": scan_threshold, "threshold_keep": threshold_keep,
            "train0": {"scan_final": train["scan_final"], "adaptive_final": train["adaptive_final"],
                       "adaptive_stop": _stop_row(train["stopping_rule"]["adaptive"], threshold),
                       "adaptive_stop_keep": _stop_row(train["stopping_rule"]["adaptive"], threshold_keep),
                       "scan_stop": _stop_row(train["stopping_rule"]["scan"], scan_threshold)},
            "tests": {}}
        for name in sorted(name for name in files[k] if name.startswith("test")):
            run = files[k][name]
            stops = run["stopping_rule"]
            entry["tests"][name] = {
                "eval_episodes": run["eval_episodes"], "checkpoint_sha256": run["sha256"],
                "scan": [run["accuracy_by_touches"]["scan"]["mean"][t - 1] for t in REPORT_TOUCHES],
                "adaptive": [run["accuracy_by_touches"]["adaptive"]["mean"][t - 1] for t in REPORT_TOUCHES],
                "adaptive_minus_scan": _at_touches(run["adaptive_minus_scan"]),
                "scan_final": run["scan_final"], "adaptive_final": run["adaptive_final"],
                "touches_for_scan_final": run["touches_for_scan_final"],
                "adaptive_stop": _stop_row(stops["adaptive"], threshold),
                "adaptive_stop_keep": _stop_row(stops["adaptive"], threshold_keep),
                "adaptive_stop_scan_threshold": _stop_row(stops["adaptive"], scan_threshold),
                "scan_stop_same_threshold": _stop_row(stops["scan"], threshold),
                "scan_stop_own_threshold": _stop_row(stops["scan"], scan_threshold)}
        report["seeds"][k] = entry
    for name in sorted({name for entry in report["seeds"].values() for name in entry["tests"]}):
        runs = [entry["tests"][name] for entry in report["seeds"].values() if name in entry["tests"]]
        report["mean_over_seeds"][name] = {
            "seeds": [k for k, entry in report["seeds"].items() if name in entry["tests"]],
            "scan": np.mean([run["scan"] for run in runs], axis=0).tolist(),
            "adaptive": np.mean([run["adaptive"] for run in runs], axis=0).tolist(),
            **{f"{stop}_{what}": float(np.mean([run[stop][key] if what == "touches" else run[stop][key][0]
                                                for run in runs]))
               for stop in ("adaptive_stop", "adaptive_stop_keep", "adaptive_stop_scan_threshold",
                            "scan_stop_same_threshold", "scan_stop_own_threshold")
               for what, key in (("touches", "touches"), ("accuracy", "accuracy"))}}
    _write_json(out / f"{family}-adaptive-lattice-with-{classifier}-seeds.json", report)
    _print_lattice_report(report)
    return report


def _print_lattice_report(report: dict[str, Any]) -> None:
    def cell(interval: list[float]) -> str:
        return f"{interval[0]:+.3f}[{interval[1]:+.3f},{interval[2]:+.3f}]"

    print(f"{report['family']}: lattice rule by belief seed and test set (classifier {report['classifier']})")
    print("touches                  " + "  ".join(f"{t:>5d}" for t in report["touches"]))
    for name, mean in report["mean_over_seeds"].items():
        for policy in ("scan", "adaptive"):
            print(f"{name} {policy:8s} mean of {len(mean['seeds'])}  " + "  ".join(f"{v:5.3f}" for v in mean[policy]))
    for k, entry in report["seeds"].items():
        for name, run in entry["tests"].items():
            print(f"seed {k} {name} adaptive-scan: " + " ".join(cell(c) for c in run["adaptive_minus_scan"]))
    print(f"stopping protocol: {report['protocol']}")
    for k, entry in report["seeds"].items():
        train = entry["train0"]
        print(f"seed {k}: threshold {entry['threshold']:g} (train0: {train['adaptive_stop']['touches']:.2f} touches, "
              f"{train['adaptive_stop']['accuracy'][0]:.3f} against the scan's {train['scan_final']:.3f} at 16); "
              f"scan's own threshold {entry['scan_threshold']:g}; second rule: threshold {entry['threshold_keep']:g} "
              f"(train0: {train['adaptive_stop_keep']['touches']:.2f} touches, "
              f"{train['adaptive_stop_keep']['accuracy'][0]:.3f}; its own at 16: {train['adaptive_final']:.3f})")
        for name, run in entry["tests"].items():
            parts = []
            for label, stop in (("adaptive", run["adaptive_stop"]), ("scan same p", run["scan_stop_same_threshold"]),
                                ("scan own p", run["scan_stop_own_threshold"]),
                                ("adaptive second rule", run["adaptive_stop_keep"]),
                                ("adaptive at the scan's p", run["adaptive_stop_scan_threshold"])):
                paired = f", minus scan@16 {cell(stop['minus_scan_final'])}" if "minus_scan_final" in stop else ""
                parts.append(f"{label} {stop['touches']:.2f} touches, {stop['accuracy'][0]:.3f} "
                             f"[{stop['accuracy'][1]:.3f},{stop['accuracy'][2]:.3f}]{paired}")
            print(f"  {name}: scan@16 {run['scan_final']:.3f}; touches_for_scan_final "
                  f"{run['touches_for_scan_final']}; " + "; ".join(parts))


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def summarise_adaptive(family: str, out: Path, runs_glob: str | None = None, summary_stem: str | None = None
                       ) -> dict[str, Any]:
    """Across the seed files in ``out`` (``runs_glob``, default the training seeds' files): final and
    per-step accuracies of each policy, per seed and mean; written to ``<out>/<summary_stem>.{json,png}``."""
    runs_glob = runs_glob or f"{family}-adaptive-seed*.json"
    runs = [json.loads(path.read_text()) for path in sorted(out.glob(runs_glob))]
    if not runs:
        raise ValueError(f"no {runs_glob} in {out}; run with --adaptive first")
    policies = list(runs[0]["accuracy_by_touches"])
    by_seed = {name: np.array([run["accuracy_by_touches"][name]["mean"] for run in runs]) for name in policies}
    summary = {"family": family, "seeds": [run["seed"] for run in runs],
               "eval_episodes": [run["eval_episodes"] for run in runs],
               "episodes_trained": [run.get("episodes_trained") for run in runs],
               "train_seconds": [run.get("train_seconds") for run in runs],
               "mean_over_seeds": {name: value.mean(axis=0).tolist() for name, value in by_seed.items()},
               "seed_min": {name: value.min(axis=0).tolist() for name, value in by_seed.items()},
               "seed_max": {name: value.max(axis=0).tolist() for name, value in by_seed.items()},
               "final_by_seed": {name: value[:, -1].tolist() for name, value in by_seed.items()},
               "touches_for_scan_final_by_seed": [run["touches_for_scan_final"] for run in runs],
               "candidates": runs[0].get("candidates", "grid")}
    summary_stem = summary_stem or f"{family}-adaptive"
    _write_json(out / f"{summary_stem}.json", summary)
    _plot_adaptive(summary, runs, out / f"{summary_stem}.png")
    return summary


def _plot_adaptive(summary: dict[str, Any], runs: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    labels = {"scan": "coverage scan", "random": "random moves",
              "adaptive": "adaptive: scan lattice in lookahead order" if summary["candidates"] == "lattice"
              else "adaptive (lookahead on the belief)"}
    first = runs[0]["accuracy_by_touches"]
    touches = np.arange(1, len(first["scan"]["mean"]) + 1)
    for name, curve in first.items():
        axes[0].plot(touches, curve["mean"], marker=".", label=labels.get(name, name))
        axes[0].fill_between(touches, curve["low"], curve["high"], alpha=0.25)
    what = "test set" if summary["candidates"] == "lattice" else "seed"  # lattice runs: one model, seeds pick episodes
    axes[0].set_title(f"{what} {runs[0]['seed']}: {runs[0]['eval_episodes']} test episodes, 95% CI")
    for name in summary["mean_over_seeds"]:
        axes[1].plot(touches, summary["mean_over_seeds"][name], marker=".", label=labels.get(name, name))
        axes[1].fill_between(touches, summary["seed_min"][name], summary["seed_max"][name], alpha=0.25)
    axes[1].set_title(f"mean of {what}s {summary['seeds']} (band: min-max)")
    for axis in axes:
        axis.set_xlabel("touches")
        axis.set_ylabel(f"{summary['family']} test accuracy")
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    scratch = path.with_suffix(".tmp.png")
    figure.savefig(scratch, dpi=110)
    plt.close(figure)
    os.replace(scratch, path)


def check_agent(family: str, checkpoint: Path, episodes: int, seed: int = 20_000,
                objects_per_split: int | None = None) -> float:
    """Mean final-step score (accuracy or error) of ``tactile-learned`` over single-env test episodes."""
    import gymnasium as gym
    import torch

    import gauntlet
    from gauntlet.runner import rollout

    torch.set_num_threads(1)
    env_id = f"gauntlet/{family}-test-v0"
    if env_id not in gym.registry:
        env_id = f"gauntlet/{family}-v0"
    env = gym.make(env_id, objects_per_split=objects_per_split)
    agent = gauntlet.make_agent("tactile-learned", checkpoint=str(checkpoint))
    key = "final_accuracy" if family in CLASSIFICATION_FAMILIES else "final_error"
    scores = [rollout(env, agent, seed=seed + i).steps[-1].info["stats"][key] for i in range(episodes)]
    score = float(np.mean(scores))
    print(f"{family}: tactile-learned ({checkpoint}) on {env_id}, {episodes} single-env episodes: "
          f"final-step {key.removeprefix('final_')} {score:.3f}")
    return score


def check_random_moves(family: str, checkpoint: Path, episodes: int, objects_per_split: int | None = None) -> float:
    """Final-step score of the checkpoint's model when the sensor moves at random (batched evaluation)."""
    import torch

    from gauntlet.agents.tactile import training

    torch.set_num_threads(1)
    model, _ = training.load(checkpoint)
    num_envs = min(64, episodes)
    curve = training.evaluate(model, family, "test", episodes=episodes, num_envs=num_envs,
                              objects_per_split=objects_per_split, random_moves=True)
    metric = "accuracy" if family in CLASSIFICATION_FAMILIES else "error"
    print(f"{family}: the same model with random moves, {(episodes // num_envs) * num_envs} test episodes: "
          f"final-step {metric} {curve[-1]:.3f}")
    return float(curve[-1])


POSE_FAMILIES = {"GlyphPose", "Toolbox"}
POSE_YAW_BINS = 36  # pose models predict the yaw over 36 arcs of 10 degrees (docs/results/tactile.md, "Pose tasks")


SYMMETRY_IOU = 0.9  # an object turned a quarter or half turn that overlaps itself this much looks the same


def footprint_symmetries(fields: np.ndarray, threshold: float = SYMMETRY_IOU) -> list[tuple[float, ...]]:
    """Per object, the turns (rad, of a quarter, a half and three quarters) under which its footprint
    overlaps itself with an intersection over union of at least ``threshold``: a yaw off by one of them
    is a yaw the touches cannot tell apart. The footprint is the field above zero, turned about the
    field's centre (where the glyphs are centred)."""
    symmetries = []
    for field in fields:
        footprint = np.asarray(field) > 0
        found = []
        for quarters in (1, 2, 3):
            turned = np.rot90(footprint, quarters)
            union = np.logical_or(footprint, turned).sum()
            if union and np.logical_and(footprint, turned).sum() / union >= threshold:
                found.append(quarters * np.pi / 2)
        symmetries.append(tuple(found))
    return symmetries


def yaw_errors_deg(predicted_rad: np.ndarray, true_rad: np.ndarray) -> np.ndarray:
    """The angle between two headings, 0 to 180 degrees."""
    return np.degrees(np.abs((predicted_rad - true_rad + np.pi) % (2 * np.pi) - np.pi))


def episode_scores(family: str, predictions: np.ndarray, targets: np.ndarray,
                   symmetries: list[tuple[float, ...]] | None = None) -> dict[str, np.ndarray]:
    """Per-episode final-step scores: accuracy (classification); position error (mm) and yaw error (degrees)
    apart (pose tasks, as the reference reports them); Euclidean error (other regression).

    Pose tasks also get the yaw axis error: the heading's error with a half turn forgiven (0 to 90 degrees,
    45 for a uniform guess), which a model that finds the object's long axis but not its direction gets right.
    ``symmetries`` (pose tasks: each episode's object's turns, ``footprint_symmetries``) adds the yaw error
    up to symmetry: the least error over the true yaw and the true yaw turned by each of them."""
    from gauntlet.envs.tactile.tasks import CELL_HALF_M

    if family == "Glyphs":  # class = face * 62 + character: also score the character, the faces' probabilities summed
        from gauntlet.envs.tactile.glyphs import CHARACTERS, FACES

        logits = predictions - predictions.max(axis=1, keepdims=True)
        by_face = np.exp(logits).reshape(len(predictions), len(FACES), len(CHARACTERS))
        character = by_face.sum(axis=1).argmax(axis=1)
        return {"accuracy": (predictions.argmax(axis=1) == targets).astype(np.float64),
                "character_accuracy": (character == targets % len(CHARACTERS)).astype(np.float64)}
    if family in CLASSIFICATION_FAMILIES:
        return {"accuracy": (predictions.argmax(axis=1) == targets).astype(np.float64)}
    if family in POSE_FAMILIES:
        position_mm = np.hypot(*(predictions[:, :2] - targets[:, :2]).T) * CELL_HALF_M * 1000
        predicted, true = np.arctan2(predictions[:, 3], predictions[:, 2]), np.arctan2(targets[:, 3], targets[:, 2])
        yaw = yaw_errors_deg(predicted, true)
        # the axis alone: a heading and its reverse count as one (0 to 90 degrees)
        scores = {"position_error_mm": position_mm, "yaw_error_deg": yaw,
                  "yaw_axis_error_deg": np.minimum(yaw, 180 - yaw)}
        if symmetries is not None:
            scores["yaw_error_up_to_symmetry_deg"] = np.array([
                min(yaw_errors_deg(np.array(p), np.array([t, *(t + turn for turn in turns)]))) for p, t, turns
                in zip(predicted, true, symmetries, strict=True)])
        return scores
    return {"error": np.linalg.norm(predictions - targets, axis=1)}


def check_scores(family: str, checkpoint: Path, episodes: int, out: Path) -> dict[str, Any]:
    """The checkpoint's final-step scores against the blind baseline on the same episodes, with 95% intervals.

    Writes ``<out>/<family>-scores.json``.
    """
    import torch

    from gauntlet.agents.tactile import training

    torch.set_num_threads(1)
    model, _ = training.load(checkpoint)
    num_envs = min(64, episodes)
    learned_predictions, targets, objects = training.final_predictions(model, family, episodes=episodes,
                                                                       num_envs=num_envs)
    blind_predictions, blind_targets, _ = training.final_predictions(None, family, episodes=episodes, num_envs=num_envs)
    symmetries = None
    if family in POSE_FAMILIES:
        from gauntlet.envs.tactile.tasks import make_task

        object_turns = footprint_symmetries(make_task(family).objects.fields)
        symmetries = [object_turns[i] for i in objects]
    learned = episode_scores(family, learned_predictions, targets, symmetries)
    blind = episode_scores(family, blind_predictions, blind_targets, symmetries)
    count = len(next(iter(learned.values())))
    result: dict[str, Any] = {"family": family, "checkpoint": str(checkpoint), "episodes": count}
    for name in learned:
        difference = learned[name] - blind[name]
        result[name] = {"learned": _interval(learned[name]), "blind": _interval(blind[name]),
                        "learned_minus_blind": _interval(difference)}
        print(f"{family}: final-step {name} over {result['episodes']} episodes (95% CI): learned "
              f"{_fmt(result[name]['learned'])}, blind {_fmt(result[name]['blind'])}, difference "
              f"{_fmt(result[name]['learned_minus_blind'])}")
    if family == "Glyphs":
        print("Glyphs: chance accuracy 1/248 = 0.004; character accuracy (face ignored) 1/62 = 0.016")
    if symmetries is not None:
        result["symmetric_objects"] = {"quarter_turn": int(sum(np.pi / 2 in turns for turns in symmetries)),
                                       "half_turn": int(sum(np.pi in turns for turns in symmetries)),
                                       "iou_threshold": SYMMETRY_IOU}
        print(f"{family}: of {count} episodes, {result['symmetric_objects']['half_turn']} have an object that looks "
              f"the same after a half turn, {result['symmetric_objects']['quarter_turn']} after a quarter turn "
              f"(footprint IoU >= {SYMMETRY_IOU})")
    _write_json(out / f"{family}-scores.json", result)
    return result


def _interval(values: np.ndarray) -> list[float]:
    """Mean and its 95% normal-approximation interval (one value: no interval)."""
    if len(values) < 2:
        return [float(values.mean())] * 3
    mean, half = float(values.mean()), float(1.96 * values.std(ddof=1) / np.sqrt(len(values)))
    return [mean, mean - half, mean + half]


def _fmt(interval: list[float]) -> str:
    return f"{interval[0]:.3f} [{interval[1]:.3f}, {interval[2]:.3f}]"


def _write_json(path: Path, data: dict[str, Any]) -> None:
    write_atomically(path, json.dumps(data, indent=1))


def _plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.arange(1, len(result["learned_by_step"]) + 1)
    figure, axis = plt.subplots(figsize=(5, 3.2))
    axis.plot(steps, result["learned_by_step"], marker="o", label="learned (coverage scan + touch-map CNN)")
    axis.plot(steps, result["random_by_step"], marker=".", label="random baseline")
    axis.set_xlabel("step")
    axis.set_ylabel(f"test {result['metric']}")
    axis.set_title(f"{result['family']}-v0 ({result['split']})")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    scratch = path.with_suffix(".tmp.png")
    figure.savefig(scratch, dpi=120)
    plt.close(figure)
    os.replace(scratch, path)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="TactileMNIST",
                        choices=["TactileMNIST", "TactileMNISTCenterOfMass", "TactileMNISTVolume", "Starstruck",
                                 "Glyphs", "GlyphPose", "Toolbox", "ShapesCenterOfMass", "ShapesVolume"])
    parser.add_argument("--updates", type=int, default=1200)
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--reuse", type=int, default=4, help="gradient steps per collected batch of episodes")
    parser.add_argument("--eval-episodes", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--yaw-bins", type=int, default=None, metavar="K",
                        help="pose families (GlyphPose, Toolbox): predict the yaw as a distribution over K equal "
                             f"arcs (K >= 8; default {POSE_YAW_BINS}); 0 regresses (cos, sin) instead")
    parser.add_argument("--out", type=Path, default=Path("runs/tactile"))
    parser.add_argument("--smoke", action="store_true", help="a tiny run on 20 objects per split")
    parser.add_argument("--check-agent", type=int, metavar="N", default=0,
                        help="only play N single-env test episodes of tactile-learned with <out>/<family>.pt")
    parser.add_argument("--random-moves", action="store_true",
                        help="with --check-agent: also evaluate the checkpoint with random moves (batched)")
    parser.add_argument("--adaptive", action="store_true",
                        help="train the adaptive agent (belief model + lookahead policy) for --seed and compare it "
                             "with the coverage scan on the same test episodes (classification families)")
    parser.add_argument("--init", type=Path, default=None,
                        help="with --adaptive: start the belief model's classifier from this scan-trained checkpoint")
    parser.add_argument("--learning-rate", type=float, default=2e-3, help="with --adaptive: peak learning rate")
    parser.add_argument("--policies", default="scan,adaptive,random",
                        help="with --adaptive: the policies evaluated on the same test episodes (scan and adaptive "
                             "are needed)")
    parser.add_argument("--checkpoint", type=Path, default=None,
                        help="with --adaptive: train nothing, evaluate this adaptive checkpoint")
    parser.add_argument("--reach", choices=["move", "any"], default="move",
                        help="with --adaptive --checkpoint: candidate touches within one move, or anywhere")
    parser.add_argument("--min-new-area", type=float, default=None,
                        help="with --adaptive --checkpoint: share of new area a touch must add (default 0.3)")
    parser.add_argument("--candidates", choices=["grid", "lattice"], default="grid",
                        help="with --adaptive --checkpoint: the adaptive policy's candidate touches: a 5 mm grid "
                             "within reach, or the scan's lattice points in the order of the lookahead")
    parser.add_argument("--classifier", type=Path, default=None,
                        help="with --adaptive --checkpoint: every policy predicts with this scan-trained checkpoint "
                             "(e.g. experiments/results/tactile/TactileMNIST.pt); the lookahead stays the "
                             "adaptive checkpoint's")
    parser.add_argument("--eval-split", choices=["test", "train"], default="test",
                        help="with --adaptive --checkpoint --candidates lattice: play test objects, or training "
                             "objects (to choose settings without looking at the test split)")
    parser.add_argument("--over-weight", type=float, default=None,
                        help="with --candidates lattice: weigh the moves over budget into the cost instead of "
                             "keeping the lattice coverage as a hard constraint (0: the plain lookahead order)")
    parser.add_argument("--lattice-report", action="store_true",
                        help="with --adaptive --classifier PATH: evaluate nothing, summarise the lattice runs in "
                             "--out across belief seeds and test sets, with the stopping threshold chosen on each "
                             "seed's training-object run (-train0)")
    parser.add_argument("--histories", type=int, default=4, help="with --adaptive: histories per episode per step")
    parser.add_argument("--check-scores", type=int, metavar="N", default=0,
                        help="only evaluate <out>/<family>.pt against the blind baseline on N test episodes, with "
                             "95%% intervals (pose tasks: position error in mm and yaw error in degrees apart)")
    args = parser.parse_args(argv)
    if args.yaw_bins is None:
        args.yaw_bins = POSE_YAW_BINS if args.family in POSE_FAMILIES else 0
    if args.yaw_bins and args.family not in POSE_FAMILIES:
        parser.exit(2, f"error: --yaw-bins is for the pose families (GlyphPose, Toolbox), not {args.family}\n")
    if args.yaw_bins < 0 or 0 < args.yaw_bins < 8:
        parser.exit(2, f"error: --yaw-bins {args.yaw_bins}: give 8 or more bins (e.g. 36, 10 degrees each), "
                       "or 0 to regress (cos, sin)\n")
    if args.check_scores:
        checkpoint = args.out / f"{args.family}.pt"
        if not checkpoint.is_file():
            parser.exit(2, f"error: no checkpoint {checkpoint}; train one first (without --check-scores)\n")
        return check_scores(args.family, checkpoint, args.check_scores, args.out)
    if args.adaptive and args.lattice_report:
        if args.classifier is None:
            parser.exit(2, "error: --lattice-report needs --classifier PATH (the stem names the files to read)\n")
        try:
            return lattice_seeds_report(args.family, args.out, args.classifier.stem)
        except ValueError as error:
            parser.exit(2, f"error: {error}\n")
    if args.adaptive:
        if args.family not in ("TactileMNIST", "Starstruck", "Glyphs"):
            parser.exit(2, f"error: --adaptive needs a classification family with a fixed sensor yaw "
                           f"(TactileMNIST, Starstruck, Glyphs), not {args.family}\n")
        chosen = args.policies.split(",")
        if not {"scan", "adaptive"} <= set(chosen) <= {"scan", "adaptive", "random"}:
            parser.exit(2, f"error: --policies {args.policies!r}: give scan,adaptive and optionally random\n")
        if args.checkpoint is not None:
            if not args.checkpoint.is_file():
                parser.exit(2, f"error: no checkpoint {args.checkpoint}; train one with --adaptive first\n")
            if args.classifier is not None and not args.classifier.is_file():
                parser.exit(2, f"error: no classifier checkpoint {args.classifier}; give a scan-trained checkpoint "
                               f"of {args.family} (experiments/tactile.py without --adaptive writes one)\n")
            return evaluate_adaptive(args.family, args.checkpoint, 8 if args.smoke else args.eval_episodes, args.out,
                                     args.reach, tuple(chosen), args.min_new_area, args.candidates, args.classifier,
                                     args.seed, 20 if args.smoke else None, args.eval_split, args.over_weight)
        if args.smoke:
            return run_adaptive(args.family, updates=4, num_envs=6, eval_episodes=6, out=args.out, seed=args.seed,
                                objects_per_split=20, reuse=2)
        if args.init is not None and not args.init.is_file():
            parser.exit(2, f"error: no checkpoint {args.init}; give a scan-trained checkpoint of {args.family} "
                           "(experiments/tactile.py without --adaptive writes one)\n")
        return run_adaptive(args.family, args.updates, args.num_envs, args.eval_episodes, args.out, args.seed,
                            threads=args.threads, reuse=args.reuse, init=args.init,
                            learning_rate=args.learning_rate, histories=args.histories,
                            policies=tuple(chosen))
    if args.check_agent:
        checkpoint = args.out / f"{args.family}.pt"
        if not checkpoint.is_file():
            parser.exit(2, f"error: no checkpoint {checkpoint}; train one first (without --check-agent)\n")
        result = {"final_step": check_agent(args.family, checkpoint, args.check_agent)}
        if args.random_moves:
            result["final_step_random_moves"] = check_random_moves(args.family, checkpoint, args.check_agent)
        return result
    if args.smoke:
        return run(args.family, updates=3, num_envs=4, eval_episodes=8, out=args.out, seed=args.seed,
                   objects_per_split=20, reuse=2, yaw_bins=args.yaw_bins)
    return run(args.family, args.updates, args.num_envs, args.eval_episodes, args.out, args.seed,
               threads=args.threads, reuse=args.reuse, yaw_bins=args.yaw_bins)


if __name__ == "__main__":
    main()
