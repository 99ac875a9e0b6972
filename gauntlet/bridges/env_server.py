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
  (``gauntlet serve env:CartPole-v1 --transport http --control-port 8001``);
* on disk: with ``record=FOLDER`` every session appends its episodes, rewards and privileged state
  included, to ``FOLDER/<session_id>.jsonl`` (one episode per reset or restore).

Both servers are built by the server recipe (``gauntlet.bridges.tool_server``): the agent's tools
receive the calling client's ``AgentSession`` (its own env, made on its first call and closed with
the session), the operator's tools the ``EnvControl``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Annotated, Any

from gymnasium import spaces
from mcp.server.fastmcp import Image
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
from gauntlet.bridges.tool_errors import ToolInputError
from gauntlet.bridges.tool_server import ToolServer, ToolSet
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


@dataclass
class AgentSession:
    """What the agent's tools act on for one client: its env session, and what the operator lets it see."""

    env: EnvSession
    observation_space: spaces.Space
    expose_reward: bool
    expose_privileged: bool

    def observation(self, observation: Any) -> Any:
        return observation_json(self.observation_space, observation)

    def visible(self, info: dict[str, Any]) -> dict[str, Any]:
        return agent_info(info, expose_reward=self.expose_reward, expose_privileged=self.expose_privileged)

    def step(self, action: Any) -> tuple[dict[str, Any], float]:
        """The fields of a step result, and the reward (for the tool that shows it)."""
        observation, reward, terminated, truncated, info = self.env.step(action)
        return {"observation": self.observation(observation), "terminated": terminated, "truncated": truncated,
                "step": len(self.env.rewards), "info": self.visible(info)}, reward

    def close(self) -> None:
        self.env.close()


# Annotations tell the truth: step/reset/restore overwrite state, snapshot only adds, render only reads.
RESET = ToolAnnotations(title="Reset the environment", readOnlyHint=False, destructiveHint=True,
                        idempotentHint=False, openWorldHint=False)
STEP = ToolAnnotations(title="Take an action", readOnlyHint=False, destructiveHint=True, idempotentHint=False,
                       openWorldHint=False)
RENDER = ToolAnnotations(title="Render the scene", readOnlyHint=True, destructiveHint=False, idempotentHint=True,
                         openWorldHint=False)
SNAPSHOT = ToolAnnotations(title="Save the state", readOnlyHint=False, destructiveHint=False, idempotentHint=False,
                           openWorldHint=False)
RESTORE = ToolAnnotations(title="Return to a saved state", readOnlyHint=False, destructiveHint=True,
                          idempotentHint=True, openWorldHint=False)
READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)

# Any JSON value but null, stated so strict function-calling clients see a type; the action space
# decides which of them fits (EnvSession.step refuses the rest by name).
Action = Annotated[Any, Field(description="the action, as JSON (the tool description gives its space)",
                              json_schema_extra={"type": ["integer", "number", "string", "boolean", "array",
                                                          "object"]})]


def reset(agent: AgentSession,
          seed: Annotated[int | None, Field(ge=0, description="random seed (>= 0) for a reproducible episode")] = None,
          options: Annotated[dict[str, Any] | None, Field(description="env-specific reset options")] = None,
          ) -> ResetResult:
    observation, info = agent.env.reset(seed, options)
    return ResetResult(observation=agent.observation(observation), info=agent.visible(info))


def step(agent: AgentSession, action: Action) -> StepResult:
    fields, _ = agent.step(action)
    return StepResult(**fields)


def step_showing_reward(agent: AgentSession, action: Action) -> RewardedStepResult:
    fields, reward = agent.step(action)
    return RewardedStepResult(**fields, reward=reward)


def render(agent: AgentSession) -> Image:
    return Image(data=agent.env.render(), format="png")


def snapshot(agent: AgentSession) -> SnapshotResult:
    return SnapshotResult(snapshot_id=agent.env.snapshot(), step=len(agent.env.rewards))


def restore(agent: AgentSession, snapshot_id: Annotated[str, Field(description="an id returned by snapshot()",
                                                                   examples=["snap-1"])]) -> RestoreResult:
    observation, info = agent.env.restore(snapshot_id)
    return RestoreResult(observation=agent.observation(observation), terminated=agent.env.terminated,
                         truncated=agent.env.truncated, step=len(agent.env.rewards), info=agent.visible(info))


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


