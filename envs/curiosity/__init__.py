"""Curiosity from in-context learners: experiment envs where the reward is learning progress.

``ActiveRegression-v0``, ``LocationFinding-v0``, ``RuleDiscovery-v0`` (non-temporal: each design is a
query whose outcome depends only on the design and a hidden parameter) and ``CuriousGridworld-v0``
(temporal: the next design starts where the last outcome left the agent). See docs/curiosity.md.
This module stays light: registering the family imports nothing heavy.
"""
