"""ScienceWorld-v0: a ScienceWorld task variation as a Gymnasium env, branched by verified replay."""

from __future__ import annotations

import hashlib
import json
import re
import string
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
from gymnasium import spaces
from gymnasium.error import ClosedEnvironmentError, ResetNeeded

from gauntlet.branching import BranchingError
from gauntlet.envs.scienceworld.simulator import DeterministicSimulator
from gauntlet.info_keys import PRIVILEGED, SUCCESS
from gauntlet.spaces import describe

TEXT_LENGTH = 16_384
"""Longest text of one observation field; longer text is cut (a full room listing is a few kB)."""
TEXT_CHARSET = string.printable
COMMAND_LENGTH = 256
COMMAND_CHARSET = string.ascii_letters + string.digits + string.punctuation + " "
FIRST_COMMAND = "look around"
"""What the simulator runs on reset (as ScienceWorld's own reset does): the first observation."""
_OUTSIDE_CHARSET = re.compile("[^" + re.escape(TEXT_CHARSET) + "]")


def clean_text(raw: str | None) -> str:
    """Simulator output as an observation: stripped, characters outside ``TEXT_CHARSET`` replaced by ``?``."""
    text = _OUTSIDE_CHARSET.sub("?", (raw or "").strip())
    return text if len(text) <= TEXT_LENGTH else text[:TEXT_LENGTH - 5] + "[...]"


