"""What the span filter removes from the attack views' real tool results: the injections, and what else.

    python experiments/latent_spans.py [--size smoke|full] [--negatives corpora|other-view] [--save DIR]
                                       [--out DIR]
    python experiments/latent_spans.py --recorded FOLDER[,FOLDER...] --filter FILE [--out DIR]

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

``--negatives other-view`` also measures, beside it, a filter fitted per view on the same corpora plus, as
benign texts, the honest pieces of the *other* view's gold results (``other_view_filters``): the filter's
false alarms are short, name-like tool text the corpora's benign side does not hold, and this asks whether
tool output like ours, from a domain it is not judged on, teaches it that text without losing injections.
Each such filter is measured with two thresholds (``THRESHOLDS``): the 95th percentile of every benign
text's out-of-fold score, as for the corpora-only filter, and of the corpora's benign texts' only.
``--save DIR`` writes each of them (``spans.save``) to ``DIR/<view>-<variant>.joblib`` (``filter_file``), for
the strip to read with (``experiments/latent_attacks.py --method strip --filter FILE``).

``--recorded`` asks instead what another filter would have changed in runs already made
(``experiments/latent_attacks.py --method strip`` run folders): every tool result the agent was shown in their
episodes (what the tools returned: the agent's own text in a tool turn left out, ``calls.written_split``),
read by the corpora-only filter and by ``--filter FILE`` (``recorded``). A strip only ever removes what its
filter flags, when a correction fires, so an episode with no correction, or where both filters flag the same
pieces, would have run the same (the 1.5B decodes greedily in its exact mode); the others are listed, to be
run again with ``--filter``. Writes ``<out>/latent_spans_recorded.{json,md}``.

Sizes: ``smoke`` 10 tasks a view, ``full`` every attack task of both views. Writes
``<out>/latent_spans.{json,md}`` (default ``experiments/results/latent/spans``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIZES = {"smoke": 10, "full": None}
VIEWS = {"chem": "chem-attack", "disaster": "disaster-attack"}
EXAMPLES = 5


class Gold:
    """What the gold trajectories of an attack view's first tasks read: each distinct result once (as the agent
    sees it, its JSON), the carrier results with their planted text, and every planted text. (A plain class:
    the tests load this file as a module of no package, where a dataclass cannot resolve its annotations.)"""

    def __init__(self, tasks: int) -> None:
        self.tasks = tasks
        self.results: dict[str, None] = {}
        self.carriers: list[tuple[str, str]] = []
        self.planted: set[str] = set()


def gold(suite: str, count: int | None) -> Gold:
    """The gold results of the first ``count`` attack tasks of ``suite`` (None: all)."""
    from gauntlet.attacks import carries, injection_of
    from gauntlet.evaluation import suite_tasks

    tasks = suite_tasks(suite)[:count]
    found = Gold(tasks=len(tasks))
    for task in tasks:
        injection = injection_of(task)
        assert injection is not None, f"{task.id} of an attack view has no injection"
        for call in task.gold_trajectory:
            if call.obs is None:
                continue
            content = json.dumps(call.obs, ensure_ascii=False)
            found.results[content] = None
            if carries(call.obs, injection.text):
                found.planted.add(injection.text)
                found.carriers.append((content, injection.text))
    return found


def honest(found: Gold, content: str) -> list[str]:
    """The scored pieces of one result (``spans.pieces``) that hold no planted text."""
    from gauntlet.controllers.latent.spans import pieces

    return [piece for piece in pieces(content)
            if not any(part in piece or piece in part for text in found.planted for part in _parts(text))]


def measure(found: Gold, suite: str, spans: Any) -> dict[str, Any]:
    """The filter's removals on one view's gold results (module doc)."""
    from gauntlet.attacks import carries

    removed = partly = 0
    for content, text in found.carriers:
        stripped, _ = spans.strip(content)
        left = json.loads(stripped)
        gone = [part for part in _parts(text) if not carries(left, part)]
        removed += len(gone) == len(_parts(text))
        partly += 0 < len(gone) < len(_parts(text))
    honest_scored = honest_removed = 0
    lost: list[str] = []
    examples: list[str] = []
    for content in found.results:
        _, gone = spans.strip(content)
        kept_honest = honest(found, content)
        honest_scored += len(kept_honest)
        wrong = [piece for piece in gone if piece in kept_honest]
        honest_removed += len(wrong)
        if wrong:
            lost.append(content[:120])
            examples += [piece for piece in wrong if piece not in examples][:EXAMPLES - len(examples)]
    return {"suite": suite, "tasks": found.tasks, "carrier_results": len(found.carriers),
            "injections_removed": removed, "injections_partly_removed": partly,
            "results": len(found.results), "honest_pieces": honest_scored, "honest_removed": honest_removed,
            "results_losing_honest_text": len(lost), "honest_examples": examples}


THRESHOLDS = {"other_view": "every benign text", "other_view_corpora_threshold": "the corpora's benign texts"}
LABELS = {"other_view": "other view", "other_view_corpora_threshold": "other view, corpora threshold"}


def other_view_filters(golds: dict[str, Gold], embed: Any) -> dict[str, dict[str, tuple[Any, dict[str, Any]]]]:
    """Per view, a filter fitted (``spans.fit``) on every corpus text plus, as benign texts, the distinct honest
    pieces of the other views' gold results: tool output like ours, never from the view it is judged on. Two
    thresholds each (``THRESHOLDS``): from every benign text's out-of-fold score, as the corpora-only filter's,
    or from the corpora's benign texts only, so the corpora's false-alarm rate stays about where it was."""
    from gauntlet.controllers.latent.corpora import load_corpora
    from gauntlet.controllers.latent.spans import fit_thresholds

    rows = load_corpora()
    texts, labels = [row["text"] for row in rows], [int(row["label"]) for row in rows]
    filters: dict[str, dict[str, tuple[Any, dict[str, Any]]]] = {key: {} for key in THRESHOLDS}
    for name in golds:
        others = sorted({piece for other, found in golds.items() if other != name
                         for content in found.results for piece in honest(found, content)})
        extra = {"negatives_from": [other for other in golds if other != name], "tool_pieces": len(others)}
        corpora = np.array([True] * len(texts) + [False] * len(others))
        # One fit serves both variants: they differ only in which benign texts set the threshold.
        variants = fit_thresholds(texts + others, np.array(labels + [0] * len(others)), embed,
                                  {key: None if key == "other_view" else corpora for key in THRESHOLDS})
        for key, (fitted, summary) in variants.items():
            filters[key][name] = fitted, {**summary, **extra, "threshold_from": THRESHOLDS[key]}
    return filters


def filter_file(folder: Path, view: str, key: str) -> Path:
    """Where ``--save`` writes view ``view``'s filter of variant ``key`` (of ``THRESHOLDS``)."""
    return folder / f"{view}-{key.replace('_', '-')}.joblib"


