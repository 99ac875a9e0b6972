"""Gauntlet's own tool suites as oversight benchmarks: ``chem`` and ``disaster`` through ``ToolTaskEnv``.

Episodes. Episode ``e`` is task ``e`` of a registered task suite (registry kind ``suite``; ``chem``'s
views such as ``chem-noisy-high`` or ``chem-routes`` are suites too), optionally narrowed to a
``split`` (a value of one of the benchmark's metadata keys: a chem reaction class; a disaster
dimension ``T1``/``T2``/``T3``, category or hazard), in a seeded shuffle of the suite: suites are
written in order (disaster by event, chem by reaction number), so the first ``n_episodes`` episodes
are a sample of the whole suite rather than its first event. The env is a ``ToolTaskEnv`` on that one
task with the suite's own env options (its scorer, its text length) and the benchmark's step budget.

Server. Every env of a benchmark talks to one server instance (the registered ``server`` built once,
served in memory): a ``ToolTaskEnv`` opens a fresh MCP session at every reset *and every restore*,
and a session on an existing in-memory server costs milliseconds, where a stdio server would start
a process per session (about 0.6 s for chem, 2 s for disaster, measured). Sharing is sound because
both servers are deterministic given the call sequence: chem is read-only; disaster sessions in one
process share its workspace, whose artefacts are content-addressed (the same call writes the same
file under the same name), and no action built here names a workspace file its own episode has not
made (lapses never use ``ws/`` paths), so a call's result never depends on what another branch wrote.

Expert. The gold continuation: from any prefix, the gold trajectory's calls not yet seen to succeed,
in gold order, then the gold answer. What has been done is the env's own call record, which a restore
rebuilds by replay, so the env computes the continuation (``GoldContinuation``, a wrapper) and names
it in ``info["privileged"]["expert_action"]`` on every reset and step; the expert is
``PrivilegedExpert`` and keeps no state of its own (a weakened one keeps only its RNG). It is exact
from every prefix, whoever made the calls before it. A gold call counts as done when a successful
call matches it as the scorer matches them (same tool, every gold argument equal), so a repeated
gold call (routes look some chemicals up twice) is not repeated.

Base agent. ``LapsingAgent`` over that expert. Its lapses (``WrongCalls``) are plausible wrong calls
built from the tool schemas and the task's entities: a wrong tool with schema-valid arguments, the
expected call with one argument taken from another entity of the task (another component's id,
another layer of the scene), or a malformed call (an argument missing or of the wrong type, a
misspelled tool, cut-off JSON). Its premature actions (``WrongAnswers``) are a final answer the
evidence does not support (the gold answer scaled, reordered or cut, another task's answer, null),
each checked wrong by the suite's scorer, or giving up (``{"stop": ...}``). Competence (how often it
lapses, loops and answers early) is drawn per episode from the episode index.

Cost. ``ToolTaskEnv`` restores by replay: a restore at step ``t`` opens a session and replays ``t``
calls, so a branch costs O(t) tool calls, not O(1).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from gauntlet.bridges.mcp_client import BlockingMCPClient, ServerTarget
from gauntlet.bridges.targets import resolve_server
from gauntlet.bridges.tool_task_env import ToolTaskEnv, parse_action, stop_action, tool_call_action
from gauntlet.controllers.oversight.features import History
from gauntlet.controllers.oversight.lapsing import (EXPERT_ACTION, BranchableAgent, Competence, LapsingAgent,
                                                    PrivilegedExpert, competence_ranges, derive_seed, weakened)
from gauntlet.episode import ToolCall
from gauntlet.info_keys import PRIVILEGED, TASK_ID, TOOL_CALL, success_of
from gauntlet.registry import load_target, registry
from gauntlet.tasks import GoldCall, Scorer, ToolTask, load_suite

WORKSPACE_PREFIX = "ws/"
"""Files a session wrote (disaster): lapses never name one (see the module docstring)."""
BUDGET_FACTOR = 1.5
"""The default step budget: this many times the longest gold trajectory (its calls and the answer)."""
CHEM_COMPETENCE = {"p_lapse": (0.02, 0.25), "p_loop": (0.0, 0.08), "p_premature": (0.0, 0.06)}
DISASTER_COMPETENCE = {"p_lapse": (0.05, 0.3), "p_loop": (0.0, 0.1), "p_premature": (0.0, 0.12)}
"""Default ranges each episode's competence is drawn from (per-step probabilities). Disaster tasks take
1-8 calls where chem's take 6-12, so its rates are higher for a like share of failing base episodes
(about 40 % under these defaults, measured)."""
LAPSE_KINDS = ("wrong_tool", "wrong_argument", "malformed")
LAPSE_SHARES = (0.35, 0.45, 0.20)
STOP_SHARE = 0.25
"""The share of premature actions that give up (stop) rather than answer wrongly."""
ANSWER_SCALES = (0.25, 0.5, 2.0, 4.0)
OTHER_ANSWERS = 4
"""How many other tasks' answers a task's wrong answers may borrow."""
_MATCHER = Scorer()  # the scorer's rule for "this call is that gold call"; chem and disaster scorers share it


def answer_action(answer: Any) -> str:
    """The action that submits ``answer`` as the final answer."""
    return json.dumps({"answer": answer}, ensure_ascii=True)


def gold_continuation(task: ToolTask, calls: Sequence[ToolCall]) -> str:
    """The expert's next action after ``calls``: the first gold call no successful call has matched
    yet, or the gold answer once every gold call has been matched."""
    made, _ = _MATCHER.grade_trajectory(task.gold_trajectory, calls)
    for gold, done in zip(task.gold_trajectory, made, strict=True):
        if not done:
            return tool_call_action(gold.call, gold.args)
    return answer_action(task.answer)


class GoldContinuation(gym.Wrapper[dict[str, str], str, dict[str, str], str]):
    """A ``ToolTaskEnv`` whose info names the gold continuation under ``info["privileged"]["expert_action"]``
    on the reset and on every step that does not end the episode (the last step's ``privileged`` stays
    the scorer's report). It keeps no state: the continuation is read off the env's own calls, so
    ``gauntlet.branching.branchable`` snapshots the env natively and the annotation follows."""

    def __init__(self, env: ToolTaskEnv):
        super().__init__(env)
        self.tool_env = env

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, str], dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        return observation, self._annotated(info)

    def step(self, action: str) -> tuple[dict[str, str], float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        return observation, float(reward), terminated, truncated, (
            info if terminated or truncated else self._annotated(info))

    def _annotated(self, info: dict[str, Any]) -> dict[str, Any]:
        task = self.tool_env.task
        assert task is not None  # reset() opened one
        return {**info, PRIVILEGED: {EXPERT_ACTION: gold_continuation(task, self.tool_env.calls)}}


# Entities: the values a lapse may put where another belongs ------------------------------------
def _names_workspace(value: Any) -> bool:
    if isinstance(value, str):
        return value.startswith(WORKSPACE_PREFIX)
    if isinstance(value, list):
        return any(_names_workspace(item) for item in value)
    if isinstance(value, dict):
        return any(_names_workspace(item) for item in value.values())
    return False


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=True)


def _unique(values: Iterator[Any]) -> list[Any]:
    """Distinct values in a fixed order (by their JSON), so a seeded choice among them is reproducible."""
    return [value for _, value in sorted({_key(value): value for value in values}.items())]


def _arguments_by_parameter(calls: Sequence[GoldCall]) -> dict[str, list[Any]]:
    """Every argument value of ``calls`` that names no workspace file, by parameter name."""
    by_parameter: dict[str, list[Any]] = {}
    for call in calls:
        for parameter, value in call.args.items():
            if not _names_workspace(value):
                by_parameter.setdefault(parameter, []).append(value)
    return {parameter: _unique(iter(values)) for parameter, values in sorted(by_parameter.items())}


def _string_leaves(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _string_leaves(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _string_leaves(item)


_JSON_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "number": (int, float),
                                             "boolean": (bool,), "array": (list,), "object": (dict,)}


def _types(schema: dict[str, Any]) -> list[str]:
    """The non-null JSON types a property schema admits."""
    declared = schema.get("type")
    names = ([declared] if isinstance(declared, str) else list(declared or [])) + [
        option.get("type") for option in schema.get("anyOf", []) if isinstance(option.get("type"), str)]
    return [name for name in names if name in _JSON_TYPES]


def _fits(value: Any, types: list[str]) -> bool:
    if isinstance(value, bool):  # a bool is an int to Python, never to a JSON schema
        return "boolean" in types
    return any(isinstance(value, _JSON_TYPES[name]) for name in types)


class _Entities:
    """One task's entities (its gold arguments by parameter, the identifiers among its inputs) and the
    suite's arguments by parameter."""

    def __init__(self, task: ToolTask, suite_arguments: dict[str, list[Any]]):
        self.by_parameter = _arguments_by_parameter(task.gold_trajectory)
        leaves = [*_string_leaves([call.args for call in task.gold_trajectory]), *_string_leaves(task.inputs)]
        # Identifiers only (ids, names, layer paths): free text in the inputs is no argument value.
        self.strings = _unique(s for s in leaves
                               if s and not s.startswith(WORKSPACE_PREFIX) and len(s.split()) <= 4)
        self.suite_arguments = suite_arguments

    def other_value(self, parameter: str, correct: Any, types: list[str], rng: np.random.Generator) -> Any:
        """A value of one of ``types`` for ``parameter`` other than ``correct``: another of the task's
        own values first, then the suite's, else ``correct`` perturbed."""
        pools = [self.by_parameter.get(parameter, []),
                 self.strings if "string" in types else [],
                 self.suite_arguments.get(parameter, [])]
        for pool in pools:
            options = [value for value in pool if _fits(value, types) and _key(value) != _key(correct)]
            if options:
                return options[int(rng.integers(len(options)))]
        return _perturbed(correct)


def _perturbed(value: Any) -> Any:
    """A different value of the same JSON type (numbers doubled, strings marked, lists reversed or emptied)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value * 2 if value else 1
    if isinstance(value, float):
        return value * 2.0 if value else 1.0
    if isinstance(value, str):
        return value + "-2"
    if isinstance(value, list):
        return value[::-1] if len(value) > 1 and value[::-1] != value else []
    return {}


def _mistyped(value: Any) -> Any:
    """A value of another JSON type that no schema coerces into ``value``'s (a number to a non-numeric
    string, a string to a number, ...)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, (bool, int, float)):
        return f"about {value}"
    return json.dumps(value)


