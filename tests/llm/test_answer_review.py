"""The answer review: the first answer of an episode is held back once with the question restated; the
model then makes the call a step still needs or answers again, and a redrawing model is not told to
avoid the answer it was asked to give again."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

import gauntlet
from gauntlet.agents.llm.agent import ANSWER_REVIEW, LLMAgent, review_message
from gauntlet.agents.llm.calls import ToolSpec, repeatable_calls
from gauntlet.agents.llm.records import conversation
from gauntlet.agents.llm.scripted import ScriptedChatModel
from gauntlet.errors import UserError
from tests.llm.helpers import answer_turn, run_scripted, text_call


run = run_scripted


def notes(episode: gauntlet.Episode, key: str) -> list:
    return [event.data[key] for step in episode.steps for event in step.events
            if event.kind == "note" and key in event.data]


def test_a_first_answer_is_held_back_once_with_the_question_and_the_next_call_then_runs():
    episode = run([answer_turn(2), text_call("add", {"a": 2, "b": 3}), answer_turn(5)], review_answer=True)
    added, answered = episode.steps  # the held-back answer ran no step
    assert added.tool_call.name == "add" and answered.info["score"] == 1.0
    assert notes(episode, "answer_review") == [2]
    review = conversation(episode)[3]
    assert review.type == "tool" and review.content.startswith("Not submitted yet")
    assert "Add 2 and 3." in review.content  # the question, restated


def test_the_same_answer_given_again_is_submitted_and_only_one_answer_is_reviewed():
    episode = run([answer_turn(5), answer_turn(5)], review_answer=True)
    assert len(episode.steps) == 1 and episode.steps[0].info["score"] == 1.0
    assert notes(episode, "answer_review") == [5]
    twice = run([answer_turn(4), text_call("add", {"a": 2, "b": 3}), answer_turn(4)], review_answer=True)
    assert twice.steps[-1].info["score"] == 0.0 and notes(twice, "answer_review") == [4]


def test_without_the_option_the_first_answer_ends_the_task():
    episode = run([answer_turn(2)])
    assert len(episode.steps) == 1 and episode.steps[0].info["score"] == 0.0
    assert notes(episode, "answer_review") == [] and episode.agent.config["review_answer"] is False


def test_a_held_back_answer_is_not_a_call_a_redrawing_model_must_avoid():
    submit = ToolSpec("submit_answer", "", {})
    history = [HumanMessage("Add 2 and 3."),
               AIMessage(content="", tool_calls=[{"id": "c0", "name": "submit_answer", "args": {"answer": 5}}]),
               ToolMessage(review_message("Add 2 and 3.", "submit_answer"), tool_call_id="c0",
                           artifact={"unrun": ANSWER_REVIEW, "may_repeat": True})]
    assert repeatable_calls(history, {"submit_answer": submit}) == []
    refused = history[:2] + [ToolMessage("no", tool_call_id="c0", artifact={"unrun": "ungrounded_numbers"})]
    assert repeatable_calls(refused, {"submit_answer": submit}) == [{"name": "submit_answer",
                                                                     "arguments": {"answer": 5}}]


def test_a_review_answer_that_is_not_true_or_false_is_one_line():
    with pytest.raises(UserError, match="review_answer is true or false, not 1"):
        LLMAgent(model=ScriptedChatModel.model_validate({"turns": []}), review_answer=1)
