"""The runner: one episode (``rollout``) and many (``run_many``, on local processes or Ray).

``rollout`` records an Episode in one of three ways: ``record="memory"`` keeps typed steps in the
returned Episode; a path (or an ``EpisodeWriter``) appends them to disk as they happen (the returned
Episode then holds header and outcome only, unless ``keep_steps=True``; ``load_episodes`` reads the
steps back); ``record="none"`` keeps only the outcome, for the fastest possible loop. Monitors and
controllers (``gauntlet.hooks``) need the steps, so with hooks the steps are always kept.
"""

from __future__ import annotations

import itertools
import os
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import gymnasium as gym
import numpy as np

from gauntlet.agent import Agent, AgentOutput
from gauntlet.branching import branchable
from gauntlet.episode import SCHEMA_VERSION, Episode, EpisodeHeader, EpisodeWriter, Event, Outcome, Step, to_plain
from gauntlet.hooks import Controller, Decision, Monitor, Prefix
from gauntlet.versions import versions

RecordMode = str  # "memory" | "none" | a path


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


# Episode ids: a random per-process prefix and a counter (unique, and cheaper than a uuid per episode).
_process_tag = uuid.uuid4().hex[:8]
_episode_counter = itertools.count()


def _env_id(env: gym.Env) -> str | None:
    spec = getattr(env.unwrapped, "spec", None)
    return spec.id if spec is not None else None


def _env_kwargs(env: gym.Env) -> dict[str, Any]:
    """The kwargs the env was made with (from its spec), as JSON: replay re-creates the env from them."""
    spec = getattr(env.unwrapped, "spec", None)
    return to_plain(spec.kwargs) if spec is not None and spec.kwargs else {}


def rollout(env: gym.Env, agent: Agent, *, seed: int | None = None, max_steps: int | None = None,
            hooks: tuple[Monitor | Controller, ...] | list[Monitor | Controller] = (),
            record: RecordMode | EpisodeWriter | os.PathLike[str] = "memory",
            run_id: str | None = None, episode_id: str | None = None,
            config: dict[str, Any] | None = None, keep_steps: bool | None = None) -> Episode:
    """Run one episode of ``agent`` in ``env`` and return its Episode.

    Ends when the env terminates or truncates, or after ``max_steps`` steps (then the last step is
    marked truncated). See the module docstring for ``record``.
    """
    monitors = [h for h in hooks if isinstance(h, Monitor)]
    controllers = [h for h in hooks if isinstance(h, Controller)]
    if controllers:
        env = branchable(env)
    run_id = run_id or new_run_id()
    episode_id = episode_id or f"{run_id}-{_process_tag}-{next(_episode_counter)}"
    writer, owns_writer = None, False
    if isinstance(record, EpisodeWriter):
        writer = record
    elif record not in ("memory", "none"):
        writer, owns_writer = EpisodeWriter(record), True
    if keep_steps is None:
        keep_steps = record == "memory"

    observation, info = env.reset(seed=seed)
    agent.reset(seed=seed, observation_space=env.observation_space, action_space=env.action_space)
    # Every field given and already of its type, so no validation pass on the per-episode path.
    header = EpisodeHeader.model_construct(
        schema_version=SCHEMA_VERSION, run_id=run_id, episode_id=episode_id, env_id=_env_id(env), task_id=None,
        seed=seed, agent=agent.spec(), config={"env_kwargs": _env_kwargs(env), **(config or {})},
        versions=versions(), created_at=datetime.now(UTC).isoformat(), initial_observation=observation,
        reset_info=dict(info))
    if writer is not None:
        writer.begin(header)
    limit = max_steps if max_steps is not None else -1
    try:
        if hooks:
            steps, total, total_cost, info = _hooked_loop(env, agent, observation, info, limit, writer,
                                                          monitors, controllers, seed)
            length = len(steps)
        elif keep_steps or writer is not None:
            steps, total, total_cost, length, info = _recording_loop(env, agent, observation, info, limit,
                                                                     writer, keep_steps)
        else:
            steps, (total, total_cost, length, info) = [], _bare_loop(env, agent, observation, info, limit)
        outcome = Outcome.model_construct(score=total, success=_success(info),
                                          metrics={"return": total, "length": length, "cost": total_cost})
        if writer is not None:
            writer.end(outcome)
    finally:
        if owns_writer:
            writer.close()
    return Episode.model_construct(**header.__dict__, steps=steps, outcome=outcome,
                                   sidecar=str(writer.sidecar_path) if writer and writer.sidecar_path.exists() else None)


def _success(info: dict[str, Any]) -> bool | None:
    value = info.get("success", info.get("is_success"))
    return None if value is None else bool(value)


