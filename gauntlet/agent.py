"""The agent contract: what the runner asks of anything that acts."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Protocol, final, runtime_checkable

from gymnasium import spaces

from gauntlet.episode import AgentSpec, Event, Message, ToolCall


@final
@dataclass
class AgentOutput:
    """An action plus what the agent wants recorded with it (LLM turns, tool calls, events).

    Final: the runner records exactly these fields, so a subclass's own fields would be silently
    lost; it also tells an AgentOutput from a bare action by its exact type, on every step.
    """

    action: Any
    messages: list[Message] = field(default_factory=list)
    tool_call: ToolCall | None = None
    events: list[Event] = field(default_factory=list)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise TypeError(f"{cls.__name__} subclasses AgentOutput, which is final: the runner would record only "
                        "AgentOutput's own fields; return an AgentOutput and put what else to record in its events")


@runtime_checkable
class ClientModelUser(Protocol):
    """An env whose MCP sessions can answer their servers' requests for a language model (``ToolTaskEnv``):
    the runner passes it the agent's ``client_model()`` before each reset."""

    def use_client_model(self, callback: Any) -> None: ...


class Agent(ABC):
    """Something that acts: ``reset`` at the start of an episode, then ``act`` once per step.

    ``act`` returns an action from the env's action space, or an ``AgentOutput`` when the agent has
    more to record than the action.
    """

    name: str = "agent"

    def spec(self) -> AgentSpec:
        """Name and configuration that rebuild this agent with ``gauntlet.make_agent``."""
        return AgentSpec(name=self.name, config=self.config())

    def config(self) -> dict[str, Any]:
        return {}

    def reset(  # noqa: B027 (a default, not a hook every agent must fill: most keep nothing between episodes)
            self, *, seed: int | None, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        """Prepare for a new episode; the default keeps nothing between episodes."""

    def client_model(self) -> Any:
        """The language model this agent lends to the tool servers it talks to, as an MCP sampling callback
        (``mcp.client.session.SamplingFnT``), or None (the default: a server asking its client for a model
        is declined). The runner hands it to envs that pass it on (``gauntlet.bridges.client_model``)."""
        return None

    @abstractmethod
    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        """Choose the next action."""
