"""Gauntlet's own tool suites as oversight benchmarks: ``chem`` and ``disaster`` through ``ToolTaskEnv``.

Episodes. Episode ``e`` is task ``e`` of a registered task suite (registry kind ``suite``; ``chem``'s
views such as ``chem-noisy-high`` or ``chem-routes`` are suites too), optionally narrowed to a
``split`` (a value of one of the benchmark's metadata keys: a chem reaction class; a disaster
dimension ``T1``/``T2``/``T3``, category or hazard), in a seeded shuffle of the suite: suites are
written in order (disaster by event, chem by reaction number), so the first ``n_episodes`` episodes
are a sample of the whole suite rather than its first event. The env is a ``ToolTaskEnv`` on that one
task with the suite's own env options (its scorer, its text length) and the benchmark's step budget,
wrapped in ``GoldContinuation`` (``tool_expert``), which names the expert's next action.

Server. Every env of a benchmark talks to one server instance (the registered ``server`` built once,
served in memory): a ``ToolTaskEnv`` opens a fresh MCP session at every reset *and every restore*,
and a session on an existing in-memory server costs milliseconds, where a stdio server would start
a process per session (about 0.6 s for chem, 2 s for disaster, measured). Sharing is sound because
both servers are deterministic given the call sequence: chem is read-only; disaster sessions in one
process share its workspace, whose artefacts are content-addressed (the same call writes the same
file under the same name), and no action built here names a workspace file its own episode has not
made (lapses never use ``ws/`` paths), so a call's result never depends on what another branch wrote.

Agents. The expert is ``PrivilegedExpert`` over the gold continuation (``tool_expert``); the base agent
a ``LapsingAgent`` over it whose lapses and premature actions are ``tool_lapses``' wrong calls and
wrong answers. Competence (how often it lapses, loops and answers early) is drawn per episode from the
episode index. Prefix features are ``tool_features``.

Cost. ``ToolTaskEnv`` restores by replay: a restore at step ``t`` opens a session and replays ``t``
calls, so a branch costs O(t) tool calls, not O(1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from gauntlet.bridges.mcp_client import BlockingMCPClient, ServerTarget
from gauntlet.bridges.targets import resolve_server
from gauntlet.bridges.tool_task_env import ToolTaskEnv
from gauntlet.controllers.oversight.benchmarks.tool_expert import GoldContinuation
from gauntlet.controllers.oversight.benchmarks.tool_features import tool_features
from gauntlet.controllers.oversight.benchmarks.tool_lapses import WrongAnswers, WrongCalls
from gauntlet.controllers.oversight.features import History
from gauntlet.controllers.oversight.lapsing import (BranchableAgent, Competence, LapsingAgent, PrivilegedExpert,
                                                    competence_ranges, derive_seed, weakened)
from gauntlet.info_keys import success_of
from gauntlet.registry import load_target, registry
from gauntlet.tasks import Scorer, ToolTask, load_suite

BUDGET_FACTOR = 1.5
"""The default step budget: this many times the longest gold trajectory (its calls and the answer)."""
CHEM_COMPETENCE = {"p_lapse": (0.02, 0.25), "p_loop": (0.0, 0.08), "p_premature": (0.0, 0.06)}
DISASTER_COMPETENCE = {"p_lapse": (0.05, 0.3), "p_loop": (0.0, 0.1), "p_premature": (0.0, 0.12)}
"""Default ranges each episode's competence is drawn from (per-step probabilities). Disaster tasks take
1-8 calls where chem's take 6-12, so its rates are higher for a like share of failing base episodes
(about 40 % under these defaults, measured)."""


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
