"""The agent's verbalised confidence: asked beside the conversation after each call, recorded as a note and a
model call of its own (the oversight benchmarks read it back: tests/oversight/test_llm_benchmarks.py)."""

from __future__ import annotations

import pytest

import gauntlet
from gauntlet.agents.llm.agent import CONFIDENCE_QUESTION, LLMAgent, parse_confidence
from gauntlet.bridges.tool_task_env import ToolTaskEnv
from tests.llm.helpers import Confident, run_scripted, small_server, small_task, text_call


@pytest.mark.parametrize(("reply", "expected"), [
    ("70", 0.7), (" 85% ", 0.85), ("100.", 1.0), ("0", 0.0), ("12.5", 0.125), ("101", None), ("about 70", None),
    ("70 percent", None), ('{"name": "add", "arguments": {"a": 2}}', None), ("", None)])
def test_only_a_bare_number_from_0_to_100_is_a_confidence(reply, expected):
    assert parse_confidence(reply) == (pytest.approx(expected) if expected is not None else None)


def test_each_call_is_followed_by_the_question_whose_answer_is_a_note_and_never_joins_the_conversation():
    model = Confident.model_validate({"turns": [text_call("add", {"a": 2, "b": 3}),
                                                text_call("submit_answer", {"answer": 5})],
                                      "answers": ["60", "I am sure"], "asked": []})
    env = ToolTaskEnv([small_task()], small_server)
    try:
        episode = gauntlet.rollout(env, LLMAgent(model=model, ask_confidence=True, check_numbers=False), seed=0)
    finally:
        env.close()
    assert episode.outcome.score == 1.0
    notes = [[event.data["confidence"] for event in step.events if event.kind == "note" and "confidence" in event.data]
             for step in episode.steps]
    assert notes == [[0.6], [None]]  # an answer that is not a number is recorded as None
    asked = [event.data for step in episode.steps for event in step.events
             if event.kind == "model_call" and event.data.get("requested_by") == {"question": "confidence"}]
    assert len(asked) == 2
    # The question and its answer never joined the conversation: the agent's turns are the script's alone.
    texts = [message.content for step in episode.steps for message in step.messages]
    assert CONFIDENCE_QUESTION not in texts and "60" not in texts
    assert episode.agent.config["ask_confidence"] is True
    # An online overseer reads the same feature from the recorded steps as the branching protocol does.
    from gauntlet.controllers.oversight.benchmarks.llm import confidence_features
    from gauntlet.controllers.oversight.features import History

    first = History.from_steps(episode.steps[:1], episode.steps[0].observation, episode.steps[0].info, 10)
    assert confidence_features(first) == {"verbal_confidence": 0.6, "verbal_confidence_missing": 0.0}
    both = History.from_steps(episode.steps, episode.steps[1].observation, episode.steps[1].info, 10)
    assert confidence_features(both) == {"verbal_confidence": 0.5, "verbal_confidence_missing": 1.0}


def test_without_the_option_nothing_is_asked():
    episode = run_scripted([text_call("add", {"a": 2, "b": 3}), text_call("submit_answer", {"answer": 5})],
                           check_numbers=False)
    assert not any("confidence" in event.data for step in episode.steps for event in step.events
                   if event.kind == "note")
    assert episode.agent.config["ask_confidence"] is False


@pytest.mark.xdist_group("offline-model")
def test_on_llama_cpp_the_question_reads_only_what_is_new_and_the_answer_is_a_whole_number(offline_gguf, monkeypatch):
    from gauntlet.agents.llm.agent import CONFIDENCE_GRAMMAR, CONFIDENCE_TOKENS
    from gauntlet.agents.llm.llama_chat import LlamaChatModel
    from gauntlet.agents.llm.llama_runtime import LlamaRuntime

    reads: list[dict] = []
    generate = LlamaRuntime.generate

    def recording(runtime, prompt, **options):
        generation = generate(runtime, prompt, **options)
        reads.append({"prompt": len(prompt), "reused": generation.reused, "grammar": options.get("grammar"),
                      "limit": options["max_new_tokens"], "written": len(generation.tokens)})
        return generation

    monkeypatch.setattr(LlamaRuntime, "generate", recording)
    model = LlamaChatModel(model_path=str(offline_gguf), max_new_tokens=64, persist_prefix=False)
    env = ToolTaskEnv([small_task()], small_server)
    try:
        episode = gauntlet.rollout(env, LLMAgent(model=model, ask_confidence=True, check_numbers=False, max_steps=3),
                                   seed=0)
    finally:
        env.close()
    notes = [event.data["confidence"] for step in episode.steps for event in step.events
             if event.kind == "note" and "confidence" in event.data]
    asked = [index for index, read in enumerate(reads) if read["grammar"] == CONFIDENCE_GRAMMAR]
    assert notes and len(asked) == len(notes)
    # The grammar holds the answer to a number the parser takes, in a few tokens.
    assert all(note is not None and 0.0 <= note <= 1.0 for note in notes)
    assert all(reads[index]["limit"] == CONFIDENCE_TOKENS >= reads[index]["written"] for index in asked)
    for index in asked:
        call, question = reads[index - 1], reads[index]
        # The question's prompt starts with the call's prompt (tools and all): only the reply and the question
        # are read (without the tools, only the system prompt's first words were reused).
        assert question["reused"] >= call["prompt"]
        if index + 1 < len(reads):  # and the next call, after the tool's result, reads from the same prefix
            assert reads[index + 1]["reused"] >= call["prompt"]
