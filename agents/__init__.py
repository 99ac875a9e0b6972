"""gauntlet.agents: agents that act in envs and call tools (scripted/gold, RL, LLM)."""

from gauntlet.registry import require_mounted

require_mounted(__name__, "gauntlet.agents")


def register() -> None:
    """Register the agents every env supports, then each agent family's own (its ``registration.py``)."""
    from gauntlet.registry import register_subpackages, registry

    registry.add("agent", "random", "gauntlet.basic_agents:RandomAgent",
                 "uniform samples from the action space, seeded per episode")
    registry.add("agent", "replay", "gauntlet.basic_agents:ReplayAgent",
                 "plays back the actions of a recorded episode (config: episode=PATH[, index=N])")
    registry.add("agent", "gold", "gauntlet.agents.tool:GoldAgent",
                 "replays a tool task's gold trajectory, then submits its answer (config: suite=PATH)")
    register_subpackages(__name__, __path__[0])
