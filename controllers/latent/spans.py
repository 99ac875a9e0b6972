"""Finding the injected text inside tool results: the span filter the ``strip`` correction uses.

The latent gate says a reply went wrong, not which text led it there. Withholding the results the reply
answered removes the honest figures with the injection and leaves an injection read earlier in place;
restating the hierarchy leaves the injection in the context. ``strip`` removes only the pieces of the
episode's tool results that read as an injection, and keeps the rest.

**The filter.** A logistic regression on the sentence embeddings (``embeddings``, all-MiniLM-L6-v2) of
every text of the injection corpora (``corpora.load_corpora``: 17,629 texts, both labels, none of them
written for this project's attack views). Its threshold is the ``GATE_QUANTILE`` (95th) percentile of the
benign texts' out-of-fold scores (5 stratified folds), so about 1 benign corpus text in 20 is flagged.
Fitted once and kept in the data cache (``span_filter``); ``summary.json`` there records the
out-of-fold AUROC and the threshold. Another filter ``fit`` returned (say, with some tool text as benign)
is written by ``save`` and read by ``span_filter(path)``, the strip's ``filter`` option.

**Pieces.** A tool result that is JSON (the part before a note the agent's harness appended to it:
``checklist.SEPARATOR``) is walked, and every string value is cut into paragraphs (at blank lines: an attack
view appends an injection to a free-text field after one); other text is cut into paragraphs directly.
A paragraph of fewer than ``MIN_WORDS`` words (a path, an id, a place name) is kept unscored; each other
is scored, and one above the threshold is removed. A string left empty reads ``REMOVED`` (never scored
itself: a stripped result stays stripped in the conversation, and the next correction reads it again).
Keys, numbers and the appended note are never touched.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gauntlet.agents.llm.checklist import SEPARATOR
from gauntlet.controllers.latent.detectors import GATE_QUANTILE
from gauntlet.errors import UserError

DATA_NAME, DATA_VERSION = "latent-span-filter", "1"
MODEL_FILE, SUMMARY_FILE = "span-filter.joblib", "summary.json"
FOLDS = 5
MIN_WORDS = 4
PARAGRAPH = "\n\n"
REMOVED = "[removed by the monitor: this text read as an instruction to the assistant]"
SCORED_MAX = 4096

_lock = threading.Lock()
_loaded: dict[str, SpanFilter] = {}


@dataclass
class SpanFilter:
    """Scores texts (the probability that a text is an injection) and removes the flagged pieces of a tool
    result (module doc)."""

    model: Any
    threshold: float
    embed: Any = field(default=None, repr=False)  # texts -> (n, 384) unit vectors; None: the shared encoder
    # Each text's score, once: an episode's tool results are read again at every reply (the spans gate, then
    # the strip), and one paragraph recurs across results. Emptied when it reaches SCORED_MAX texts. One
    # filter is shared by the threads of a process (span_filter), so a call reads the memo once, into its
    # own lookup: a memo emptied by another thread meanwhile costs a text its embedding again, never a read.
    _scored: dict[str, float] = field(default_factory=dict, repr=False, compare=False)

    def scores(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0)
        unique = dict.fromkeys(texts)
        lookup = {text: score for text in unique if (score := self._scored.get(text)) is not None}
        new = [text for text in unique if text not in lookup]
        if new:
            embed = self.embed
            if embed is None:
                from gauntlet.controllers.latent.embeddings import sentence_encoder

                embed = sentence_encoder().encode
            fresh = dict(zip(new, np.asarray(self.model.predict_proba(embed(new))[:, 1]).tolist(), strict=True))
            if len(self._scored) + len(fresh) > SCORED_MAX:
                self._scored.clear()
            self._scored.update(fresh)
            lookup.update(fresh)
        return np.array([lookup[text] for text in texts])

    def strip(self, content: str) -> tuple[str, list[str]]:
        """``content`` with its flagged pieces removed, and the removed pieces (module doc, Pieces)."""
        scored = pieces(content)
        flagged = {piece for piece, score in zip(scored, self.scores(scored), strict=True) if score > self.threshold}
        if not flagged:
            return content, []

        def kept(text: str) -> str:
            left = PARAGRAPH.join(piece for piece in text.split(PARAGRAPH) if piece.strip() not in flagged)
            return left if left.strip() else REMOVED

        result, joint, note = content.partition(SEPARATOR)
        parsed = _structured(result)
        cleaned = kept(result) if parsed is None else json.dumps(_walk(parsed, None, kept), ensure_ascii=False)
        return cleaned + joint + note, sorted(flagged)


def pieces(content: str) -> list[str]:
    """The pieces of a tool result the filter scores (module doc, Pieces), each once, in sorted order."""
    result = content.partition(SEPARATOR)[0]
    parsed = _structured(result)
    strings: list[str] = []
    if parsed is None:
        strings.append(result)
    else:
        _walk(parsed, strings.append)
    # A result stripped before (the edit stays in the conversation) shows the notice, which is not scored again.
    return sorted({piece.strip() for text in strings for piece in text.split(PARAGRAPH)
                   if len(piece.split()) >= MIN_WORDS and piece.strip() != REMOVED})


def _structured(text: str) -> dict[str, Any] | list[Any] | None:
    """``text`` parsed, when it is a JSON object or array (None otherwise)."""
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, (dict, list)) else None


def _walk(value: Any, seen: Any, change: Any = None) -> Any:
    """Every string value of a JSON value, passed to ``seen``; with ``change``, the value with each string
    replaced by ``change(string)``."""
    if isinstance(value, str):
        if seen is not None:
            seen(value)
        return change(value) if change is not None else value
    if isinstance(value, dict):
        return {key: _walk(item, seen, change) for key, item in value.items()}
    if isinstance(value, list):
        return [_walk(item, seen, change) for item in value]
    return value


def fit(texts: list[str], labels: np.ndarray, embed: Any,
        calibrate: np.ndarray | None = None) -> tuple[SpanFilter, dict[str, Any]]:
    """The filter fitted on ``texts`` (labels 1: injection), its threshold from the benign texts' out-of-fold
    scores (with ``calibrate``, a mask over ``texts``: those benign texts' only), and a summary (texts,
    out-of-fold AUROC, threshold, benign and injected shares above it)."""
    return fit_thresholds(texts, labels, embed, {"": calibrate})[""]


def fit_thresholds(texts: list[str], labels: np.ndarray, embed: Any,
                   calibrations: dict[str, np.ndarray | None]) -> dict[str, tuple[SpanFilter, dict[str, Any]]]:
    """``fit`` once per name of ``calibrations`` (name -> ``calibrate``): one embedding, one cross-validation and
    one model, a threshold and a summary per name."""
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    from gauntlet.controllers.latent.detectors import _logistic
    from gauntlet.stats import auroc

    features = embed(texts)
    labels = np.asarray(labels, dtype=int)
    folds = StratifiedKFold(n_splits=FOLDS, shuffle=True, random_state=0)
    held_out = cross_val_predict(_logistic(), features, labels, cv=folds, method="predict_proba")[:, 1]
    model = _logistic().fit(features, labels)
    fitted = {}
    for name, calibrate in calibrations.items():
        setting = labels == 0 if calibrate is None else (labels == 0) & np.asarray(calibrate, dtype=bool)
        threshold = float(np.quantile(held_out[setting], GATE_QUANTILE))
        summary = {"texts": len(texts), "injections": int(labels.sum()), "folds": FOLDS,
                   "out_of_fold_auroc": auroc(held_out, labels), "threshold": threshold,
                   "benign_above": float((held_out[labels == 0] > threshold).mean()),
                   "injections_above": float((held_out[labels == 1] > threshold).mean())}
        fitted[name] = SpanFilter(model=model, threshold=threshold, embed=embed), summary
    return fitted


def build(folder: Path) -> None:
    """Data builder: fit the filter on every corpus text and write it with its summary into ``folder``."""
    import joblib  # type: ignore[import-untyped]  # joblib ships no type information

    from gauntlet.controllers.latent.corpora import load_corpora
    from gauntlet.controllers.latent.embeddings import sentence_encoder
    from gauntlet.fileio import write_atomically

    rows = load_corpora()
    found, summary = fit([row["text"] for row in rows], np.array([row["label"] for row in rows]),
                         sentence_encoder().encode)
    joblib.dump({"model": found.model, "threshold": found.threshold}, folder / MODEL_FILE)
    write_atomically(folder / SUMMARY_FILE, json.dumps(summary, indent=1, sort_keys=True) + "\n")


def span_filter_folder() -> Path:
    """The data-cache folder holding the fitted filter and its summary, built on first use."""
    from gauntlet.controllers.latent.corpora import PINS
    from gauntlet.datacache import ensure_built

    return ensure_built(DATA_NAME, DATA_VERSION, build, inputs=(PINS,))


def save(found: SpanFilter, path: Path, summary: dict[str, Any]) -> None:
    """Write a filter ``fit`` returned (its model, threshold and summary) to ``path``, atomically, for
    ``span_filter(path)``."""
    import io

    import joblib  # type: ignore[import-untyped]  # joblib ships no type information

    from gauntlet.fileio import write_atomically

    buffer = io.BytesIO()
    joblib.dump({"model": found.model, "threshold": found.threshold, "summary": summary}, buffer)
    write_atomically(path, buffer.getvalue())


def span_filter(path: str | Path | None = None) -> SpanFilter:
    """The process's one filter (fitted on first use on this machine: a few minutes on a CPU), or with ``path``
    the filter ``save`` wrote there (loaded once a process; ``UserError`` when it is missing or not one)."""
    import joblib  # type: ignore[import-untyped]  # joblib ships no type information

    key = "default" if path is None else str(Path(path).resolve())
    with _lock:
        if key not in _loaded:
            if path is None:
                saved = joblib.load(span_filter_folder() / MODEL_FILE)
            else:
                saved = _saved(Path(path))
            _loaded[key] = SpanFilter(model=saved["model"], threshold=float(saved["threshold"]))
        return _loaded[key]


def _saved(path: Path) -> dict[str, Any]:
    import joblib  # type: ignore[import-untyped]  # joblib ships no type information

    fix = "write one with python experiments/latent_spans.py --negatives other-view --save DIR"
    try:
        saved = joblib.load(path)
    except FileNotFoundError:
        raise UserError(f"span filter {path.name} not found; {fix}") from None
    except Exception as exc:  # joblib raises many kinds on a file that is not its own
        raise UserError(f"span filter {path.name} could not be read ({type(exc).__name__}); {fix}") from None
    if not (isinstance(saved, dict) and {"model", "threshold"} <= saved.keys()
            and hasattr(saved["model"], "predict_proba")):
        raise UserError(f"span filter {path.name} holds no fitted filter; {fix}")
    return saved


__all__ = ["MIN_WORDS", "REMOVED", "SpanFilter", "fit", "fit_thresholds", "pieces", "save", "span_filter",
           "span_filter_folder"]
