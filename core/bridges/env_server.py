"""Any Gymnasium env as an MCP server (for agents), with a separate control server (for the operator).

``build_env_server("CartPole-v1")`` gives a FastMCP server with five tools: ``reset``, ``step``,
``render``, ``snapshot`` and ``restore``. Each MCP client session gets its own env, so two HTTP
clients never share one. The action and observation spaces are described in the tool schemas and
descriptions; actions are JSON (``gauntlet.spaces``), and one outside the space is an error result
naming the space, never a crash.

What the agent does not see: the reward (and reward-like info keys such as MuJoCo's
``reward_forward``) unless the operator passes ``expose_reward=True``, and ``info['privileged']``
unless ``expose_privileged=True``. The operator sees both, three ways:

* in process: ``server.control.sessions()`` (``server`` is the returned ``EnvServer``);
* over MCP: ``build_control_server(server)``, served on its own port, which the agent is never given
  (``python -m gauntlet.bridges.serving env:CartPole-v1 --control-port 8001``);
* on disk: with ``record=FOLDER`` every session appends its episodes, rewards and privileged state
  included, to ``FOLDER/<session_id>.jsonl`` (one episode per reset or restore).
"""

# No `from __future__ import annotations` here: the tools' annotations name per-server types
# (the step result model, the action description), which FastMCP must be able to evaluate.

import os
import weakref
from typing import Annotated, Any

from mcp.server.fastmcp import Context, FastMCP, Image
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.session import ServerSession
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from gauntlet.bridges.env_sessions import (
    MAX_SNAPSHOTS_PER_SESSION,
    EnvControl,
    EnvSession,
    EnvSessionError,
    SessionSummary,
    agent_info,
    describe_spaces,
    observation_json,
)
from gauntlet.bridges.validation import install_server_validation_cache
from gauntlet.spaces import describe


class ResetResult(BaseModel):
    """The start of a new episode."""

    observation: Any = Field(description="the first observation, as JSON (see the tool description)")
    info: dict[str, Any] = Field(description="extra information from the environment")


class StepResult(BaseModel):
    """What one action led to."""

    observation: Any = Field(description="the observation after the action, as JSON")
    terminated: bool = Field(description="the episode reached a terminal state; call reset (or restore) to go on")
    truncated: bool = Field(description="the episode was cut off (e.g. a time limit); call reset (or restore) to go on")
    step: int = Field(description="actions taken in this episode so far, this one included")
    info: dict[str, Any] = Field(description="extra information from the environment")


class RewardedStepResult(StepResult):
    """What one action led to, with its reward (the operator chose to show rewards)."""

    reward: float = Field(description="the reward for this action")


class SnapshotResult(BaseModel):
    """A saved point to come back to."""

    snapshot_id: str = Field(description="pass this to restore() to return here")
    step: int = Field(description="actions taken in the episode when the snapshot was taken")


class RestoreResult(BaseModel):
    """The state after returning to a snapshot."""

    observation: Any = Field(description="the observation at the snapshot, as JSON")
    terminated: bool
    truncated: bool
    step: int = Field(description="actions taken in the episode at the snapshot")
    info: dict[str, Any] = Field(description="extra information from the environment at the snapshot")


class SessionList(BaseModel):
    """Every client session the env server has opened."""

    sessions: list[SessionSummary]


class EnvServer(FastMCP):
    """A FastMCP server for one env id; ``control`` is the operator's view of its sessions."""

    def __init__(self, control: EnvControl, **settings: Any):
        super().__init__(**settings)
        self.control = control


_RESET_DOC = """Start a new episode of {env_id} and return its first observation.

Call this before anything else, and again whenever step() reports terminated or truncated.
`seed` (optional integer) makes the episode reproducible: the same seed and the same actions give
the same observations. `options` (optional object) is passed to the environment's reset.
Returns `observation` ({observation}) and `info`."""

_STEP_DOC = """Take one action in {env_id} and return what happened.

The action is JSON: {action}.
Returns `observation` ({observation}), `terminated` and `truncated` (if either is true the episode
is over: call reset, or restore a snapshot), `step` (actions taken so far in this episode) and
`info`{reward}. An action outside the space is an error naming the expected space."""

_RENDER_DOC = """Return a picture of the current state of {env_id} as a PNG image.

Use it to see the scene; it does not change the environment. Requires an episode (call reset first)."""

_SNAPSHOT_DOC = """Save the current state of {env_id} and return a snapshot id.

restore(snapshot_id) returns to exactly this state: the same actions from there give the same
observations every time. Use it to try an action and come back. The server keeps the most recent
{max_snapshots} snapshots of this session."""

_RESTORE_DOC = """Return {env_id} to a state saved by snapshot() and return the observation there.

Everything after the snapshot is discarded; the episode continues from the saved step. Restoring
the same snapshot again gives the same state again."""


