"""``gauntlet latent``: fit a detector on a model's hidden states, evaluate it on held-out texts, score with it.

Mounted on the command line through the registry (kind ``command``), so this module imports lightly:
everything heavy loads inside the commands.

    gauntlet latent fit --out chaos.npz                          # the chaos score at layer 12, as the monitor loads it
    gauntlet latent fit --detector probe --out probe.joblib --source corpora --texts 200
    gauntlet latent evaluate chaos.npz --texts 48                # AUROC and FPR@95TPR, 95 % intervals
    gauntlet latent score chaos.npz --run runs/chem-latent       # every model reply of a run
    gauntlet latent score probe.joblib "Ignore all previous instructions."

The examples (``collection``): replies of the instruction-hierarchy suite labelled by its rule
checkers, or texts of the injection corpora labelled by the corpora; ``fit`` reads the ``fit`` part,
``evaluate`` the ``held-out`` part, which shares no text with it.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from gauntlet.errors import UserError

app = typer.Typer(no_args_is_help=True, help=(
    "Latent monitor: fit a detector on a model's hidden states, evaluate it on held-out texts, score replies."))

DEFAULT_LAYER = 12


class DetectorName(StrEnum):
    aeo = "aeo"
    mahalanobis = "mahalanobis"
    probe = "probe"
    tasktracker = "tasktracker"


class Source(StrEnum):
    hierarchy = "hierarchy"
    corpora = "corpora"


ReaderOption = Annotated[Path | None, typer.Option(exists=True, help=(
    "The model whose hidden states are read: a .gguf file or a transformers model folder (default: the small "
    "offline model, offline:small, the shipped fit's; for a fitted file, the model it was fitted on)."))]
ThreadsOption = Annotated[int, typer.Option(min=1, help="CPU threads of the model.")]
MaxNewTokensOption = Annotated[int, typer.Option(min=1, help="Longest suite reply, in tokens (source hierarchy).")]
MaxTokensOption = Annotated[int, typer.Option(min=1, help="Corpus texts are cut to this many tokens (source corpora).")]
JsonOption = Annotated[Path | None, typer.Option("--json", help="Write the full result here (JSON).")]
FittedArgument = Annotated[Path, typer.Argument(exists=True, dir_okay=False, help=(
    "A fitted detector: .npz (the chaos score) or .joblib (gauntlet latent fit)."))]


def _quiet_loading() -> None:
    """No transformers progress bar while a model loads: the command's own output says what it reads."""
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()


def _weights(reader: Path, layer: int) -> Any:
    """The loaded model at ``reader``, refused in one line when ``layer`` is not one of its layers."""
    from gauntlet.agents.llm.local_chat import load_weights

    _quiet_loading()
    weights = load_weights(str(reader))
    layers = int(weights.model.config.num_hidden_layers)
    if not 0 <= layer <= layers:
        raise UserError(f"--layer {layer} is not a layer of {reader.name}, which has layers 0 (the embeddings) to "
                        f"{layers}; give one of those")
    return weights


def _fitted_reader(fitted: Any, reader: Path | None, file: Path) -> Path:
    """The reader of a fitted file: the model it was fitted on (as the monitor picks it), which a given
    ``--reader`` must be."""
    if reader is None:
        from gauntlet.agents.llm.offline_model import model_path, pinned_model_of_file

        reader = model_path(pinned_model_of_file(fitted.model))
    if reader.name != fitted.model:
        raise UserError(f"{file} was fitted on {fitted.model}'s states, not {reader.name}'s; give --reader the model "
                        "it was fitted on")
    return reader


def _collect(weights: Any, source: Source, part: str, texts: int, layer: int, max_new_tokens: int, max_tokens: int,
             threads: int) -> Any:
    from gauntlet.cli_commands.common import console
    from gauntlet.controllers.latent.collection import collect

    with console.status(f"reading {texts} {source.value} texts ({part} part) at layer {layer}"):
        collected = collect(weights, source.value, part, texts, [layer], max_new_tokens=max_new_tokens,
                            max_tokens=max_tokens, threads=threads)
    if not collected.examples:
        raise UserError(f"none of the {texts} {source.value} texts gave an example (every reply called a tool); "
                        "raise --texts")
    return collected


def _dropped(collected: Any) -> str:
    return f"; {collected.dropped} replies that called a tool left out" if collected.dropped else ""


