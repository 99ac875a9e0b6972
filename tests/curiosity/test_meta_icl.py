"""The transformer ICLs meta-trained for LocationFinding-v0 and RuleDiscovery-v0 (smoke sizes)."""

from __future__ import annotations

from dataclasses import asdict, replace

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env

import gauntlet  # noqa: F401
from gauntlet.envs.curiosity.meta_icl import (CONFIGS, InContextTransformer, MetaICLConfig, MetaTransformerLearner,
                                              build, load_meta_learner, negative_log_likelihood, sample_tasks,
                                              scale_inputs)
from gauntlet.envs.curiosity.predictive import CategoricalPredictive, GaussianPredictive
from gauntlet.envs.curiosity.rule_discovery import rule_tables

TINY = {name: replace(CONFIGS[f"{name}-smoke"], steps=3, batch_size=8) for name in ("location_finding", "rules")}


@pytest.fixture(scope="module")
def learners(tmp_path_factory):
    out = {}
    for name, config in TINY.items():
        folder = tmp_path_factory.mktemp(name)
        build(folder, **asdict(config))
        out[name] = MetaTransformerLearner(config, folder / "weights.pt")
    return out


def held_out_loss(config: MetaICLConfig, model: InContextTransformer) -> float:
    x, y, mask, queries, target = sample_tasks(replace(config, batch_size=128), np.random.default_rng(123))
    x, y, queries = scale_inputs(config, x, y, queries)
    as_tensor = lambda a: torch.as_tensor(a, dtype=torch.float32)
    with torch.no_grad():
        output = model(as_tensor(x), as_tensor(y), torch.as_tensor(mask), as_tensor(queries))
    return float(negative_log_likelihood(config, output, as_tensor(target)).mean())


@pytest.mark.parametrize("name", ["location_finding", "rules"])
def test_meta_training_lowers_the_held_out_loss(name):
    config = CONFIGS[f"{name}-smoke"]
    torch.manual_seed(config.seed)
    untrained = held_out_loss(config, InContextTransformer(config))  # the same initial weights as ``build``
    trained = load_meta_learner(f"{name}-smoke")  # built into the data cache on first use (seconds)
    assert held_out_loss(config, trained.model) < untrained - 0.05


def test_training_is_deterministic(tmp_path):
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
        build(tmp_path / run, **asdict(TINY["rules"]))
    assert (tmp_path / "a" / "weights.pt").read_bytes() == (tmp_path / "b" / "weights.pt").read_bytes()


def test_rule_tasks_query_distinct_inputs_answered_by_one_rule():
    config = CONFIGS["rules-smoke"]
    x, y, mask, queries, target = sample_tasks(config, np.random.default_rng(0))
    tables = rule_tables(config.rule_class, config.n_bits)
    index = lambda bits: (bits * 2 ** np.arange(config.n_bits - 1, -1, -1)).sum(-1).astype(int)
    for b in range(config.batch_size):
        assert len(set(index(x[b]).tolist())) == config.max_context
        consistent = (tables[:, index(x[b])] == y[b]).all(1) & (tables[:, index(queries[b])] == target[b]).all(1)
        assert consistent.any()


def test_predictions_depend_on_the_context_only_and_ignore_masked_rows(learners):
    learner = learners["location_finding"]
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-4, 4, (1, 3, 2)), rng.standard_normal((1, 3))
    query = np.array([[[0.5, -1.0]]])
    alone = learner.predict(x, y, query)
    with_others = learner.predict(x, y, np.concatenate([query, rng.uniform(-4, 4, (1, 2, 2))], axis=1))
    np.testing.assert_allclose(with_others.mean[0, 0], alone.mean[0, 0], rtol=1e-5, atol=1e-6)
    masked = learner.predict(np.concatenate([x, [[[9.0, 9.0]]]], 1), np.concatenate([y, [[99.0]]], 1), query,
                             np.array([[True, True, True, False]]))
    np.testing.assert_allclose(masked.mean, alone.mean, rtol=1e-5, atol=1e-6)
    assert isinstance(alone, GaussianPredictive) and (alone.variance > 0).all()


def test_rule_learner_gives_proper_probabilities(learners):
    learner = learners["rules"]
    predictive = learner.predict(np.zeros((2, 1, 3)), np.array([[1.0], [0.0]]), np.ones((2, 4, 3)) * [0, 1, 1])
    assert isinstance(predictive, CategoricalPredictive)
    np.testing.assert_allclose(predictive.probs.sum(-1), 1.0)
    assert ((predictive.probs > 0) & (predictive.probs < 1)).all()


@pytest.mark.parametrize("env_id, kwargs, name", [
    ("LocationFinding-v0", {"horizon": 6, "n_particles": 128}, "location_finding"),
    ("RuleDiscovery-v0", {"n_bits": 3}, "rules")])
def test_envs_with_the_transformer_as_learner_pass_the_checker(learners, env_id, kwargs, name):
    env = gym.make(f"gauntlet/{env_id}", learner=learners[name], **kwargs)
    check_env(env.unwrapped, skip_render_check=True)
    env.reset(seed=0)
    _, reward, _, _, info = env.step(env.action_space.sample())
    assert reward == info["privileged"]["icl_lp"] and np.isfinite(reward)


def test_bad_configs_and_inputs_are_refused(learners):
    with pytest.raises(ValueError, match="task must be one of"):
        build(".", **asdict(replace(TINY["rules"], task="vision")))
    with pytest.raises(ValueError, match="max_context"):
        load_meta_learner(replace(TINY["rules"], max_context=9))
    with pytest.raises(ValueError, match="config must be one of"):
        load_meta_learner("huge")
    too_long = TINY["location_finding"].max_context + 1
    with pytest.raises(ValueError, match="longer than this learner's maximum"):
        learners["location_finding"].predict(np.zeros((1, too_long, 2)), np.zeros((1, too_long)), np.zeros((1, 1, 2)))
    with pytest.raises(ValueError, match="queries must have shape"):
        learners["rules"].predict(np.zeros((1, 1, 3)), np.zeros((1, 1)), np.zeros((1, 1, 2)))