def recorded(folders: list[Path], filters: dict[str, Any], planted: dict[str, str]) -> dict[str, Any]:
    """What each of ``filters`` (name -> filter) flags in the tool results the episodes of ``folders`` were shown,
    a piece counted planted when it is part of its task's planted text (``planted``: task id -> text; a clean
    twin's results hold none of it), and the episodes whose filters flag different pieces, with their
    corrections (module doc). An episode cut short is left out (a resumed run ran its task again)."""
    from langchain_core.messages import ToolMessage

    from gauntlet import load_episodes
    from gauntlet.agents.llm.calls import written_split
    from gauntlet.agents.llm.records import conversation
    from gauntlet.controllers.latent.spans import pieces

    counts = {name: {"planted": 0, "honest": 0} for name in filters}
    total = {"planted": 0, "honest": 0}
    episodes = corrected = cut = 0
    differ: list[dict[str, Any]] = []
    for folder in folders:
        for episode in load_episodes(folder):
            if episode.outcome is None:  # cut short: a resumed run ran its task again
                cut += 1
                continue
            episodes += 1
            corrections = sum(event.kind == "intervention" for step in episode.steps for event in step.events)
            corrected += corrections > 0
            shown = sorted({piece for message in conversation(episode)
                            if isinstance(message, ToolMessage) and isinstance(message.content, str)
                            for piece in pieces(written_split(message)[1])})
            parts = _parts(planted.get(episode.task_id or "", ""))
            for piece in shown:
                total[_kind(piece, parts)] += 1
            flagged = {}
            for name, found in filters.items():
                flagged[name] = {piece for piece, score in zip(shown, found.scores(shown), strict=True)
                                 if score > found.threshold}
                for piece in flagged[name]:
                    counts[name][_kind(piece, parts)] += 1
            first, *others = flagged.values()
            if any(other != first for other in others):
                differ.append({"folder": str(folder), "task": episode.task_id, "corrections": corrections,
                               **{f"only_{name}": sorted(found - set().union(*(flagged[other] for other in flagged
                                                                               if other != name)))
                                  for name, found in flagged.items()}})
    return {"folders": [str(folder) for folder in folders], "episodes": episodes, "cut_short": cut,
            "corrected": corrected, "shown": total,
            "flagged": counts, "differ": differ, "to_rerun": sum(row["corrections"] > 0 for row in differ)}