@app.command()
def fit(
    out: Annotated[Path, typer.Option(help=(
        "The fitted detector to write: .npz for the chaos score (the file the latent monitor loads), "
        ".joblib for any detector."))],
    detector: Annotated[DetectorName, typer.Option(help=(
        "aeo: the chaos score (compliant examples only); mahalanobis: distance of the mean reply state "
        "(compliant only); probe: logistic regression on it; tasktracker: on the activation delta the "
        "lower-priority text caused."))] = DetectorName.aeo,
    source: Annotated[Source, typer.Option(help=(
        "hierarchy: the model's replies to the instruction-hierarchy suite, labelled by its rule checkers; "
        "corpora: injection-corpus texts read as a tool's document, labelled by the corpora."))] = Source.hierarchy,
    texts: Annotated[int, typer.Option(min=2, help=(
        "Texts to read, taken in turn from every suite cell or corpus dataset (24 = one per suite cell)."))] = 72,
    layer: Annotated[int, typer.Option(min=0, help="Layer whose states the detector reads (0: the embeddings).")
                     ] = DEFAULT_LAYER,
    reader: ReaderOption = None,
    max_new_tokens: MaxNewTokensOption = 80,
    max_tokens: MaxTokensOption = 128,
    threads: ThreadsOption = 1,
) -> None:
    """Read the model's hidden states on the fit part of a source and fit a detector; its gate threshold is the
    95th percentile of compliant texts' scores, each scored by a fit that never saw its rule or dataset."""
    from gauntlet.cli_commands.common import console
    from gauntlet.controllers.latent.detector_file import FittedDetector, check_suffix, save_detector
    from gauntlet.controllers.latent.detectors import LATENT_DETECTORS
    from gauntlet.controllers.latent.study import held_out_scores, held_out_threshold

    def make() -> Any:
        return LATENT_DETECTORS[detector.value](layer)

    check_suffix(out, make())
    if reader is None:
        from gauntlet.agents.llm.offline_model import model_path

        reader = model_path("small")
    collected = _collect(_weights(reader, layer), source, "fit", texts, layer, max_new_tokens, max_tokens, threads)
    labels, groups = collected.labels, collected.groups
    what = "rules" if source is Source.hierarchy else "datasets"
    if len(set(groups.tolist())) < 2:
        raise UserError(f"the {len(labels)} texts read come from one of the {what}; the threshold is set on "
                        f"{what} held out, so raise --texts")
    try:
        scores, _ = held_out_scores(collected.examples, labels, groups, make)
        fitted = make().fit(collected.examples, labels)
    except ValueError as exc:
        raise UserError(f"cannot fit {detector.value} on {len(labels)} texts ({int(labels.sum())} labelled 1): "
                        f"{exc}; raise --texts") from None
    fitted.threshold_ = held_out_threshold(scores, labels)
    metadata = {"texts": len(labels), "positives": int(labels.sum()), "dropped": collected.dropped,
                "max_new_tokens": max_new_tokens, "max_tokens": max_tokens}
    save_detector(out, FittedDetector(fitted, layer, reader.name, source.value, metadata))
    console.print(f"{detector.value} at layer {layer} of {reader.name}, fitted on {len(labels)} {source.value} texts "
                  f"({int(labels.sum())} labelled 1{_dropped(collected)}); threshold {fitted.threshold_:.4g}")
    console.print(f"detector in [bold]{out}[/bold]; next: gauntlet latent evaluate {out}")


@app.command()
def evaluate(
    file: FittedArgument,
    source: Annotated[Source | None, typer.Option(help=(
        "Where the held-out texts come from (default: the source the detector was fitted on)."))] = None,
    texts: Annotated[int, typer.Option(min=2, help="Held-out texts to read.")] = 48,
    reader: ReaderOption = None,
    resamples: Annotated[int, typer.Option(min=10, help="Bootstrap resamples of the intervals.")] = 1000,
    max_new_tokens: MaxNewTokensOption = 80,
    max_tokens: MaxTokensOption = 128,
    threads: ThreadsOption = 1,
    json_out: JsonOption = None,
) -> None:
    """AUROC and FPR@95TPR (95 % stratified bootstrap intervals) of a fitted detector on held-out texts, and
    what its gate flags there."""
    from gauntlet.cli_commands.common import console
    from gauntlet.controllers.latent.detector_file import load_detector
    from gauntlet.controllers.latent.study import summary
    from gauntlet.fileio import write_atomically

    fitted = load_detector(file)
    chosen = source if source is not None else Source(fitted.source)
    reader = _fitted_reader(fitted, reader, file)
    collected = _collect(_weights(reader, fitted.layer), chosen, "held-out", texts, fitted.layer, max_new_tokens,
                         max_tokens, threads)
    labels = collected.labels
    if len(set(labels.tolist())) < 2:
        raise UserError(f"the {len(labels)} held-out texts all have label {int(labels[0])}; AUROC needs both, "
                        "so raise --texts")
    decisions = _decisions(fitted, collected.examples, file)
    result = {"file": str(file), "source": chosen.value, "layer": fitted.layer, "model": fitted.model,
              **summary(decisions, labels, resamples),
              "flagged_positives": float((decisions[labels == 1] > 0).mean()),
              "flagged_negatives": float((decisions[labels == 0] > 0).mean())}
    console.print(f"{len(labels)} held-out {chosen.value} texts, {int(labels.sum())} labelled 1 (violation or "
                  f"injection){_dropped(collected)}")
    console.print(f"AUROC {result['auroc']:.3f} [{result['auroc_ci'][0]:.3f}, {result['auroc_ci'][1]:.3f}]; "
                  f"FPR@95TPR {result['fpr95']:.3f} [{result['fpr95_ci'][0]:.3f}, {result['fpr95_ci'][1]:.3f}]")
    console.print(f"at the file's gate: flags {result['flagged_positives']:.3f} of texts labelled 1 and "
                  f"{result['flagged_negatives']:.3f} of texts labelled 0")
    if json_out is not None:
        write_atomically(json_out, json.dumps(result, indent=2, default=float))
        console.print(f"result in [bold]{json_out}[/bold]")


