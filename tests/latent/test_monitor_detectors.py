"""The latent monitor runs any fitted detector with a ``decision_function``: a user's scikit-learn estimator
(joblib or pickle, fitted on replies' mean response states) or a detector file ``gauntlet latent fit`` writes,
each recording its decision value for every reply, flagged above 0; a file that holds neither, an estimator
that was never fitted, one without its layer or of another width is refused in one line."""

from __future__ import annotations

import pickle
from pathlib import Path

import joblib
import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from gauntlet.controllers.latent.detector_file import FittedDetector, reply_example, save_detector
from gauntlet.controllers.latent.detectors import Example, LinearProbe
from gauntlet.controllers.latent.hidden import Generation, SequenceStates, read_states
from gauntlet.controllers.latent.monitor import LatentMonitor, reply_text
from gauntlet.episode import Step
from gauntlet.errors import UserError
from tests.latent.test_monitor import steps
from tests.latent.tiny_reader import HIDDEN, LAYER, build_tiny_reader


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_reader(tmp_path_factory.mktemp("reader") / "tiny-reader")


def user_estimator(width: int = HIDDEN) -> LogisticRegression:
    """What a user brings: a logistic regression fitted on random states of the reader's width."""
    rng = np.random.default_rng(0)
    states = rng.normal(size=(40, width))
    return LogisticRegression().fit(states, (states[:, 0] > 0).astype(int))


def reply_states_read_afresh(reader: Path) -> list[np.ndarray]:
    """The states at LAYER that wrote each reply of ``steps()``, read by the reader directly."""
    from gauntlet.agents.llm.local_chat import LocalChatModel, load_weights
    from gauntlet.agents.llm.records import message_of

    model, weights = LocalChatModel(model_path=str(reader)), load_weights(str(reader))
    history = [message_of(record) for step in steps() for record in step.messages]
    rows = []
    for reply_at in (2, 4):
        prompt = model.prompt_ids(history[:reply_at])
        response = list(weights.tokenizer(reply_text(history[reply_at]), add_special_tokens=False)["input_ids"])
        [states] = read_states(weights, [Generation(prompt, response, "")], (LAYER,), threads=1)
        rows.append(states.response[LAYER])
    return rows


@pytest.mark.parametrize("dump", ["joblib", "pickle"])
def test_a_users_sklearn_estimator_scores_each_reply_by_its_decision_function(tmp_path, reader, dump):
    estimator = user_estimator()
    path = tmp_path / ("probe.joblib" if dump == "joblib" else "probe.pkl")
    if dump == "joblib":
        joblib.dump(estimator, path)
    else:
        path.write_bytes(pickle.dumps(estimator))
    monitor = LatentMonitor(str(path), reader=str(reader), layer=LAYER)
    observed = [monitor.observe(step) for step in steps()]
    for scores, states in zip(observed, reply_states_read_afresh(reader), strict=True):
        expected = float(estimator.decision_function(states.mean(0, keepdims=True))[0])
        assert scores["decision"] == pytest.approx(expected, rel=1e-4, abs=1e-6) and "chaos" not in scores
        assert scores["flagged"] == float(expected > 0) and scores["reused"] == 0.0
    assert len({round(scores["decision"], 6) for scores in observed}) == 2  # two replies, two scores


def test_a_users_estimator_scores_the_states_a_reply_carries(tmp_path, reader):
    from langchain_core.messages import HumanMessage, SystemMessage

    from gauntlet.agents.llm.kept_states import ReplyStates, carry_states
    from gauntlet.agents.llm.local_chat import LocalChatModel
    from gauntlet.agents.llm.records import message_record

    estimator = user_estimator()
    joblib.dump(estimator, tmp_path / "probe.joblib")
    monitor = LatentMonitor(str(tmp_path / "probe.joblib"), reader=str(reader), layer=LAYER)
    messages = [SystemMessage("Answer briefly."), HumanMessage("Name a shape.")]
    reply = LocalChatModel(model_path=str(reader), max_new_tokens=5).invoke(messages)
    step = Step(index=0, messages=[carry_states(message_record(message), message) for message in (*messages, reply)])
    scores = monitor.observe(step)
    kept = ReplyStates.of(reply).layer(LAYER)
    assert scores["reused"] == 1.0
    assert scores["decision"] == pytest.approx(float(estimator.decision_function(kept.mean(0, keepdims=True))[0]))


def test_a_detector_file_gauntlet_latent_fit_writes_runs_in_the_monitor_too(tmp_path, reader):
    rng = np.random.default_rng(1)
    examples = [Example(SequenceStates(response={LAYER: rng.normal(size=(6, HIDDEN)).astype(np.float32) + bad},
                                       prompt_end={}, boundary=None)) for bad in (0, 1) * 10]
    probe = LinearProbe(LAYER).fit(examples, np.array([0, 1] * 10))
    path = save_detector(tmp_path / "probe.joblib", FittedDetector(probe, LAYER, reader.name))
    monitor = LatentMonitor(str(path), reader=str(reader))
    observed = [monitor.observe(step) for step in steps()]
    for scores, states in zip(observed, reply_states_read_afresh(reader), strict=True):
        expected = float(probe.decision_function([reply_example(states, LAYER)])[0])
        assert scores["decision"] == pytest.approx(expected, rel=1e-4, abs=1e-6)
        assert scores["flagged"] == float(expected > 0)


def test_a_file_without_a_usable_detector_is_one_line_naming_what_it_needs(tmp_path, reader):
    joblib.dump([1, 2, 3], tmp_path / "list.joblib")
    with pytest.raises(UserError, match="holds a list.*decision_function"):
        LatentMonitor(str(tmp_path / "list.joblib"), reader=str(reader), layer=LAYER)
    joblib.dump(LogisticRegression(), tmp_path / "unfitted.joblib")
    with pytest.raises(UserError, match="never fitted"):
        LatentMonitor(str(tmp_path / "unfitted.joblib"), reader=str(reader), layer=LAYER)
    joblib.dump(user_estimator(), tmp_path / "probe.joblib")
    with pytest.raises(UserError, match="which layer"):
        LatentMonitor(str(tmp_path / "probe.joblib"), reader=str(reader))
    joblib.dump(user_estimator(width=16), tmp_path / "narrow.joblib")
    with pytest.raises(UserError, match="16 features.*32"):
        LatentMonitor(str(tmp_path / "narrow.joblib"), reader=str(reader), layer=LAYER)
    (tmp_path / "probe.txt").write_text("not a detector")
    with pytest.raises(UserError, match="neither a .npz chaos score"):
        LatentMonitor(str(tmp_path / "probe.txt"), reader=str(reader), layer=LAYER)
