"""The Cal-SPI task envs: Gymnasium's checker, the Branchable contract, datasets and their validation."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import gauntlet
from gauntlet.envs.calspi.datasets import OfflineDataset, export_episodes, export_minari, load_dataset
from gauntlet.testing import check_branchable

DOMAINS = ("InvertedPendulum", "Hopper", "HalfCheetah", "Swimmer")


@pytest.mark.parametrize("domain", DOMAINS)
def test_task_env_passes_gymnasium_env_checker(domain):
    env = gym.make(f"gauntlet/CalSPI-{domain}-v0")
    check_env(env.unwrapped, skip_render_check=True)


@pytest.mark.parametrize("domain", DOMAINS)
def test_task_env_is_branchable(domain):
    check_branchable(lambda: gym.make(f"gauntlet/CalSPI-{domain}-v0"))


def test_action_outside_the_space_is_refused_naming_the_space():
    env = gym.make("gauntlet/CalSPI-Hopper-v0")
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"action space Box\(-1.0, 1.0, \(3,\)"):
        env.step(np.array([0.0, 0.0]))
    with pytest.raises(ValueError, match="action space"):
        env.step(np.array([np.nan, 0.0, 0.0]))


@pytest.mark.parametrize("domain", DOMAINS)
def test_baseline_return_matches_its_frozen_record(domain):
    task = gym.make(f"gauntlet/CalSPI-{domain}-v0").unwrapped
    returns = task.true_returns(task.baseline, episodes=2, seed=2 * 10**9, max_steps=1000)
    record = task.baseline_record
    assert record["command"].startswith("python -m gauntlet.envs.calspi.baselines")
    assert abs(returns.mean() - record["return_mean"]) <= 3 * record["return_std"] + 1e-6


def test_dataset_is_deterministic_cached_and_well_formed():
    first = load_dataset("InvertedPendulum", 500, seed=3)
    second = load_dataset("InvertedPendulum", 500, seed=3)
    other = load_dataset("InvertedPendulum", 500, seed=4)
    assert len(first) == 500 and first.observations.shape == (500, 4) and first.actions.shape == (500, 1)
    np.testing.assert_array_equal(first.actions, second.actions)
    assert not np.array_equal(first.actions, other.actions)
    # Transitions chain within an episode: the next observation is the following observation.
    inside = ~first.episode_ends[:-1]
    np.testing.assert_array_equal(first.next_observations[:-1][inside], first.observations[1:][inside])


def test_dataset_actions_are_the_baseline_plus_bounded_exploration_noise():
    task = gym.make("gauntlet/CalSPI-Hopper-v0", dataset_size=1000).unwrapped
    data = task.dataset
    deviation = data.actions - task.baseline(data.observations)
    assert 0.03 < deviation.std() < 0.2  # noise_std 0.1 of the half range 1, clipped at the box


def _dataset(n=10, obs=3, act=2):
    rng = np.random.default_rng(0)
    return dict(observations=rng.normal(size=(n, obs)), actions=rng.normal(size=(n, act)), rewards=rng.normal(size=n),
                next_observations=rng.normal(size=(n, obs)), terminals=np.zeros(n, bool), timeouts=np.zeros(n, bool))


def test_dataset_with_nans_is_refused_with_the_field_and_count():
    fields = _dataset()
    fields["rewards"][[2, 5]] = np.nan
    with pytest.raises(ValueError, match=r"'rewards' has NaN or infinite values in 2 of 10"):
        OfflineDataset(**fields).validate()


def test_dataset_with_wrong_shapes_is_refused_with_the_expected_shape():
    fields = _dataset()
    with pytest.raises(ValueError, match=r"'observations' has shape \(10, 3\), expected \(10, 11\)"):
        OfflineDataset(**fields).validate(obs_dim=11, act_dim=2)
    fields["next_observations"] = fields["next_observations"][:9]
    with pytest.raises(ValueError, match="next_observations"):
        OfflineDataset(**fields).validate()


def test_export_writes_episode_records_that_load_back(tmp_path):
    data = load_dataset("InvertedPendulum", 300, seed=0)
    count = export_episodes(data, tmp_path / "data.jsonl", env_id="gauntlet/CalSPI-InvertedPendulum-v0")
    episodes = gauntlet.load_episodes(tmp_path / "data.jsonl")
    assert len(episodes) == count == int(data.episode_ends.sum())
    assert sum(len(e.steps) for e in episodes) == len(data)
    np.testing.assert_allclose(episodes[0].steps[0].action, data.actions[0])
    assert episodes[0].outcome.score == pytest.approx(data.rewards[: len(episodes[0].steps)].sum())


def test_minari_export_loads_back_with_every_transition(tmp_path, monkeypatch):
    minari = pytest.importorskip("minari")
    data = load_dataset("Hopper", 400, seed=0)  # Hopper falls: episodes end by termination, and one is cut
    exported = export_minari(data, "gauntlet/calspi-hopper-400-v0", env_id="Hopper-v5", datasets_path=tmp_path)
    assert exported.total_steps == len(data)
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    loaded = minari.load_dataset("gauntlet/calspi-hopper-400-v0")
    start = 0
    for episode in loaded.iterate_episodes():
        stop = start + len(episode.rewards)
        np.testing.assert_allclose(episode.observations[:-1], data.observations[start:stop])
        np.testing.assert_allclose(episode.observations[-1], data.next_observations[stop - 1])
        np.testing.assert_allclose(episode.actions, data.actions[start:stop])
        np.testing.assert_allclose(episode.rewards, data.rewards[start:stop])
        np.testing.assert_array_equal(episode.terminations, data.terminals[start:stop])
        start = stop
    assert start == len(data)
    assert loaded.total_episodes == int(data.episode_ends.sum()) + (0 if data.episode_ends[-1] else 1)


def test_the_cli_builder_and_load_dataset_share_one_cache_entry():
    from gauntlet.datacache import entry_dir

    load_dataset("InvertedPendulum", 300)
    assert (entry_dir("calspi-dataset", "1", {"domain": "InvertedPendulum", "size": 300}) / "dataset.npz").is_file()


def test_the_frozen_pendulum_baseline_is_what_its_training_command_reproduces():
    from gauntlet.envs.calspi.baselines import load_baseline, train_ars

    frozen, record = load_baseline("InvertedPendulum")
    trained, training = train_ars("InvertedPendulum", seed=record["seed"])
    assert training["iterations"] == record["training"]["iterations"]
    np.testing.assert_array_equal(trained.weights, frozen.weights)
    # The running observation mean is a long float sum whose last bits depend on the numpy build's
    # summation (seen: 1e-16 apart on another machine); equal weights already prove the same training.
    np.testing.assert_allclose(trained.obs_mean, frozen.obs_mean, rtol=1e-12, atol=0)


@pytest.mark.parametrize("domain", DOMAINS)
def test_baselines_are_package_resources_so_a_wheel_carries_them(domain):
    from importlib import resources

    from gauntlet.envs.calspi.baselines import BASELINE_DIR, BASELINE_PACKAGE

    resource = resources.files(BASELINE_PACKAGE).joinpath(f"{domain}.json")
    assert resource.is_file()
    # The training command writes where the package reads (in a source checkout).
    assert (BASELINE_DIR / f"{domain}.json").read_bytes() == resource.read_bytes()
