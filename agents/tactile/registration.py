"""Registers the tactile agents (string entry points only)."""

from __future__ import annotations


def register() -> None:
    from gauntlet.registry import registry

    registry.add("agent", "tactile-random", "gauntlet.agents.tactile.random_agent:TactileRandomAgent",
                 "tactile envs: uniformly random sensor moves and a blind prediction (the baseline)")
    registry.add("agent", "tactile-learned", "gauntlet.agents.tactile.learned:LearnedTactileAgent",
                 "tactile envs: coverage scan of the object's region + a CNN over the map of touches "
                 "(config: checkpoint=PATH, trained by experiments/tactile.py)")
    registry.add("agent", "tactile-adaptive", "gauntlet.agents.tactile.adaptive:AdaptiveTactileAgent",
                 "tactile classification envs: chooses each touch by a learned lookahead of its belief's loss "
                 "(config: checkpoint=PATH, trained by experiments/tactile.py --adaptive; candidates=grid|lattice, "
                 "lattice = the scan's lattice in lookahead order; classifier=PATH of a scan-trained checkpoint)")
    registry.add("demo", "tactile", "gauntlet.agents.tactile.demo:run_demo",
                 "a Tactile MNIST episode (saved rendering) and the learned agent's accuracy by step")