def agent_tools(env_id: str, action_doc: str, observation_doc: str, *, expose_reward: bool) -> ToolSet[AgentSession]:
    """The agent's five tools for one env: their descriptions (and the action's) name its spaces, and
    ``step`` shows the reward only if ``expose_reward``."""
    fill = {"env_id": env_id, "action": action_doc, "observation": observation_doc,
            "reward": ", and `reward` (a number)" if expose_reward else "",
            "max_snapshots": MAX_SNAPSHOTS_PER_SESSION}
    tools = ToolSet[AgentSession](fixable=[EnvSessionError])
    tools.add(reset, RESET, description=_RESET_DOC.format(**fill))
    tools.add(step_showing_reward if expose_reward else step, STEP, name="step", description=_STEP_DOC.format(**fill),
              argument_descriptions={"action": f"the action, as JSON: {action_doc}"})
    tools.add(render, RENDER, description=_RENDER_DOC.format(**fill))
    tools.add(snapshot, SNAPSHOT, description=_SNAPSHOT_DOC.format(**fill))
    tools.add(restore, RESTORE, description=_RESTORE_DOC.format(**fill))
    return tools


class EnvServer(ToolServer[EnvControl]):
    """The agent-facing server of one env id; ``control`` is the operator's view of its sessions."""

    @property
    def control(self) -> EnvControl:
        return self.state


def build_env_server(env_id: str, *, env_kwargs: dict[str, Any] | None = None, expose_reward: bool = False,
                     expose_privileged: bool = False, record: str | os.PathLike[str] | None = None) -> EnvServer:
    """An MCP server exposing the Gymnasium env ``env_id`` to agents (see the module docstring).

    ``env_kwargs`` go to ``gymnasium.make``; ``expose_reward`` adds the reward to step results;
    ``expose_privileged`` leaves ``info['privileged']`` in results; ``record`` names a folder that
    receives one Episode JSONL per client session. ``server.control`` is the operator's view.
    """
    action_space, observation_space = describe_spaces(env_id, env_kwargs)
    action_doc, observation_doc = describe(action_space), describe(observation_space)
    control = EnvControl(env_id, env_kwargs, record=record)

    def open_agent_session(session: ServerSession) -> AgentSession:
        # One env per MCP session (not per process), so concurrent HTTP clients never share state.
        return AgentSession(control.open_session(client=_client_name(session)), observation_space,
                            expose_reward, expose_privileged)

    instructions = (f"This server runs the reinforcement-learning environment {env_id}. Call reset, then step "
                    f"with actions ({action_doc}). Observations: {observation_doc}. "
                    + ("step returns the reward. " if expose_reward else "Rewards are not shown. ")
                    + "snapshot/restore let you try actions and come back.")
    return EnvServer(agent_tools(env_id, action_doc, observation_doc, expose_reward=expose_reward), control,
                     name=f"gauntlet-env-{env_id}", instructions=instructions, session_state=open_agent_session)


CONTROL_TOOLS = ToolSet[EnvControl]()


@CONTROL_TOOLS.tool(READ_ONLY)
def list_sessions(control: EnvControl) -> SessionList:
    """Every client session of the env server, oldest first: per-step rewards of the current
    episode, its total, termination flags, the last privileged state, and finished episodes."""
    return SessionList(sessions=control.sessions())


@CONTROL_TOOLS.tool(READ_ONLY)
def session_summary(control: EnvControl, session_id: Annotated[str, Field(description="e.g. 'session-001'",
                                                                          examples=["session-001"])]
                    ) -> SessionSummary:
    """One client session of the env server (see list_sessions for the fields)."""
    try:
        return control.summary(session_id)
    except KeyError as exc:  # EnvControl names the known sessions in its KeyError
        raise ToolInputError(str(exc.args[0])) from None


def build_control_server(env_server: EnvServer | EnvControl, *, name: str | None = None) -> ToolServer[EnvControl]:
    """The operator's MCP server for an env server: sessions, rewards, privileged state, episodes.

    Serve it where only the operator can reach it (another port); it shares no tools with the
    agent-facing server. Both tools are read-only.
    """
    control = env_server.control if isinstance(env_server, EnvServer) else env_server
    return ToolServer(CONTROL_TOOLS, control, name=name or f"gauntlet-control-{control.env_id}", instructions=(
        f"Operator view of the {control.env_id} env server: rewards, privileged state and episode "
        "summaries of every client session. Not for agents."))


def _client_name(session: ServerSession) -> str:
    params = session.client_params
    if params is None:
        return "unknown"
    return f"{params.clientInfo.name}/{params.clientInfo.version}"
