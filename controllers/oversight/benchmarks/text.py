"""TextWorld and ScienceWorld as oversight benchmarks: ``textworld`` and ``scienceworld``.

Both are text games whose base agent is a ``LapsingAgent`` over an expert that reads its command from
``info["privileged"]``; they differ in what their expert knows.

**textworld** (``gauntlet/TextWorld-v0``). Episode ``e`` plays generated game ``e`` (built into the
data cache on first use, with the benchmark's difficulty knobs), so held-out episodes are unseen
games. The expert is TextWorld's winning policy from the current state, exact from every prefix: it
replans after any detour (a dropped key becomes "take key" again). A game an irreversible command
made unwinnable has no policy; there the expert says ``look`` (nothing it can do wins) until the
budget ends. Lapses are admissible commands other than the expert's; the premature action is the
plan's last command before its time (the quest's final move made too early: a wasted step). The
step budget is twice the quest length, so an agent that lapses often runs out of steps.
TextWorld-v0 snapshots natively, so a branch from any prefix costs one restore (a few ms).

**scienceworld** (``gauntlet/ScienceWorld-v0``). Episode ``e`` is variation ``e // len(tasks)`` of
task ``tasks[e % len(tasks)]``; there are ``len(tasks)`` times the fewest variations any of the tasks
has (80 for the default tasks), so every episode's variation exists. ScienceWorld's only expert is its
gold action sequence, fixed at the start state: it is exact while every command so far followed it,
and says nothing about states off it. So the benchmark's env (``GoldPathRecovery``) defines two privileged commands:

- ``plan_action``: the next gold command in order, skipping over whatever else was done. The base
  agent follows it: a plan it keeps to between lapses, without noticing what its lapses broke.
- ``expert_action``: on the gold path, the next gold command; off it, ``ROLLBACK``, which returns the
  world to the last step on the gold path (the env's verified replay of those commands; one step
  of the episode), after which the gold continuation is exact again. Handing over to the expert
  from an off-path prefix is therefore "roll back to where the gold path was left, then follow it",
  and ``expert_k`` spends one of its ``k`` steps on the rollback. The overseer's own ``rollback``
  action (``r`` steps back, the base agent tries again) is unchanged. Results on ScienceWorld
  should be read with this in mind: its expert undoes mistakes, which no real expert could.

Lapses are commands built from ScienceWorld's action templates and the objects in view, never a
focus; the premature action is focusing on an object in view, ScienceWorld's way of committing to
an answer (focusing on the wrong thing fails the task). The env runs with ``admissible_commands``
off (ScienceWorld's valid-action list costs about eight steps' time per step), which is why lapses
come from the objects in view. ScienceWorld has no save/restore: a branch from prefix ``t`` costs a
reset and ``t`` replayed steps.

Per-episode competence (lapse, loop and premature probabilities) is drawn from the episode index;
``strength="strong"`` lapses four times less often (``lapsing.Competence``).
"""

from __future__ import annotations

import functools
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from gauntlet.controllers.oversight.features import History
from gauntlet.controllers.oversight.lapsing import (EXPERT_ACTION, BranchableAgent, Competence, LapsingAgent,
                                                    StatelessExpert, competence_ranges, derive_seed, weakened)
from gauntlet.info_keys import PRIVILEGED, SUCCESS

# Streams of ``derive_seed(benchmark seed, ...)``.
_EPISODE_SEED, _AGENT_SEED, _EXPERT_SEED = 0, 1, 2

BUDGET_FACTOR = 2
"""TextWorld's default step budget: this many times the quest length (the expert's walkthrough is about
as long as the quest), so that a base agent that lapses often can run out of steps."""
TEXTWORLD_IDLE = "look"
SCIENCEWORLD_IDLE = "look around"
PLAN_ACTION = "plan_action"
"""ScienceWorld: the next gold command in order, detours skipped (what the base agent follows)."""
ROLLBACK = "[rollback to the gold path]"
"""ScienceWorld: the expert's command that returns the world to the last step on the gold path."""
SCIENCEWORLD_TASKS = ("find-living-thing", "find-non-living-thing", "find-plant", "find-animal",
                      "chemistry-mix-paint-secondary-color", "lifespan-longest-lived", "identify-life-stages-2",
                      "power-component")
"""Default ScienceWorld tasks: in variations 0-2, gold sequences of 3 to 27 commands, each completing its task."""
LAPSE_TEMPLATES = ("look at {}", "look in {}", "pick up {}", "put down {}", "open {}", "close {}", "go to {}",
                   "teleport to {}", "move {} to {}", "pour {} in {}", "use {} on {}", "mix {}", "activate {}",
                   "deactivate {}", "eat {}", "read {}", "wait1", "inventory")
