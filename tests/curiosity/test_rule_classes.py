"""RuleDiscovery-v0's hypothesis classes: conjunctions and small deterministic finite automata."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import gauntlet  # noqa: F401
from gauntlet.envs.curiosity.rule_discovery import all_inputs, dfa_rules, optimal_expected_queries, rule_tables


def test_two_state_dfas_are_the_distinct_functions_they_compute():
    tables = dfa_rules(3, 2)
    assert len({t.tobytes() for t in tables}) == len(tables)
    bits = all_inputs(3).astype(int)
    parity = bits.sum(axis=1) % 2 == 1
    ends_in_one = bits[:, -1] == 1
    for expected in (parity, ends_in_one, np.zeros(8, bool), np.ones(8, bool)):
        assert any(np.array_equal(t, expected) for t in tables)
    # "the number of ones is 0 mod 3" needs three states.
    mod3 = bits.sum(axis=1) % 3 == 0
    assert not any(np.array_equal(t, mod3) for t in tables)
    assert any(np.array_equal(t, mod3) for t in dfa_rules(3, 3))


def test_one_state_dfas_are_the_constants_and_the_optimum_is_one_query():
    tables = dfa_rules(2, 1)
    assert sorted(t.tolist() for t in tables) == [[False] * 4, [True] * 4]
    assert optimal_expected_queries(tables) == 1.0


def test_dfa_env_identifies_its_rule_by_exact_enumeration():
    env = gym.make("gauntlet/RuleDiscovery-v0", n_bits=3, rule_class="dfa", dfa_states=2, reward_mode="true_lp")
    check_env(env.unwrapped, skip_render_check=True)
    _, info = env.reset(seed=4)
    table = np.array(info["privileged"]["theta"]["truth_table"])
    assert any(np.array_equal(table, t) for t in dfa_rules(3, 2))
    identified = False
    for action in range(8):  # every input: the answers are the truth table, which fixes the rule
        _, _, _, _, step_info = env.step(action)
        assert step_info["privileged"]["outcome"] == table[action]
        identified = step_info["privileged"]["identified"]
    assert identified
    assert np.isclose(env.unwrapped.posterior().max(), 1.0)


def test_unknown_rule_class_or_state_count_is_refused():
    with pytest.raises(ValueError, match=r"rule_class must be one of \('conjunction', 'dfa'\)"):
        gym.make("gauntlet/RuleDiscovery-v0", rule_class="cfg")
    with pytest.raises(ValueError, match="dfa_states must be in 1..3"):
        gym.make("gauntlet/RuleDiscovery-v0", rule_class="dfa", dfa_states=5)
    assert rule_tables("conjunction", 2).shape == (9, 4)
