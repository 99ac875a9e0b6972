"""Design policies for the curiosity envs: random, uncertainty sampling, greedy expected information gain.

Light on import; see ``policies`` and docs/curiosity.md.
"""
