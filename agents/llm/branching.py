"""Coupled branching: an LLM agent and its tool env, snapshotted and forked as one.

An ``AgentEpisode`` holds an ``LLMAgent``, the ``ToolTaskEnv`` it acts in, and where the two stand
between steps: the observation and info the agent reads next, or the action it proposed and the
env has not yet run (a controller deciding about a step sees the episode there: ``at_decision``). Its snapshot is
(agent checkpoint, env snapshot, that position), so ``gauntlet.fork(episode, snapshot)`` branches
agent *and* tool state together: the fork has its own checkpointer thread and its own MCP session
(the env replays its calls into a fresh one), and under the same model outputs its future is the
original's, action for action, observation for observation and reward for reward.

``step()`` is one step of the runner's loop without its recording: for branching experiments (try
a continuation, compare futures), not for running episodes, which is ``gauntlet.rollout``'s.
``check_coupled_branching`` is the contract test, in the spirit of ``gauntlet.testing.check_branchable``.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import gymnasium as gym

from gauntlet.agent import AgentOutput
from gauntlet.agents.llm.agent import LLMAgent, LLMAgentSnapshot
from gauntlet.branching import fork
from gauntlet.bridges.tool_task_env import ToolTaskEnv, ToolTaskSnapshot
from gauntlet.hooks import Prefix


@dataclass(frozen=True)
class AgentEpisodeSnapshot:
    """A point between two steps of an agent episode (see the module docstring)."""

    agent: LLMAgentSnapshot
    env: ToolTaskSnapshot
    observation: Any
    info: dict[str, Any]
    proposed: AgentOutput | None
    done: bool


class Transition(NamedTuple):
    """One step: what the agent proposed, the action the env ran, and what the env returned."""

    output: AgentOutput
    action: str
    observation: Any
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


class AgentEpisode:
    """An ``LLMAgent`` acting in a ``ToolTaskEnv``, stepped together and branchable as a pair."""

    def __init__(self, agent: LLMAgent, env: gym.Env | ToolTaskEnv):
        self.agent = agent
        self.env = env
        self._tool_env = cast(ToolTaskEnv, env.unwrapped)
        if not isinstance(self._tool_env, ToolTaskEnv):
            raise TypeError("an AgentEpisode couples an agent with a ToolTaskEnv, "
                            f"not a {type(env.unwrapped).__name__}")
        self.observation: Any = None
        self.info: dict[str, Any] = {}
        self.proposed: AgentOutput | None = None
        self.done = False

    @classmethod
    def at_decision(cls, prefix: Prefix, candidate: str) -> AgentEpisode:
        """The episode a controller is deciding about, standing before ``candidate`` runs: fork it
        to try the candidate (or another action) before deciding."""
        episode = cls(prefix.agent, prefix.env)
        episode.observation, episode.info = prefix.observation, prefix.info
        episode.proposed = AgentOutput(action=candidate)
        return episode

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self.observation, self.info = self.env.reset(seed=seed, options=options)
        self.agent.reset(seed=seed, observation_space=self.env.observation_space, action_space=self.env.action_space)
        self.proposed, self.done = None, False
        return self.observation, self.info

    def propose(self) -> AgentOutput:
        """The agent's next output (asked once: a proposal stands until it is executed)."""
        if self.done:
            raise RuntimeError("the episode has ended; reset() starts another")
        if self.proposed is None:
            output = self.agent.act(self.observation, self.info)
            self.proposed = output if isinstance(output, AgentOutput) else AgentOutput(action=output)
        return self.proposed

    def step(self, action: str | None = None) -> Transition:
        """Run the proposed action (or ``action`` in its place, as a controller's ``replace_action``)."""
        output = self.propose()
        taken = output.action if action is None else action
        self.observation, reward, terminated, truncated, self.info = self.env.step(taken)
        self.proposed, self.done = None, bool(terminated or truncated)
        return Transition(output, taken, self.observation, float(reward), bool(terminated), bool(truncated),
                          self.info)

    def snapshot(self) -> AgentEpisodeSnapshot:
        return AgentEpisodeSnapshot(agent=self.agent.snapshot(), env=self._tool_env.snapshot(),
                                    observation=copy.deepcopy(self.observation), info=copy.deepcopy(self.info),
                                    proposed=copy.deepcopy(self.proposed), done=self.done)

    def restore(self, snapshot: AgentEpisodeSnapshot) -> None:
        self.agent.restore(snapshot.agent)
        self._tool_env.restore(snapshot.env)
        self._take_position(snapshot)

    def fork(self, snapshot: AgentEpisodeSnapshot) -> AgentEpisode:
        """An independent (agent, env) pair standing at ``snapshot``."""
        twin = AgentEpisode(self.agent.fork(snapshot.agent), self._tool_env.fork(snapshot.env))
        twin._take_position(snapshot)
        return twin

    def _take_position(self, snapshot: AgentEpisodeSnapshot) -> None:
        self.observation, self.info = copy.deepcopy(snapshot.observation), copy.deepcopy(snapshot.info)
        self.proposed, self.done = copy.deepcopy(snapshot.proposed), snapshot.done

    def close(self) -> None:
        self.env.close()

    def play_out(self) -> list[tuple[Any, ...]]:
        """Step to the end of the episode: each step's (action, observation, reward, terminated, truncated)."""
        steps = []
        while not self.done:
            step = self.step()
            steps.append((step.action, step.observation, step.reward, step.terminated, step.truncated))
        return steps


def check_coupled_branching(make_episode: Callable[[], AgentEpisode], *, seed: int = 0,
                            prefix_steps: int = 2) -> None:
    """Raise ``AssertionError`` unless agent episodes made by ``make_episode`` honour coupled
    branching: after ``prefix_steps`` steps, restoring the snapshot (or its pickled copy) gives the
    same future, and ``gauntlet.fork`` gives a pair with the same future that a fork played out
    first does not disturb. The agent's model must give the same outputs for the same conversation."""
    episode = make_episode()
    try:
        episode.reset(seed=seed)
        for _ in range(prefix_steps):
            episode.step()
        assert not episode.done, f"the episode ended within the {prefix_steps} prefix steps"
        snapshot = episode.snapshot()
        pickled = pickle.loads(pickle.dumps(snapshot))
        first, second = fork(episode, snapshot), fork(episode, pickled)
        try:
            second_future = second.play_out()
            original = episode.play_out()
            assert original, "the episode has no future to compare"
            assert first.play_out() == original, "gauntlet.fork gave an agent episode with a different future"
            assert second_future == original, "a fork from a pickled snapshot had a different future"
        finally:
            first.close()
            second.close()
        episode.restore(snapshot)
        assert episode.play_out() == original, "restore then the same model outputs gave a different future"
    finally:
        episode.close()
