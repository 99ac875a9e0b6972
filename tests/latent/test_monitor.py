"""The run-time latent monitor scores each model reply of an LLM-agent episode from the reader's hidden
states, as the fitted chaos score scores them directly; its file round-trips; a wrong file is one line."""

from __future__ import annotations

import numpy as np
import pytest

from gauntlet.controllers.latent.detectors import ChaosScore, Example
from gauntlet.controllers.latent.hidden import Generation, SequenceStates, read_states
from gauntlet.controllers.latent.monitor import LatentMonitor, load_chaos_score, reply_text, save_chaos_score
from gauntlet.episode import Message, Step
from gauntlet.errors import UserError

LAYER = 2


# The tiny model borrows the offline model's tokenizer: the first test of a run may wait for its one-time
# reading (about 30 s, more on a loaded machine; see conftest).
pytestmark = pytest.mark.timeout(900)


def fitted(dim: int = 32) -> ChaosScore:
    rng = np.random.default_rng(0)
    examples = [Example(SequenceStates(response={LAYER: rng.normal(size=(6, dim)).astype(np.float32)},
                                       prompt_end={}, boundary=None)) for _ in range(10)]
    return ChaosScore(LAYER, rank=4).fit(examples, np.zeros(10, dtype=int))


def test_a_saved_chaos_score_loads_back_and_scores_alike(tmp_path):
    score = fitted()
    path = save_chaos_score(tmp_path / "chaos.npz", score, threshold=3.5, model="m.gguf")
    loaded, threshold, model = load_chaos_score(path)
    tokens = np.random.default_rng(1).normal(size=(7, 32))
    assert (threshold, model, loaded.layer) == (3.5, "m.gguf", LAYER)
    assert loaded.divergence(tokens) == pytest.approx(score.divergence(tokens))
    (tmp_path / "not.npz").write_bytes(b"nothing")
    with pytest.raises(UserError, match="not a fitted chaos score"):
        load_chaos_score(tmp_path / "not.npz")


def steps() -> list[Step]:
    call = {"id": "c0", "name": "search_chemical", "arguments": {"query": "ethanol"}}
    first = [Message(role="system", content="Answer with an id."), Message(role="user", content="Find ethanol."),
             Message(role="assistant", content="", tool_calls=[call])]
    second = [Message(role="tool", content='[{"chemical_id": 7}]', tool_call_id="c0", name="search_chemical"),
              Message(role="assistant", content="7")]
    return [Step(index=i, observation=None, action=None, reward=0.0, terminated=False, truncated=False, info={},
                 messages=messages) for i, messages in enumerate((first, second))]


def test_each_reply_is_scored_from_the_readers_states_at_the_positions_that_wrote_it(tmp_path, tiny_model_folder,
                                                                                  tiny_weights):
    from gauntlet.agents.llm.local_chat import LocalChatModel
    from gauntlet.agents.llm.records import message_of

    score = fitted()
    path = save_chaos_score(tmp_path / "chaos.npz", score, threshold=0.0, model=tiny_model_folder.name)
    monitor = LatentMonitor(str(path), reader=str(tiny_model_folder))
    episode = steps()
    observed = [monitor.observe(step) for step in episode]
    reader = LocalChatModel(model_path=str(tiny_model_folder))
    history = [message_of(record) for step in episode for record in step.messages]
    for reply_at, scores in zip((2, 4), observed, strict=True):
        prompt = reader.prompt_ids(history[:reply_at])
        response = list(tiny_weights.tokenizer(reply_text(history[reply_at]), add_special_tokens=False)["input_ids"])
        [states] = read_states(tiny_weights, [Generation(prompt, response, "")], (LAYER,), threads=1)
        assert scores["chaos"] == pytest.approx(score.divergence(states.response[LAYER]), rel=1e-4)
        assert scores["flagged"] == 1.0  # every reply is above a threshold of 0
    assert '"name": "search_chemical"' in reply_text(history[2])
    # A new episode starts a new conversation.
    assert monitor.observe(episode[0]) == observed[0]


def test_a_score_fitted_on_another_model_is_refused(tmp_path, tiny_model_folder):
    path = save_chaos_score(tmp_path / "chaos.npz", fitted(), threshold=1.0, model="other.gguf")
    with pytest.raises(UserError, match="fitted on other.gguf"):
        LatentMonitor(str(path), reader=str(tiny_model_folder))