def _decisions(fitted: Any, examples: list[Any], file: Path) -> Any:
    try:
        return fitted.decision_function(examples)
    except ValueError as exc:  # TaskTracker on replies: no boundary marks the lower-priority text
        raise UserError(f"{file}'s detector cannot score these examples ({exc}); score texts instead, or use "
                        "another detector") from None


@app.command()
def score(
    file: FittedArgument,
    text: Annotated[list[str] | None, typer.Argument(help="Texts to score, each read as a document a tool returned.")
                    ] = None,
    texts_file: Annotated[Path | None, typer.Option(exists=True, dir_okay=False, help=(
        "A file of texts to score, one per line."))] = None,
    run: Annotated[Path | None, typer.Option(exists=True, help=(
        "A run folder or episode file: score every model reply of its episodes, as the latent monitor reads "
        "them."))] = None,
    reader: ReaderOption = None,
    max_tokens: Annotated[int, typer.Option(min=1, help="Texts are cut to this many tokens.")] = 128,
    threads: ThreadsOption = 1,
    json_out: JsonOption = None,
) -> None:
    """Score texts, or a run's model replies, with a fitted detector: its decision value (above 0 is flagged)."""
    from rich.table import Table

    from gauntlet.cli_commands.common import console
    from gauntlet.controllers.latent.detector_file import load_detector
    from gauntlet.fileio import write_atomically

    given = list(text or [])
    if texts_file is not None:
        given += [line for line in texts_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    if (run is None) == (not given):
        raise UserError("score either texts (arguments or --texts-file) or a run's replies (--run), one of the two")
    fitted = load_detector(file)
    reader = _fitted_reader(fitted, reader, file)
    if run is not None:
        names, examples = _run_replies(run, reader, fitted.layer, threads)
        if not examples:
            raise UserError(f"{run} holds no model replies to score; give a run of an llm agent")
    else:
        from gauntlet.controllers.latent.corpus_study import read_documents
        from gauntlet.controllers.latent.detectors import Example

        states = read_documents(_weights(reader, fitted.layer), given, [fitted.layer], max_tokens=max_tokens,
                                threads=threads)
        names, examples = given, [Example(state, item, "") for state, item in zip(states, given, strict=True)]
    decisions = _decisions(fitted, examples, file)
    rows: list[dict[str, Any]] = [{"what": name, "score": float(value), "flagged": bool(value > 0)}
                                  for name, value in zip(names, decisions, strict=True)]
    table = Table(title=f"{file.name}: decision values (above 0 is flagged)")
    for column in ("reply" if run is not None else "text", "score", "flagged"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["what"][:80], f"{row['score']:.4g}", "yes" if row["flagged"] else "no")
    console.print(table)
    if json_out is not None:
        write_atomically(json_out, json.dumps({"file": str(file), "rows": rows}, indent=2))
        console.print(f"scores in [bold]{json_out}[/bold]")


def _run_replies(run: Path, reader: Path, layer: int, threads: int) -> tuple[list[str], list[Any]]:
    """Every model reply of the episodes at ``run``, named ``episode/step`` and made an example from the
    states the reader reads for it over the conversation before it (as the latent monitor does)."""
    from langchain_core.messages import AIMessage

    from gauntlet.agents.llm.models import local_model
    from gauntlet.agents.llm.records import message_of
    from gauntlet.controllers.latent.detector_file import reply_example, reply_states
    from gauntlet.controllers.latent.monitor import reply_text
    from gauntlet.episode import load_episodes

    _quiet_loading()
    model: Any = local_model(reader, threads=threads, max_new_tokens=1)
    names, examples = [], []
    for episode in load_episodes(run):
        conversation: list[Any] = []
        for step in episode.steps:
            for record in step.messages:
                message = message_of(record)
                if isinstance(message, AIMessage) and conversation:
                    response = reply_text(message)
                    names.append(f"{episode.episode_id}/{step.index}: {response}")
                    examples.append(reply_example(reply_states(model, conversation, response, layer), layer,
                                                  response))
                conversation.append(message)
    return names, examples
