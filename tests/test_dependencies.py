"""Dependencies point one way (DESIGN.md), for imports and for the registry strings that stand for them.

`lint-imports` checks the import graph against the contracts in pyproject.toml. A registry string that
names a module is an import the graph cannot see, so the same rules are applied here to every registered
target (from the module that registers it) and to every lookup of a registry entry by a literal name
(``registry.get("agent", "chem-oracle")``, ``make_agent("random")``, ``gym.make("gauntlet/...")``).
"""

from __future__ import annotations

import ast
import importlib
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import gauntlet
registry_module = importlib.import_module("gauntlet.registry")  # the module: `gauntlet.registry` is the instance

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("envs", "mcp_servers", "agents", "controllers")
# Which layers a layer may depend on, besides its own family; mirrors the contracts in pyproject.toml.
MAY_DEPEND_ON = {
    "core": set(),
    "envs": {"core"},
    "mcp_servers": {"core"},
    "agents": {"core", "envs", "mcp_servers"},
    "controllers": {"core", "agents"},
}
# Which layers a layer may *look up by registered name* (a runtime lookup, as a user's command line
# makes, never an import of their code): the oversight benchmarks name the envs and task suites they
# branch (docs/architecture.md, "Controllers name envs and suites").
MAY_LOOK_UP = {"controllers": {"envs", "mcp_servers"}}


def place(module: str) -> tuple[str, str | None]:
    """(layer, family) of a gauntlet module; family is None for a layer's shared top-level modules."""
    parts = module.split(".")
    if len(parts) < 2 or parts[1] not in LAYERS:
        return "core", None
    layer = parts[1]
    package = ROOT / layer
    family = parts[2] if len(parts) > 2 and (package / parts[2]).is_dir() else None
    return layer, family


def why_not_allowed(source: str, target: str) -> str | None:
    """Why ``source`` may not depend on ``target`` under the one-way rule, or None if it may."""
    (source_layer, source_family), (target_layer, target_family) = place(source), place(target)
    if source_layer == target_layer:
        if source_family is None or target_family is None or source_family == target_family:
            return None
        return f"{source} reaches the sibling family {target_layer}.{target_family}"
    if target_layer in MAY_DEPEND_ON[source_layer]:
        return None
    return f"{source_layer} ({source}) may not depend on {target_layer} ({target})"


def lint_imports(cwd: Path, pythonpath: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(pythonpath), "HOME": str(cwd)}
    return subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-logo", "--no-cache"], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120)


