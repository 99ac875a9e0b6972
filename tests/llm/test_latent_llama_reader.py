"""The latent study on llama.cpp (``controllers/latent/llama_reader``): the prompts transformers renders,
document states that match a transformers forward of the same file dequantised, and replies without
their end token, as the study's transformers path gives them."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.xdist_group("offline-model")

LAYERS = (6, 24)
TOLERANCE_COSINE = 0.999


@pytest.fixture(scope="module")
def reader(offline_gguf):
    from gauntlet.controllers.latent.llama_reader import load_llama_weights

    return load_llama_weights(offline_gguf)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1))


def texts() -> list[str]:
    from gauntlet.controllers.latent import corpus_study
    from gauntlet.controllers.latent.corpora import load_corpora

    rows = corpus_study.sample(load_corpora(), 1)
    # A benign text and an injection, from two datasets.
    return [next(row["text"] for row in rows if row["label"] == 0), next(row["text"] for row in rows if row["label"])]


def test_the_study_s_prompts_are_the_tokens_transformers_makes(reader, local_model):
    from gauntlet.controllers.latent import corpus_study
    from gauntlet.controllers.latent.hierarchy import hierarchy_suite
    from gauntlet.controllers.latent.study import prompt_and_boundary, render

    reference = local_model.weights.tokenizer
    for text in texts():
        for opened in (True, False):
            messages = corpus_study.document_messages(text)
            assert render(reader.tokenizer, messages, generation_prompt=opened) == render(
                reference, messages, generation_prompt=opened)
    for case in hierarchy_suite(per_cell=1)[::5]:
        assert prompt_and_boundary(reader.tokenizer, case) == prompt_and_boundary(reference, case)


def test_document_states_read_after_a_shared_opening_match_a_transformers_forward(reader, local_model):
    from gauntlet.controllers.latent.corpus_study import read_documents

    documents = texts()
    on_llama = read_documents(reader, documents, LAYERS, max_tokens=40)
    reference = read_documents(local_model.weights, documents, LAYERS, max_tokens=40, threads=1)
    for ours, theirs in zip(on_llama, reference, strict=True):
        for layer in LAYERS:
            assert ours.response[layer].shape == theirs.response[layer].shape
            assert cosines(ours.response[layer], theirs.response[layer]).min() >= TOLERANCE_COSINE
            assert cosines(ours.boundary[layer][None], theirs.boundary[layer][None])[0] >= TOLERANCE_COSINE


def test_a_reply_is_the_runtime_s_greedy_tokens_without_the_end_token(reader):
    from gauntlet.controllers.latent.hidden import generate
    from gauntlet.controllers.latent.hierarchy import hierarchy_suite
    from gauntlet.controllers.latent.study import prompts

    asked = prompts(reader.tokenizer, hierarchy_suite(per_cell=1)[:2])
    replies = generate(reader, asked, max_new_tokens=48)
    for prompt, reply in zip(asked, replies, strict=True):
        written = reader.runtime.generate(prompt, max_new_tokens=48, reuse_prefix=False)
        assert reply.prompt_ids == prompt
        assert reply.response_ids == [token for token in written.tokens if not reader.runtime.is_end(token)]
        assert reply.text == reader.runtime.detokenize(reply.response_ids)
        assert not any(reader.runtime.is_end(token) for token in reply.response_ids)


def test_states_after_a_position_outside_the_sequence_is_refused(reader):
    with pytest.raises(ValueError, match="outside the 3 tokens"):
        reader.runtime.states_after([1, 2, 3], 3, LAYERS)