def test_decoding_keeps_the_states_that_wrote_each_reply_token_as_a_full_read_gives_them(tiny_model_folder,
                                                                                        tiny_weights):
    import torch
    from langchain_core.messages import HumanMessage, SystemMessage

    from gauntlet.agents.llm.local_chat import LocalChatModel, ReplyStates

    messages = [SystemMessage("Answer briefly."), HumanMessage("Name a colour.")]
    model = LocalChatModel(model_path=str(tiny_model_folder), max_new_tokens=6, keep_hidden_layers=(1, -1))
    reply = model.invoke(messages)
    prompt = model.prompt_ids(messages)
    with torch.inference_mode():
        written = tiny_weights.model.generate(torch.tensor([prompt]), max_new_tokens=6, do_sample=False,
                                              pad_token_id=0)[0, len(prompt):].tolist()
    [states] = read_states(tiny_weights, [Generation(prompt, written, "")], (1, 2), threads=1)
    carried = ReplyStates.of(reply)
    assert carried is not None and carried.source == tiny_weights.source
    for layer, number in ((1, 1), (-1, 2)):  # -1 is the last hidden state: 2 in a two-layer model
        kept = carried.layer(layer)
        assert kept is not None and kept.shape == (len(written), 32)
        np.testing.assert_allclose(kept, states.response[number], rtol=1e-4, atol=1e-4)
    assert carried.layer(0) is None  # a layer nobody kept


def test_the_monitor_scores_the_states_the_reply_carries_when_its_reader_decoded_them(tmp_path, tiny_model_folder,
                                                                                       tiny_weights):
    from langchain_core.messages import HumanMessage, SystemMessage

    from gauntlet.agents.llm.kept_states import RECORD_ATTRIBUTE, ReplyStates, carry_states
    from gauntlet.agents.llm.local_chat import LocalChatModel
    from gauntlet.agents.llm.records import message_record

    score = fitted()
    path = save_chaos_score(tmp_path / "chaos.npz", score, threshold=0.0, model=tiny_model_folder.name)
    monitor = LatentMonitor(str(path), reader=str(tiny_model_folder))  # asks the weights to keep layer 2
    messages = [SystemMessage("Answer briefly."), HumanMessage("Name a shape.")]
    reply = LocalChatModel(model_path=str(tiny_model_folder), max_new_tokens=5).invoke(messages)
    step = Step(index=0, observation=None, action=None, reward=0.0, terminated=False, truncated=False, info={},
                messages=[carry_states(message_record(message), message) for message in (*messages, reply)])
    scores = monitor.observe(step)
    assert scores["reused"] == 1.0
    kept = ReplyStates.of(reply).layer(LAYER)
    assert scores["chaos"] == pytest.approx(score.divergence(kept))
    # The record's states are the ones scored, not any other reply's of the same text.
    planted = ReplyStates(tiny_weights.source, 3, {LAYER: kept[::-1] * 3})
    setattr(step.messages[-1], RECORD_ATTRIBUTE, planted)
    assert monitor.observe(step)["chaos"] == pytest.approx(score.divergence(kept[::-1] * 3))
    # States another model decoded are not the reader's: the reader reads the reply.
    setattr(step.messages[-1], RECORD_ATTRIBUTE, ReplyStates("llama.cpp:/elsewhere.gguf", 3, {LAYER: kept}))
    assert monitor.observe(step)["reused"] == 0.0
    # A reply that carries no states (another process's, a replayed episode) is read by the reader.
    other = step.model_copy(update={"messages": [*step.messages[:2], Message(role="assistant", content="blue")]})
    assert monitor.observe(other)["reused"] == 0.0


def test_the_shipped_score_is_the_small_offline_models_layer_12_fit():
    from gauntlet.agents.llm.offline_model import model_pin
    from gauntlet.controllers.latent.monitor import shipped_score

    score, threshold, model = load_chaos_score(shipped_score())
    assert (score.layer, model) == (12, model_pin("small").file) and score.directions.shape == (896, 32)
    assert np.isfinite(threshold) and threshold > 0
