"""TextWorld played by the LLM agent: the game as a tool task (``TextGameTools``), and ``llm-textworld`` rows
that replay, with the expert's commands, hints and the confidence feature."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from gauntlet.branching import branchable, outputs_identical
from gauntlet.controllers.oversight.benchmarks import get_benchmark
from gauntlet.controllers.oversight.benchmarks.llm import LLMTextWorldBenchmark
from gauntlet.controllers.oversight.protocol import collect_episode
from gauntlet.envs.textworld.tools import GIVE_UP, PLAY
from gauntlet.info_keys import PRIVILEGED, SUCCESS, TASK_ID, TOOL_CALL
from tests.oversight.test_llm_benchmarks import Heeding, _turn_list
from tests.oversight.test_text_benchmarks import SMALL_TEXTWORLD

KNOBS = {key: SMALL_TEXTWORLD[key] for key in ("nb_rooms", "nb_objects", "quest_length")}
HARNESS = {"check_numbers": False, "ask_confidence": False}


def play(command: str) -> str:
    return json.dumps({"name": PLAY, "arguments": {"command": command}})


def _turn(command: str) -> dict:
    return {"text": f"I will type {command}. " + play(command)}


@pytest.fixture
def game(textworld_home, monkeypatch):
    monkeypatch.setenv("GAUNTLET_HOME", str(textworld_home))
    env = gym.make("gauntlet/TextWorldTools-v0", game=0, **KNOBS, max_episode_steps=16)
    yield env
    env.close()


@pytest.fixture(scope="module")
def textworld_home(tmp_path_factory):
    """A cache holding the small game of episode 0, built once for the module."""
    from gauntlet.controllers.oversight.benchmarks.text import textworld

    home = tmp_path_factory.mktemp("llm-textworld-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GAUNTLET_HOME", str(home))
        textworld(**SMALL_TEXTWORLD).make_env(0).close()
    return home


def test_the_game_is_a_tool_task_whose_play_calls_and_bare_commands_move_it_and_other_calls_do_not(game):
    observation, info = game.reset(seed=0)
    # The task is the opening text without TextWorld's banner: from the welcome and the quest on.
    task, commands = observation["task"].split("\n\nCommands that make sense now: ")
    assert observation["feedback"].endswith(task) and len(task) < len(observation["feedback"])
    assert "$$" not in task and "TextWorld" in task.splitlines()[0] and "-= " in task
    assert commands == ", ".join(info["admissible_commands"])
    assert [tool["name"] for tool in info["tools"]] == [PLAY, GIVE_UP] and info["answer_tool"] == GIVE_UP
    assert info[TASK_ID] == "textworld/game-0"
    plan = list(info[PRIVILEGED]["expert_plan"])
    assert len(plan) >= 2
    # A call of another tool, or play without a command: an error result; the game did not move.
    for wrong, says in ((json.dumps({"name": "look", "arguments": {}}), "no tool 'look'"),
                        (json.dumps({"name": PLAY, "arguments": {}}), "takes one argument"),
                        ("take \\key", "no backslash"), ("x" * 199, "1 to 198")):
        after, reward, terminated, truncated, moved = game.step(wrong)
        assert moved[TOOL_CALL].is_error and says in moved[TOOL_CALL].result
        assert after == observation and moved["admissible_commands"] == info["admissible_commands"]
        assert (reward, terminated, truncated) == (0.0, False, False)
    # The first gold command as the agent writes it: the game's reply, the score and what makes sense now.
    observation, _, _, _, info = game.step(play(plan[0]))
    call = info[TOOL_CALL]
    assert (call.name, call.arguments, call.is_error) == (PLAY, {"command": plan[0]}, False)
    assert call.result.startswith(observation["feedback"]) and "Score: " in call.result
    assert ", ".join(info["admissible_commands"]) in call.result
    assert observation["task"].startswith(task)
    # The rest as bare commands (what the scripted expert says) wins the game.
    for command in plan[1:]:
        observation, _, terminated, truncated, info = game.step(command)
    assert terminated and not truncated and info[SUCCESS] and "You won the game." in info[TOOL_CALL].result


@pytest.mark.filterwarnings("ignore:.*is different from the unwrapped version")
def test_the_wrapped_game_passes_the_env_checker(game):
    from gymnasium.utils.env_checker import check_env

    check_env(game, skip_render_check=True)  # random text: commands the game cannot take are error results


def test_give_up_ends_the_game_unwon_a_stop_truncates_it_and_a_bad_action_names_the_space(game):
    game.reset(seed=0)
    _, _, terminated, truncated, info = game.step(json.dumps({"name": GIVE_UP, "arguments": {}}))
    assert terminated and not truncated and info[SUCCESS] is False and info[TOOL_CALL].name == GIVE_UP
    game.reset(seed=0)
    _, _, terminated, truncated, info = game.step(json.dumps({"stop": "max_steps"}))
    assert truncated and not terminated and info[TOOL_CALL].result == "max_steps"
    with pytest.raises(ValueError, match="action space"):
        game.step(42)


def test_a_branch_of_the_wrapped_game_replays_bit_for_bit(game):
    env = branchable(game)
    _, info = env.reset(seed=0)
    plan = list(info[PRIVILEGED]["expert_plan"])
    env.step(play(plan[0]))
    snapshot = env.snapshot()
    first = [env.step(play(command)) for command in plan[1:]]
    env.restore(snapshot)
    again = [env.step(play(command)) for command in plan[1:]]
    assert all(outputs_identical(a, b) for a, b in zip(first, again, strict=True))
    assert first[-1][4][SUCCESS]


def test_llm_textworld_rows_replay_the_expert_wins_and_a_hint_shows_its_next_command(textworld_home, monkeypatch):
    monkeypatch.setenv("GAUNTLET_HOME", str(textworld_home))
    probe = LLMTextWorldBenchmark(**SMALL_TEXTWORLD, model="scripted:none", strong_model=None)
    env = probe.make_env(0)
    try:
        plan = list(env.reset(seed=probe.episode_seed(0))[1][PRIVILEGED]["expert_plan"])
    finally:
        env.close()
    # The base plays the plan but detours (inventory) before its last command; after a notice it plays that command.
    last = len(plan) - 1
    turns = [*map(_turn, plan[:last]), _turn("inventory"), _turn(plan[last]), *[_turn("look")] * 40]  # (look: a
    # rollback's branch, one reply longer, plays on after the won base episode's last turn)
    model = Heeding(turns=_turn_list(turns), heeded=_turn(plan[last]), notices=[])
    benchmark = get_benchmark("llm-textworld", **SMALL_TEXTWORLD, model=model, strong_model=None,
                              agent_config=HARNESS)
    assert benchmark._config("offline:small")["mode"] == "textgame"
    assert benchmark._config("offline:small")["max_steps"] == int(1.5 * SMALL_TEXTWORLD["max_steps"])
    (row,) = collect_episode(benchmark, 0, prefixes=[last], actions=("continue", "quit", "expert", "rollback", "hint"))
    branches = row["branches"]
    assert row["prefix_match"] and row["base_success"] and row["base_length"] == len(plan) + 1
    assert branches["continue"]["success"] and branches["continue"]["steps"] == 2
    assert branches["expert"]["success"] and branches["expert"]["steps"] == 1
    # The hint showed the plan's last command as a play call; the revised reply played it and won at once.
    assert branches["hint"]["success"] and branches["hint"]["steps"] == 1
    undo, notice = model.notices  # the rollback's branch runs before the hint's
    assert json.loads(notice.split("the call ", 1)[1].split(". Write", 1)[0]) == json.loads(play(plan[last]))
    # The rollback (r = 2) named the two play calls it undid, as the agent wrote them.
    assert last >= 2 and "your last 2 calls were undone" in undo
    assert [json.loads(call) for call in undo.split("They were: ", 1)[1].split(". Write", 1)[0].split("; ")] == [
        json.loads(play(command)) for command in plan[last - 2:last]]
    assert {"tw_score", "tw_admissible", "verbal_confidence"} <= set(row["features"])
    assert row["benchmark_meta"]["mode"] == "textgame" and row["benchmark_meta"]["game"] == 0
    with pytest.raises(ValueError, match="no lapse rates"):
        get_benchmark("llm-textworld", **SMALL_TEXTWORLD, p_lapse=(0.0, 0.1))


def test_the_textgame_mode_offers_the_game_s_tool_and_no_answer_tool(game):
    import gauntlet
    from gauntlet.agents.llm.agent import LLMAgent
    from gauntlet.agents.llm.modes import TEXTGAME, answer_spec
    from gauntlet.agents.llm.scripted import ScriptedChatModel

    _, info = game.reset(seed=0)
    plan = list(info[PRIVILEGED]["expert_plan"])
    model = ScriptedChatModel(turns=_turn_list([_turn(command) for command in plan]))
    episode = gauntlet.rollout(game, LLMAgent(model=model, mode="textgame", check_numbers=False), seed=0)
    offered = [event.data["tools_offered"] for step in episode.steps for event in step.events
               if event.kind == "note" and "tools_offered" in event.data]
    assert offered == [[PLAY]]  # the game ends by itself: no give_up to call early
    assert episode.outcome.success and len(episode.steps) == len(plan)
    with pytest.raises(ValueError, match="no answer"):
        answer_spec(TEXTGAME, GIVE_UP)
