"""What several test packages share: loading an experiment script as a module, and the small chem data
their fixtures build alike (into ``shared_data_home``, so one build serves them all)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"

SMALL_CATALOGUE = {"n_chemicals": 600, "n_suppliers": 30}
SMALL_REACTIONS = {"n_reactions": 24, "n_routes": 8, "catalogue": SMALL_CATALOGUE}


def load_experiment(name: str) -> ModuleType:
    """``experiments/<name>.py`` (a script, not a package module) imported as a module."""
    spec = importlib.util.spec_from_file_location(f"{name}_experiment", EXPERIMENTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
