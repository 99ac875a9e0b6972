"""Replay and branching of recorded episodes (gauntlet.replay), below the CLI."""

from __future__ import annotations

import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import gauntlet
from gauntlet.basic_agents import ReplayAgent
from gauntlet.branching import branchable, outputs_identical
from gauntlet.episode import load_episodes
from gauntlet.replay import ReplayDivergedError, branch_episode, replay_episode, replay_episodes, rollout_from
from gauntlet.runner import rollout
from tests.module_registered_envs import IMPORT_ROOT, MODULE, MODULE_IDS, PLAIN_ID

GRID_ID = "gauntlet-test/NoisyGrid-v0"


class NoisyGridEnv(gym.Env):
    """A 10x10 float32 grid (100 elements: the episode writer keeps it in the sidecar .npz) that
    shifts by the action and gains noise from the env's RNG every step; 12 steps long."""

    observation_space = spaces.Box(0.0, 2.0, (10, 10), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.grid = self.np_random.random((10, 10), dtype=np.float32)
        return self.grid.copy(), {}

    def step(self, action):
        self.t += 1
        noise = self.np_random.random((10, 10), dtype=np.float32)
        self.grid = (np.roll(self.grid, int(action) + 1, axis=0) * 0.9 + 0.1 * noise).astype(np.float32)
        return self.grid.copy(), float(self.grid.mean()), self.t >= 12, False, {}


if GRID_ID not in gym.registry:
    gym.register(GRID_ID, entry_point=NoisyGridEnv)


@pytest.fixture
def grid_episode_file(tmp_path):
    path = tmp_path / "grid.jsonl"
    rollout(gym.make(GRID_ID), gauntlet.make_agent("random"), seed=4, record=path)
    assert path.with_suffix(".npz").exists()
    return path


def test_replay_compares_observations_kept_in_the_sidecar(grid_episode_file):
    episode = load_episodes(grid_episode_file)[0]
    assert replay_episode(episode).matches
    sidecar = grid_episode_file.with_suffix(".npz")
    with np.load(sidecar) as stored:
        arrays = {key: stored[key] for key in stored.files}
    key = episode.steps[4].observation["__array__"]
    arrays[key] = arrays[key] + np.float32(1e-6)
    np.savez(sidecar, **arrays)
    check = replay_episode(load_episodes(grid_episode_file)[0])
    assert check.divergence == "step 4: observation"


def test_a_branch_keeps_its_large_observations_in_its_own_sidecar(grid_episode_file, tmp_path):
    episode = load_episodes(grid_episode_file)[0]
    out = tmp_path / "branch.jsonl"
    branch_episode(episode, 5, action=1 - episode.steps[5].action, record=out)
    assert out.with_suffix(".npz").exists()
    assert replay_episode(load_episodes(out)[0]).matches


def test_rollout_from_a_snapshot_continues_exactly_where_the_prefix_left_off():
    original = rollout(gym.make(GRID_ID), gauntlet.make_agent("random"), seed=8)
    env = branchable(gym.make(GRID_ID))
    observation, info = env.reset(seed=8)
    for step in original.steps[:5]:
        observation, _, _, _, info = env.step(step.action)
    snapshot = env.snapshot()
    rest = original.model_copy(update={"steps": original.steps[5:]})
    continued = rollout_from(env, snapshot, observation, info, ReplayAgent(rest), seed=8)
    assert len(continued.steps) == len(original.steps) - 5
    for mine, theirs in zip(continued.steps, original.steps[5:], strict=True):
        assert outputs_identical((mine.observation, mine.reward), (theirs.observation, theirs.reward))


def test_a_branch_refuses_a_prefix_the_env_no_longer_reproduces(tmp_path):
    path = tmp_path / "cartpole.jsonl"
    rollout(gym.make("CartPole-v1"), gauntlet.make_agent("random"), seed=2, record=path)
    episode = load_episodes(path)[0]
    edited = episode.model_copy(update={"steps": [*episode.steps]})
    edited.steps[1] = edited.steps[1].model_copy(update={"reward": 5.0})
    with pytest.raises(ReplayDivergedError, match="step 1 \\(reward\\)"):
        branch_episode(edited, 3)


def test_episodes_recorded_by_the_env_server_replay_and_restored_ones_are_marked(tmp_path):
    from gauntlet.bridges.env_sessions import EnvControl

    control = EnvControl("CartPole-v1", record=tmp_path / "served")
    session = control.open_session()
    session.reset(seed=5)
    for action in (0, 1, 1):
        session.step(action)
    saved = session.snapshot()
    session.step(0)
    session.restore(saved)
    session.step(1)
    control.close()
    checks = list(replay_episodes(load_episodes(tmp_path / "served")))
    assert [check.matches for check in checks] == [True, False]
    assert "starts from snapshot" in checks[1].not_replayable and checks[1].divergence is None


def test_an_episode_reset_without_a_seed_is_not_replayable():
    episode = rollout(gym.make("CartPole-v1"), gauntlet.make_agent("random"), seed=None)
    check = replay_episode(episode)
    assert not check.matches and "without a seed" in check.not_replayable


@pytest.mark.filterwarnings("ignore:.*latest versioned environment")
@pytest.mark.parametrize(("given", "recorded"), [
    (MODULE_IDS[0], MODULE_IDS[0]), (MODULE_IDS[1], MODULE_IDS[1]), ("CartPole", "CartPole-v1"),
    (f"{MODULE}:ModuleCartPole", f"{MODULE}:{PLAIN_ID}"), ("CartPole-v1", "CartPole-v1")])
def test_the_header_records_the_spec_id_with_the_module_of_a_module_prefixed_id(given, recorded):
    episode = rollout(gym.make(given), gauntlet.make_agent("random"), seed=0, max_steps=3, env_id=given)
    assert episode.env_id == recorded


@pytest.mark.parametrize("env_id", MODULE_IDS)
def test_an_episode_of_a_module_registered_env_replays_in_a_process_that_has_not_imported_the_module(
        env_id, tmp_path):
    path = tmp_path / "episode.jsonl"
    rollout(gym.make(env_id), gauntlet.make_agent("random"), seed=1, max_steps=8, record=path, env_id=env_id)
    environment = {key: value for key, value in os.environ.items() if key != "GAUNTLET_DEBUG"}
    environment["PYTHONPATH"] = IMPORT_ROOT  # where the module is found; nothing imports it but the replay
    result = subprocess.run([sys.executable, "-m", "gauntlet.cli", "replay", str(path)], capture_output=True,
                            text=True, cwd=tmp_path, env=environment, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "the episode reproduces its recording exactly" in result.stdout
