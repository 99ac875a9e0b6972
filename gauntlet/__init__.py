"""Gauntlet: Gymnasium environments and MCP tool servers where AI agents are put through real trials.

The public API::

    import gauntlet
    env = gauntlet.branchable(gymnasium.make("CartPole-v1"))
    episode = gauntlet.rollout(env, gauntlet.make_agent("random"), seed=0)
    snapshot = env.snapshot(); twin = gauntlet.fork(env, snapshot)
    episodes = gauntlet.load_episodes("runs/demo")
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

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
    "EpisodeWriter", "Event", "Message", "Outcome", "RunResult", "RunSpec", "Snapshot", "Step", "ToolCall",
    "branchable", "fork", "load_episodes", "make_agent", "registry", "rollout", "run_many",
]

if TYPE_CHECKING:
    from gauntlet.batch import RunResult, RunSpec, run_many
    from gauntlet.runner import rollout

# Each lazy name and the module that defines it. The runner and batch pull in multiprocessing and
# rich; they load on first use to keep `import gauntlet` light.
_LAZY = {"rollout": "gauntlet.runner", "run_many": "gauntlet.batch", "RunSpec": "gauntlet.batch",
         "RunResult": "gauntlet.batch"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gauntlet' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


load_plugins()
