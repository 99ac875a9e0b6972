"""A fitted detector on disk, and how a model reply becomes an example for it.

Two formats, by the file's suffix, and a user's own estimator:

- ``.npz``: the chaos score (``aeo``) in the run-time monitor's format (``monitor.save_chaos_score``:
  the manifold, its layer, the gate threshold and the model file it was fitted on), which the
  ``latent`` monitor and the ``latent-correct`` controller load (config ``model=FILE``). It was fitted
  on the instruction-hierarchy suite's replies.
- ``.joblib``: any detector, ours or anything with ``fit`` and ``decision_function`` over ``Example``s
  (``detectors`` module doc), with the layer its examples need, the model file it was fitted on and
  the source of its examples (``collection.SOURCES``): a versioned dict, as oversight's model files.
- a pickled or joblib-dumped scikit-learn estimator (``.joblib``, ``.pkl``, ``.pickle``) that has
  ``decision_function`` over arrays, fitted on replies' mean response states: loading it takes the
  layer those states were read at (the file does not say), and it reads each example as that one row
  (``MeanResponseEstimator``). A file that holds neither is refused in one line.

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

from gauntlet.controllers.latent.detectors import ChaosScore, Example, response_means
from gauntlet.controllers.latent.hidden import SequenceStates
from gauntlet.errors import UserError

FILE_FORMAT = "gauntlet-latent-detector"
FILE_VERSION = 1
SUFFIXES = (".npz", ".joblib")
LOADABLE_SUFFIXES = (*SUFFIXES, ".pkl", ".pickle")


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


def load_detector(path: str | Path, layer: int | None = None) -> FittedDetector:
    """The fitted detector at ``path``; a ``UserError`` that says what is wrong otherwise.

    ``path`` is a file ``save_detector`` wrote (``.npz`` or ``.joblib``), or a pickled or joblib-dumped
    scikit-learn estimator with ``decision_function`` (``.joblib``, ``.pkl``, ``.pickle``) fitted on
    replies' mean response states at ``layer``, which such a bare estimator needs (it does not say
    which layer it was fitted at, nor on which model's states): it is given each example as one row,
    ``detectors.response_means`` (``MeanResponseEstimator``)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"no fitted detector at {path}; make one with `gauntlet latent fit`")
    if path.suffix == ".npz":
        from gauntlet.controllers.latent.monitor import load_chaos_score

        score, threshold, model = load_chaos_score(path)
        score.threshold_ = threshold
        return _at_layer(FittedDetector(score, score.layer, model), path, layer)
    if path.suffix not in LOADABLE_SUFFIXES:
        raise UserError(f"{path} is neither a .npz chaos score, a .joblib detector nor a pickled estimator "
                        f"({', '.join(LOADABLE_SUFFIXES)}); give a file `gauntlet latent fit` wrote")
    import joblib  # type: ignore[import-untyped]

    try:
        payload = joblib.load(path)
    except Exception as exc:  # a truncated or foreign file fails in many ways inside the unpickler
        raise UserError(f"{path} is not a fitted detector ({type(exc).__name__}); make one with "
                        "`gauntlet latent fit`") from None
    if isinstance(payload, dict) and payload.get("format") == FILE_FORMAT:
        if payload.get("version") != FILE_VERSION:
            raise UserError(f"{path} is a fitted-detector file of version {payload.get('version')}; this Gauntlet "
                            f"reads version {FILE_VERSION}: fit the detector again")
        fitted = FittedDetector(payload["detector"], int(payload["layer"]), str(payload["model"]),
                                str(payload["source"]), {**payload["metadata"],
                                                         "sklearn_version": payload["sklearn_version"]})
        return _at_layer(fitted, path, layer)
    if not callable(getattr(payload, "decision_function", None)):
        raise UserError(f"{path} is not a fitted detector: it holds a {type(payload).__name__}, and a detector file "
                        "holds a `gauntlet latent fit` detector or an estimator with decision_function; make one "
                        "with `gauntlet latent fit`")
    _check_fitted(path, payload)
    if layer is None:
        raise UserError(f"{path} holds a bare {type(payload).__name__}, which does not say which layer's states it "
                        "was fitted on; give the layer (monitor config layer=N)")
    return FittedDetector(MeanResponseEstimator(payload, layer), layer, "", "user")


def _at_layer(fitted: FittedDetector, path: Path, layer: int | None) -> FittedDetector:
    if layer is not None and layer != fitted.layer:
        raise UserError(f"{path} reads layer {fitted.layer}, not {layer}; leave the layer out (only a bare "
                        "estimator needs it)")
    return fitted


def _check_fitted(path: Path, estimator: Any) -> None:
    """Refuse, in one line, a scikit-learn estimator that was never fitted."""
    from sklearn.base import BaseEstimator
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    if isinstance(estimator, BaseEstimator):
        try:
            check_is_fitted(estimator)
        except NotFittedError:
            raise UserError(f"{path} holds a {type(estimator).__name__} that was never fitted; fit it on "
                            "replies' mean response states, then dump it") from None


@dataclass
class MeanResponseEstimator:
    """A scikit-learn estimator fitted on arrays, as a detector over ``Example``s: each example is its
    mean response state at ``layer`` (``detectors.response_means``), the probe's features."""

    estimator: Any
    layer: int

    @property
    def n_features_in_(self) -> int | None:
        width = getattr(self.estimator, "n_features_in_", None)
        return None if width is None else int(width)

    def decision_function(self, examples: list[Example]) -> np.ndarray:
        return np.ravel(self.estimator.decision_function(response_means(examples, self.layer)))


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


__all__ = ["FILE_FORMAT", "FILE_VERSION", "LOADABLE_SUFFIXES", "SUFFIXES", "FittedDetector", "MeanResponseEstimator",
           "check_suffix", "load_detector", "reply_example", "reply_states", "save_detector"]
