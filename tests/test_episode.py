"""The Episode record: writing, reading, torn lines, sidecar arrays."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

import gauntlet
from gauntlet.episode import (AgentSpec, Episode, EpisodeFormatError, EpisodeHeader, EpisodeWriter, Event,
                              Message, Outcome, Step, ToolCall, load_episodes)
from gauntlet.runner import rollout


def _header(episode_id="e1", observation=None):
    return EpisodeHeader(run_id="r", episode_id=episode_id, env_id="X-v0", seed=3,
                         agent=AgentSpec(name="random"), initial_observation=observation)


def test_written_episode_reads_back_as_typed_records(tmp_path):
    path = tmp_path / "ep.jsonl"
    with EpisodeWriter(path) as writer:
        writer.begin(_header(observation=np.arange(3, dtype=np.float32)))
        call = ToolCall(server="s", name="t", arguments={"a": 1}, result=2, latency_ms=1.0)
        writer.step(0, np.array([1.5, 2.5]), 1, 1.0, False, False, {"x": np.float32(0.5), "tool_call": call},
                    cost=0.25, events=[Event(source="m", kind="monitor", data={"risk": 0.1}, cost_ms=0.2)],
                    privileged={"truth": 7})
        writer.end(Outcome(score=1.0, success=True, metrics={"length": 1}))
    (episode,) = load_episodes(path)
    assert isinstance(episode, Episode) and episode.complete
    assert episode.initial_observation == [0.0, 1.0, 2.0]
    step = episode.steps[0]
    assert isinstance(step, Step)
    assert step.observation == [1.5, 2.5] and step.action == 1 and step.cost == 0.25
    assert step.info == {"x": 0.5, "tool_call": call} and step.privileged == {"truth": 7}
    assert step.tool_call == call and step.tool_call is step.info["tool_call"]
    assert step.events[0].data == {"risk": 0.1} and step.events[0].cost_ms == 0.2
    assert episode.outcome.success is True


def test_every_line_is_flushed_as_it_happens(tmp_path):
    path = tmp_path / "ep.jsonl"
    writer = EpisodeWriter(path)
    writer.begin(_header())
    writer.step(0, 0, 0, 1.0, False, False, {})
    # Read while the writer is still open: a crash now must leave these lines on disk.
    lines = path.read_text().splitlines()
    assert [json.loads(line)["kind"] for line in lines] == ["header", "step"]
    (episode,) = load_episodes(path)
    assert not episode.complete and len(episode.steps) == 1
    writer.close()


def test_a_new_file_appears_only_with_its_header_line_whole(tmp_path, monkeypatch):
    # A process killed between creating the file and writing its header would leave an empty episode
    # file, which loads as no episode at all: the file must come into being holding its first line.
    path = tmp_path / "ep.jsonl"
    writer = EpisodeWriter(path)
    assert not path.exists()
    created_empty = []
    real_open = open

    def watching_open(file, mode="r", *args, **kwargs):
        if str(file) == str(path) and "a" in mode:
            created_empty.append(not path.exists() or path.stat().st_size == 0)
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr("builtins.open", watching_open)
    writer.begin(_header())
    assert created_empty == [False]
    assert [json.loads(line)["kind"] for line in path.read_text().splitlines()] == ["header"]
    assert not list(tmp_path.glob("*.tmp"))
    writer.step(0, 0, 0, 1.0, False, False, {})
    writer.close()
    with EpisodeWriter(path) as again:  # an existing file is appended to, its lines kept
        again.begin(_header("e2"))
    assert [episode.episode_id for episode in load_episodes(path)] == ["e1", "e2"]


def test_torn_last_line_is_skipped_with_a_warning_and_the_prefix_returned(tmp_path):
    path = tmp_path / "ep.jsonl"
    with EpisodeWriter(path) as writer:
        writer.begin(_header())
        for i in range(3):
            writer.step(i, i, 0, 1.0, False, False, {})
    with open(path, "ab") as handle:
        handle.write(b'{"kind":"step","index":3,"observ')
    with pytest.warns(UserWarning, match="torn last line"):
        (episode,) = load_episodes(path)
    assert [s.index for s in episode.steps] == [0, 1, 2]
    assert episode.outcome is None


def test_a_corrupt_line_in_the_middle_is_an_error_not_silently_dropped(tmp_path):
    path = tmp_path / "ep.jsonl"
    with EpisodeWriter(path) as writer:
        writer.begin(_header())
        writer.step(0, 0, 0, 1.0, False, False, {})
    text = path.read_text().splitlines()
    path.write_text(text[0] + "\nnot json\n" + text[1] + "\n")
    with pytest.raises(EpisodeFormatError, match="line 2 is not JSON"):
        load_episodes(path)


def test_file_that_does_not_match_the_schema_names_the_problem(tmp_path):
    path = tmp_path / "ep.jsonl"
    path.write_text('{"kind":"header","run_id":"r"}\n')
    with pytest.raises(EpisodeFormatError, match="does not match schema"):
        load_episodes(path)


def test_large_arrays_go_to_the_sidecar_and_load_by_key(tmp_path):
    path = tmp_path / "ep.jsonl"
    image = np.random.default_rng(0).integers(0, 255, size=(16, 16, 3), dtype=np.uint8)
    with EpisodeWriter(path) as writer:
        writer.begin(_header())
        writer.step(0, {"image": image, "pos": np.array([1.0, 2.0])}, 0, 0.0, False, False, {})
        writer.end(Outcome(score=0.0))
    (episode,) = load_episodes(path)
    summary = episode.steps[0].observation["image"]
    assert summary["shape"] == [16, 16, 3] and summary["dtype"] == "uint8"
    assert summary["max"] == float(image.max())
    assert episode.steps[0].observation["pos"] == [1.0, 2.0]
    np.testing.assert_array_equal(episode.array(summary["__array__"]), image)


def test_several_episodes_in_one_file_read_in_order(tmp_path):
    path = tmp_path / "many.jsonl"
    env = gym.make("CartPole-v1")
    agent = gauntlet.make_agent("random")
    with EpisodeWriter(path) as writer:
        returns = [rollout(env, agent, seed=s, record=writer).outcome.score for s in range(3)]
    episodes = load_episodes(path)
    assert [e.seed for e in episodes] == [0, 1, 2]
    assert [e.outcome.score for e in episodes] == returns
    assert [e.total_reward for e in episodes] == returns


def test_episode_file_is_plain_json_lines_readable_without_gauntlet(tmp_path):
    path = tmp_path / "ep.jsonl"
    rollout(gym.make("CartPole-v1"), gauntlet.make_agent("random"), seed=0, record=path)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert records[0]["kind"] == "header" and records[0]["schema_version"] == 1
    assert records[0]["versions"]["gauntlet"] == gauntlet.__version__
    assert all(r["kind"] == "step" for r in records[1:-1]) and records[-1]["kind"] == "outcome"
    assert sum(r["reward"] for r in records[1:-1]) == records[-1]["score"]


def test_llm_messages_keep_their_extra_fields_through_a_file(tmp_path):
    path = tmp_path / "ep.jsonl"
    with EpisodeWriter(path) as writer:
        writer.begin(_header())
        writer.step(0, 0, 0, 0.0, False, False, {},
                    messages=[Message(role="assistant", content="hi", tool_calls=[{"name": "step"}])])
    (episode,) = load_episodes(path)
    message = episode.steps[0].messages[0]
    assert message.role == "assistant" and message.tool_calls == [{"name": "step"}]


def test_write_episode_writes_back_what_it_read_including_outcome_events(tmp_path):
    step = Step(index=0, observation=[0.5], action=1, reward=2.0, cost=0.5, truncated=True, info={"k": 1},
                tool_call=ToolCall(server="s", name="t"), messages=[Message(role="assistant", content="x")],
                events=[Event(source="c", kind="decision", data={"kind": "continue"})], privileged={"p": 1})
    halt = [Event(source="c", kind="intervention", data={"intervention": "halt", "reason": "r"})]
    original = Episode(**_header().model_dump(), steps=[step],
                       outcome=Outcome(score=2.0, metrics={"length": 1}, events=halt))
    with EpisodeWriter(tmp_path / "ep.jsonl") as writer:
        writer.write_episode(original)
    (loaded,) = load_episodes(tmp_path / "ep.jsonl")
    assert loaded.model_dump() == original.model_dump()


def test_an_episode_given_as_its_header_writes_only_the_header_fields(tmp_path):
    path = tmp_path / "ep.jsonl"
    episode = Episode(**_header().model_dump(), steps=[Step(index=0)], outcome=Outcome(score=1.0),
                      sidecar="elsewhere.npz")
    with EpisodeWriter(path) as writer:
        writer.begin(episode)
    header = json.loads(path.read_text().splitlines()[0])
    assert set(header) == {"kind", *EpisodeHeader.model_fields}


OLD_STEP_LINE = {"kind": "step", "index": 0, "observation": {"result": "{}"}, "action": "a", "reward": 0.0,
                 "terminated": False, "truncated": False, "info": {"task_id": "t1", "step": 1},
                 "tool_call": {"server": "s", "name": "t", "arguments": {"a": 1}, "result": 2, "is_error": False,
                               "latency_ms": 1.5}}


def test_a_file_written_with_the_step_level_tool_call_reads_with_the_call_in_info(tmp_path):
    # Before the tool call had one home, the runner moved it out of info into a step-level field.
    path = tmp_path / "old.jsonl"
    header = {"kind": "header", **_header().model_dump()}
    path.write_text("\n".join(json.dumps(record) for record in (header, OLD_STEP_LINE)) + "\n")
    (episode,) = load_episodes(path)
    step = episode.steps[0]
    call = ToolCall(server="s", name="t", arguments={"a": 1}, result=2, latency_ms=1.5)
    assert step.info == {"task_id": "t1", "step": 1, "tool_call": call} and step.tool_call == call
    assert "tool_call" not in step.model_dump()  # one home: written back, it is part of info
    with EpisodeWriter(tmp_path / "new.jsonl") as writer:
        writer.write_episode(episode)
    written = json.loads((tmp_path / "new.jsonl").read_text().splitlines()[1])
    assert "tool_call" not in written and written["info"]["tool_call"] == OLD_STEP_LINE["tool_call"]
    assert load_episodes(tmp_path / "new.jsonl")[0].steps == episode.steps


def test_a_step_given_its_tool_call_keeps_it_in_info_and_refuses_a_second_copy():
    call = ToolCall(server="s", name="t", result={"ok": True})
    info = {"k": 1}
    step = Step(index=0, info=info, tool_call=call)
    assert step.info == {"k": 1, "tool_call": call} and step.tool_call is call
    assert info == {"k": 1}  # the caller's dict is left as it was
    assert Step(index=0, info={"tool_call": call.model_dump()}).tool_call == call  # read as a ToolCall
    assert Step(index=0).tool_call is None and Step(index=0, tool_call=None).info == {}
    with pytest.raises(ValueError, match="given twice"):
        Step(index=0, info={"tool_call": call}, tool_call=call)
