"""The meta-trained transformer in-context learner (smoke-size config; the default trains in minutes)."""

from __future__ import annotations

from dataclasses import asdict, replace

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import gauntlet  # noqa: F401
from gauntlet.datacache import ensure_built
from gauntlet.envs.curiosity.transformer import (CONFIGS, DATA_NAME, DATA_VERSION, TransformerLearner, build,
                                                 load_transformer_learner)

TINY = replace(CONFIGS["smoke"], steps=3, batch_size=8)


@pytest.fixture(scope="module")
def learner(tmp_path_factory):
    folder = tmp_path_factory.mktemp("weights")
    build(folder, **asdict(TINY))
    return TransformerLearner(TINY, folder / "weights.pt")


def test_training_is_deterministic(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    build(first, **asdict(TINY))
    build(second, **asdict(TINY))
    assert (first / "weights.pt").read_bytes() == (second / "weights.pt").read_bytes()


def test_weights_come_from_the_data_cache_and_are_built_once():
    folder = ensure_built(DATA_NAME, DATA_VERSION, build, params=asdict(TINY))
    assert (folder / "weights.pt").is_file() and (folder / "MANIFEST.json").is_file()
    learner = load_transformer_learner(TINY)
    assert learner.max_context == TINY.max_context
    with pytest.raises(ValueError, match="config must be one of"):
        load_transformer_learner("huge")


def test_a_query_prediction_depends_on_the_context_only(learner):
    rng = np.random.default_rng(0)
    context_x, context_y = rng.uniform(-1, 1, (1, 5, 1)), rng.standard_normal((1, 5))
    alone = learner.predict(context_x, context_y, np.array([[[0.3]]]))
    with_others = learner.predict(context_x, context_y, np.array([[[0.3], [-0.8], [0.9]]]))
    np.testing.assert_allclose(with_others.mean[0, 0], alone.mean[0, 0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(with_others.variance[0, 0], alone.variance[0, 0], rtol=1e-5, atol=1e-6)


def test_masked_rows_and_padding_do_not_change_predictions(learner):
    x, y = np.array([[[0.1], [0.7], [-0.4]]]), np.array([[0.3, 99.0, -0.2]])
    masked = learner.predict(x, y, np.array([[[0.5]]]), np.array([[True, False, True]]))
    short = learner.predict(x[:, [0, 2]], y[:, [0, 2]], np.array([[[0.5]]]))
    np.testing.assert_allclose(masked.mean, short.mean, rtol=1e-5, atol=1e-6)


def test_context_longer_than_the_maximum_is_refused(learner):
    n = TINY.max_context + 1
    with pytest.raises(ValueError, match=f"longer than this learner's maximum of {TINY.max_context}"):
        learner.predict(np.zeros((1, n, 1)), np.zeros((1, n)), np.zeros((1, 1, 1)))


def test_env_with_the_transformer_as_its_learner_passes_the_checker(learner):
    env = gym.make("gauntlet/ActiveRegression-v0", learner=learner)
    check_env(env.unwrapped, skip_render_check=True)
    env.reset(seed=0)
    _, reward, _, _, info = env.step(np.array([0.2], dtype=np.float32))
    assert reward == info["privileged"]["icl_lp"] and np.isfinite(reward)
