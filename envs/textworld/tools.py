"""A text game as a tool task, so the LLM agent can play it: ``TextGameTools``.

The LLM agent acts on tool tasks (``gauntlet.bridges.tool_task_env``): its first observation's ``task``
is the question, ``info["tools"]`` the tools it may call, ``info["answer_tool"]`` the call that ends the
task, and each step's ``info["tool_call"]`` the call that ran with its result. This wrapper gives a
TextWorld game that shape without changing the game:

* **The task** (``observation["task"]``) is the game's opening text (its welcome and objective), its
  banner of drawing characters left out, and the commands that make sense at the start.
  The game's own fields (``feedback``, ``description``, ``inventory``) stay in the observation, so
  what reads them (the oversight benchmark's features) reads the same game.
* **One tool, ``play``**, whose one argument is a command. Its result is the game's reply, the score
  and the admissible commands (TextWorld's list of commands that make sense now: the help LLM agents
  on TextWorld are usually given).
* **``give_up``** (the answer tool, no arguments) ends the game unwon. A game ends by itself when it
  is won or lost.
* **Actions**: a ``play`` call as the agent writes it (``{"name": "play", "arguments": {"command":
  ...}}``), a ``give_up`` call, a stop (``{"stop": reason}``, an agent whose budget is spent: the
  episode is truncated), or a bare command (what the scripted experts say). A call of another tool,
  or a command the game cannot take (empty, too long, or with characters outside its charset), is
  one step whose result is an error naming the fix; the game does not move.

Branching: the wrapper's own state is plain data (the task text, whether the agent gave up), which
``gauntlet.branching`` carries with the game's native snapshot.
"""

from __future__ import annotations

import json
import re
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from gauntlet.bridges.tool_task_env import ENV_SERVER, STOP
from gauntlet.envs.textworld.env import COMMAND_CHARSET, COMMAND_LENGTH, TEXT_CHARSET, TEXT_LENGTH
from gauntlet.episode import ToolCall
from gauntlet.info_keys import SUCCESS, TASK_ID, TOOL_CALL
from gauntlet.spaces import describe

PLAY = "play"
GIVE_UP = "give_up"
SERVER = "text-game"
"""``ToolCall.server`` of the game's calls: the wrapper answers them, no MCP server."""
PLAY_TOOL = {
    "name": PLAY,
    "description": ("Type one command into the text game (e.g. 'go north', 'take key', 'open door'); the result is "
                    "the game's reply, your score and the commands that make sense now."),
    "input_schema": {"type": "object", "required": ["command"], "additionalProperties": False,
                    "properties": {"command": {"type": "string", "minLength": 1, "maxLength": COMMAND_LENGTH,
                                               "description": "one command, as you would type it"}}},
}
_WORDS = re.compile(r"[A-Za-z]{3,}")
_COMMAND_CHARS = frozenset(COMMAND_CHARSET)
GIVE_UP_TOOL = {
    "name": GIVE_UP, "description": "Stop playing: the game ends now, unwon. It ends by itself when you win.",
    "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
}
ACTION_LENGTH = COMMAND_LENGTH + 64
"""Longest action: a ``play`` call's JSON around the longest command."""


