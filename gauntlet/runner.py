"""The runner: one episode of an agent in an env (``rollout``); many episodes are ``gauntlet.batch``'s.

Recording. ``record="memory"`` keeps typed steps in the returned Episode; a path (or an
``EpisodeWriter``) appends them to disk as they happen (the returned Episode then holds header and
outcome only, unless ``keep_steps=True``; ``load_episodes`` reads the steps back); ``record="none"``
keeps only the outcome. One step loop serves every mode: a step is kept, written, both or neither,
and what is kept is what is written. The env's ``info`` is read through the keys of
``gauntlet.info_keys``: ``cost`` becomes ``Step.cost`` (summed into the outcome), ``privileged`` moves
to ``Step.privileged`` (recorded once, out of the step's ``info``), ``tool_call`` stays where the env put
it (``Step.info``, its one home, which ``Step.tool_call`` reads), the final step's ``success`` (or
``is_success``) is the outcome's, and the reset info's ``task_id`` the episode's. An agent that runs a
tool itself, not through the env, reports it as ``AgentOutput.tool_call``: the step's ``info`` then
records that call under ``tool_call``.

Hooks. Monitors and controllers (``gauntlet.hooks``) read the steps, so with hooks the steps are
always kept. A controller decides before each step. When one halts, the step it was asked about
never happens, so the halting call's ``decision`` and ``intervention`` events are appended to the
events of the last step taken, which is marked truncated. For the file to say so too, a step is
written with controllers present only once the decision after it is known (or the episode has
ended): the file runs one decision behind the env and then holds exactly what memory holds. A halt
before the first step leaves no step to carry it: its events are the outcome's ``events`` and the
outcome's metrics say ``"truncated": True``. A controller's ``replace_action`` may name a whole
``AgentOutput`` (an agent's revised proposal, ``LLMAgent.revise``): the step then records that output's
action, messages and events instead of the proposal's.
"""

from __future__ import annotations

import itertools
import os
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple, SupportsFloat, TypeAlias, TypeGuard

import gymnasium as gym
import numpy as np

from gauntlet.agent import Agent, AgentOutput, ClientModelUser
from gauntlet.branching import branchable
from gauntlet.episode import (
    SCHEMA_VERSION,
    Episode,
    EpisodeWriter,
    Event,
    Outcome,
    Step,
    step_extra,
    to_plain,
)
from gauntlet.hooks import Controller, Decision, Monitor, Prefix
from gauntlet.info_keys import COST, PRIVILEGED, TASK_ID, TOOL_CALL, success_of
from gauntlet.versions import versions

RecordMode: TypeAlias = Literal["memory", "none"] | str | os.PathLike[str] | EpisodeWriter
"""Where ``rollout`` records steps: ``"memory"``, ``"none"`` (outcome only), a file path, or an open writer."""


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + os.urandom(3).hex()


# Episode ids: a random per-process prefix and a counter (unique, and cheaper than a uuid per episode).
_process_tag = uuid.uuid4().hex[:8]
_episode_counter = itertools.count()


_client_model_users: dict[type, bool] = {}


def _is_client_model_user(env: gym.Env) -> TypeGuard[ClientModelUser]:
    """Whether ``env`` takes the agent's model, asked once per class: a runtime protocol check walks the
    protocol's attributes on every call."""
    kind = type(env)
    known = _client_model_users.get(kind)
    if known is None:
        known = _client_model_users[kind] = issubclass(kind, ClientModelUser)
    return known


def _made_as(env: gym.Env, given_id: str | None) -> tuple[str | None, dict[str, Any]]:
    """The id the (unwrapped) env was made from and its kwargs as JSON: replay re-creates the env from them.

    The id is the spec's (an unversioned id resolved to its version), with the module of ``given_id`` (the id
    as given to ``gymnasium.make``) when that is a ``module:Name-v0`` id: the spec drops the module, whose
    import registers the env, so a fresh process could not make the env from the spec's id alone."""
    spec = getattr(env, "spec", None)
    if spec is None:
        return None, {}
    module = given_id.partition(":")[0] if given_id is not None and ":" in given_id else None
    env_id = spec.id if module is None else f"{module}:{spec.id}"
    return env_id, to_plain(spec.kwargs) if spec.kwargs else {}


