"""Lapsing agents: restoring a snapshot then acting reproduces the same actions bit for bit."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from gauntlet.controllers.oversight.lapsing import (STRONG_DIVISOR, Competence, LapsingAgent, PrivilegedExpert,
                                                    weakened)

LAPSE, PREMATURE = -1, -2
OBSERVATIONS = spaces.Discrete(50)
ACTIONS = spaces.Discrete(50)


class ParityExpert:
    """A deterministic expert (the observation plus one) with a RNG of its own, to check snapshots cover it."""

    name = "parity"

    def __init__(self) -> None:
        self.rng = np.random.default_rng(7)

    def reset(self, *, seed, observation_space, action_space) -> None:
        self.rng = np.random.default_rng(seed)

    def act(self, observation: Any, info: dict[str, Any]) -> int:
        return int(observation) + 1 + (100 if self.rng.random() < 0.5 else 0)

    def snapshot(self) -> dict[str, Any]:
        return dict(self.rng.bit_generator.state)

    def restore(self, snapshot: dict[str, Any]) -> None:
        self.rng.bit_generator.state = dict(snapshot)

    def reseed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)


def lapse(observation: Any, info: dict[str, Any], rng: np.random.Generator) -> int:
    return LAPSE - int(rng.integers(0, 3)) * 10


def premature(observation: Any, info: dict[str, Any], rng: np.random.Generator) -> int:
    return PREMATURE


def make_agent(**overrides: Any) -> LapsingAgent:
    settings = {"seed": 3, "p_lapse": 0.2, "p_loop": 0.3, "loop_len": 4, "p_premature": 0.05,
                "premature_action": premature, **overrides}
    agent = LapsingAgent(ParityExpert(), lapse, **settings)
    agent.reset(seed=11, observation_space=OBSERVATIONS, action_space=ACTIONS)
    return agent


def play(agent: LapsingAgent, start: int, steps: int) -> list[int]:
    return [agent.act(np.int64((start + k) % 50), {}) for k in range(steps)]


def test_restore_then_act_reproduces_the_actions_bit_for_bit_at_every_step():
    agent = make_agent()
    snapshots, observed_loops = [], 0
    for k in range(120):
        snapshots.append((k, agent.snapshot()))
        observed_loops += agent._loop_left > 0
        agent.act(np.int64(k % 50), {})
    assert observed_loops > 5, "the agent should have been snapshotted mid-loop several times"
    for k, snapshot in snapshots[::7]:
        agent.restore(snapshot)
        first = play(agent, k, 40)
        agent.restore(pickle.loads(pickle.dumps(snapshot)))
        assert play(agent, k, 40) == first


def test_a_restored_agent_goes_on_from_where_the_original_was():
    original = make_agent()
    play(original, 0, 30)
    snapshot = original.snapshot()
    expected = play(original, 30, 50)
    twin = make_agent(seed=999)
    twin.restore(snapshot)
    assert play(twin, 30, 50) == expected


def test_reseed_gives_a_fresh_draw_that_its_seed_reproduces():
    agent = make_agent()
    play(agent, 0, 10)
    snapshot = agent.snapshot()
    futures = {}
    for seed in (1, 2, 1):
        agent.restore(snapshot)
        agent.reseed(seed)
        futures.setdefault(seed, []).append(play(agent, 10, 60))
    assert futures[1][0] == futures[1][1]
    assert futures[1][0] != futures[2][0]


def test_reset_with_the_same_seed_acts_the_same():
    first, second = make_agent(), make_agent()
    assert play(first, 0, 80) == play(second, 0, 80)
    second.reset(seed=12, observation_space=OBSERVATIONS, action_space=ACTIONS)
    first.reset(seed=11, observation_space=OBSERVATIONS, action_space=ACTIONS)
    assert play(first, 0, 80) != play(second, 0, 80)


def test_lapses_and_premature_answers_happen_at_their_probabilities():
    n = 20_000
    agent = make_agent(p_lapse=0.3, p_loop=0.0, p_premature=0.1)
    actions = np.array(play(agent, 0, n))
    for value, chosen in ((0.3, (actions < 0) & (actions != PREMATURE)), (0.1, actions == PREMATURE)):
        share = float(np.mean(chosen))
        assert abs(share - value) < 5 * np.sqrt(value * (1 - value) / n)


def test_a_loop_repeats_the_last_one_or_two_actions_for_loop_len_steps():
    agent = LapsingAgent(ParityExpert(), lapse, seed=0, p_lapse=0.0, p_loop=1.0, loop_len=5)
    agent.reset(seed=0, observation_space=OBSERVATIONS, action_space=ACTIONS)
    first = agent.act(np.int64(0), {})  # nothing to loop over yet: the expert acts
    assert first in (1, 101)
    looped = play(agent, 1, 5)
    assert looped == [first] * 5
    later = play(agent, 10, 30)
    for k in range(2, len(later)):
        assert later[k] in later[:k]


def test_weakened_expert_is_the_expert_at_full_strength_and_lapses_below_it():
    expert = PrivilegedExpert()
    assert weakened(expert, lapse, 1.0, seed=0) is expert
    weak = weakened(expert, lapse, 0.6, seed=0)
    weak.reset(seed=1, observation_space=OBSERVATIONS, action_space=ACTIONS)
    n = 10_000
    actions = [weak.act(0, {"privileged": {"expert_action": 5}}) for _ in range(n)]
    share = np.mean([a == 5 for a in actions])
    assert abs(share - 0.6) < 5 * np.sqrt(0.24 / n)
    with pytest.raises(ValueError, match="strength"):
        weakened(expert, lapse, 1.5, seed=0)


def test_privileged_expert_needs_the_envs_expert_action():
    with pytest.raises(ValueError, match="expert_action"):
        PrivilegedExpert().act(0, {})


def test_competence_is_drawn_per_episode_and_a_strong_agent_lapses_four_times_less():
    ranges = {"p_lapse": (0.0, 0.5), "p_loop": (0.0, 0.1), "p_premature": (0.0, 0.05)}
    draws = [Competence.draw(e, seed=0, **ranges) for e in range(20)]
    assert draws[3] == Competence.draw(3, seed=0, **ranges)
    assert len({c.p_lapse for c in draws}) == 20
    assert all(0 <= c.p_lapse <= 0.5 and 0 <= c.p_loop <= 0.1 and 0 <= c.p_premature <= 0.05 for c in draws)
    strong = draws[0].for_strength("strong")
    assert strong.p_lapse == pytest.approx(draws[0].p_lapse / STRONG_DIVISOR)
    assert strong.p_loop == pytest.approx(draws[0].p_loop / STRONG_DIVISOR)
    assert draws[0].for_strength("base") == draws[0]
    with pytest.raises(ValueError, match="strength"):
        draws[0].for_strength("heroic")


def test_bad_probabilities_are_refused():
    with pytest.raises(ValueError, match="at most 1"):
        LapsingAgent(PrivilegedExpert(), lapse, seed=0, p_lapse=0.7, p_loop=0.5)
    with pytest.raises(ValueError, match="premature_action"):
        LapsingAgent(PrivilegedExpert(), lapse, seed=0, p_lapse=0.1, p_premature=0.1)
    with pytest.raises(ValueError, match="p_lapse"):
        LapsingAgent(PrivilegedExpert(), lapse, seed=0, p_lapse=-0.1)