def _tool_call_from_info(info: dict[str, Any], extra: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Move a ``tool_call`` an env reports in ``info`` (ToolTaskEnv does) to the step's own field."""
    if "tool_call" not in info or (extra and extra.get("tool_call") is not None):
        return info, extra
    info = dict(info)
    return info, {**(extra or {}), "tool_call": info.pop("tool_call")}


def _split(output: Any) -> tuple[Any, dict[str, Any]]:
    if isinstance(output, AgentOutput):
        extra = {"messages": output.messages, "tool_call": output.tool_call, "events": list(output.events)}
        return output.action, extra
    return output, {}


def _bare_loop(env, agent, observation, info, limit):
    """Outcome only: the loop a benchmark compares against a bare ``env.step`` loop."""
    act, step = agent.act, env.step
    total = total_cost = 0.0
    n = 0
    while True:
        action = act(observation, info)
        if type(action) is AgentOutput:
            action = action.action
        observation, reward, terminated, truncated, info = step(action)
        total += reward
        if info:
            total_cost += info.get("cost", 0.0)
        n += 1
        if terminated or truncated or n == limit:
            return float(total), float(total_cost), n, info


def _recording_loop(env, agent, observation, info, limit, writer, keep_steps):
    act, step = agent.act, env.step
    construct = Step.model_construct if keep_steps else None
    write = writer.record_step if writer is not None else None
    steps: list[Step] = []
    total = total_cost = 0.0
    n = 0
    while True:
        action = act(observation, info)
        extra = _split(action)[1] if type(action) is AgentOutput else None
        if extra is not None:
            action = action.action
        observation, reward, terminated, truncated, info = step(action)
        n += 1
        if n == limit and not terminated:
            truncated = True
        total += reward
        cost = info.get("cost") if info else None
        if cost:
            total_cost += cost
            extra = {**(extra or {}), "cost": float(cost)}
        step_info = info
        if info and "tool_call" in info:
            step_info, extra = _tool_call_from_info(info, extra)
        if write is not None:
            write(n - 1, observation, action, reward, terminated, truncated, step_info, extra)
        if construct is not None:
            extra = extra or {}
            # Every field given explicitly: model_construct's default lookup is far slower than a step.
            steps.append(construct(index=n - 1, observation=observation, action=action, reward=float(reward),
                                   cost=float(cost or 0.0), terminated=terminated, truncated=truncated,
                                   info=step_info, tool_call=extra.get("tool_call"),
                                   messages=extra.get("messages", []), events=extra.get("events", []),
                                   privileged=info.get("privileged")))
        if terminated or truncated:
            return steps, float(total), float(total_cost), n, info


def _timed(fn, *args):
    start = time.perf_counter()
    result = fn(*args)
    return result, (time.perf_counter() - start) * 1e3


def _hooked_loop(env, agent, observation, info, limit, writer, monitors, controllers, seed):
    steps: list[Step] = []
    total = total_cost = 0.0
    while True:
        action, extra = _split(agent.act(observation, info))
        events: list[Event] = extra.pop("events", [])
        halt = False
        for controller in controllers:
            prefix = Prefix(steps=steps, observation=observation, info=info, env=env, agent=agent, seed=seed)
            decision, cost_ms = _timed(controller.decide, prefix, [action])
            if not isinstance(decision, Decision):
                raise TypeError(f"controller {controller.name!r} returned {type(decision).__name__}, not a Decision")
            events.append(Event(source=controller.name, kind="decision", cost_ms=cost_ms,
                                data=decision.model_dump(exclude={"action"}, exclude_none=True)))
            if decision.kind == "intervene":
                events.append(Event(source=controller.name, kind="intervention",
                                    data={"intervention": decision.intervention, "reason": decision.reason}))
                if decision.intervention == "replace_action":
                    action = decision.action
                elif decision.intervention == "halt":
                    halt = True
        if halt:
            if steps:
                steps[-1].truncated = True
            return steps, float(total), float(total_cost), info
        observation, reward, terminated, truncated, info = env.step(action)
        if len(steps) + 1 == limit and not terminated:
            truncated = True
        cost = float(info.get("cost", 0.0))
        total += reward
        total_cost += cost
        step_info, extra = _tool_call_from_info(info, extra)
        step = Step.model_construct(index=len(steps), observation=observation, action=action,
                                    reward=float(reward), cost=cost, terminated=terminated,
                                    truncated=truncated, info=step_info, events=events,
                                    messages=extra.get("messages", []), tool_call=extra.get("tool_call"),
                                    privileged=info.get("privileged"))
        for monitor in monitors:
            scores, cost_ms = _timed(monitor.observe, step)
            step.events.append(Event(source=monitor.name, kind="monitor", data=dict(scores), cost_ms=cost_ms))
        if writer is not None:
            writer.write_step(step)
        steps.append(step)
        if terminated or truncated:
            return steps, float(total), float(total_cost), info


def episode_seed(base_seed: int, index: int) -> int:
    """The seed of episode ``index`` in a run with ``base_seed``: independent streams, stable in n."""
    return int(np.random.SeedSequence(base_seed, spawn_key=(index,)).generate_state(1, np.uint32)[0])


def __getattr__(name: str):
    if name in {"run_many", "RunSpec", "RunResult"}:
        from gauntlet import batch

        return getattr(batch, name)
    raise AttributeError(name)
