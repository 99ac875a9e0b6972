"""What a controller decides is in the episode file exactly as in the returned Episode.

Each test records with hooks to a file, reads the file back with ``load_episodes`` and compares it,
field by field, with the Episode ``rollout`` returned.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

import gauntlet
from gauntlet.episode import Episode, load_episodes, to_plain
from gauntlet.hooks import Decision
from gauntlet.runner import rollout


class _HaltAt:
    """Halts before step ``at``; lets every other step go ahead."""

    name = "halt-at"

    def __init__(self, at: int):
        self.at = at

    def decide(self, prefix, candidates):
        if len(prefix.steps) == self.at:
            return Decision.intervene("halt", reason=f"stop before step {self.at}", scores={"risk": 1.0})
        return Decision.proceed()


class _NoPushRight:
    """Replaces every 'push right' with 'push left'."""

    name = "no-right"

    def decide(self, prefix, candidates):
        if int(candidates[0]) == 1:
            return Decision.intervene("replace_action", action=0, reason="no pushing right")
        return Decision.proceed()


class _AngleMonitor:
    name = "angle"

    def observe(self, step):
        return {"abs_angle": float(abs(step.observation[2]))}


class _FailsAt:
    """A controller with a bug that shows before step ``at``."""

    name = "fails-at"

    def __init__(self, at: int):
        self.at = at

    def decide(self, prefix, candidates):
        if len(prefix.steps) == self.at:
            raise RuntimeError("controller bug")
        return Decision.proceed()


def _record_and_read_back(tmp_path, hooks, seed=0) -> tuple[Episode, Episode]:
    path = tmp_path / "ep.jsonl"
    in_memory = rollout(gym.make("CartPole-v1"), gauntlet.make_agent("random"), seed=seed, hooks=hooks, record=path)
    (on_disk,) = load_episodes(path)
    return in_memory, on_disk


def _same_record(in_memory: Episode, on_disk: Episode) -> None:
    assert to_plain(on_disk.model_dump()) == to_plain(in_memory.model_dump())


def _kinds(events):
    return [(event.source, event.kind, event.data.get("intervention")) for event in events]


def test_halt_before_the_first_step_is_recorded_in_the_outcome_on_disk_as_in_memory(tmp_path):
    in_memory, on_disk = _record_and_read_back(tmp_path, [_HaltAt(0)])
    _same_record(in_memory, on_disk)
    assert on_disk.steps == [] and on_disk.complete
    assert on_disk.outcome.metrics.pop("wall_s") >= 0
    assert on_disk.outcome.metrics == {"return": 0.0, "length": 0, "cost": 0.0, "truncated": True}
    assert _kinds(on_disk.outcome.events) == [("halt-at", "decision", "halt"), ("halt-at", "intervention", "halt")]
    assert on_disk.outcome.events[0].data["reason"] == "stop before step 0"
    assert on_disk.outcome.events[0].data["scores"] == {"risk": 1.0}


def test_halt_mid_episode_truncates_the_last_step_and_keeps_the_halting_events_on_disk(tmp_path):
    in_memory, on_disk = _record_and_read_back(tmp_path, [_AngleMonitor(), _HaltAt(4)])
    _same_record(in_memory, on_disk)
    assert len(on_disk.steps) == 4 and on_disk.outcome.metrics["length"] == 4
    assert [step.truncated for step in on_disk.steps] == [False, False, False, True]
    # The last step: the decision that let it happen, its monitor score, then the halt that ended the episode.
    assert _kinds(on_disk.steps[-1].events) == [("halt-at", "decision", None), ("angle", "monitor", None),
                                                ("halt-at", "decision", "halt"), ("halt-at", "intervention", "halt")]
    assert on_disk.outcome.events == [] and "truncated" not in on_disk.outcome.metrics


def test_replaced_actions_and_their_interventions_are_on_disk_as_in_memory(tmp_path):
    in_memory, on_disk = _record_and_read_back(tmp_path, [_NoPushRight(), _AngleMonitor()], seed=3)
    _same_record(in_memory, on_disk)
    assert all(step.action == 0 for step in on_disk.steps)
    replaced = [step for step in on_disk.steps if any(event.kind == "intervention" for event in step.events)]
    assert replaced, "the random agent pushed right at least once"
    for step in replaced:
        assert _kinds(step.events)[:2] == [("no-right", "decision", "replace_action"),
                                           ("no-right", "intervention", "replace_action")]
        assert step.events[1].data["original_action"] == 1 and step.action == 0  # proposed, then taken
    assert on_disk.steps[-1].terminated or on_disk.steps[-1].truncated


def test_a_controller_that_fails_leaves_every_step_taken_on_disk(tmp_path):
    path = tmp_path / "ep.jsonl"
    with pytest.raises(RuntimeError, match="controller bug"):
        rollout(gym.make("CartPole-v1"), gauntlet.make_agent("random"), seed=0, hooks=[_FailsAt(3)], record=path)
    (on_disk,) = load_episodes(path)
    assert [step.index for step in on_disk.steps] == [0, 1, 2] and not on_disk.complete
