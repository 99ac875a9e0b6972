"""The counterfactual-context LP estimator: equals exact LP for the exact learner; biased in the MDP."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import gauntlet  # noqa: F401
from gauntlet.envs.curiosity.lp import icl_learning_progress, true_learning_progress
from gauntlet.envs.curiosity.predictive import CategoricalPredictive


def history(env, seed: int, n_steps: int):
    env.reset(seed=seed)
    env.action_space.seed(seed)
    for _ in range(n_steps):
        env.step(env.action_space.sample())
    designs, outcomes = env.context
    return designs[None, :-1], outcomes[None, :-1], designs[None, -1], outcomes[None, -1]


@pytest.mark.parametrize("name", ["RuleDiscovery-v0", "CuriousGridworld-v0"])
def test_estimator_equals_exact_lp_for_exact_learner_when_probes_enumerate_outcomes(name):
    env = gym.make(f"gauntlet/{name}").unwrapped
    for seed in range(5):
        context_x, context_y, new_x, new_y = history(env, seed, 3)
        probe_designs = env.inputs if name == "RuleDiscovery-v0" else env.draw_probe_designs(None)
        truth = env._truth(probe_designs).probs[0]  # (M, K): p(y | x̃, θ)
        n_outcomes = truth.shape[1]
        # Every (x̃, ỹ) pair once, weighted by q(x̃) p(ỹ | x̃, θ): the estimator's expectation, exactly.
        probe_x = np.repeat(probe_designs, n_outcomes, axis=0)[None]
        probe_y = np.tile(np.arange(n_outcomes), len(probe_designs))[None].astype(float)
        weights = (truth / len(probe_designs)).reshape(1, -1)
        keep = weights > 0
        estimate = icl_learning_progress(env.exact_learner, context_x, context_y, None, new_x, new_y,
                                         probe_x[:, keep[0]], probe_y[:, keep[0]], weights[:, keep[0]])
        exact = true_learning_progress(env.exact_learner, context_x, context_y, None, new_x, new_y,
                                       probe_designs[None], CategoricalPredictive(truth[None]))
        np.testing.assert_allclose(estimate, exact, rtol=1e-10, atol=1e-12)


def test_estimator_is_an_unbiased_monte_carlo_estimate_of_exact_lp_in_regression():
    env = gym.make("gauntlet/ActiveRegression-v0").unwrapped
    rng = np.random.default_rng(0)
    for seed in range(3):
        context_x, context_y, new_x, new_y = history(env, seed, 4)
        probe_designs = rng.uniform(-1, 1, (1, 50_000, 1))
        truth = env._truth(probe_designs[0])
        probe_y = truth.sample(rng)
        per_probe = [icl_learning_progress(env.exact_learner, context_x, context_y, None, new_x, new_y,
                                           probe_designs[:, i:i + 1], probe_y[:, i:i + 1])[0] for i in range(0, 2000)]
        estimate = icl_learning_progress(env.exact_learner, context_x, context_y, None, new_x, new_y,
                                         probe_designs, probe_y)[0]
        exact = true_learning_progress(env.exact_learner, context_x, context_y, None, new_x, new_y,
                                       probe_designs, truth)[0]
        standard_error = np.std(per_probe) / np.sqrt(probe_designs.shape[1])
        assert abs(estimate - exact) < 4 * standard_error + 1e-9


def test_both_counterfactual_contexts_go_through_the_learner_in_one_call():
    env = gym.make("gauntlet/ActiveRegression-v0").unwrapped
    context_x, context_y, new_x, new_y = history(env, 0, 5)
    calls = []
    original = env.exact_learner.predict

    def spy(*args, **kwargs):
        calls.append(np.shape(args[0]))
        return original(*args, **kwargs)

    env.exact_learner.predict = spy
    icl_learning_progress(env.exact_learner, context_x, context_y, None, new_x, new_y,
                          np.zeros((1, 7, 1)), np.zeros((1, 7)))
    assert calls == [(2, 5, 1)]


def test_env_icl_lp_reward_equals_estimator_on_its_probes():
    env = gym.make("gauntlet/ActiveRegression-v0").unwrapped
    env.reset(seed=4)
    env.step(np.array([0.3], dtype=np.float32))
    designs, outcomes = env.context
    _, reward, _, _, info = env.step(np.array([-0.2], dtype=np.float32))
    manual = icl_learning_progress(env.exact_learner, designs[None], outcomes[None], None, np.array([[-0.2]]),
                                   np.array([info["privileged"]["outcome"]]), env._probe_x[None], env._probe_y[None])
    assert reward == pytest.approx(float(manual[0]), rel=1e-6)


def test_estimator_rejects_mismatched_new_point_and_probes():
    env = gym.make("gauntlet/ActiveRegression-v0").unwrapped
    with pytest.raises(ValueError, match=r"new_x must have shape \(B, D\) = \(1, 1\)"):
        icl_learning_progress(env.exact_learner, np.zeros((1, 2, 1)), np.zeros((1, 2)), None,
                              np.zeros((1, 2)), np.zeros(1), np.zeros((1, 3, 1)), np.zeros((1, 3)))
    with pytest.raises(ValueError, match=r"probe_x must have shape \(B, M, D\)"):
        icl_learning_progress(env.exact_learner, np.zeros((1, 2, 1)), np.zeros((1, 2)), None,
                              np.zeros((1, 1)), np.zeros(1), np.zeros((1, 3, 1)), np.zeros((1, 4)))


def test_gridworld_trajectory_estimator_is_biased_by_the_nuisance_once_dynamics_are_known():
    """The negative result: with θ known, true LP is 0 but the trajectory estimator pays for moving."""
    env = gym.make("gauntlet/CuriousGridworld-v0", horizon=60).unwrapped
    env.reset(seed=0)
    env.action_space.seed(0)
    biased_steps = 0
    for _ in range(60):
        _, _, _, _, info = env.step(env.action_space.sample())
        privileged = info["privileged"]
        posterior_is_certain = env.exact_learner.log_posterior(*env._context_batch()).max() > -1e-12
        if posterior_is_certain and abs(privileged["true_lp"]) < 1e-12:
            assert privileged["trajectory_lp_expected"] == pytest.approx(privileged["nuisance"], abs=1e-9)
            biased_steps += privileged["nuisance"] != 0.0
    assert biased_steps > 0, "the episode never crossed the ice edge after identifying θ"


def test_non_temporal_estimator_has_no_nuisance_once_theta_is_known():
    env = gym.make("gauntlet/RuleDiscovery-v0", n_bits=2, horizon=5, reward_mode="icl_lp").unwrapped
    env.reset(seed=0)
    for action in range(4):  # every input queried: the rule is known
        env.step(action)
    assert env.step(0)[1] == 0.0