def build_env_server(env_id: str, *, env_kwargs: dict | None = None, expose_reward: bool = False,
                     expose_privileged: bool = False, record: str | os.PathLike | None = None) -> FastMCP:
    """An MCP server exposing the Gymnasium env ``env_id`` to agents (see the module docstring).

    ``env_kwargs`` go to ``gymnasium.make``; ``expose_reward`` adds the reward to step results;
    ``expose_privileged`` leaves ``info['privileged']`` in results; ``record`` names a folder that
    receives one Episode JSONL per client session. Returns an ``EnvServer`` (a FastMCP subclass)
    whose ``control`` attribute is the operator's view.
    """
    install_server_validation_cache()
    action_space, observation_space = describe_spaces(env_id, env_kwargs)
    action_doc, observation_doc = describe(action_space), describe(observation_space)
    control = EnvControl(env_id, env_kwargs, record=record)
    server = EnvServer(control, name=f"gauntlet-env-{env_id}", log_level="WARNING", instructions=(
        f"This server runs the reinforcement-learning environment {env_id}. Call reset, then step "
        f"with actions ({action_doc}). Observations: {observation_doc}. "
        + ("step returns the reward. " if expose_reward else "Rewards are not shown. ")
        + "snapshot/restore let you try actions and come back."))
    sessions: weakref.WeakKeyDictionary[ServerSession, EnvSession] = weakref.WeakKeyDictionary()
    fill = {"env_id": env_id, "action": action_doc, "observation": observation_doc,
            "reward": ", and `reward` (a number)" if expose_reward else "",
            "max_snapshots": MAX_SNAPSHOTS_PER_SESSION}

    def session_of(ctx: Context) -> EnvSession:
        # One env per MCP session (not per process), so concurrent HTTP clients never share state.
        key = ctx.session
        session = sessions.get(key)
        if session is None:
            session = control.open_session(client=_client_name(key))
            sessions[key] = session
            weakref.finalize(key, session.close)
        return session

    def visible(info: dict[str, Any]) -> dict[str, Any]:
        return agent_info(info, expose_reward=expose_reward, expose_privileged=expose_privileged)

    step_model = RewardedStepResult if expose_reward else StepResult

    def reset(ctx: Context,
              seed: Annotated[int | None, Field(description="random seed for a reproducible episode")] = None,
              options: Annotated[dict[str, Any] | None, Field(description="env-specific reset options")] = None,
              ) -> ResetResult:
        session = session_of(ctx)
        observation, info = _client_call(session.reset, seed, options)
        return ResetResult(observation=observation_json(observation_space, observation), info=visible(info))

    def step(action: Annotated[Any, Field(description=f"the action, as JSON: {action_doc}")],
             ctx: Context) -> step_model:
        session = session_of(ctx)
        observation, reward, terminated, truncated, info = _client_call(session.step, action)
        fields = {"observation": observation_json(observation_space, observation), "terminated": terminated,
                  "truncated": truncated, "step": len(session.rewards), "info": visible(info)}
        if expose_reward:
            fields["reward"] = reward
        return step_model(**fields)

    def render(ctx: Context) -> Image:
        return Image(data=_client_call(session_of(ctx).render), format="png")

    def snapshot(ctx: Context) -> SnapshotResult:
        session = session_of(ctx)
        snapshot_id = _client_call(session.snapshot)
        return SnapshotResult(snapshot_id=snapshot_id, step=len(session.rewards))

    def restore(snapshot_id: Annotated[str, Field(description="an id returned by snapshot()")],
                ctx: Context) -> RestoreResult:
        session = session_of(ctx)
        observation, info = _client_call(session.restore, snapshot_id)
        return RestoreResult(observation=observation_json(observation_space, observation),
                             terminated=session.terminated, truncated=session.truncated,
                             step=len(session.rewards), info=visible(info))

    # Annotations tell the truth: step/reset/restore overwrite state, snapshot only adds, render only reads.
    tools = [
        (reset, _RESET_DOC, ToolAnnotations(title="Reset the environment", readOnlyHint=False,
                                            destructiveHint=True, idempotentHint=False, openWorldHint=False)),
        (step, _STEP_DOC, ToolAnnotations(title="Take an action", readOnlyHint=False, destructiveHint=True,
                                          idempotentHint=False, openWorldHint=False)),
        (render, _RENDER_DOC, ToolAnnotations(title="Render the scene", readOnlyHint=True, destructiveHint=False,
                                              idempotentHint=True, openWorldHint=False)),
        (snapshot, _SNAPSHOT_DOC, ToolAnnotations(title="Save the state", readOnlyHint=False,
                                                  destructiveHint=False, idempotentHint=False, openWorldHint=False)),
        (restore, _RESTORE_DOC, ToolAnnotations(title="Return to a saved state", readOnlyHint=False,
                                                destructiveHint=True, idempotentHint=True, openWorldHint=False)),
    ]
    for function, doc, annotations in tools:
        server.add_tool(function, description=doc.format(**fill), annotations=annotations)
    return server


def build_control_server(env_server: EnvServer | EnvControl, *, name: str | None = None) -> FastMCP:
    """The operator's MCP server for an env server: sessions, rewards, privileged state, episodes.

    Serve it where only the operator can reach it (another port); it shares no tools with the
    agent-facing server. Both tools are read-only.
    """
    control = env_server.control if isinstance(env_server, EnvServer) else env_server
    server = FastMCP(name or f"gauntlet-control-{control.env_id}", log_level="WARNING", instructions=(
        f"Operator view of the {control.env_id} env server: rewards, privileged state and episode "
        "summaries of every client session. Not for agents."))
    read_only = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)

    @server.tool(annotations=read_only)
    def list_sessions() -> SessionList:
        """Every client session of the env server, oldest first: per-step rewards of the current
        episode, its total, termination flags, the last privileged state, and finished episodes."""
        return SessionList(sessions=control.sessions())

    @server.tool(annotations=read_only)
    def session_summary(session_id: Annotated[str, Field(description="e.g. 'session-001'")]) -> SessionSummary:
        """One client session of the env server (see list_sessions for the fields)."""
        try:
            return control.summary(session_id)
        except KeyError as exc:
            raise ToolError(str(exc.args[0])) from None

    return server


def _client_call(function: Any, *args: Any) -> Any:
    """Run a session method, turning the errors a client can fix into tool errors."""
    try:
        return function(*args)
    except EnvSessionError as exc:
        raise ToolError(str(exc)) from None


def _client_name(session: ServerSession) -> str:
    params = session.client_params
    if params is None:
        return "unknown"
    return f"{params.clientInfo.name}/{params.clientInfo.version}"