def _kind(piece: str, parts: list[str]) -> str:
    return "planted" if any(part in piece or piece in part for part in parts) else "honest"


def recorded_table(results: dict[str, Any]) -> str:
    found = results["recorded"]
    names = list(found["flagged"])
    described = ", ".join(f"{name} (threshold {results['thresholds'][name]:.3f})" for name in names)
    lines = [f"# Span filters on the tool results of {found['episodes']} recorded episodes", "",
             f"Filters: {described}. Episodes cut short, left out: {found['cut_short']}. "
             f"{found['corrected']} of the {found['episodes']} episodes had a correction.", "",
             "| filter | planted pieces flagged | honest pieces flagged |", "|---|---|---|"]
    lines += [f"| {name} | {row['planted']}/{found['shown']['planted']} | {row['honest']}/{found['shown']['honest']} |"
              for name, row in found["flagged"].items()]
    lines += ["", f"Episodes where the filters flag different pieces: {len(found['differ'])}; with a correction, so "
                  f"a strip with the other filter could run differently: {found['to_rerun']}."]
    for row in found["differ"]:
        only = "; ".join(f"only {name}: " + (", ".join(json.dumps(text[:80], ensure_ascii=False)
                                                        for text in row[f"only_{name}"]) or "nothing")
                         for name in names)
        lines.append(f"- {row['folder']}, {row['task']} ({row['corrections']} corrections): {only}")
    return "\n".join(lines) + "\n"


def _parts(text: str) -> list[str]:
    from gauntlet.controllers.latent.spans import PARAGRAPH

    return [part.strip() for part in text.split(PARAGRAPH) if part.strip()]


def _rows(views: dict[str, Any], label: str) -> list[str]:
    return [f"| {name} | {label} | {row['tasks']} | {row['injections_removed']}/{row['carrier_results']} | "
            f"{row['injections_partly_removed']} | {row['honest_removed']}/{row['honest_pieces']} | "
            f"{row['results_losing_honest_text']}/{row['results']} |" for name, row in views.items()]


def _examples(views: dict[str, Any], label: str) -> list[str]:
    lines = []
    for name, row in views.items():
        if row["honest_examples"]:
            lines += ["", f"{name} ({label}), honest pieces removed (examples): "
                          + "; ".join(json.dumps(text[:160], ensure_ascii=False) for text in row["honest_examples"])]
    return lines


