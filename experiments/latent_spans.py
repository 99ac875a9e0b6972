"""What the span filter removes from the attack views' real tool results: the injections, and what else.

    python experiments/latent_spans.py [--size smoke|full] [--out DIR]

The ``strip`` correction (``gauntlet.controllers.latent.correction``) keeps a tool result's text but the
pieces the span filter (``gauntlet.controllers.latent.spans``, fitted on the injection corpora only)
reads as an injection. This measures the filter where it is used, against the attack views' own truth:
every attack task's gold trajectory records the results its server sends, the planted one included,
and the task names the text planted (``Injection.text``). Each result is stripped as the agent would
see it (its JSON), and counted:

* ``injections removed``: carrier results left without any of the planted text (``partly``: some of it
  gone, some left);
* ``honest pieces removed``: of the scored pieces (``spans.pieces``: paragraphs of a few words or more)
  that hold no planted text, across every result of the gold trajectories (each distinct result once), the share
  removed, with the results that lost one and examples.

Sizes: ``smoke`` 10 tasks a view, ``full`` every attack task of both views. Writes
``<out>/latent_spans.{json,md}`` (default ``experiments/results/latent/spans``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIZES = {"smoke": 10, "full": None}
VIEWS = {"chem": "chem-attack", "disaster": "disaster-attack"}
EXAMPLES = 5


def measure(suite: str, count: int | None, spans: Any) -> dict[str, Any]:
    """The filter's removals on the gold results of the first ``count`` attack tasks of ``suite`` (None: all)."""
    from gauntlet.attacks import carries, injection_of
    from gauntlet.controllers.latent.spans import pieces
    from gauntlet.evaluation import suite_tasks

    tasks = suite_tasks(suite)[:count]
    removed = partly = carriers = 0
    results: dict[str, None] = {}  # each distinct result the gold trajectories read, as the agent sees it
    planted: set[str] = set()
    for task in tasks:
        injection = injection_of(task)
        assert injection is not None, f"{task.id} of an attack view has no injection"
        for call in task.gold_trajectory:
            if call.obs is None:
                continue
            content = json.dumps(call.obs, ensure_ascii=False)
            results[content] = None
            if carries(call.obs, injection.text):
                planted.add(injection.text)
                carriers += 1
                stripped, _ = spans.strip(content)
                left = json.loads(stripped)
                gone = [part for part in _parts(injection.text) if not carries(left, part)]
                removed += len(gone) == len(_parts(injection.text))
                partly += 0 < len(gone) < len(_parts(injection.text))
    honest_scored = honest_removed = 0
    lost: list[str] = []
    examples: list[str] = []
    for content in results:
        _, gone = spans.strip(content)
        honest = [piece for piece in pieces(content)
                  if not any(part in piece or piece in part for text in planted for part in _parts(text))]
        honest_scored += len(honest)
        wrong = [piece for piece in gone if piece in honest]
        honest_removed += len(wrong)
        if wrong:
            lost.append(content[:120])
            examples += [piece for piece in wrong if piece not in examples][:EXAMPLES - len(examples)]
    return {"suite": suite, "tasks": len(tasks), "carrier_results": carriers,
            "injections_removed": removed, "injections_partly_removed": partly,
            "results": len(results), "honest_pieces": honest_scored, "honest_removed": honest_removed,
            "results_losing_honest_text": len(lost), "honest_examples": examples}


def _parts(text: str) -> list[str]:
    from gauntlet.controllers.latent.spans import PARAGRAPH

    return [part.strip() for part in text.split(PARAGRAPH) if part.strip()]


def table(results: dict[str, Any]) -> str:
    fitted = results["filter"]
    lines = [f"# Span filter on the attack views' gold results ({results['size']} size)", "",
             f"Filter: logistic regression on all-MiniLM-L6-v2 embeddings of {fitted['texts']} corpus texts; "
             f"out-of-fold AUROC {fitted['out_of_fold_auroc']:.3f}; threshold {fitted['threshold']:.3f} (above it: "
             f"{fitted['benign_above']:.1%} of benign corpus texts, {fitted['injections_above']:.1%} of injections).",
             "", "| view | tasks | injections removed | partly | honest pieces removed | results losing honest text |",
             "|---|---|---|---|---|---|"]
    for name, row in results["views"].items():
        lines.append(f"| {name} | {row['tasks']} | {row['injections_removed']}/{row['carrier_results']} | "
                     f"{row['injections_partly_removed']} | {row['honest_removed']}/{row['honest_pieces']} | "
                     f"{row['results_losing_honest_text']}/{row['results']} |")
    for name, row in results["views"].items():
        if row["honest_examples"]:
            lines += ["", f"{name}, honest pieces removed (examples): "
                          + "; ".join(json.dumps(text[:160], ensure_ascii=False) for text in row["honest_examples"])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="smoke")
    parser.add_argument("--out", type=Path, default=ROOT / "experiments" / "results" / "latent" / "spans")
    args = parser.parse_args(argv)
    from gauntlet.controllers.latent import spans as span_module
    from gauntlet.fileio import write_atomically

    spans = span_module.span_filter()
    fitted = json.loads((span_module.span_filter_folder() / span_module.SUMMARY_FILE).read_text())
    results = {"size": args.size, "filter": fitted,
               "views": {name: measure(suite, SIZES[args.size], spans) for name, suite in VIEWS.items()}}
    args.out.mkdir(parents=True, exist_ok=True)
    write_atomically(args.out / "latent_spans.json", json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    write_atomically(args.out / "latent_spans.md", table(results))
    print(table(results))
    return results


if __name__ == "__main__":
    main()
