"""A fitted detector on disk, and how a model reply becomes an example for it.

Two formats, by the file's suffix:

- ``.npz``: the chaos score (``aeo``) in the run-time monitor's format (``monitor.save_chaos_score``:
  the manifold, its layer, the gate threshold and the model file it was fitted on), which the
  ``latent`` monitor and the ``latent-correct`` controller load (config ``model=FILE``). It was fitted
  on the instruction-hierarchy suite's replies.
- ``.joblib``: any detector, ours or anything with ``fit`` and ``decision_function`` over ``Example``s
  (``detectors`` module doc), with the layer its examples need, the model file it was fitted on and
  the source of its examples (``collection.SOURCES``): a versioned dict, as oversight's model files.

Either way the gate is the detector's ``decision_function`` above 0 (``detectors`` module doc): the
threshold of a chaos score file becomes the loaded score's ``threshold_``.

``reply_example`` makes one model reply an example from the states that wrote it, as the monitor reads
them; ``reply_states`` reads those states with a reader model over the conversation before the reply.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gauntlet.controllers.latent.detectors import ChaosScore, Example
from gauntlet.controllers.latent.hidden import SequenceStates
from gauntlet.errors import UserError

FILE_FORMAT = "gauntlet-latent-detector"
FILE_VERSION = 1
SUFFIXES = (".npz", ".joblib")


@dataclass
class FittedDetector:
    """A fitted detector, the layer its examples are read at, the model file (name) whose states it was
    fitted on, and the source of its examples."""

    detector: Any
    layer: int
    model: str
    source: str = "hierarchy"
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def threshold(self) -> float | None:
        """The detector's own gate threshold on its unshifted scores, where it has one."""
        value = getattr(self.detector, "threshold_", None)
        return None if value is None else float(value)

    def decision_function(self, examples: list[Example]) -> np.ndarray:
        """The detector's decision values: above 0 is flagged."""
        return np.asarray(self.detector.decision_function(examples), dtype=np.float64)


def save_detector(path: str | Path, fitted: FittedDetector) -> Path:
    """Write ``fitted`` (atomically) in the format its suffix names (module doc)."""
    from gauntlet.fileio import write_atomically

    path = Path(path)
    check_suffix(path, fitted.detector)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".npz":
        from gauntlet.controllers.latent.monitor import save_chaos_score

        return save_chaos_score(path, fitted.detector, fitted.detector.threshold_, fitted.model)
    import joblib  # type: ignore[import-untyped]  # joblib ships no type information

    payload = {"format": FILE_FORMAT, "version": FILE_VERSION, "detector": fitted.detector, "layer": fitted.layer,
               "model": fitted.model, "source": fitted.source, "metadata": dict(fitted.metadata),
               "sklearn_version": _installed_version("scikit-learn")}
    buffer = io.BytesIO()
    joblib.dump(payload, buffer)
    return write_atomically(path, buffer.getvalue())


def _installed_version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def check_suffix(path: Path, detector: Any) -> None:
    """Refuse, in one line, a file name whose format cannot hold ``detector``."""
    if path.suffix not in SUFFIXES:
        raise UserError(f"{path}: a fitted detector is a .npz (the chaos score, as the monitor loads it) or a "
                        ".joblib file; name it so")
    if path.suffix == ".npz" and not isinstance(detector, ChaosScore):
        raise UserError(f"{path}: only the chaos score (aeo) is written as .npz; name the file .joblib")


def load_detector(path: str | Path) -> FittedDetector:
    """The fitted detector at ``path``; a ``UserError`` that says what is wrong otherwise."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"no fitted detector at {path}; make one with `gauntlet latent fit`")
    if path.suffix == ".npz":
        from gauntlet.controllers.latent.monitor import load_chaos_score

        score, threshold, model = load_chaos_score(path)
        score.threshold_ = threshold
        return FittedDetector(score, score.layer, model)
    if path.suffix != ".joblib":
        raise UserError(f"{path} is neither a .npz chaos score nor a .joblib detector; give a file "
                        "`gauntlet latent fit` wrote")
    import joblib  # type: ignore[import-untyped]

    try:
        payload = joblib.load(path)
    except Exception as exc:  # a truncated or foreign file fails in many ways inside the unpickler
        raise UserError(f"{path} is not a fitted detector ({type(exc).__name__}); make one with "
                        "`gauntlet latent fit`") from None
    if not isinstance(payload, dict) or payload.get("format") != FILE_FORMAT:
        raise UserError(f"{path} is not a fitted detector; make one with `gauntlet latent fit`")
    if payload.get("version") != FILE_VERSION:
        raise UserError(f"{path} is a fitted-detector file of version {payload.get('version')}; this Gauntlet reads "
                        f"version {FILE_VERSION}: fit the detector again")
    return FittedDetector(payload["detector"], int(payload["layer"]), str(payload["model"]), str(payload["source"]),
                          {**payload["metadata"], "sklearn_version": payload["sklearn_version"]})


def reply_example(tokens: np.ndarray, layer: int, response_text: str = "") -> Example:
    """A model reply as an example: ``tokens`` are the ``(n, hidden)`` states at ``layer`` of the positions
    that wrote it (the last prompt token first). No boundary is known, so TaskTracker cannot score it."""
    states = SequenceStates(response={layer: tokens}, prompt_end={layer: tokens[0]}, boundary=None)
    return Example(states, "", response_text)


def reply_states(reader: Any, conversation: list[Any], response: str, layer: int) -> np.ndarray:
    """The states at ``layer`` of the positions that wrote ``response`` after ``conversation`` (LangChain
    messages), read by ``reader`` (a model of ``gauntlet.agents.llm.models.local_model``)."""
    states = reader.hidden_states(conversation, response, layers=(layer,))
    # The positions that produced the reply's tokens: the last prompt token and all but the last.
    return np.asarray(states.layers[layer][states.prompt_length - 1:max(len(states.token_ids) - 1,
                                                                        states.prompt_length)])


__all__ = ["FILE_FORMAT", "FILE_VERSION", "SUFFIXES", "FittedDetector", "check_suffix", "load_detector",
           "reply_example", "reply_states", "save_detector"]