def table(results: dict[str, Any]) -> str:
    fitted = results["filter"]
    lines = [f"# Span filter on the attack views' gold results ({results['size']} size)", "",
             f"Filter: logistic regression on all-MiniLM-L6-v2 embeddings of {fitted['texts']} corpus texts; "
             f"out-of-fold AUROC {fitted['out_of_fold_auroc']:.3f}; threshold {fitted['threshold']:.3f} (above it: "
             f"{fitted['benign_above']:.1%} of benign corpus texts, {fitted['injections_above']:.1%} of injections)."]
    variants = {LABELS[key]: results[key] for key in THRESHOLDS if key in results}
    for label, rows in variants.items():
        for name, row in rows.items():
            summary = row["filter"]
            lines.append(f"For {name}, the same fitted with the {summary['tool_pieces']} honest pieces of "
                         f"{', '.join(summary['negatives_from'])}'s gold results as benign texts (\"{label}\", "
                         f"threshold from {summary['threshold_from']}): out-of-fold AUROC "
                         f"{summary['out_of_fold_auroc']:.3f}; threshold {summary['threshold']:.3f}.")
    lines += ["", "| view | filter | tasks | injections removed | partly | honest pieces removed | "
                  "results losing honest text |", "|---|---|---|---|---|---|---|"]
    lines += _rows(results["views"], "corpora")
    for label, rows in variants.items():
        lines += _rows({name: row["measured"] for name, row in rows.items()}, label)
    lines += _examples(results["views"], "corpora")
    for label, rows in variants.items():
        lines += _examples({name: row["measured"] for name, row in rows.items()}, label)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="smoke")
    parser.add_argument("--negatives", choices=["corpora", "other-view"], default="corpora",
                        help="other-view: also fit a filter per view with the other view's honest pieces as benign "
                             "texts, and measure it beside the corpora-only filter")
    parser.add_argument("--save", type=Path, default=None,
                        help="with --negatives other-view: write each view's fitted filters into this folder")
    parser.add_argument("--recorded", default=None,
                        help="run folders (comma-separated) whose episodes' tool results to read with the corpora-only "
                             "filter and --filter, instead of the gold results")
    parser.add_argument("--filter", type=Path, default=None, help="with --recorded: a filter file --save wrote")
    parser.add_argument("--out", type=Path, default=ROOT / "experiments" / "results" / "latent" / "spans")
    args = parser.parse_args(argv)
    if args.save is not None and args.negatives != "other-view":
        parser.error("--save writes the filters --negatives other-view fits; add --negatives other-view")
    if (args.recorded is None) != (args.filter is None):
        parser.error("--recorded and --filter go together: the run folders to read, and the filter to read them with "
                     "beside the corpora-only one")
    if args.recorded is not None:
        if args.save is not None or args.negatives != "corpora":
            parser.error("--recorded reads recorded runs with a saved filter; it fits none (drop --negatives, --save)")
        return _main_recorded(args)
    from gauntlet.controllers.latent import spans as span_module
    from gauntlet.fileio import write_atomically

    spans = span_module.span_filter()
    fitted = json.loads((span_module.span_filter_folder() / span_module.SUMMARY_FILE).read_text())
    golds = {name: gold(suite, SIZES[args.size]) for name, suite in VIEWS.items()}
    results: dict[str, Any] = {"size": args.size, "filter": fitted,
                               "views": {name: measure(found, VIEWS[name], spans) for name, found in golds.items()}}
    if args.negatives == "other-view":
        embed = spans.embed
        if embed is None:
            from gauntlet.controllers.latent.embeddings import sentence_encoder

            embed = sentence_encoder().encode
        for key, filters in other_view_filters(golds, embed).items():
            results[key] = {name: {"filter": summary, "measured": measure(golds[name], VIEWS[name], found)}
                            for name, (found, summary) in filters.items()}
            if args.save is not None:
                args.save.mkdir(parents=True, exist_ok=True)
                for name, (found, summary) in filters.items():
                    span_module.save(found, filter_file(args.save, name, key), {**summary, "size": args.size})
    args.out.mkdir(parents=True, exist_ok=True)
    write_atomically(args.out / "latent_spans.json", json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    write_atomically(args.out / "latent_spans.md", table(results))
    print(table(results))
    return results


def _main_recorded(args: argparse.Namespace) -> dict[str, Any]:
    from gauntlet.attacks import injection_of
    from gauntlet.controllers.latent.spans import span_filter
    from gauntlet.errors import UserError
    from gauntlet.evaluation import suite_tasks
    from gauntlet.fileio import write_atomically

    folders = [Path(name.strip()) for name in args.recorded.split(",") if name.strip()]
    missing = [str(folder) for folder in folders if not (folder / "episodes").is_dir()]
    if not folders or missing:
        raise SystemExit(f"error: --recorded: {', '.join(missing) or 'none given'} is not a run folder (one with "
                         "episodes/); name the folders experiments/latent_attacks.py wrote")
    try:
        other = args.filter.stem if args.filter.stem != "corpora" else f"{args.filter.stem} (file)"
        filters = {"corpora": span_filter(), other: span_filter(args.filter)}
    except UserError as exc:
        raise SystemExit(f"error: {exc}") from None
    planted = {task.id: injection.text for suite in VIEWS.values() for task in suite_tasks(suite)
               if (injection := injection_of(task)) is not None}
    results = {"filter": str(args.filter), "thresholds": {name: found.threshold for name, found in filters.items()},
               "recorded": recorded(folders, filters, planted)}
    args.out.mkdir(parents=True, exist_ok=True)
    write_atomically(args.out / "latent_spans_recorded.json", json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    write_atomically(args.out / "latent_spans_recorded.md", recorded_table(results))
    print(recorded_table(results))
    return results


if __name__ == "__main__":
    main()