def step_digest(observation: dict[str, str], info: dict[str, Any]) -> str:
    """A fingerprint of what one step showed (observation and info, privileged part included)."""
    return hashlib.sha256(json.dumps([observation, info], sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class ScienceWorldSnapshot:
    """A ``ScienceWorldEnv`` mid-episode: the commands since reset and a digest of what every step
    showed (``step_digest``; the reset first), so a restore can check its replay step by step."""

    commands: tuple[str, ...]
    digests: tuple[str, ...]
    rng: dict[str, Any]


class ScienceWorldEnv(gym.Env):
    """
    ## Description
    One variation of a ScienceWorld task (Wang et al., 2022): an interactive text simulation of a
    house and its surroundings (rooms, containers, substances, thermometers, plants, animals,
    electrical parts) where the agent carries out an elementary-school science task ("find a living
    thing and move it to the red box", "measure the temperature of substance B", "make green
    paint"). The simulator runs on the JVM: each env starts one Java process (a few seconds) and
    ``close()`` ends it. Variations are fixed worlds and the simulator takes no seed; it is started
    so that it is deterministic (``simulator.DeterministicSimulator``), which is what branching by
    replay relies on.

    ## Action Space
    ``Text(1..256)`` over ASCII letters, digits, punctuation and space: one command, e.g.
    ``"open door to kitchen"``, ``"focus on dove"``. Commands the simulator does not know cost a step
    and say so. A command that could mean several objects is answered with numbered options; the
    next command, the option's number, chooses. An action that is not a string of the space raises
    ``ValueError``.

    ## Observation Space
    ``Dict`` of three ``Text(0..16384)`` fields: ``feedback`` (the answer to the last command;
    after reset, what ``look around`` says), ``description`` (what ``look around`` would say now)
    and ``inventory``.

    ## Rewards
    The change of the task score (0 to 100; a failed task scores negative).

    ## Starting State
    The variation's world after ``look around``.

    ## Episode End
    Terminates when the task is completed (success) or failed (a negative score, e.g. focusing on
    the wrong thing). ``gym.make`` truncates after ``max_episode_steps`` (default 60).

    ## Info
    ``score``, ``max_score`` (100), ``won``, ``lost``, ``success``, ``moves`` (the simulator's
    clock), ``objects`` (sorted names of the objects in view, for composing commands from the
    templates in the reset info's ``action_templates``) and, when ``admissible_commands=True``,
    ``admissible_commands``: ScienceWorld's valid action-object combinations, sorted (hundreds of
    commands; computing them costs the simulator several times a step). The reset info also has
    ``task``, ``variation`` and ``task_description``. Privileged: ``gold_actions`` (the gold action
    sequence, fixed at the start state), ``on_gold_path`` (whether every command so far followed
    it) and ``expert_action`` (the next gold action while on the path; None off it, where the gold
    sequence says nothing about how to go on, and once the episode is over).

    ## Branching
    ScienceWorld cannot save or restore its state, so ``snapshot()`` records the commands since
    reset with a digest of every step's observation and info, and ``restore()`` resets the
    simulator and replays them, checking every step against its digest (``BranchingError`` if one
    differs). Cost: a reset plus one step per recorded command. ``rewind(steps)`` returns the same
    way to an earlier step of the current episode; ``commands`` lists the commands since reset and
    ``score`` is the task score now.

    ## Arguments
    ``task="find-living-thing"`` (a ScienceWorld task name), ``variation=0``,
    ``simplification="easy"`` (ScienceWorld's simplification string; "easy" opens doors, adds
    teleporting, ...), ``admissible_commands=True``, ``render_mode=None | "ansi"``.

    ## Version History
    * v0: initial version.
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, task: str = "find-living-thing", variation: int = 0, simplification: str = "easy",
                 admissible_commands: bool = True, render_mode: str | None = None):
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi'; got {render_mode!r}")
        self.task, self.variation, self.simplification = task, variation, simplification
        self.admissible_commands = admissible_commands
        self.render_mode = render_mode
        text = spaces.Text(TEXT_LENGTH, min_length=0, charset=TEXT_CHARSET)
        self.observation_space = spaces.Dict({"feedback": text, "description": text, "inventory": text})
        self.action_space = spaces.Text(COMMAND_LENGTH, min_length=1, charset=COMMAND_CHARSET)
        # The simulator's own step limit is off: gym.make's TimeLimit truncates episodes.
        self._simulator: DeterministicSimulator | None = DeterministicSimulator(env_step_limit=2**31 - 1)
        try:
            self._load(self._simulator)
        except BaseException:
            self.close()
            raise
        self._commands: list[str] = []
        self._digests: list[str] = []
        self._score = 0
        self._done = True
        self._observation: dict[str, str] = {}
        self._info: dict[str, Any] = {}

    def _load(self, simulator: DeterministicSimulator) -> None:
        """Load the task variation with its gold path, first thing: the gold path the simulator
        generates depends on what it did before, so every env does the same before it."""
        tasks = simulator.get_task_names()
        if self.task not in tasks:
            raise ValueError(f"unknown ScienceWorld task {self.task!r}; known: {', '.join(tasks)}")
        variations = simulator.get_max_variations(self.task)
        if not 0 <= self.variation < variations:
            raise ValueError(f"variation must be in [0, {variations}) for task {self.task!r}; got {self.variation}")
        simulator.load(self.task, self.variation, self.simplification, generateGoldPath=True)
        self.gold_actions = tuple(simulator.get_gold_action_sequence())
        self.action_templates = list(simulator.get_possible_actions())

    @property
    def _server(self) -> Any:
        """The simulator's Java interface. Commands go to it directly: the Python wrapper's ``step``
        asks for more than this env reports (the valid actions, whatever ``admissible_commands`` says)."""
        if self._simulator is None:
            raise ClosedEnvironmentError("this ScienceWorld env is closed: its simulator has ended")
        return self._simulator.server

    # Gymnasium API -------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._restart()
        info = self._copy_info()
        info.update(task=self.task, variation=self.variation, task_description=clean_text(
            self._server.freeActionTaskDesc()), action_templates=list(self.action_templates))
        return dict(self._observation), info

    def step(self, action: Any):
        if not isinstance(action, str) or not self.action_space.contains(action):
            raise ValueError(f"action {action!r:.80} is not in the action space: {describe(self.action_space)} "
                             "over letters, digits, punctuation and space")
        if self._done:
            raise ResetNeeded("the task is over: call reset() before step()")
        previous = self._score
        self._run(action)
        return dict(self._observation), float(self._score - previous), self._done, False, self._copy_info()

    def render(self) -> str | None:
        return self._observation.get("feedback") if self.render_mode == "ansi" else None

    def close(self) -> None:
        """End the simulator's Java process (once; closing again does nothing)."""
        simulator, self._simulator = self._simulator, None
        if simulator is not None:
            simulator.close()
            simulator._gateway.java_process.wait(timeout=30)

    # The simulator -------------------------------------------------------------------------------
    # Reset, step and restore ask the simulator the same questions in the same order: what the
    # simulator names objects in its lists depends on what it was asked before.
    def _restart(self) -> None:
        """Reset the simulator and run the first command."""
        self._server.reset()
        self._commands, self._digests = [], []
        self._observe(self._server.step(FIRST_COMMAND))

    def _run(self, command: str) -> None:
        self._commands.append(command)
        self._observe(self._server.step(command))

    def _observe(self, reply: str) -> None:
        """Read the simulator's state after ``reply`` into the observation and info."""
        server = self._server
        self._score = int(round(100 * server.getScore()))
        completed = bool(server.getCompleted())
        failed = self._score < 0
        won = completed and not failed
        self._done = won or failed
        self._observation = {"feedback": clean_text(reply), "description": clean_text(server.freeActionLook()),
                             "inventory": clean_text(server.freeActionInventory())}
        steps = len(self._commands)
        on_path = tuple(self._commands) == self.gold_actions[:steps]
        expert = self.gold_actions[steps] if on_path and steps < len(self.gold_actions) and not self._done else None
        info: dict[str, Any] = {"score": self._score, "max_score": 100, "won": won, "lost": failed, SUCCESS: won,
                                "moves": int(server.getNumMoves()), "objects": sorted(server.getPossibleObjects())}
        if self.admissible_commands:
            info["admissible_commands"] = sorted(server.getValidActionObjectCombinations())
        info[PRIVILEGED] = {"gold_actions": list(self.gold_actions), "on_gold_path": on_path,
                            "expert_action": expert}
        self._info = info
        self._digests.append(step_digest(self._observation, info))

    def _copy_info(self) -> dict[str, Any]:
        """A copy of the info that shares no list with it (callers may change what they are given)."""
        info: dict[str, Any] = {key: list(value) if isinstance(value, list) else value
                                for key, value in self._info.items()}
        privileged: dict[str, Any] = self._info[PRIVILEGED]
        info[PRIVILEGED] = {**privileged, "gold_actions": list(privileged["gold_actions"])}
        return info

    # Branchable ----------------------------------------------------------------------------------
    def snapshot(self) -> ScienceWorldSnapshot:
        if not self._digests:
            raise ResetNeeded("call reset() before snapshot()")
        return ScienceWorldSnapshot(commands=tuple(self._commands), digests=tuple(self._digests),
                                    rng=dict(self.np_random.bit_generator.state))

    def restore(self, snapshot: ScienceWorldSnapshot) -> None:
        """Reset the simulator and replay the snapshot's commands, checking every step against its digest."""
        self._replay(snapshot.commands, snapshot.digests)
        self.np_random.bit_generator.state = dict(snapshot.rng)

    @property
    def score(self) -> int:
        """The task score now (0 to 100; negative once failed)."""
        return self._score

    @property
    def commands(self) -> tuple[str, ...]:
        """The commands since the last reset (or restore: those the restored state was reached by)."""
        return tuple(self._commands)

    def rewind(self, steps: int) -> tuple[dict[str, str], dict[str, Any]]:
        """Return to the state after the first ``steps`` commands since reset (a restore of that earlier
        step); the observation and info of that state."""
        if not 0 <= steps <= len(self._commands):
            raise ValueError(f"can rewind to 0..{len(self._commands)} commands; got {steps}")
        self._replay(tuple(self._commands[:steps]), tuple(self._digests[:steps + 1]))
        return dict(self._observation), self._copy_info()

    def _replay(self, commands: tuple[str, ...], digests: tuple[str, ...]) -> None:
        self._restart()
        self._check_replay(commands, digests, 0)
        for index, command in enumerate(commands, start=1):
            self._run(command)
            self._check_replay(commands, digests, index)

    def _check_replay(self, commands: tuple[str, ...], digests: tuple[str, ...], index: int) -> None:
        if self._digests[index] != digests[index]:
            where = "the reset" if index == 0 else f"command {index} ({commands[index - 1]!r})"
            raise BranchingError(f"ScienceWorld {self.task} variation {self.variation} did not replay: what "
                                 f"{where} showed differs from the recorded step, so the snapshot cannot be restored")