def rollout(env: gym.Env, agent: Agent, *, seed: int | None = None, max_steps: int | None = None,
            hooks: tuple[Monitor | Controller, ...] | list[Monitor | Controller] = (),
            record: RecordMode = "memory", run_id: str | None = None, episode_id: str | None = None,
            config: dict[str, Any] | None = None, keep_steps: bool | None = None,
            env_id: str | None = None) -> Episode:
    """Run one episode of ``agent`` in ``env`` and return its Episode.

    Ends when the env terminates or truncates, after ``max_steps`` steps (then the last step is
    marked truncated), or when a controller halts it. See the module docstring for ``record`` and
    for how a halt is recorded. ``env_id`` is the id ``env`` was made from, as given to ``gymnasium.make``:
    the header records the env's spec id, and with the module of a ``module:Name-v0`` id kept (the spec
    drops it), replay in another process can make the env again.
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
    keep = bool(hooks) or (keep_steps if keep_steps is not None else record == "memory")

    started = time.perf_counter()
    unwrapped = env.unwrapped
    if _is_client_model_user(unwrapped):  # its tools may ask for the agent's model (MCP sampling)
        lend = getattr(agent, "client_model", None)  # an agent written to the protocol, not the base class, lends none
        unwrapped.use_client_model(lend() if lend is not None else None)
    observation, info = env.reset(seed=seed)
    agent.reset(seed=seed, observation_space=env.observation_space, action_space=env.action_space)
    task_id = info.get(TASK_ID) if info else None
    # The records are built with validation: for these few fields pydantic-core's validator is
    # several times faster than ``model_construct``'s Python loop over the fields. The episode is
    # built once, as the header the writer records; its steps and outcome are filled in when it ends.
    env_id, env_kwargs = _made_as(unwrapped, env_id)
    episode = Episode(
        schema_version=SCHEMA_VERSION, run_id=run_id, episode_id=episode_id, env_id=env_id,
        task_id=None if task_id is None else str(task_id), seed=seed, agent=agent.spec(),
        config={"env_kwargs": env_kwargs, **(config or {})},
        created_at=datetime.now(UTC).isoformat(), initial_observation=observation, reset_info=info)
    # The process's versions are str to str by construction; validating their dozens of entries again
    # would be a third of the header's cost. A copy, so that the process's own stays as it is.
    episode.versions = dict(versions())
    try:
        if writer is not None:
            writer.begin(episode)
        run = _run(env, agent, observation, info, max_steps if max_steps is not None else -1,
                   writer.step if writer is not None else None, keep, monitors, controllers, seed)
        # Wall time from reset to the end: what an evaluation reports as the seconds a task took.
        metrics: dict[str, Any] = {"return": run.total_reward, "length": run.length, "cost": run.total_cost,
                                   "wall_s": time.perf_counter() - started}
        if run.halt_events:
            metrics["truncated"] = True
        outcome = Outcome(score=run.total_reward, success=success_of(run.info), metrics=metrics,
                          events=run.halt_events)
        if writer is not None:
            writer.end(outcome)
    finally:
        if owns_writer and writer is not None:
            writer.close()
    episode.steps = run.steps
    episode.outcome = outcome
    if writer is not None and writer.has_sidecar:
        episode.sidecar = str(writer.sidecar_path)
    return episode


_NO_FIELDS: dict[str, Any] = {}


class _Run(NamedTuple):
    steps: list[Step]
    total_reward: float
    total_cost: float
    length: int
    info: dict[str, Any]
    halt_events: list[Event]
    """A halt before the first step: its events (there is no step to carry them)."""


def _run(env: gym.Env, agent: Agent, observation: Any, info: dict[str, Any], limit: int,
         write: Callable[..., None] | None, keep: bool, monitors: list[Monitor], controllers: list[Controller],
         seed: int | None) -> _Run:
    """The step loop of every record mode (``write``: the writer's ``step``, or None; ``limit`` -1: none)."""
    act, env_step = agent.act, env.step
    deciding, recording = bool(controllers), keep or write is not None
    steps: list[Step] = []
    total = total_cost = 0.0
    n = 0
    # With controllers, the last step and its raw reward, written once the next decision is known.
    pending: tuple[Step, SupportsFloat] | None = None
    try:
        while True:
            output = act(observation, info)
            if type(output) is AgentOutput:  # final, so this is isinstance at a fraction of its cost
                action = output.action
                # The lists themselves, read when the step is built: calls of a model the agent lends the
                # env (``client_model``) while the step's action runs join its events.
                extra: dict[str, Any] | None = {"messages": output.messages, "events": output.events}
                reported = output.tool_call
            else:
                action, extra, reported = output, None, None
            if deciding:
                prefix = Prefix(steps=steps, observation=observation, info=info, env=env, agent=agent, seed=seed,
                                extra={"proposal": output} if extra is not None else {})
                action, revised, events, halt = _decide(controllers, prefix, action)
                if halt and steps:
                    steps[-1].truncated = True
                    steps[-1].events.extend(events)
                if pending is not None and write is not None:
                    _write_step(write, *pending)
                    pending = None
                if halt:
                    return _Run(steps, total, total_cost, n, info, [] if steps else events)
                if revised is not None:
                    extra = {"messages": revised.messages, "events": revised.events}
                    reported = revised.tool_call
                if events:
                    if extra:  # onto the output's own list: what the agent adds while the step runs is kept too
                        extra["events"].extend(events)
                    else:
                        extra = {"events": events}
            observation, reward, terminated, truncated, info = env_step(action)
            n += 1
            ended = terminated or truncated or n == limit
            if ended and not terminated:  # a cut at max_steps is a truncation
                truncated = True
            # Summed as Python floats: a float32 reward summed as float32 would lose what its steps record.
            value = reward if type(reward) is float else float(reward)
            total += value
            step_info = info
            if info:
                cost = info.get(COST)
                if cost:
                    cost = float(cost)
                    total_cost += cost
                    extra = {**extra, "cost": cost} if extra else {"cost": cost}
                if recording and PRIVILEGED in info:
                    step_info, extra = _privileged_from_info(info, extra)
            if reported is not None and recording:
                step_info = {**step_info, TOOL_CALL: reported}
            if keep:
                # Validated, so a step kept in memory is one the file can hold (and pydantic-core builds
                # it in half the time ``model_construct`` takes); ``extra`` holds Step fields by name.
                step = Step(index=n - 1, observation=observation, action=action, reward=value, terminated=terminated,
                            truncated=truncated, info=step_info, **(extra or _NO_FIELDS))
                for monitor in monitors:
                    scores, cost_ms = _timed(monitor.observe, step)
                    step.events.append(Event(source=monitor.name, kind="monitor", data=dict(scores), cost_ms=cost_ms))
                steps.append(step)
                if write is not None:
                    if deciding and not ended:
                        pending = (step, reward)
                    else:
                        _write_step(write, step, reward)
            elif write is not None:
                if extra:
                    write(n - 1, observation, action, reward, terminated, truncated, step_info, **extra)
                else:
                    write(n - 1, observation, action, reward, terminated, truncated, step_info)
            if ended:
                return _Run(steps, total, total_cost, n, info, [])
    except BaseException:
        if pending is not None and write is not None:  # the step happened; only what came after it failed
            _write_step(write, *pending)
        raise


def _write_step(write: Callable[..., None], step: Step, reward: SupportsFloat) -> None:
    # The reward as the env gave it: a float32 reward is written in float32's shortest form, as the
    # writer writes it without steps kept, and as replay compares it.
    write(step.index, step.observation, step.action, reward, step.terminated, step.truncated, step.info,
          **step_extra(step))


def _privileged_from_info(info: dict[str, Any],
                          extra: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Move ``privileged`` out of the env's ``info`` into the step's own field, so it is recorded once.

    ``info`` keeps the rest, the tool call included. The env's own dict is left as it was: the agent
    reads it next.
    """
    info = dict(info)
    fields = dict(extra or {})
    privileged = info.pop(PRIVILEGED, None)
    if privileged is not None:
        fields["privileged"] = privileged
    return info, fields


def _timed(fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    result = fn(*args)
    return result, (time.perf_counter() - start) * 1e3


def _decide(controllers: list[Controller], prefix: Prefix,
            action: Any) -> tuple[Any, AgentOutput | None, list[Event], bool]:
    """Ask every controller about ``action``: the action to take, the output replacing the agent's (a
    ``replace_action`` that names an ``AgentOutput``; else None), the events to record, whether to halt."""
    events: list[Event] = []
    revised: AgentOutput | None = None
    halt = False
    for controller in controllers:
        decision, cost_ms = _timed(controller.decide, prefix, [action])
        if not isinstance(decision, Decision):
            raise TypeError(f"controller {controller.name!r} returned {type(decision).__name__}, not a Decision")
        events.append(Event(source=controller.name, kind="decision", cost_ms=cost_ms,
                            data=decision.model_dump(exclude={"action"}, exclude_none=True)))
        if decision.kind == "intervene":
            data = {"intervention": decision.intervention, "reason": decision.reason}
            if decision.intervention == "replace_action":
                # The agent's own proposal is recorded beside the action taken instead (Step.action).
                data["original_action"] = to_plain(action)
            events.append(Event(source=controller.name, kind="intervention", data=data))
            if decision.intervention == "replace_action":
                action = decision.action
                if type(action) is AgentOutput:
                    revised, action = action, action.action
            elif decision.intervention == "halt":
                halt = True
    return action, revised, events, halt


def episode_seed(base_seed: int, index: int) -> int:
    """The seed of episode ``index`` in a run with ``base_seed``: independent streams, stable in n."""
    return int(np.random.SeedSequence(base_seed, spawn_key=(index,)).generate_state(1, np.uint32)[0])
