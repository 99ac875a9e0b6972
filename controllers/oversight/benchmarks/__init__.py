"""The benchmarks branched rows are collected on: what each must provide, and where each lives.

A benchmark turns an episode index into an env, a reset seed, a lapsing base agent and an expert, and
says how to read success from the final ``info``. ``get_benchmark(name, **options)`` loads one by name
from ``BENCHMARKS`` (``"module:factory"`` strings, so naming a benchmark imports nothing until it is
used; each factory takes keyword options such as ``n_episodes`` or ``split``).

Modules:

- ``basic``: ``corridor`` (closed form, for tests) and ``taxi`` (Gymnasium's Taxi, a Q-learned expert).
- ``text``: ``textworld`` and ``scienceworld``, text games with an expert read from ``info``.
- ``tool``: ``chem`` and ``disaster``, Gauntlet's tool suites through ``ToolTaskEnv``; built from
  ``tool_expert`` (the env wrapper that names the gold continuation, the tool benchmarks' expert),
  ``tool_lapses`` (the base agent's wrong calls and wrong answers) and ``tool_features`` (what an
  overseer sees of a tool episode's prefix).
- ``llm``: ``llm-chem``, ``llm-disaster`` and ``llm-textworld``, the same tool benchmarks and TextWorld
  with Gauntlet's LLM agent as the base agent (a real model's trajectories) and a stronger model as
  ``stronger``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import gymnasium as gym

from gauntlet.registry import load_target

if TYPE_CHECKING:
    from gauntlet.controllers.oversight.features import History
    from gauntlet.controllers.oversight.lapsing import BranchableAgent

BENCHMARKS: dict[str, str] = {
    "corridor": "gauntlet.controllers.oversight.benchmarks.basic:corridor",
    "taxi": "gauntlet.controllers.oversight.benchmarks.basic:taxi",
    "textworld": "gauntlet.controllers.oversight.benchmarks.text:textworld",
    "scienceworld": "gauntlet.controllers.oversight.benchmarks.text:scienceworld",
    "chem": "gauntlet.controllers.oversight.benchmarks.tool:chem",
    "disaster": "gauntlet.controllers.oversight.benchmarks.tool:disaster",
    "llm-chem": "gauntlet.controllers.oversight.benchmarks.llm:llm_chem",
    "llm-disaster": "gauntlet.controllers.oversight.benchmarks.llm:llm_disaster",
    "llm-textworld": "gauntlet.controllers.oversight.benchmarks.llm:llm_textworld",
}


PRIVILEGED_REFERENCE: dict[str, tuple[str, ...]] = {name: ("expert", "expert_k")
                                                    for name in ("llm-chem", "llm-disaster", "llm-textworld")}
"""Benchmarks whose ``expert`` is the privileged gold continuation, not an overseer a deployment has: their
rows are evaluated and trained on with those actions kept as references that no overseer chooses, and
the scalar routers escalate to ``stronger`` (``overseer_defaults``). Elsewhere the expert is the
intervention, as in the paper."""


def overseer_defaults(name: str) -> tuple[str, tuple[str, ...]]:
    """(the scalar routers' intervention, the reference actions) for rows of benchmark ``name``."""
    if name in PRIVILEGED_REFERENCE:
        return "stronger", PRIVILEGED_REFERENCE[name]
    return "expert", ()


@runtime_checkable
class Benchmark(Protocol):
    """What the branching protocol needs of a benchmark.

    ``make_env(episode)`` gives an env that is Branchable or can be made so by
    ``gauntlet.branching.branchable``; ``make_agent(episode, strength)`` the episode's lapsing base agent
    (``"base"``, or ``"strong"`` where ``has_stronger``); ``make_expert(strength)`` the expert
    (``strength < 1``: one that lapses with probability ``1 - strength``). Episodes end when the env
    ends or after ``max_steps`` steps in all (prefix and branch together). A benchmark may also define
    ``episode_meta(episode) -> dict`` (e.g. the episode's drawn competence), recorded in each row's
    ``benchmark_meta``, and ``n_episodes`` where it has a fixed number of episodes (a tool suite's
    tasks, ScienceWorld's task variations): its episodes are then ``0 .. n_episodes - 1``. A benchmark
    whose agents hold a conversation sets ``stronger_takes_over`` and ``base_follows_expert`` (see
    ``protocol``'s docstring).
    """

    name: str
    max_steps: int
    has_stronger: bool

    def make_env(self, episode: int) -> gym.Env: ...

    def episode_seed(self, episode: int) -> int: ...

    def make_agent(self, episode: int, strength: str = "base") -> BranchableAgent: ...

    def make_expert(self, strength: float = 1.0) -> BranchableAgent: ...

    def success(self, info: dict[str, Any]) -> bool: ...

    def features(self, history: History) -> dict[str, float]: ...


def get_benchmark(name: str, **options: Any) -> Benchmark:
    """The benchmark ``name`` built with ``options`` (see ``BENCHMARKS`` for the names)."""
    if name not in BENCHMARKS:
        raise ValueError(f"unknown oversight benchmark {name!r}; expected one of {sorted(BENCHMARKS)}")
    return load_target(BENCHMARKS[name])(**options)


def episode_count(benchmark: Benchmark) -> int | None:
    """How many episodes ``benchmark`` has (its ``n_episodes``), or None where it generates episodes
    without end (corridor, Taxi, TextWorld: any index is a new episode)."""
    return getattr(benchmark, "n_episodes", None)
