"""ScienceWorld-v0: gold path and expert, success and failure, branching by verified replay, the JVM's life.

Every test here starts a Java process, so they share one group (one worker) when the run is split.
"""

from __future__ import annotations

import dataclasses
import pickle

import gymnasium as gym
import psutil
import pytest
from gymnasium.utils.env_checker import check_env

from gauntlet.branching import BranchingError, outputs_identical
from gauntlet.testing import check_branchable

pytestmark = pytest.mark.xdist_group("scienceworld")
TASK = {"task": "find-living-thing", "variation": 0}


def make(**kwargs) -> gym.Env:
    return gym.make("gauntlet/ScienceWorld-v0", **{**TASK, "admissible_commands": False, **kwargs})


@pytest.fixture(scope="module")
def env():
    env = make()
    yield env
    env.close()


def java_children() -> set[int]:
    return {child.pid for child in psutil.Process().children(recursive=True) if "java" in child.name()}


def test_following_the_gold_actions_completes_the_task(env):
    _, info = env.reset(seed=0)
    gold = info["privileged"]["gold_actions"]
    assert info["task"] == TASK["task"] and "living thing" in info["task_description"]
    assert info["privileged"]["expert_action"] == gold[0] and info["privileged"]["on_gold_path"]
    total = float(info["score"])  # the task's score can start above zero (progress the start state already has)
    for index, command in enumerate(gold):
        assert info["privileged"]["expert_action"] == command
        _, reward, terminated, _, info = env.step(command)
        total += reward
        assert info["privileged"]["on_gold_path"] and terminated == (index == len(gold) - 1)
    assert info["success"] and info["won"] and not info["lost"]
    assert info["score"] == total == 100 and info["privileged"]["expert_action"] is None


def test_off_the_gold_path_there_is_no_expert_action(env):
    _, info = env.reset(seed=0)
    gold = info["privileged"]["gold_actions"]
    env.step(gold[0])
    _, _, _, _, info = env.step("look at picture")
    assert not info["privileged"]["on_gold_path"] and info["privileged"]["expert_action"] is None
    assert info["privileged"]["gold_actions"] == gold


def test_focusing_on_the_wrong_thing_fails_the_task(env):
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("focus on air")
    assert terminated and info["lost"] and not info["success"] and info["score"] < 0 and reward < 0


def test_restore_replays_the_episode_and_gives_the_same_future(env):
    _, info = env.reset(seed=0)
    gold = info["privileged"]["gold_actions"]
    for command in (gold[0], "look at picture", gold[1]):
        env.step(command)
    snapshot = env.unwrapped.snapshot()
    future = ["look around", "open door to kitchen", "wait1", "inventory"]
    original = [env.step(command) for command in future]
    for restored in (snapshot, pickle.loads(pickle.dumps(snapshot))):
        env.unwrapped.restore(restored)
        assert outputs_identical([env.step(command) for command in future], original)


def test_a_snapshot_whose_replay_differs_is_refused(env):
    env.reset(seed=0)
    env.step("look at picture")
    snapshot = env.unwrapped.snapshot()
    tampered = dataclasses.replace(snapshot, digests=(*snapshot.digests[:-1], "0" * 64))
    with pytest.raises(BranchingError, match="did not replay.*'look at picture'"):
        env.unwrapped.restore(tampered)


@pytest.mark.parametrize("action", [3, None, "take caf\u00e9", "look\naround", "x" * 257])
def test_an_action_outside_the_text_space_raises_value_error_naming_it(env, action):
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action space: Text"):
        env.step(action)


def test_passes_gymnasium_checker(env):
    check_env(env.unwrapped, skip_render_check=True, skip_close_check=True)


def test_honours_the_branchable_contract():
    check_branchable(make, prefix_steps=2, future_steps=4)


def test_resets_replay_heat_exchange_and_admissible_commands_identically_and_close_ends_the_jvm():
    """On a plain JVM the thermometer read 45, 46, 49 and 46 degrees on four resets (object hash order)."""
    env = make(task="use-thermometer", variation=1, admissible_commands=True)
    process = env.unwrapped._simulator._gateway.java_process
    episodes = []
    for _ in range(2):
        _, info = env.reset(seed=0)
        episodes.append([env.step(command) for command in info["privileged"]["gold_actions"][:16]])
    assert outputs_identical(episodes[0], episodes[1])
    assert "temperature of" in episodes[0][-1][0]["feedback"] and episodes[0][-1][4]["admissible_commands"]
    env.close()
    assert process.poll() is not None
    env.close()


def test_an_unknown_task_or_variation_raises_and_leaves_no_jvm_behind():
    before = java_children()
    with pytest.raises(ValueError, match="unknown ScienceWorld task"):
        make(task="no-such-task")
    with pytest.raises(ValueError, match="variation must be in"):
        make(variation=10_000)
    assert java_children() <= before


def test_rewind_returns_to_an_earlier_step_of_the_episode(env):
    _, info = env.reset(seed=0)
    gold = info["privileged"]["gold_actions"]
    first = env.step(gold[0])
    env.step("look at picture")
    observation, info = env.unwrapped.rewind(1)
    assert env.unwrapped.commands == (gold[0],)
    assert outputs_identical((observation, info), (first[0], first[4]))
    assert info["privileged"]["on_gold_path"] and info["privileged"]["expert_action"] == gold[1]
    with pytest.raises(ValueError, match="rewind to 0..1"):
        env.unwrapped.rewind(2)