"""ScienceWorld's action templates (``action_templates`` in its reset info) but focus: what a lapse says."""
_TEXTWORLD_ROOM = re.compile(r"^-= (.+) =-", re.MULTILINE)
_SCIENCEWORLD_ROOM = re.compile(r"^This (?:room|outside location) is called the ([^.]+)\.", re.MULTILINE)
_TEXTWORLD_REFUSALS = ("You can't", "That's not a verb", "I only understood", "You need to", "You don't",
                       "nothing happens")
_SCIENCEWORLD_REFUSALS = ("No known action matches", "Ambiguous request", "It's not clear how to",
                          "You can't", "That can't")


class InfoExpert(StatelessExpert):
    """Acts the command an env names in ``info["privileged"][key]``; ``idle`` where it names none (the
    episode cannot be won from here, or the plan is spent)."""

    def __init__(self, key: str, idle: str):
        self.key, self.idle = key, idle
        self.privileged_key = key  # what the controller checks an env gives before it hands over
        self.name = f"info-expert[{key}]"

    def config(self) -> dict[str, Any]:
        return {"key": self.key, "idle": self.idle}

    def act(self, observation: Any, info: dict[str, Any]) -> str:
        command = info[PRIVILEGED].get(self.key)
        return self.idle if command is None else str(command)


def _seen(history: History) -> list[dict[str, str]]:
    """The observations a prefix's features read: o_1..o_t (what the runner's steps record), o_0 at t = 0."""
    return [history.observations[k] for k in (range(1, history.t + 1) if history.t else (0,))]


def _refusals(history: History, phrases: Sequence[str]) -> float:
    """Steps whose feedback contains one of ``phrases`` (the game refused or did not understand)."""
    return float(sum(any(p in history.observations[k]["feedback"] for p in phrases)
                     for k in range(1, history.t + 1)))


def _rooms(history: History, pattern: re.Pattern[str]) -> float:
    """How many rooms the descriptions named so far."""
    return float(len({room for observation in _seen(history) for room in pattern.findall(observation["description"])}))


class _TextBenchmark(ABC):
    """What both text benchmarks share: seeds, competence, agents built around the benchmark's experts."""

    name: str
    has_stronger = True

    def __init__(self, *, max_steps: int, seed: int, loop_len: int, p_lapse: tuple[float, float],
                 p_loop: tuple[float, float], p_premature: tuple[float, float]):
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1; got {max_steps}")
        self.max_steps, self.seed, self.loop_len = max_steps, seed, loop_len
        self.ranges = competence_ranges(p_lapse, p_loop, p_premature)

    # What each benchmark defines.
    @abstractmethod
    def make_env(self, episode: int) -> gym.Env:
        """The env of episode ``episode``."""

    @abstractmethod
    def base_expert(self) -> StatelessExpert:
        """The expert the base agent lapses from."""

    @abstractmethod
    def intervention_expert(self) -> StatelessExpert:
        """The expert the overseer hands over to."""

    @abstractmethod
    def lapse_action(self, observation: Any, info: dict[str, Any], rng: np.random.Generator) -> str:
        """A command the base agent says instead of its expert's."""

    @abstractmethod
    def premature_action(self, observation: Any, info: dict[str, Any], rng: np.random.Generator) -> str:
        """A command that ends or commits too early."""

    @abstractmethod
    def features(self, history: History) -> dict[str, float]:
        """The benchmark's own prefix features (never from ``privileged``)."""

    # The Benchmark protocol.
    def competence(self, episode: int) -> Competence:
        return Competence.draw(episode, seed=self.seed, **self.ranges)

    def episode_seed(self, episode: int) -> int:
        return derive_seed(self.seed, _EPISODE_SEED, episode)

    def make_agent(self, episode: int, strength: str = "base") -> BranchableAgent:
        competence = self.competence(episode).for_strength(strength)
        return LapsingAgent(self.base_expert(), self.lapse_action, seed=derive_seed(self.seed, _AGENT_SEED, episode),
                            p_lapse=competence.p_lapse, p_loop=competence.p_loop, loop_len=self.loop_len,
                            p_premature=competence.p_premature, premature_action=self.premature_action)

    def make_expert(self, strength: float = 1.0) -> BranchableAgent:
        return weakened(self.intervention_expert(), self.lapse_action, strength,
                        seed=derive_seed(self.seed, _EXPERT_SEED))

    def success(self, info: dict[str, Any]) -> bool:
        return bool(info.get(SUCCESS, False))

    def episode_meta(self, episode: int) -> dict[str, Any]:
        competence = self.competence(episode)
        return {"p_lapse": competence.p_lapse, "p_loop": competence.p_loop, "p_premature": competence.p_premature}


