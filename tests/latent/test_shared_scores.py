"""The latent monitor and the latent-correct controller in one run score each reply once: the monitor takes
the score the controller recorded in the step's decision; beside a controller that reads another score it
scores for itself; and both are refused, before a run starts, for an agent that writes no model replies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import gauntlet
from gauntlet.agents.llm.agent import LLMAgent
from gauntlet.agents.llm.scripted import ScriptedChatModel
from gauntlet.batch import HookSpec
from gauntlet.bridges.tool_task_env import ToolTaskEnv
from gauntlet.cli_commands.common import HookTarget
from gauntlet.controllers.latent.correction import LatentCorrection
from gauntlet.controllers.latent.detectors import ChaosScore
from gauntlet.controllers.latent.monitor import LatentMonitor
from gauntlet.errors import UserError
from gauntlet.tasks import EvalSpec, ToolTask
from tests.latent.tiny_reader import build_tiny_reader, tiny_score_file
from tests.llm.helpers import answer_turn, text_call

TASK = ToolTask(id="cartpole-report", server="env:CartPole-v1", answer=0.0,
                eval_spec=EvalSpec(kind="numeric", abs_tol=1), question="Reset with seed 0 and report the position.")
SCRIPT = [text_call("reset", {"seed": 0}), text_call("step", {"action": 1}), answer_turn(0.0)]


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_reader(tmp_path_factory.mktemp("reader") / "tiny-reader")


@pytest.fixture
def detector_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every call of the chaos score's divergence (the detector), by the number of tokens it scored."""
    calls: list[int] = []
    divergence = ChaosScore.divergence

    def counted(self: ChaosScore, tokens: Any) -> float:
        calls.append(len(tokens))
        return divergence(self, tokens)

    monkeypatch.setattr(ChaosScore, "divergence", counted)
    return calls


def watched_episode(tmp_path: Path, monitor: LatentMonitor, controller: LatentCorrection,
                    detector_calls: list[int]) -> gauntlet.Episode:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    agent = LLMAgent(model=ScriptedChatModel.from_file(script))
    detector_calls.clear()  # only the episode's: fitting a score calls the detector too
    return gauntlet.rollout(ToolTaskEnv([TASK]), agent, seed=0, hooks=[monitor, controller],
                            record=tmp_path / "episode.jsonl", keep_steps=True)


def replies_of(episode: gauntlet.Episode) -> int:
    return sum(record.role == "assistant" for step in episode.steps for record in step.messages)


@pytest.mark.parametrize("threshold", [1e9, -1e9], ids=["let-through", "every-reply-rewritten"])
def test_a_reply_watched_by_the_monitor_and_the_correction_is_scored_once(tmp_path, reader, detector_calls,
                                                                          threshold):
    score = str(tiny_score_file(tmp_path / "chaos.npz", reader, threshold=0.0))
    monitor = LatentMonitor(score, reader=str(reader))
    controller = LatentCorrection(score, reader=str(reader), threshold=threshold)
    episode = watched_episode(tmp_path, monitor, controller, detector_calls)
    assert replies_of(episode) >= 2 and len(detector_calls) == replies_of(episode)
    for step in episode.steps:
        [decision] = [event.data["scores"] for event in step.events if event.kind == "decision"]
        [watched] = [event.data for event in step.events if event.kind == "monitor"]
        # The monitor records the controller's score of the step's last reply, flagged at its own threshold 0.
        assert watched["shared"] == 1.0
        assert watched["chaos"] == decision.get("chaos_after", decision["chaos"])
        assert watched["flagged"] == float(watched["chaos"] > 0.0)
    assert any("chaos_after" in event.data["scores"] for step in episode.steps for event in step.events
               if event.kind == "decision") == (threshold < 0)


def test_beside_a_correction_that_reads_another_score_the_monitor_scores_every_reply_itself(tmp_path, reader,
                                                                                            detector_calls):
    ours = str(tiny_score_file(tmp_path / "ours.npz", reader, threshold=0.0))
    theirs = str(tiny_score_file(tmp_path / "theirs.npz", reader, threshold=0.0))
    partner = HookSpec(kind="controller", name="latent-correct", config={"model": theirs, "reader": str(reader)})
    target = HookTarget("eval", "chem", "llm", hooks={"controller": partner})
    config = LatentMonitor.compose(target, {"model": ours, "reader": str(reader)})
    assert config["scores_from"] is None
    same = HookTarget("eval", "chem", "llm", hooks={"controller": partner.model_copy(update={"config": {
        "model": ours, "reader": str(reader), "threshold": 5.0}})})
    assert "scores_from" not in LatentMonitor.compose(same, {"model": ours, "reader": str(reader)})
    episode = watched_episode(tmp_path, LatentMonitor(ours, reader=str(reader), scores_from=None),
                              LatentCorrection(theirs, reader=str(reader), threshold=1e9), detector_calls)
    watched = [event.data for step in episode.steps for event in step.events if event.kind == "monitor"]
    assert watched and all(data["shared"] == 0.0 for data in watched)
    assert len(detector_calls) == 2 * replies_of(episode)  # each hook read each reply


@pytest.mark.parametrize("hook", [LatentMonitor, LatentCorrection])
def test_each_latent_hook_refuses_an_agent_that_writes_no_replies_before_anything_is_loaded(hook, tmp_path):
    target = HookTarget("run", "CartPole-v1", "random")
    with pytest.raises(UserError, match="agent 'random'.*run it with --agent llm"):
        hook.compose(target, {"model": str(tmp_path / "not-even-read.npz")})
    with pytest.raises(UserError, match="no fitted detector at .*absent.npz"):
        hook.compose(HookTarget("eval", "chem", "llm"), {"model": str(tmp_path / "absent.npz")})
