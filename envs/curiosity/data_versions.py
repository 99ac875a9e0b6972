"""Data-cache name and builder version of the curiosity envs' trained in-context learner.

Apart from its builder (``transformer.py`` imports torch) so that ``registration.py`` registers the
builder with the version it builds without importing torch. Change the version here when the
builder's output changes.
"""

from __future__ import annotations

REGRESSION_ICL = "curiosity-regression-icl"
REGRESSION_ICL_VERSION = "3"  # 3: context encoder + cross-attending query decoder (2: one joint self-attention)
META_ICL = "curiosity-meta-icl"  # the transformers of LocationFinding-v0 and RuleDiscovery-v0 (``meta_icl.py``)
META_ICL_VERSION = "1"
