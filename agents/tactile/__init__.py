"""gauntlet.agents.tactile: agents for the tactile perception envs (random baseline, learned agent).

Light on purpose; torch is imported only by the learned agent's modules.
"""
