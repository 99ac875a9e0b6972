"""Prefix features: what an overseer sees, computed the same from the protocol's History and the runner's Prefix."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gauntlet.controllers.oversight.benchmarks.basic import CorridorBenchmark, TaxiBenchmark
from gauntlet.controllers.oversight.features import GENERIC_FEATURES, History, digest, prefix_features
from gauntlet.controllers.oversight.protocol import collect_episode
from gauntlet.runner import rollout


class Plain:
    """A benchmark with no features of its own."""

    name = "plain"

    def features(self, history: History) -> dict[str, float]:
        return {}


def history_of(observations: list[Any], actions: list[Any], rewards: list[float]) -> History:
    history = History.start(observations[0], {"privileged": {"answer": 42}}, max_steps=20)
    for action, reward, observation in zip(actions, rewards, observations[1:], strict=True):
        history.append(action, reward, observation, {"privileged": {"answer": 42}, "note": "seen"})
    return history


def test_generic_features_read_rewards_actions_and_observation_changes():
    #              o0 o1 o2 o3 o4 o5 o6
    observations = [0, 1, 1, 2, 1, 1, 1]
    actions = ["a", "a", "b", "a", "b", "b"]
    rewards = [0.0, 1.0, 0.0, -1.0, 0.0, 0.0]
    features = prefix_features(history_of(observations, actions, rewards), Plain())
    assert list(features) == sorted(GENERIC_FEATURES)
    assert features["t"] == 6 and features["t_frac"] == pytest.approx(6 / 20)
    assert features["return_so_far"] == 0.0 and features["last_reward"] == 0.0
    assert features["positive_rewards"] == 1 and features["negative_rewards"] == 1
    assert features["steps_since_positive_reward"] == 4
    assert features["distinct_action_share"] == pytest.approx(2 / 6)
    assert features["action_repeats"] == 2            # a,a and b,b
    assert features["last_action_run"] == 2 and features["longest_action_run"] == 2
    assert features["loop_last_4"] == 0               # b a b b is no period-2 loop
    assert features["unchanged_observations"] == 3    # o1->o2, o4->o5, o5->o6 (o0 is never read past t=0)
    assert features["last_observation_unchanged"] == 1
    assert features["revisited_observations"] == 4    # among o1..o6, four repeat an earlier one


def test_a_period_two_loop_is_flagged():
    features = prefix_features(history_of([0, 1, 2, 1, 2], ["l", "r", "l", "r"], [0.0] * 4), Plain())
    assert features["loop_last_4"] == 1 and features["action_repeats"] == 0


def test_the_empty_prefix_has_all_features_zero():
    features = prefix_features(History.start("start", {}, max_steps=10), Plain())
    assert set(features.values()) == {0.0}


def test_privileged_info_never_reaches_a_benchmarks_features():
    class Peeking:
        name = "peeking"

        def features(self, history: History) -> dict[str, float]:
            assert all("privileged" not in info for info in history.infos)
            return {"notes": float(sum(info.get("note") == "seen" for info in history.infos))}

    features = prefix_features(history_of([0, 1, 2], [1, 1], [0.0, 0.0]), Peeking())
    assert features["notes"] == 2


def test_a_benchmark_feature_may_not_shadow_a_generic_one():
    class Shadowing:
        name = "shadowing"

        def features(self, history: History) -> dict[str, float]:
            return {"t": 99.0}

    with pytest.raises(ValueError, match="generic feature"):
        prefix_features(History.start(0, {}, max_steps=5), Shadowing())


def test_an_observation_digests_the_same_as_an_array_or_as_the_list_read_back_from_a_file():
    assert digest(np.array([[1, 2], [3, 4]])) == digest([[1, 2], [3, 4]])
    assert digest(np.int64(3)) == digest(3)
    assert digest({"text": "a"}) != digest({"text": "b"})


def check_runner_features_equal_the_protocols(benchmark, episode: int) -> tuple[list[dict], list]:
    """Collect ``episode`` with the protocol and roll it out with the runner; assert that every prefix of the
    runner's steps gives the features the protocol recorded. Returns the protocol's rows and the runner's steps."""
    rows = collect_episode(benchmark, episode, actions=("continue",))
    recorded = rollout(benchmark.make_env(episode), benchmark.make_agent(episode),
                       seed=benchmark.episode_seed(episode), max_steps=benchmark.max_steps, record="memory")
    steps = recorded.steps
    assert rows[0]["base_length"] == len(steps)
    for row in rows:
        t = row["t"]
        observation = steps[t - 1].observation if t else recorded.initial_observation
        info = steps[t - 1].info if t else recorded.reset_info
        history = History.from_steps(steps[:t], observation, info, benchmark.max_steps)
        assert prefix_features(history, benchmark) == row["features"], f"episode {episode}, t={t}"
    return rows, steps


@pytest.mark.parametrize("make", [lambda: CorridorBenchmark(), lambda: TaxiBenchmark()], ids=["corridor", "taxi"])
def test_features_from_the_runners_prefix_equal_the_protocols(make):
    benchmark = make()
    for episode in range(3):
        check_runner_features_equal_the_protocols(benchmark, episode)


@pytest.mark.xdist_group("oversight-tools")
def test_tool_features_from_the_runners_prefix_equal_the_protocols(small_chem):
    # The runner keeps each step's tool call in the step's info, where the protocol's History has it
    # from the env: the overseer reads the same calls online as in collection, with nothing put back.
    from gauntlet.controllers.oversight.benchmarks.tool import chem

    benchmark = chem(**small_chem, n_episodes=2, p_lapse=(0.3, 0.4))
    for episode in range(2):
        rows, steps = check_runner_features_equal_the_protocols(benchmark, episode)
        assert all(step.tool_call is not None for step in steps)
        assert rows[-1]["features"]["tool_distinct_tools"] > 0  # the calls were read, not missed alike
