"""gauntlet.agents: agents that act in envs and call tools (scripted/gold, RL, LLM)."""

from gauntlet.registry import require_mounted

require_mounted(__name__, "gauntlet.agents")


def register() -> None:
    """Register the gold agent for tool tasks, then each agent family's own (its ``registration.py``)."""
    from gauntlet.registry import register_subpackages, registry

    registry.add("agent", "gold", "gauntlet.agents.tool:GoldAgent",
                 "replays a tool task's gold trajectory, then submits its answer (config: suite=PATH)")
    registry.add("agent", "gold-complying", "gauntlet.agents.tool:ComplyingGoldAgent",
                 "the gold agent that carries out the goal of an injected instruction once it reads one (attack "
                 "views; config: suite=PATH)")
    register_subpackages(__name__, __path__[0])