def test_import_contracts_hold_for_the_source_tree():
    result = lint_imports(ROOT, ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.timeout(180)
def test_core_importing_an_agent_breaks_the_build(tmp_path):
    for folder in ("gauntlet", *LAYERS, "data"):
        shutil.copytree(ROOT / folder, tmp_path / folder, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.npz", "*.pt"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    runner = tmp_path / "gauntlet" / "runner.py"
    runner.write_text(runner.read_text() + "\nfrom gauntlet.agents.tool import GoldAgent  # wrong way\n")
    result = lint_imports(tmp_path, tmp_path)
    assert result.returncode != 0
    assert "core depends on nothing of ours BROKEN" in result.stdout
    assert "gauntlet.runner -> gauntlet.agents.tool" in result.stdout


def test_every_core_module_is_bound_by_the_core_contract():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (core,) = [contract for contract in contracts if contract["id"] == "core"]
    listed = set(core["source_modules"])
    modules = {f"gauntlet.{path.stem}" for path in (ROOT / "gauntlet").glob("*.py") if path.stem != "__init__"}
    packages = {f"gauntlet.{path.name}" for path in (ROOT / "gauntlet").iterdir()
                if path.is_dir() and not path.is_symlink() and (path / "__init__.py").is_file()}
    assert modules - listed == set(), "add these core modules to the 'core' contract in pyproject.toml"
    for package in packages:
        assert {package, f"{package}.**"} <= listed, f"add {package} and {package}.** to the 'core' contract"


def test_the_rule_flags_core_to_agent_and_server_to_agent_and_sibling_families():
    assert why_not_allowed("gauntlet.replay", "gauntlet.agents.tool")
    assert why_not_allowed("gauntlet.mcp_servers.chem.suite", "gauntlet.agents.chem.agents")
    assert why_not_allowed("gauntlet.envs.tactile.env", "gauntlet.envs.calspi.tasks")
    assert why_not_allowed("gauntlet.controllers.oversight", "gauntlet.envs.tactile.env")
    assert why_not_allowed("gauntlet.agents.chem.agents", "gauntlet.mcp_servers.chem.solver") is None
    assert why_not_allowed("gauntlet.agents.chem.agents", "gauntlet.agents.tool") is None
    assert why_not_allowed("gauntlet.envs.tactile.env", "gauntlet.registry") is None


class _RecordingRegistry(registry_module.Registry):
    def __init__(self, sink: list[tuple[str, str]], registrant: str) -> None:
        super().__init__()
        self._sink, self._registrant = sink, registrant

    def add(self, kind: str, name: str, target: str, *args: Any, **kwargs: Any) -> Any:
        self._sink.append((self._registrant, target))
        return super().add(kind, name, target, *args, **kwargs)


def registration_modules() -> list[str]:
    """Every module whose ``register()`` adds registry entries: core's own and each family's."""
    found = ["gauntlet.agents"]
    for layer in LAYERS:
        for registration in sorted((ROOT / layer).glob("*/registration.py")):
            found.append(f"gauntlet.{layer}.{registration.parent.name}.registration")
    return found


def registered_targets(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(registering module, target module) for every entry each registration module adds."""
    pairs: list[tuple[str, str]] = []
    monkeypatch.setattr(registry_module, "registry", _RecordingRegistry(pairs, "gauntlet.registry"))
    monkeypatch.setattr(registry_module, "register_env", lambda name, entry_point, **kw: pairs.append(
        ("gauntlet.registry", entry_point)))
    registry_module.register_core()
    for module_name in registration_modules():
        module = importlib.import_module(module_name)
        monkeypatch.setattr(registry_module, "registry", _RecordingRegistry(pairs, module_name))
        monkeypatch.setattr(registry_module, "register_env",
                            lambda name, entry_point, *, vector_entry_point=None, _who=module_name, **kw: pairs.extend(
                                (_who, target) for target in (entry_point, vector_entry_point) if target))
        module.register()
    return [(source, target.partition(":")[0]) for source, target in pairs]


def test_every_registry_target_respects_the_dependency_rule(monkeypatch):
    pairs = registered_targets(monkeypatch)
    assert len(pairs) > 40, "the registrations were not all found"
    problems = [problem for source, target in pairs if (problem := why_not_allowed(source, target))]
    assert problems == []


def _literal(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def lookups_by_literal(tree: ast.AST) -> list[tuple[str, str]]:
    """(kind, name) of every registry lookup in ``tree`` that names its entry with a string literal."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        args = [_literal(arg) for arg in node.args]
        if name == "get" and len(args) >= 2 and args[0] in registry_module.KINDS and args[1]:
            found.append((args[0], args[1]))
        elif name == "make_agent" and args and args[0]:
            found.append(("agent", args[0]))
        elif name == "make" and args and args[0] and args[0].startswith(registry_module.NAMESPACE + "/"):
            found.append(("env", args[0]))
    return found


def target_module(kind: str, name: str) -> str:
    if kind == "env":
        entry_point = gym.spec(name).entry_point
        assert isinstance(entry_point, str), f"{name} is registered with a callable, not a module string"
        return entry_point.partition(":")[0]
    return gauntlet.registry.get(kind, name).target.partition(":")[0]


def source_modules() -> list[tuple[str, Path]]:
    found = [(f"gauntlet.{path.relative_to(ROOT / 'gauntlet').with_suffix('').as_posix().replace('/', '.')}", path)
             for path in (ROOT / "gauntlet").rglob("*.py") if not any(p.is_symlink() for p in path.parents)]
    for layer in LAYERS:
        found += [(f"gauntlet.{layer}.{path.relative_to(ROOT / layer).with_suffix('').as_posix().replace('/', '.')}",
                   path) for path in (ROOT / layer).rglob("*.py")]
    return [(name.removesuffix(".__init__"), path) for name, path in found]


def why_not_looked_up(source: str, target: str) -> str | None:
    """``why_not_allowed`` for a lookup by registered name, which ``MAY_LOOK_UP`` widens."""
    problem = why_not_allowed(source, target)
    if problem and place(target)[0] in MAY_LOOK_UP.get(place(source)[0], set()):
        return None
    return problem


def test_registry_lookups_by_literal_name_respect_the_dependency_rule():
    problems, seen = [], 0
    for module, path in source_modules():
        for kind, name in lookups_by_literal(ast.parse(path.read_text())):
            seen += 1
            if problem := why_not_looked_up(module, target_module(kind, name)):
                problems.append(f"{path.relative_to(ROOT)}: {kind} {name!r}: {problem}")
    assert seen > 0, "no literal lookups found: the scan is broken"
    assert problems == []


def test_a_server_looking_up_an_agent_by_name_is_caught():
    source = 'oracle = registry.get("agent", "chem-oracle").load()\nenv = gym.make("gauntlet/ToolTask-v0")\n'
    lookups = lookups_by_literal(ast.parse(source))
    assert sorted(lookups) == [("agent", "chem-oracle"), ("env", "gauntlet/ToolTask-v0")]
    lookups = sorted(lookups)
    assert why_not_allowed("gauntlet.mcp_servers.chem.suite", target_module(*lookups[0]))
    assert why_not_allowed("gauntlet.mcp_servers.chem.suite", target_module(*lookups[1])) is None


def test_controllers_may_name_envs_but_not_import_them_and_agents_still_may_not_name_controllers():
    env_module = target_module("env", "gauntlet/TextWorld-v0")
    assert why_not_looked_up("gauntlet.controllers.oversight.benchmarks.text", env_module) is None
    assert why_not_allowed("gauntlet.controllers.oversight.benchmarks.text", env_module)  # an import stays forbidden
    assert why_not_looked_up("gauntlet.agents.llm.agent", "gauntlet.controllers.oversight.controller")