class TextGameTools(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """A TextWorld env (``gauntlet/TextWorld-v0``, any wrappers) as a tool task (see the module docstring);
    ``task_id`` names the game in ``info``."""

    def __init__(self, env: gym.Env, task_id: str):
        gym.utils.RecordConstructorArgs.__init__(self, task_id=task_id)  # so gym.make can build it again
        gym.Wrapper.__init__(self, env)
        inner = env.observation_space
        if not isinstance(inner, spaces.Dict):
            raise ValueError(f"TextGameTools wraps a text game with a Dict observation space; got {describe(inner)}")
        text = spaces.Text(TEXT_LENGTH, min_length=0, charset=TEXT_CHARSET)
        self.observation_space = spaces.Dict({**inner.spaces, "task": text})
        self.action_space = spaces.Text(ACTION_LENGTH, min_length=1, charset=TEXT_CHARSET)
        self.task_id = task_id
        self.task = ""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        observation, info = self.env.reset(seed=seed, options=options)
        self.task = game_task(observation["feedback"]) + "\n\n" + _commands(info)
        return {**observation, "task": self.task}, self._info(info)

    def step(self, action: Any):
        if not isinstance(action, str) or not self.action_space.contains(action):
            raise ValueError(f"action {action!r:.80} is not in the action space: {describe(self.action_space)}; "
                             f'write a command or {{"name": "{PLAY}", "arguments": {{"command": "..."}}}}')
        kind, value = read_action(action)
        if kind == "command":
            observation, reward, terminated, truncated, info = self.env.step(value)
            call = ToolCall(server=SERVER, name=PLAY, arguments={"command": value},
                            result=game_reply(observation, info))
            return self._out(observation), reward, terminated, truncated, self._info(info, call)
        observation, info = self._current()
        if kind == "give_up":
            call = ToolCall(server=SERVER, name=GIVE_UP, result="You gave up; the game is over.")
            return self._out(observation), 0.0, True, False, self._info({**info, SUCCESS: False}, call)
        if kind == "stop":
            call = ToolCall(server=ENV_SERVER, name=STOP, result=value)
            return self._out(observation), 0.0, False, True, self._info(info, call)
        call = ToolCall(server=SERVER, name=str(value.get("name", "")), arguments=value.get("arguments") or {},
                        result=f"Error: {value['problem']}", is_error=True)
        return self._out(observation), 0.0, False, False, self._info(info, call)

    def _current(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The game's last observation and info, unchanged (an action that did not reach the game)."""
        game: Any = self.env.unwrapped  # a TextWorldEnv, under whatever wrappers
        return game.current()

    def _out(self, observation: dict[str, Any]) -> dict[str, Any]:
        return {**observation, "task": self.task}

    def _info(self, info: dict[str, Any], call: ToolCall | None = None) -> dict[str, Any]:
        return {**info, TASK_ID: self.task_id, "tools": json.loads(json.dumps([PLAY_TOOL, GIVE_UP_TOOL])),
                "answer_tool": GIVE_UP,
                **({TOOL_CALL: call} if call is not None else {})}


class TextWorldTools(TextGameTools):
    """``gauntlet/TextWorldTools-v0``: generated TextWorld game ``game`` (``TextWorld-v0``'s arguments) as a
    tool task, named ``textworld/game-<game>``."""

    def __init__(self, game: int = 0, nb_rooms: int = 10, nb_objects: int = 20, quest_length: int = 15,
                 render_mode: str | None = None):
        from gauntlet.envs.textworld.env import TextWorldEnv

        super().__init__(TextWorldEnv(game, nb_rooms=nb_rooms, nb_objects=nb_objects, quest_length=quest_length,
                                      render_mode=render_mode), task_id=f"textworld/game-{game}")
        self.metadata = self.env.metadata


def read_action(action: str) -> tuple[str, Any]:
    """What an action asks for: ``("command", text)``, ``("give_up", None)``, ``("stop", reason)`` or
    ``("error", {"name", "arguments", "problem"})`` (see the module docstring)."""
    try:
        parsed = json.loads(action)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        return _command(action, {"name": PLAY, "arguments": {"command": action}})
    if set(parsed) == {"stop"}:
        return "stop", str(parsed["stop"])
    if "answer" in parsed and "name" not in parsed:
        return "give_up", None
    name, arguments = parsed.get("name"), parsed.get("arguments")
    arguments = arguments if isinstance(arguments, dict) else {}
    if name == GIVE_UP:
        return "give_up", None
    if name == PLAY:
        command = arguments.get("command")
        return _command(command, {"name": name, "arguments": arguments})
    return "error", {"name": name, "arguments": arguments,
                     "problem": f"there is no tool {name!r}; call {PLAY} with a command, or {GIVE_UP} to stop"}


def _command(command: Any, call: dict[str, Any]) -> tuple[str, Any]:
    """A command the game takes (``("command", text)``), or the error that says what one is."""
    text = command.strip() if isinstance(command, str) else ""
    if text and len(text) <= COMMAND_LENGTH and set(text) <= _COMMAND_CHARS:
        return "command", text
    return "error", {**call, "problem": f"{PLAY} takes one argument, command: a command of 1 to {COMMAND_LENGTH} "
                                        "letters, digits, spaces and punctuation (no backslash)"}


def game_task(opening: str) -> str:
    """The task an opening text sets: the text from its first line of words on (TextWorld opens with a banner
    of drawing characters, hundreds of tokens of nothing to a model)."""
    lines = opening.splitlines()
    first = next((index for index, line in enumerate(lines) if _WORDS.search(line)), 0)
    return "\n".join(lines[first:]).strip()


def game_reply(observation: dict[str, Any], info: dict[str, Any]) -> str:
    """A ``play`` call's result: the game's reply, the score, and the commands that make sense now."""
    parts = [observation["feedback"] or "(no reply)", f"Score: {info.get('score', 0)} of {info.get('max_score', 0)}."]
    if info.get("won"):
        parts.append("You won the game.")
    elif info.get("lost"):
        parts.append("You lost the game.")
    else:
        parts.append(_commands(info))
    return "\n".join(parts)


def _commands(info: dict[str, Any]) -> str:
    return "Commands that make sense now: " + ", ".join(info.get("admissible_commands", []))