class WrongCalls:
    """Lapse actions: a plausible wrong call at the task's current point (see the module docstring).

    Called as ``(observation, info, rng)``: ``info`` names the task and, under ``privileged``, the
    expected next action, which the wrong call departs from.
    """

    def __init__(self, tasks: Sequence[ToolTask], tools: Sequence[dict[str, Any]]):
        self.tasks = {task.id: task for task in tasks}
        self.schemas = {tool["name"]: tool.get("input_schema") or {} for tool in tools}
        self.tool_names = sorted(self.schemas)
        self.suite_arguments = _arguments_by_parameter([call for task in tasks for call in task.gold_trajectory])
        self._entities: dict[str, _Entities] = {}

    def entities(self, task: ToolTask) -> _Entities:
        if task.id not in self._entities:
            self._entities[task.id] = _Entities(task, self.suite_arguments)
        return self._entities[task.id]

    def __call__(self, observation: Any, info: dict[str, Any], rng: np.random.Generator) -> str:
        task = self.tasks[info[TASK_ID]]
        expected = _expected_call(info)
        # Past the last gold call the expected action is the answer: a lapse then re-does a gold call
        # wrongly (all of them are done, so its workspace inputs exist).
        template = expected or (task.gold_trajectory[int(rng.integers(len(task.gold_trajectory)))]
                                if task.gold_trajectory else None)
        kind = LAPSE_KINDS[int(rng.choice(len(LAPSE_KINDS), p=LAPSE_SHARES))] if template else "wrong_tool"
        if kind == "wrong_argument" and template is not None and template.args:
            return self.wrong_argument(task, template, rng)
        if kind == "malformed" and template is not None:
            return self.malformed(template, rng)
        return self.wrong_tool(task, template.call if template else None, rng)

    def wrong_tool(self, task: ToolTask, expected_tool: str | None, rng: np.random.Generator) -> str:
        """Another tool (half the time one the task's gold uses, else any), with schema-valid arguments."""
        in_gold = sorted({call.call for call in task.gold_trajectory} - {expected_tool or ""})
        in_gold = [name for name in in_gold if name in self.schemas]
        pool = in_gold if in_gold and rng.random() < 0.5 else [n for n in self.tool_names if n != expected_tool]
        name = pool[int(rng.integers(len(pool)))]
        schema = self.schemas[name]
        entities = self.entities(task)
        arguments = {}
        for parameter in schema.get("required", []):
            prop = schema.get("properties", {}).get(parameter, {})
            arguments[parameter] = self._value_for(prop, parameter, entities, rng)
        return tool_call_action(name, arguments)

    def _value_for(self, prop: dict[str, Any], parameter: str, entities: _Entities, rng: np.random.Generator) -> Any:
        if prop.get("enum"):
            return prop["enum"][int(rng.integers(len(prop["enum"])))]
        types = _types(prop) or ["string"]
        for pool in (entities.by_parameter.get(parameter, []), entities.suite_arguments.get(parameter, []),
                     prop.get("examples") or []):
            options = [value for value in pool if _fits(value, types)]
            if options:
                return options[int(rng.integers(len(options)))]
        first = types[0]
        if first == "string":
            return entities.strings[int(rng.integers(len(entities.strings)))] if entities.strings else parameter
        return {"integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}[first]

    def wrong_argument(self, task: ToolTask, template: GoldCall, rng: np.random.Generator) -> str:
        """The expected call with one argument set to another of the task's entities."""
        parameters = sorted(template.args)
        parameter = parameters[int(rng.integers(len(parameters)))]
        prop = self.schemas.get(template.call, {}).get("properties", {}).get(parameter, {})
        correct = template.args[parameter]
        others = [option for option in prop.get("enum", []) if option != correct]
        if others:  # a choice among named options: another of them
            return tool_call_action(template.call, {**template.args, parameter: others[int(rng.integers(len(others)))]})
        types = _types(prop) or [name for name in _JSON_TYPES if _fits(correct, [name])]
        value = self.entities(task).other_value(parameter, correct, types, rng)
        return tool_call_action(template.call, {**template.args, parameter: value})

    def malformed(self, template: GoldCall, rng: np.random.Generator) -> str:
        """The expected call broken: an argument missing or mistyped, the tool misspelled, or the JSON cut."""
        kinds = ["misspelled_tool", "cut_json"] + (["missing_argument", "mistyped_argument"] if template.args else [])
        kind = kinds[int(rng.integers(len(kinds)))]
        arguments = dict(template.args)
        if kind in ("missing_argument", "mistyped_argument"):
            parameter = sorted(arguments)[int(rng.integers(len(arguments)))]
            if kind == "missing_argument":
                del arguments[parameter]
            else:
                arguments[parameter] = _mistyped(arguments[parameter])
            return tool_call_action(template.call, arguments)
        if kind == "misspelled_tool":
            spellings = [template.call.replace("_", "-"), template.call + "_tool", "get_" + template.call]
            return tool_call_action(next(s for s in spellings if s not in self.schemas), arguments)
        text = tool_call_action(template.call, arguments)
        return text[:max(1, len(text) // 2)]


def _expected_call(info: dict[str, Any]) -> GoldCall | None:
    """The expected next call named in ``info`` (None when the expected action is the answer)."""
    try:
        name, arguments = parse_action(info[PRIVILEGED][EXPERT_ACTION], answer_tool="")
    except (KeyError, TypeError):
        raise ValueError("the lapse actions of a tool benchmark need the env's gold continuation in "
                         f"info[{PRIVILEGED!r}][{EXPERT_ACTION!r}] (make the env with the benchmark's make_env)"
                         ) from None
    return None if name == "" else GoldCall(call=name, args=arguments)


class WrongAnswers:
    """Premature actions: give up (``STOP_SHARE`` of them) or submit an answer the evidence does not
    support, drawn from candidates the suite's scorer grades wrong (see the module docstring)."""

    def __init__(self, tasks: Sequence[ToolTask], scorer: Scorer):
        self.tasks = list(tasks)
        self.by_id = {task.id: task for task in tasks}
        self.scorer = scorer
        self._candidates: dict[str, list[Any]] = {}

    def candidates(self, task: ToolTask) -> list[Any]:
        """The wrong answers of ``task``: the gold answer scaled, reversed or halved, other tasks' answers
        of the same eval kind and type, and null; only those the scorer grades wrong."""
        if task.id not in self._candidates:
            answer = task.answer
            options: list[Any] = [_scaled(answer, factor) for factor in ANSWER_SCALES]
            if isinstance(answer, list) and len(answer) > 1:
                options += [answer[::-1], answer[:len(answer) // 2]]
            kind = (task.eval_spec.kind, type(answer))
            options += [other.answer for other in self.tasks
                        if other.id != task.id and (other.eval_spec.kind, type(other.answer)) == kind][:OTHER_ANSWERS]
            options.append(None)
            self._candidates[task.id] = [option for option in _unique(iter(options))
                                         if not self.scorer.score(task, option, []).answer_correct]
        return self._candidates[task.id]

    def __call__(self, observation: Any, info: dict[str, Any], rng: np.random.Generator) -> str:
        wrong = self.candidates(self.by_id[info[TASK_ID]])
        if not wrong or rng.random() < STOP_SHARE:
            return stop_action("gave up before finishing the task")
        return answer_action(wrong[int(rng.integers(len(wrong)))])


def _scaled(value: Any, factor: float) -> Any:
    """``value`` with every number in it multiplied by ``factor`` (integers stay integers)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(round(value * factor))
    if isinstance(value, float):
        return value * factor
    if isinstance(value, list):
        return [_scaled(item, factor) for item in value]
    if isinstance(value, dict):
        return {key: _scaled(item, factor) for key, item in value.items()}
    return value


# Features ----------------------------------------------------------------------------------------
TOOL_FEATURES = ("tool_errors", "tool_error_share", "tool_last_error", "tool_error_run", "tool_invalid_actions",
                 "tool_repeated_calls", "tool_distinct_tools", "tool_steps_since_new_call",
                 "tool_last_result_chars", "tool_task_chars")


def _tool_call(info: dict[str, Any]) -> ToolCall | None:
    call = info.get(TOOL_CALL)
    if call is None or isinstance(call, ToolCall):
        return call
    return ToolCall.model_validate(call)


def tool_features(history: History) -> dict[str, float]:
    """What an overseer sees of a tool episode's prefix (``TOOL_FEATURES``): error results so far (and
    their share, the last one, the run of them at the end), invalid actions, calls identical to an
    earlier call, distinct tools used, steps since the last call unlike every earlier one (a loop
    makes it grow), the length of the last
    result and of the task text. Read from the calls in the infos and from observations; never from
    ``privileged``."""
    t = history.t
    calls = [_tool_call(info) for info in history.infos[1:t + 1]]
    errors = [call is not None and call.is_error for call in calls]
    error_run = next((t - 1 - k for k in range(t - 1, -1, -1) if not errors[k]), t)
    actions = [str(action) for action in history.actions]
    new = [k for k in range(t) if actions[k] not in actions[:k]]
    tools = {call.name for call in calls if call is not None and call.name and not call.is_error}
    observation = history.observations[t] if isinstance(history.observations[t], dict) else {}
    return {
        "tool_errors": float(sum(errors)),
        "tool_error_share": sum(errors) / t if t else 0.0,
        "tool_last_error": float(bool(errors) and errors[-1]),
        "tool_error_run": float(error_run),
        "tool_invalid_actions": float(sum(bool(info.get("invalid_action")) for info in history.infos[1:t + 1])),
        "tool_repeated_calls": float(t - len(new)),
        "tool_distinct_tools": float(len(tools)),
        "tool_steps_since_new_call": float(t - 1 - new[-1] if new else 0),
        "tool_last_result_chars": float(len(observation.get("result", ""))),
        "tool_task_chars": float(len(observation.get("task", ""))),
    }


# The benchmark -------------------------------------------------------------------------------------
def _suite_tasks(suite: str) -> list[ToolTask]:
    """The tasks of registered suite ``suite`` (its entry gives a suite file path or a list of tasks)."""
    loaded = registry.get("suite", suite).load()
    loaded = loaded() if callable(loaded) else loaded
    if isinstance(loaded, list):
        return [task if isinstance(task, ToolTask) else ToolTask.model_validate(task) for task in loaded]
    return load_suite(loaded)


def _split(tasks: list[ToolTask], split: str | None, exclude: Sequence[str], keys: Sequence[str]) -> list[ToolTask]:
    """The tasks with ``split`` (if given) and none of ``exclude`` as a value of one of ``keys``."""
    values = sorted({str(task.metadata[key]) for task in tasks for key in keys if key in task.metadata})
    unknown = [value for value in ([split] if split is not None else []) + list(exclude) if value not in values]
    if unknown:
        raise ValueError(f"no task has {unknown[0]!r} as its {' or '.join(keys)}; the suite's values are "
                         f"{', '.join(values[:20])}{' ...' if len(values) > 20 else ''}")
    return [task for task in tasks
            if (split is None or any(task.metadata.get(key) == split for key in keys))
            and not any(task.metadata.get(key) in exclude for key in keys)]


class ToolBenchmark:
    """A tool suite as an oversight benchmark (``gauntlet.controllers.oversight.benchmarks.Benchmark``);
    see the module docstring. Build one with ``chem(...)`` or ``disaster(...)``.

    Options: ``suite`` (a registered suite); ``split`` / ``exclude`` (keep only the tasks with, or drop
    those with, these values of one of ``split_keys``); ``tasks`` (a suite file to use instead of the
    registered one's, with the registered suite's env options) and ``server_options`` (keyword
    arguments of the registered server's factory); ``n_episodes`` (the first that many tasks of the
    seeded shuffle; default all); ``max_steps`` (default ``BUDGET_FACTOR`` times the longest gold
    trajectory plus its answer); ``seed`` (the shuffle, competences and agents' streams); ``loop_len``;
    ``p_lapse``, ``p_loop``, ``p_premature``: ``(low, high)`` ranges of the per-episode competence.
    """

    has_stronger = True

    def __init__(self, name: str, suite: str, *, split_keys: Sequence[str], split: str | None = None,
                 exclude: Sequence[str] = (), tasks: str | None = None, server_options: dict[str, Any] | None = None,
                 n_episodes: int | None = None, max_steps: int | None = None, seed: int = 0, loop_len: int = 3,
                 p_lapse: tuple[float, float], p_loop: tuple[float, float], p_premature: tuple[float, float]):
        self.name = name
        self.suite = suite
        self.split = split
        self.exclude = tuple(exclude)
        self.seed = seed
        self.env_kwargs: dict[str, Any] = dict(registry.get("suite", suite).metadata.get("env_kwargs", {}))
        selected = _split(load_suite(tasks) if tasks is not None else _suite_tasks(suite), split, exclude, split_keys)
        order = np.random.default_rng(seed).permutation(len(selected))
        self.tasks = [selected[int(i)] for i in order][:n_episodes]
        if not self.tasks:
            raise ValueError(f"benchmark {name!r} has no episodes (suite {suite!r}, split {split!r}, "
                             f"n_episodes {n_episodes})")
        servers = sorted({str(task.server) for task in self.tasks})
        if len(servers) != 1 or self.tasks[0].server is None:
            raise ValueError(f"the tasks of suite {suite!r} must all name one server; they name {servers}")
        self.server_name = servers[0]
        self.server_options = dict(server_options or {})
        longest = max(len(task.gold_trajectory) for task in self.tasks) + 1
        self.max_steps = max_steps if max_steps is not None else math.ceil(BUDGET_FACTOR * longest)
        self.loop_len = loop_len
        self.competence_ranges = competence_ranges(p_lapse, p_loop, p_premature)
        scorer = self.env_kwargs.get("scorer")
        self.scorer: Scorer = load_target(scorer)() if isinstance(scorer, str) else Scorer()
        self._server: Any = None
        self._wrong_calls: WrongCalls | None = None
        self.wrong_answers = WrongAnswers(self.tasks, self.scorer)

    @property
    def n_episodes(self) -> int:
        return len(self.tasks)

    def task(self, episode: int) -> ToolTask:
        """The task episode ``episode`` runs."""
        if not 0 <= episode < len(self.tasks):
            raise ValueError(f"benchmark {self.name!r} has episodes 0..{len(self.tasks) - 1}; got {episode}")
        return self.tasks[episode]

    def server(self) -> Any:
        """The one server instance every env of this benchmark talks to (built on first use)."""
        if self._server is None:
            self._server = resolve_server(self.server_name, **self.server_options)
        return self._server

    def make_env(self, episode: int) -> GoldContinuation:
        kwargs = {**self.env_kwargs, "max_steps": self.max_steps}
        return GoldContinuation(ToolTaskEnv([self.task(episode)], server=self.server(), **kwargs))

    def episode_seed(self, episode: int) -> int:
        return episode

    def competence(self, episode: int) -> Competence:
        """How often episode ``episode``'s base agent lapses, loops and answers early."""
        return Competence.draw(episode, seed=self.seed, **self.competence_ranges)

    def episode_meta(self, episode: int) -> dict[str, Any]:
        competence = self.competence(episode)
        return {"suite": self.suite, "split": self.split, "exclude": list(self.exclude),
                "task_id": self.task(episode).id, "p_lapse": competence.p_lapse, "p_loop": competence.p_loop,
                "p_premature": competence.p_premature}

    def make_agent(self, episode: int, strength: str = "base") -> LapsingAgent:
        competence = self.competence(episode).for_strength(strength)
        return LapsingAgent(PrivilegedExpert(), self.lapse_action, seed=derive_seed(self.seed, episode),
                            p_lapse=competence.p_lapse, p_loop=competence.p_loop, loop_len=self.loop_len,
                            p_premature=competence.p_premature, premature_action=self.wrong_answers)

    def make_expert(self, strength: float = 1.0) -> BranchableAgent:
        return weakened(PrivilegedExpert(), self.lapse_action, strength, seed=derive_seed(self.seed, 0, 1))

    def lapse_action(self, observation: Any, info: dict[str, Any], rng: np.random.Generator) -> str:
        """A plausible wrong call (``WrongCalls``, built on first use from the server's tool schemas)."""
        if self._wrong_calls is None:
            client = BlockingMCPClient(ServerTarget.coerce(self.server()))
            try:
                client.open()
                tools = [{"name": tool.name, "input_schema": tool.inputSchema} for tool in client.list_tools()]
            finally:
                client.close()
            self._wrong_calls = WrongCalls(self.tasks, tools)
        return self._wrong_calls(observation, info, rng)

    def success(self, info: dict[str, Any]) -> bool:
        return bool(success_of(info))

    def features(self, history: History) -> dict[str, float]:
        return tool_features(history)


def chem(**options: Any) -> ToolBenchmark:
    """The chem pricing suites as a benchmark (``ToolBenchmark``'s options). ``suite`` is any registered
    chem suite (a view: ``chem`` by default, ``chem-noisy-high``, ``chem-routes``, ...); ``split`` and
    ``exclude`` name reaction classes; ``tasks`` (a suite file) and ``server_options`` (the chem server's
    ``db_path``, ``reactions_dir``) replace the registered data, e.g. with a small catalogue."""
    return ToolBenchmark("chem", **{"suite": "chem", "split_keys": ("reaction_class",), **CHEM_COMPETENCE, **options})


def disaster(**options: Any) -> ToolBenchmark:
    """The disaster-response suite as a benchmark (``ToolBenchmark``'s options). ``split`` and ``exclude``
    name dimensions (``T1``, ``T2``, ``T3``), categories (``affected_area``, ...) or hazards (``flood``,
    ...); ``tasks`` (a suite file) and ``server_options`` (the disaster server's ``data_root``) replace the
    registered data, e.g. with smaller scenes. One call of ``seg_storage_tanks`` takes seconds (the rest
    tens of milliseconds), and a replayed prefix repeats it in every branch, so
    ``exclude=("storage_tank_count", "largest_tank_radius")`` makes branching several times faster."""
    return ToolBenchmark("disaster", **{"suite": "disaster", "split_keys": ("dimension", "category", "hazard"),
                                        **DISASTER_COMPETENCE, **options})
