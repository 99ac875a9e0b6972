"""The taxi benchmark: a Q-learned expert that solves Taxi, and branched rows that replay their prefixes."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

from gauntlet.controllers.oversight.benchmarks.basic import (TAXI_ID, TAXI_MAX_STEPS, TaxiBenchmark, decode_taxi,
                                                             taxi_expert_folder, taxi_expert_table, taxi_success_rate,
                                                             train_taxi_expert)
from gauntlet.controllers.oversight.protocol import CollectStats, collect_episode
from gauntlet.controllers.oversight.utility import LADDER
from gauntlet.datacache import entry_dir
from gauntlet.testing import check_branchable


@pytest.fixture(scope="module")
def trained_home(tmp_path_factory):
    """One cache holding the trained expert, shared by this module's tests (training takes a second or two)."""
    home = tmp_path_factory.mktemp("taxi-expert-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GAUNTLET_HOME", str(home))
        taxi_expert_folder()
    return home


@pytest.fixture(autouse=True)
def shared_expert(trained_home, monkeypatch):
    monkeypatch.setenv("GAUNTLET_HOME", str(trained_home))


def test_the_trained_expert_solves_held_out_episodes_within_the_budget():
    report = json.loads((taxi_expert_folder() / "training.json").read_text())
    assert report["held_out_success"] >= 0.99 and report["held_out_max_steps"] == TAXI_MAX_STEPS
    # Episodes from yet another seed stream, run through the real env.
    assert taxi_success_rate(taxi_expert_table(), episodes=300, max_steps=TAXI_MAX_STEPS, seed=12345) >= 0.99


def test_training_is_deterministic_in_its_seed():
    first, second = train_taxi_expert(seed=4, episodes=300), train_taxi_expert(seed=4, episodes=300)
    assert np.array_equal(first, second)
    assert not np.array_equal(first, train_taxi_expert(seed=5, episodes=300))


def test_an_untrained_table_does_not_solve_taxi():
    # The success check can fail: a Q-table of zeros always drives south.
    assert taxi_success_rate(np.zeros((500, 6)), episodes=50, max_steps=TAXI_MAX_STEPS, seed=0) < 0.1


def test_taxi_branches_by_attributes_and_honours_the_contract():
    benchmark = TaxiBenchmark()
    env = benchmark.make_env(0)
    assert env.strategy == "attributes"
    check_branchable(lambda: benchmark.make_env(0))


def test_decode_inverts_taxis_encoding():
    taxi = gym.make(TAXI_ID).unwrapped
    for state in range(500):
        assert taxi.encode(*decode_taxi(state)) == state


def test_collected_rows_are_valid_and_replay_their_prefixes():
    benchmark, stats = TaxiBenchmark(), CollectStats()
    rows = [row for episode in range(4) for row in collect_episode(benchmark, episode, prefixes=2, draws=2,
                                                                   stats=stats)]
    assert stats.match_rate == 1.0 and all(row["prefix_match"] for row in rows)
    for row in rows:
        assert set(row["branches"]) == set(LADDER)  # no revise: no hint or confirm
        assert row["base_length"] <= benchmark.max_steps
        for branch in row["branches"].values():
            assert branch["steps"] <= benchmark.max_steps - row["t"]
        assert {"passenger_in_taxi", "manhattan_to_go", "illegal_actions"} <= set(row["features"])
        assert set(row["benchmark_meta"]) >= {"p_lapse", "p_loop", "p_premature"}
        # The full-strength expert finishes any prefix that leaves it the longest optimal episode (18 steps).
        if benchmark.max_steps - row["t"] >= 18:
            assert row["branches"]["expert"]["success"]


def test_episodes_differ_in_competence_and_base_success():
    benchmark = TaxiBenchmark()
    outcomes = [collect_episode(benchmark, episode, prefixes=[0], actions=("quit",))[0] for episode in range(30)]
    assert len({row["benchmark_meta"]["p_lapse"] for row in outcomes}) == 30
    assert 0 < sum(row["base_success"] for row in outcomes) < 30


def test_probability_ranges_are_checked():
    with pytest.raises(ValueError, match="sum"):
        TaxiBenchmark(p_lapse=(0.0, 0.9), p_loop=(0.0, 0.2))


def test_the_default_expert_is_the_entry_the_data_command_builds():
    # `gauntlet data build oversight-taxi-expert` builds with no parameters.
    assert taxi_expert_folder() == entry_dir("oversight-taxi-expert", "1")
