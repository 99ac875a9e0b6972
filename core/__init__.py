"""Gauntlet: Gymnasium environments and MCP tool servers where AI agents are put through real trials.

The public API::

    import gauntlet
    env = gauntlet.branchable(gymnasium.make("CartPole-v1"))
    episode = gauntlet.rollout(env, gauntlet.make_agent("random"), seed=0)
    snapshot = env.snapshot(); twin = gauntlet.fork(env, snapshot)
    episodes = gauntlet.load_episodes("runs/demo")
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("gauntlet")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

from gauntlet.branching import Branchable, BranchableEnv, BranchingError, Snapshot, branchable, fork
from gauntlet.episode import (
    AgentSpec,
    Episode,
    EpisodeFormatError,
    EpisodeWriter,
    Event,
    Message,
    Outcome,
    Step,
    ToolCall,
    load_episodes,
)
from gauntlet.registry import load_plugins, make_agent, registry

__all__ = [
    "AgentSpec", "Branchable", "BranchableEnv", "BranchingError", "Episode", "EpisodeFormatError",
    "EpisodeWriter", "Event", "Message", "Outcome", "Snapshot", "Step", "ToolCall", "branchable",
    "fork", "load_episodes", "make_agent", "registry", "rollout", "run_many", "RunSpec",
]


def __getattr__(name: str):
    # The runner pulls in multiprocessing and rich; load it on first use to keep `import gauntlet` light.
    if name in {"rollout", "run_many", "RunSpec"}:
        from gauntlet import runner

        return getattr(runner, name)
    raise AttributeError(f"module 'gauntlet' has no attribute {name!r}")


load_plugins()
