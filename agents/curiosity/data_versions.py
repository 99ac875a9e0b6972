"""Data-cache names and builder versions of the curiosity agents' trained weights.

They live apart from the builders (``dad.py``, ``belief.py``, ``ppo.py`` import torch or SB3) so that
``registration.py`` registers the builders with the versions they build without importing either.
Change a version here when its builder's output changes.
"""

from __future__ import annotations

DAD_POLICY = "curiosity-dad-policy"
DAD_POLICY_VERSION = "2"  # 2: design schedule + adaptive emitter, gradient clipping
BELIEF_POLICY = "curiosity-belief-policy"
BELIEF_POLICY_VERSION = "1"
PPO_POLICY = "curiosity-ppo-policy"
PPO_POLICY_VERSION = "1"
REGRESSION_BELIEF_POLICY = "curiosity-belief-regression-policy"
REGRESSION_BELIEF_POLICY_VERSION = "1"
