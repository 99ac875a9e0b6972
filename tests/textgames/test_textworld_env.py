"""TextWorld-v0: the expert wins, the Branchable contract holds exactly, bad commands are refused."""

from __future__ import annotations

import hashlib
import pickle

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import ResetNeeded
from gymnasium.utils.env_checker import check_env

import gauntlet
from gauntlet.branching import outputs_identical
from gauntlet.envs.textworld.env import clean_text, interpreter_word
from gauntlet.envs.textworld.games import GAMES, GAMES_VERSION, GameKnobs, build_game, game_params
from gauntlet.testing import check_branchable


def make(game: dict, **kwargs) -> gym.Env:
    return gym.make("gauntlet/TextWorld-v0", **game, **kwargs)


def wander(env: gym.Env, info: dict, rng: np.random.Generator, steps: int, p_expert: float) -> tuple[list[str], dict]:
    """Play ``steps`` commands: the expert's with probability ``p_expert``, else an admissible one;
    the commands and the last info."""
    commands = []
    for _ in range(steps):
        expert = info["privileged"]["expert_action"]
        command = expert if expert is not None and rng.random() < p_expert else str(
            rng.choice(info["admissible_commands"]))
        _, _, terminated, truncated, info = env.step(command)
        commands.append(command)
        if terminated or truncated:
            break
    return commands, info


def test_following_the_expert_wins_the_game(small_game):
    env = make(small_game)
    observation, info = env.reset(seed=0)
    assert set(observation) == {"feedback", "description", "inventory"}
    assert info["privileged"]["expert_action"] == info["privileged"]["expert_plan"][0]
    assert info["privileged"]["expert_action"] in info["admissible_commands"]
    total, steps, terminated = 0.0, 0, False
    while not terminated:
        _, reward, terminated, truncated, info = env.step(info["privileged"]["expert_action"])
        total, steps = total + reward, steps + 1
        assert not truncated
    assert info["won"] and info["success"] and not info["lost"]
    assert total == info["score"] == info["max_score"] == 1
    assert steps == small_game["quest_length"]
    assert info["privileged"]["expert_action"] is None and info["privileged"]["expert_plan"] == []
    with pytest.raises(ResetNeeded):
        env.step("look")


def test_the_expert_plans_from_wherever_the_player_strayed(small_game):
    env = make(small_game, max_episode_steps=200)
    _, info = env.reset(seed=0)
    _, info = wander(env, info, np.random.default_rng(0), steps=12, p_expert=0.0)
    assert not info["won"] and info["privileged"]["expert_plan"]
    for _ in range(60):
        _, _, terminated, _, info = env.step(info["privileged"]["expert_action"])
        if terminated:
            break
    assert info["success"]


def test_passes_gymnasium_checker(small_game):
    check_env(make(small_game).unwrapped, skip_render_check=True)


def test_honours_the_branchable_contract(small_game):
    check_branchable(lambda: make(small_game))


def test_restore_reproduces_every_later_step_and_info_exactly(small_game):
    """Snapshots at every step of a straying episode; restoring any of them (or its pickle) replays
    the rest of the episode bit for bit, the privileged expert plan included."""
    env = make(small_game, max_episode_steps=200).unwrapped
    rng = np.random.default_rng(1)
    observation, info = env.reset(seed=3)
    steps, snapshots, commands = [], [env.snapshot()], []
    for _ in range(30):
        expert = info["privileged"]["expert_action"]
        command = expert if expert is not None and rng.random() < 0.4 else str(rng.choice(info["admissible_commands"]))
        step = env.step(command)
        commands.append(command)
        steps.append(step)
        snapshots.append(env.snapshot())
        info = step[4]
        if step[2]:
            break
    assert len(commands) >= 8
    for t in range(0, len(commands), 3):
        env.restore(pickle.loads(pickle.dumps(snapshots[t])) if t % 2 else snapshots[t])
        replayed = [env.step(command) for command in commands[t:]]
        assert outputs_identical(replayed, steps[t:]), f"restore at step {t} changed the future"


def test_a_fresh_env_replaying_the_commands_matches_a_restored_one(small_game):
    env = make(small_game, max_episode_steps=200).unwrapped
    _, info = env.reset(seed=5)
    commands, info = wander(env, info, np.random.default_rng(2), steps=10, p_expert=0.3)
    assert not info["won"]
    snapshot = env.snapshot()
    fresh = make(small_game, max_episode_steps=200).unwrapped
    fresh.reset(seed=5)
    for command in commands:
        fresh.step(command)
    env.restore(snapshot)
    for command in ("look", "inventory", *info["admissible_commands"][:4]):
        step = env.step(command)
        assert outputs_identical(step, fresh.step(command))
        if step[2]:
            break


@pytest.mark.parametrize("action", [3, None, "x" * 199, "take k\u00e9y", "look\nlook", "\\help"])
def test_an_action_outside_the_text_space_raises_value_error_naming_it(small_game, action):
    env = make(small_game)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action space: Text"):
        env.step(action)


@pytest.mark.parametrize("command", ["save", "restore", "restart", "quit", "q", "script", "tw-trace-actions",
                                     "go east. restart"])
def test_interpreter_commands_are_refused_and_change_nothing(small_game, command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where the interpreter would write saves and transcripts
    env = make(small_game).unwrapped
    env.reset(seed=0)
    before = env.snapshot()
    observation, reward, terminated, truncated, info = env.step(command)
    assert "nothing happens" in observation["feedback"] and reward == 0.0 and not terminated
    assert info == before.info and list(tmp_path.iterdir()) == []
    following = env.step(before.info["privileged"]["expert_action"])
    env.restore(before)
    assert outputs_identical(following, env.step(before.info["privileged"]["expert_action"]))


def test_interpreter_words_are_found_anywhere_in_a_command_but_not_inside_names():
    assert interpreter_word("take key then SAVE") == "save"
    assert interpreter_word("tw-extra-infos score") == "tw-extra-infos"
    assert interpreter_word("take q-tip") is None and interpreter_word("examine saver") is None


def test_clean_text_drops_the_prompt_and_status_line():
    raw = "\nYou open the gate.\n\n\n>                                  -= Attic =-0/5"
    assert clean_text(raw) == "You open the gate."
    assert clean_text("caf\u00e9") == "caf?" and clean_text(None) == ""


def test_games_are_cached_under_the_key_the_data_command_uses(small_game):
    knobs = GameKnobs(**{k: v for k, v in small_game.items() if k != "game"})
    assert game_params(small_game["game"], knobs) == small_game
    assert game_params(7, GameKnobs()) == {"game": 7}
    entry = gauntlet.registry.get("data", GAMES)
    assert entry.load() is build_game and entry.metadata["version"] == GAMES_VERSION
    with pytest.raises(ValueError):
        GameKnobs(nb_rooms=0)


def test_a_game_is_generated_identically_every_time(tmp_path):
    """Generation is seeded by the game index alone: two builds give byte-identical files."""
    digests = []
    for name in ("first", "second"):
        folder = tmp_path / name
        folder.mkdir()
        build_game(folder, game=2, nb_rooms=2, nb_objects=3, quest_length=2)
        digests.append({path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in folder.iterdir()})
    assert digests[0] == digests[1] and {"game.z8", "game.json"} <= set(digests[0])

