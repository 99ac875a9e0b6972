"""The states a reply carries reach the latent hooks through the LLM agent itself: the correction scores
exactly the states of the reply it is asked about, taken from the agent's checkpoint, not a second read
and not another reply's; and the episode file never holds them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.outputs import ChatResult

import gauntlet
from gauntlet.agents.llm.agent import LLMAgent
from gauntlet.agents.llm.kept_states import ReplyStates, with_states
from gauntlet.agents.llm.scripted import ScriptedChatModel
from gauntlet.bridges.tool_task_env import ToolTaskEnv
from gauntlet.controllers.latent.correction import LatentCorrection
from gauntlet.controllers.latent.detectors import ChaosScore
from tests.latent.test_shared_scores import TASK
from tests.latent.tiny_reader import HIDDEN, LAYER, build_tiny_reader, tiny_score_file
from tests.llm.helpers import answer_turn, text_call

# The same call twice: two replies of one text, each with its own states.
SCRIPT = [text_call("reset", {"seed": 0}), text_call("reset", {"seed": 0}), answer_turn(0.0)]


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_reader(tmp_path_factory.mktemp("reader") / "tiny-reader")


class DecodedOnTheReader(ScriptedChatModel):
    """The script, each reply carrying states as if the reader had decoded it: turn ``t``'s rows are drawn
    from a generator seeded ``t``, shifted by ``t`` (so no two replies carry the same states)."""

    states_source: str = ""
    carried: list[np.ndarray] = []

    def _generate(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        result = super()._generate(messages, stop, run_manager, **kwargs)
        reply = result.generations[0].message
        reply.response_metadata = with_states(reply.response_metadata, ReplyStates(
            self.states_source, 3, {LAYER: carried_rows(len(self.carried))}))
        self.carried.append(carried_rows(len(self.carried)))
        return result


def carried_rows(turn: int) -> np.ndarray:
    return (np.random.default_rng(turn).normal(size=(4 + turn, HIDDEN)) + turn).astype(np.float32)


def watched_episode(tmp_path: Path, reader: Path, hook: Any) -> tuple[Any, DecodedOnTheReader, Path]:
    """One scripted LLM episode whose replies carry states decoded on ``reader``, watched by ``hook``."""
    from gauntlet.agents.llm.local_chat import load_weights

    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    model = DecodedOnTheReader.from_file(script)
    model.states_source, model.carried = load_weights(str(reader)).source, []
    record = tmp_path / "episode.jsonl"
    episode = gauntlet.rollout(ToolTaskEnv([TASK]), LLMAgent(model=model), seed=0, hooks=[hook], record=record,
                               keep_steps=True)
    return episode, model, record


def test_the_correction_scores_the_states_each_reply_carries_through_the_agents_checkpoint(tmp_path, reader):
    score_path = tiny_score_file(tmp_path / "chaos.npz", reader, threshold=0.0)
    controller = LatentCorrection(str(score_path), reader=str(reader), threshold=1e9)  # scores, never corrects
    episode, model, record = watched_episode(tmp_path, reader, controller)
    scored = [event.data["scores"] for step in episode.steps for event in step.events
              if event.kind == "decision" and "chaos" in event.data["scores"]]
    fitted = controller.monitor.score
    assert isinstance(fitted, ChaosScore)
    assert len(scored) == 3 and all(scores["reused"] == 1.0 for scores in scored)
    assert [scores["chaos"] for scores in scored] == pytest.approx([fitted.divergence(rows) for rows in model.carried])
    assert scored[0]["chaos"] != scored[1]["chaos"]  # one text, two replies, two scores
    assert "hidden_states" not in record.read_text()


def test_the_monitor_alone_scores_the_states_each_reply_carries_through_its_step_record(tmp_path, reader):
    """Without the correction, the monitor reads a reply's states from the step's messages: the agent's
    records carry them in memory, so no reply is read again."""
    from gauntlet.controllers.latent.monitor import LatentMonitor

    monitor = LatentMonitor(str(tiny_score_file(tmp_path / "chaos.npz", reader, threshold=0.0)), reader=str(reader))
    episode, model, record = watched_episode(tmp_path, reader, monitor)
    scored = [event.data for step in episode.steps for event in step.events
              if event.kind == "monitor" and "chaos" in event.data]
    fitted = monitor.score
    assert isinstance(fitted, ChaosScore)
    assert len(scored) == 3 and all(scores["reused"] == 1.0 for scores in scored)
    assert [scores["chaos"] for scores in scored] == pytest.approx([fitted.divergence(rows) for rows in model.carried])
    assert "hidden_states" not in record.read_text()