# TextWorld --------------------------------------------------------------------------------------
class TextWorldBenchmark(_TextBenchmark):
    """Generated TextWorld games (see the module docstring)."""

    name = "textworld"

    def __init__(self, *, nb_rooms: int = 10, nb_objects: int = 20, quest_length: int = 15,
                 max_steps: int | None = None, seed: int = 0, loop_len: int = 3,
                 p_lapse: tuple[float, float] = (0.0, 0.5), p_loop: tuple[float, float] = (0.0, 0.1),
                 p_premature: tuple[float, float] = (0.0, 0.05)):
        super().__init__(max_steps=max_steps if max_steps is not None else BUDGET_FACTOR * quest_length, seed=seed,
                         loop_len=loop_len, p_lapse=p_lapse, p_loop=p_loop, p_premature=p_premature)
        self.knobs: dict[str, Any] = {"nb_rooms": nb_rooms, "nb_objects": nb_objects, "quest_length": quest_length}

    def make_env(self, episode: int) -> gym.Env:
        return gym.make("gauntlet/TextWorld-v0", game=episode, **self.knobs, max_episode_steps=self.max_steps)

    def base_expert(self) -> StatelessExpert:
        return InfoExpert(EXPERT_ACTION, TEXTWORLD_IDLE)

    def intervention_expert(self) -> StatelessExpert:
        return InfoExpert(EXPERT_ACTION, TEXTWORLD_IDLE)

    def lapse_action(self, observation: Any, info: dict[str, Any], rng: np.random.Generator) -> str:
        """An admissible command other than the expert's (``look`` if there is none)."""
        expert = info[PRIVILEGED]["expert_action"]
        others = [command for command in info["admissible_commands"] if command != expert]
        return str(others[int(rng.integers(len(others)))]) if others else TEXTWORLD_IDLE

    def premature_action(self, observation: Any, info: dict[str, Any], rng: np.random.Generator) -> str:
        """The plan's last command before its time (a lapse once the plan is one command long)."""
        plan = info[PRIVILEGED]["expert_plan"]
        return str(plan[-1]) if len(plan) > 1 else self.lapse_action(observation, info, rng)

    def features(self, history: History) -> dict[str, float]:
        info = history.infos[-1]
        return {"tw_score": float(info.get("score", 0)),
                "tw_admissible": float(len(info.get("admissible_commands", ()))),
                "tw_rooms_seen": _rooms(history, _TEXTWORLD_ROOM),
                "tw_refused": _refusals(history, _TEXTWORLD_REFUSALS)}

    def episode_meta(self, episode: int) -> dict[str, Any]:
        return {**super().episode_meta(episode), "game": episode, **self.knobs}


def textworld(**options: Any) -> TextWorldBenchmark:
    """The TextWorld benchmark (options: ``nb_rooms``, ``nb_objects``, ``quest_length``, ``max_steps``
    (default ``BUDGET_FACTOR`` times the quest length), ``seed``, ``loop_len``,
    ``p_lapse``/``p_loop``/``p_premature`` ranges)."""
    return TextWorldBenchmark(**options)


# ScienceWorld -----------------------------------------------------------------------------------
def on_path_length(commands: Sequence[str], gold: Sequence[str]) -> int:
    """How many commands from the start followed the gold sequence."""
    length = 0
    while length < min(len(commands), len(gold)) and commands[length] == gold[length]:
        length += 1
    return length


def plan_position(commands: Sequence[str], gold: Sequence[str]) -> int:
    """How far a plan follower is through ``gold``: gold commands matched in order, others skipped."""
    position = 0
    for command in commands:
        if position < len(gold) and command == gold[position]:
            position += 1
    return position


