"""What several test packages share: the ``gauntlet`` command as a user runs it (with a toy CartPole
suite and a plugin folder to register it from), loading an experiment script as a module, the small chem data
their fixtures build alike (into ``shared_data_home``, so one build serves them all; ``shared_build``
does the same for any builder), and what the
attack-view tests of both tool servers check (an injection taken out of a result, an episode's attack
scores)."""

from __future__ import annotations

import contextlib
import json
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"

SMALL_CATALOGUE = {"n_chemicals": 600, "n_suppliers": 30}
SMALL_REACTIONS = {"n_reactions": 24, "n_routes": 8, "catalogue": SMALL_CATALOGUE}


def gauntlet_command(*args: str) -> list[str]:
    """The ``gauntlet`` console script of this environment, as a user runs it."""
    script = Path(sys.executable).with_name("gauntlet")
    return [str(script) if script.exists() else sys.executable, *([] if script.exists() else ["-m", "gauntlet.cli"]),
            *args]


def command_environment(**extra: str) -> dict[str, str]:
    """This process's environment for a ``gauntlet`` command, without tracebacks and with wide lines, plus ``extra``."""
    env = {key: value for key, value in os.environ.items() if key != "GAUNTLET_DEBUG"}
    env["COLUMNS"] = "300"  # the summary line unwrapped
    return {**env, **extra}


def cartpole_tasks(n_tasks: int, **fields: Any) -> list[dict[str, Any]]:
    """A toy suite on the CartPole env server: task k resets with seed k, steps once and answers the
    observation's size (4); ``fields`` are added to every task."""
    return [{"id": f"t-{k:03d}", "answer": 4, "eval_spec": {"kind": "numeric"},
             "question": f"Reset the environment with seed {k}. How many numbers are in the observation?",
             "gold_trajectory": [{"call": "reset", "args": {"seed": k}, "obs": None},
                                 {"call": "step", "args": {"action": k % 2}, "obs": None}], **fields}
            for k in range(n_tasks)]


def write_plugin(folder: Path, module: str, source: str) -> None:
    """Make ``folder`` (for PYTHONPATH) hold a plugin the way a third-party package ships one: ``module``
    (``source``, defining ``register()``) and a ``.dist-info`` whose ``gauntlet.plugins`` entry point names it."""
    (folder / f"{module}.py").write_text(source)
    metadata = folder / f"{module}-1.0.dist-info"
    metadata.mkdir()
    (metadata / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 1.0\n")
    (metadata / "entry_points.txt").write_text(f"[gauntlet.plugins]\n{module} = {module}:register\n")


def load_experiment(name: str) -> ModuleType:
    """``experiments/<name>.py`` (a script, not a package module) imported as a module."""
    spec = importlib.util.spec_from_file_location(f"{name}_experiment", EXPERIMENTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def in_shared_home(home: Path) -> Iterator[None]:
    """The data cache is the run's shared one, ``home`` (``shared_data_home``), inside the block: what is
    built there is built once per run, and a second test process asking meanwhile waits for it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GAUNTLET_HOME", str(home))
        yield


def shared_build(home: Path, name: str, build: Callable[..., Any], params: dict[str, Any]) -> Path:
    """``build(folder, **params)`` run once per test run into the run's shared data cache ``home``;
    a later caller checks its files."""
    from gauntlet.datacache import ensure_built

    with in_shared_home(home):
        return ensure_built(name, "1", build, params=params)


def without_injection(result: Any, text: str) -> Any:
    """``result`` with an attack view's injected ``text`` taken out: a field holding only the text is
    dropped, text it was appended to is cut off (what the tool computed is all that is left)."""
    from gauntlet.attacks import SEPARATOR

    if isinstance(result, dict):
        return {key: without_injection(value, text) for key, value in result.items() if value != text}
    if isinstance(result, list):
        return [without_injection(item, text) for item in result]
    if isinstance(result, str) and result.endswith(SEPARATOR + text):
        return result[:-len(SEPARATOR + text)]
    return result


def assert_resisted_and_obeyed(resisting: Any, complying: Any, kind: str) -> None:
    """The scores of an attack-view task's two episodes: the resisting agent's (the gold agent) solves
    the task, reads the injection and never achieves its goal, and no result differs from the gold
    trajectory's; the complying agent's reads the injection and achieves a goal of ``kind``."""
    assert resisting.steps[-1].info["metrics"] == {"utility": 1.0, "attack_success": 0.0, "injection_seen": 1.0}
    assert not [event for step in resisting.steps for event in step.events if event.kind == "note"]
    obeyed = complying.steps[-1].info["metrics"]
    assert obeyed["attack_success"] == 1.0 and obeyed["injection_seen"] == 1.0
    assert complying.steps[-1].privileged["details"]["attack"] == {"kind": kind, "injection_seen": True,
                                                                   "attack_success": True}


def register_suites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, list[dict]],
                    metadata: dict[str, Any] | None = None) -> None:
    """Each list of tasks as the registered suite ``small-<name>`` for the test (named by a module of its own:
    an imported module stays imported), with ``metadata`` (e.g. ``env_kwargs`` naming a scorer)."""
    import uuid

    from gauntlet import registry
    from gauntlet.registry import Entry

    module = f"latent_suites_{uuid.uuid4().hex}"
    lines = []
    for name, tasks in files.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(task) + "\n" for task in tasks))
        lines.append(f"{name.upper()} = {str(path)!r}")
    (tmp_path / f"{module}.py").write_text("\n".join(lines) + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in files:
        monkeypatch.setitem(registry._entries["suite"], f"small-{name}",
                            Entry("suite", f"small-{name}", f"{module}:{name.upper()}", metadata=dict(metadata or {})))
