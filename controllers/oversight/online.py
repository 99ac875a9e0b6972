"""Overseers deployed online: held-out episodes through the runner, with no oversight, under the scalar
router and under the action-conditioned controller, each priced as the branched rows price a branch.

Every method runs the same held-out episodes (same env, base agent and reset seed per episode index),
so the differences are the overseers'. The utility of an overseen episode is ``online_utility``'s
(``gauntlet.controllers.oversight.controller``); an episode with no oversight is priced as the
``continue`` branch from ``t = 0``. Confidence intervals are percentile bootstraps over episodes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, cast

import numpy as np

from gauntlet.controllers.oversight.benchmarks import episode_count, get_benchmark
from gauntlet.controllers.oversight.controller import (OversightController, ScalarRoutingController, online_utility,
                                                      overseer_choices)
from gauntlet.controllers.oversight.models import load_model
from gauntlet.controllers.oversight.utility import INTERVENTIONS
from gauntlet.agent import Agent
from gauntlet.runner import rollout
from gauntlet.stats import bootstrap_ci

NONE = "no_oversight"
ONLINE_RESAMPLES = 2000  # bootstrap resamples of a method's mean online utility over episodes


# Where held-out episodes start on a benchmark that generates episodes without end: past any collection.
UNSEEN_FIRST = 100_000


def held_out_first(total: int | None, count: int) -> int:
    """The first of ``count`` episodes to deploy on, of a benchmark with ``total`` episodes (None: it
    generates episodes without end): ``UNSEEN_FIRST`` there, else the first of its last ``count``."""
    return UNSEEN_FIRST if total is None else total - count


def held_out_episodes(benchmark: str, options: Mapping[str, Any], count: int, *, collected: int = 0) -> range:
    """``count`` episodes to deploy on (``held_out_first``): from ``UNSEEN_FIRST`` where ``benchmark``
    generates episodes without end, its last ``count`` where it has a fixed number (the tool suites'
    tasks, ScienceWorld's task variations); ``collected`` first episodes must stay clear of them
    (``ValueError`` when the benchmark is too small)."""
    total = episode_count(get_benchmark(benchmark, **options))
    if total is not None and total - count < collected:
        raise ValueError(f"{benchmark}: its {total} episodes cannot hold {collected} collected and {count} held out")
    first = held_out_first(total, count)
    return range(first, first + count)


def compare_online(benchmark: str, model: str | os.PathLike[str], episodes: Iterable[int],
                   options: Mapping[str, Any] | None = None, *, scalar_model: str | os.PathLike[str] | None = None,
                   record_dir: str | os.PathLike[str] | None = None, seed: int = 0) -> dict[str, Any]:
    """Mean online utility (with a bootstrap CI), success rate and intervention rate per method.

    ``model`` is an ``ActionConditioned`` file (``gauntlet oversight train``); ``scalar_model`` a scalar
    router file. With ``record_dir``, every overseen episode is recorded there (one file per method and
    episode), decisions and interventions included.
    """
    model = Path(model)
    file = load_model(model)
    if file.benchmark != benchmark:
        raise ValueError(f"{model} was trained on the {file.benchmark!r} benchmark, not {benchmark!r}; "
                         "deploy it on its own benchmark")
    config = file.utility
    bench = get_benchmark(benchmark, **dict(options or {}))
    controllers: dict[str, Any] = {NONE: None,
                                   "action_conditioned": OversightController(model, benchmark,
                                                                             benchmark_options=options)}
    if scalar_model is not None:
        controllers["scalar"] = ScalarRoutingController(Path(scalar_model), benchmark, benchmark_options=options)
    indices = list(episodes)
    record = Path(record_dir) if record_dir is not None else None
    if record is not None:
        record.mkdir(parents=True, exist_ok=True)
    methods: dict[str, Any] = {}
    for name, controller in controllers.items():
        utilities: list[float] = []
        successes: list[bool] = []
        intervened: list[bool] = []
        actions: dict[str, int] = {}
        for episode in indices:
            env = bench.make_env(episode)
            agent = cast(Agent, bench.make_agent(episode))  # every base agent is an Agent (LapsingAgent)
            if controller is not None:
                controller.for_episode(episode)  # the episode's stronger agent, for ``stronger``
            try:
                target = record / f"{name}-{episode:06d}.jsonl" if record is not None else "memory"
                played = rollout(env, agent, seed=bench.episode_seed(episode), max_steps=bench.max_steps,
                                 hooks=[controller] if controller is not None else (), record=target,
                                 keep_steps=True)
            finally:
                env.close()
            assert played.outcome is not None
            if controller is None:
                steps = int(played.outcome.metrics["length"])
                utilities.append(config.utility("continue", bool(played.outcome.success), steps))
                intervened.append(False)
            else:
                utilities.append(online_utility(played, config, controller.name))
                choices = overseer_choices(played, controller.name)
                intervened.append(any(action in INTERVENTIONS for _, action in choices))
                for _, action in choices:
                    actions[action] = actions.get(action, 0) + 1
            successes.append(bool(played.outcome.success))
        values = np.asarray(utilities, dtype=np.float64)
        ci = bootstrap_ci(values, resamples=ONLINE_RESAMPLES, seed=seed)
        methods[name] = {"mean_utility": float(values.mean()), "ci": ci,
                         "success_rate": float(np.mean(successes)), "intervention_rate": float(np.mean(intervened)),
                         "decisions": actions, "episodes": len(indices)}
    return {"benchmark": benchmark, "model": str(model), "scalar_model": None if scalar_model is None
            else str(scalar_model), "episodes": indices, "utility": config.__dict__, "methods": methods}