class GoldPathRecovery(gym.Wrapper):
    """ScienceWorld-v0 with ``plan_action`` and a ``ROLLBACK``-aware ``expert_action`` in
    ``info["privileged"]`` (see the module docstring). ``ROLLBACK`` is a step of this wrapper: the
    env's ``rewind`` to the last on-path step, with reward the change of score."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        observation, info = self.env.reset(seed=seed, options=options)
        return observation, self._with_experts(info, terminated=False)

    def step(self, action: Any):
        if action != ROLLBACK:
            observation, reward, terminated, truncated, info = self.env.step(action)
            return observation, reward, terminated, truncated, self._with_experts(info, terminated or truncated)
        base: Any = self.env.unwrapped
        score = base.score
        observation, info = base.rewind(on_path_length(base.commands, base.gold_actions))
        return observation, float(info["score"] - score), False, False, self._with_experts(info, terminated=False)

    def _with_experts(self, info: dict[str, Any], terminated: bool) -> dict[str, Any]:
        base: Any = self.env.unwrapped
        gold, commands = base.gold_actions, base.commands
        privileged = dict(info[PRIVILEGED])
        position = plan_position(commands, gold)
        privileged[PLAN_ACTION] = gold[position] if position < len(gold) and not terminated else None
        if not privileged["on_gold_path"] and not terminated:
            privileged[EXPERT_ACTION] = ROLLBACK
        return {**info, PRIVILEGED: privileged}


def scienceworld_variations(tasks: Sequence[str]) -> dict[str, int]:
    """How many variations each of ScienceWorld's ``tasks`` has, asked of a simulator started for it (a
    JVM for a few seconds); ``ValueError`` naming the known tasks for one ScienceWorld does not have."""
    from scienceworld import ScienceWorldEnv

    simulator = ScienceWorldEnv(envStepLimit=1)
    try:
        known = simulator.get_task_names()
        unknown = [task for task in tasks if task not in known]
        if unknown:
            raise ValueError(f"unknown ScienceWorld task {unknown[0]!r}; known: {', '.join(known)}")
        return {task: int(simulator.get_max_variations(task)) for task in tasks}
    finally:
        simulator.close()
        # ScienceWorld closes again when the object is collected, which is quiet only once the JVM has exited.
        simulator._gateway.java_process.wait(timeout=30)


class ScienceWorldBenchmark(_TextBenchmark):
    """ScienceWorld task variations (see the module docstring)."""

    name = "scienceworld"

    def __init__(self, *, tasks: Sequence[str] = SCIENCEWORLD_TASKS, simplification: str = "easy",
                 max_steps: int = 40, seed: int = 0, loop_len: int = 3, p_lapse: tuple[float, float] = (0.0, 0.3),
                 p_loop: tuple[float, float] = (0.0, 0.1), p_premature: tuple[float, float] = (0.0, 0.04)):
        super().__init__(max_steps=max_steps, seed=seed, loop_len=loop_len, p_lapse=p_lapse, p_loop=p_loop,
                         p_premature=p_premature)
        if not tasks:
            raise ValueError("tasks names no ScienceWorld task")
        self.tasks, self.simplification = tuple(tasks), simplification

    @functools.cached_property
    def n_episodes(self) -> int:
        """Each task's variations up to the fewest any of them has (an episode past them would ask some
        task for a variation it does not have)."""
        return len(self.tasks) * min(scienceworld_variations(self.tasks).values())

    def task(self, episode: int) -> tuple[str, int]:
        """(task, variation) of episode ``episode``."""
        return self.tasks[episode % len(self.tasks)], episode // len(self.tasks)

    def make_env(self, episode: int) -> gym.Env:
        task, variation = self.task(episode)
        return GoldPathRecovery(gym.make("gauntlet/ScienceWorld-v0", task=task, variation=variation,
                                         simplification=self.simplification, admissible_commands=False,
                                         max_episode_steps=self.max_steps))

    def base_expert(self) -> StatelessExpert:
        return InfoExpert(PLAN_ACTION, SCIENCEWORLD_IDLE)

    def intervention_expert(self) -> StatelessExpert:
        return InfoExpert(EXPERT_ACTION, SCIENCEWORLD_IDLE)

    def lapse_action(self, observation: Any, info: dict[str, Any], rng: np.random.Generator) -> str:
        """A ``LAPSE_TEMPLATES`` command on objects in view."""
        template = LAPSE_TEMPLATES[int(rng.integers(len(LAPSE_TEMPLATES)))]
        objects = info["objects"]
        return template.format(*(objects[int(rng.integers(len(objects)))] for _ in range(template.count("{}"))))

    def premature_action(self, observation: Any, info: dict[str, Any], rng: np.random.Generator) -> str:
        """Focusing on an object in view: committing to an answer, most likely the wrong one."""
        objects = info["objects"]
        return f"focus on {objects[int(rng.integers(len(objects)))]}"

    def features(self, history: History) -> dict[str, float]:
        info = history.infos[-1]
        return {"sw_score": float(info.get("score", 0)), "sw_moves": float(info.get("moves", 0)),
                "sw_rooms_seen": _rooms(history, _SCIENCEWORLD_ROOM),
                "sw_refused": _refusals(history, _SCIENCEWORLD_REFUSALS)}

    def episode_meta(self, episode: int) -> dict[str, Any]:
        task, variation = self.task(episode)
        return {**super().episode_meta(episode), "task": task, "variation": variation}


def scienceworld(**options: Any) -> ScienceWorldBenchmark:
    """The ScienceWorld benchmark (options: ``tasks``, ``simplification``, ``max_steps``, ``seed``,
    ``loop_len``, ``p_lapse``/``p_loop``/``p_premature`` ranges)."""
    return ScienceWorldBenchmark(**options)
