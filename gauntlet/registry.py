"""Registries: environments (Gymnasium's, under the ``gauntlet/`` namespace), tool servers, task
suites, agents, data builders, demos, oversight controllers and monitors, and command-line commands
(kind ``command``: a family's ``typer.Typer``, mounted as ``gauntlet <name>``).

Every entry names its implementation as a ``"module:attribute"`` string, so registering costs
nothing and a family's heavy dependencies load only when one of its entries is used. An entry may
also carry ``params``: keyword arguments bound to the target when it loads, so one function serves
several entries (``registry.add("suite", "chem-routes", "...suite:suite_path", params={"view":
"routes"})`` loads as ``functools.partial(suite_path, view="routes")``). Families register themselves
through the ``gauntlet.plugins`` entry-point group; ``import gauntlet`` calls each plugin's
``register()`` once.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec, _find_spec, parse_env_id

from gauntlet.errors import UserError

NAMESPACE = "gauntlet"
KIND_DESCRIPTIONS = {
    "suite": "task suites of the tool servers, each task scored (gauntlet eval SUITE)",
    "agent": "policies that act in an env or on a suite's tasks (--agent NAME)",
    "controller": "hooks that decide before every step: go on, replace the action or halt (--controller NAME)",
    "monitor": "hooks that score every step (--monitor NAME)",
    "server": "MCP tool servers (gauntlet serve NAME)",
    "data": "builders of generated data, cached on first use (gauntlet data build NAME)",
    "demo": "each family's part of the tour (gauntlet demo --only NAME)",
    "command": "families' own commands (gauntlet NAME)",
}
"""What each registry kind holds, in one line (``gauntlet list`` shows the kinds in this order, each beside its
count)."""
KINDS = tuple(KIND_DESCRIPTIONS)


class UnknownEntryError(KeyError):
    """A name that is not in a registry; the message lists what is, ``kind`` says which registry."""

    def __init__(self, message: str, kind: str | None = None) -> None:
        super().__init__(message, kind)  # both in ``args``, so the error pickles whole (from a worker process)
        self.kind = kind

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class Entry:
    """One registered thing: its name, where its implementation lives, what it is for, and the keyword
    arguments (``params``) its implementation is called with."""

    kind: str
    name: str
    target: str
    description: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)

    def load(self) -> Any:
        """Import the object the entry names; with ``params``, that object with them bound
        (``functools.partial``), so calling the loaded entry calls the target with them."""
        target = load_target(self.target)
        return functools.partial(target, **self.params) if self.params else target


def load_target(target: str) -> Any:
    module_name, _, attribute = target.partition(":")
    if not attribute:
        raise ValueError(f"target {target!r} must be 'module:attribute'")
    obj: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        obj = getattr(obj, part)
    return obj


class Registry:
    """All registered entries, by kind and name."""

    def __init__(self) -> None:
        self._entries: dict[str, dict[str, Entry]] = {kind: {} for kind in KINDS}

    def add(self, kind: str, name: str, target: str, description: str = "", *,
            params: Mapping[str, Any] | None = None, **metadata: Any) -> Entry:
        """Register ``target`` (``"module:attribute"``) as ``name``; ``params`` are bound to it on load."""
        if kind not in KINDS:
            raise ValueError(f"unknown registry kind {kind!r}; expected one of {KINDS}")
        entry = Entry(kind, name, target, description, metadata, dict(params or {}))
        self._entries[kind][name] = entry
        return entry

    def get(self, kind: str, name: str) -> Entry:
        try:
            return self._entries[kind][name]
        except KeyError:
            known = ", ".join(sorted(self._entries[kind])) or "none registered"
            raise UnknownEntryError(f"unknown {kind} {name!r} (known: {known})", kind) from None

    def names(self, kind: str) -> list[str]:
        return sorted(self._entries[kind])

    def entries(self, kind: str) -> list[Entry]:
        return [self._entries[kind][name] for name in self.names(kind)]

    @staticmethod
    def env_ids() -> list[str]:
        """Every env id registered under the ``gauntlet/`` namespace."""
        return sorted(env_id for env_id in gym.registry if env_id.startswith(NAMESPACE + "/"))


registry = Registry()


def register_env(name: str, entry_point: str, *, vector_entry_point: str | None = None, **kwargs: Any) -> None:
    """Register ``gauntlet/<name>`` with Gymnasium (lazily: ``entry_point`` is a string)."""
    env_id = f"{NAMESPACE}/{name}"
    if env_id in gym.registry:
        return
    gym.register(id=env_id, entry_point=entry_point, vector_entry_point=vector_entry_point, **kwargs)


def env_spec(env_id: str) -> EnvSpec:
    """The Gymnasium spec of ``env_id`` in every form ``gymnasium.make`` takes: ``Name-v0``,
    ``namespace/Name-v0``, an unversioned ``Name`` (its latest version, with Gymnasium's warning) and
    ``module:Name-v0`` (``module`` imported first: importing it registers the env).

    Raises Gymnasium's ``NameNotFound`` / ``VersionNotFound`` for an unknown id, and ``UserError`` for an
    id of no such form or when the module of a ``module:`` id cannot be imported.
    """
    try:
        parse_env_id(env_id.split(":")[-1])
        well_formed = env_id.count(":") <= 1  # Gymnasium's lookup fails unpacking a second ':'
    except gym.error.Error:
        well_formed = False
    if not well_formed:
        raise UserError(f"malformed env id {env_id!r}: write Name-v0, namespace/Name-v0 or module:Name-v0, "
                        "e.g. CartPole-v1")
    # gymnasium.make's own lookup (private): gymnasium.spec knows no ``module:`` prefix and no unversioned names.
    try:
        return _find_spec(env_id)
    except ModuleNotFoundError as exc:
        missing = getattr(exc.__cause__, "name", None) or exc.name
        module = env_id.split(":", 1)[0]
        raise UserError(f"env id {env_id!r} imports {module!r}, which fails: no module named {missing!r}; "
                        f"install it or add its folder to PYTHONPATH") from None


def require_mounted(module_name: str, expected: str) -> None:
    """Refuse a family folder imported under its bare name: it would shadow other packages."""
    if module_name != expected:
        bare = expected.rsplit(".", 1)[-1]
        raise ImportError(f"import {expected}, not the bare {bare!r} folder (install the project: make test)")


def families_registrar(package: str, folder: str) -> Callable[[], None]:
    """The ``register()`` of a family package: registers every family found in ``folder``."""

    def register() -> None:
        register_subpackages(package, folder)

    register.__doc__ = f"Register every family of {package} (called on `import gauntlet`)."
    return register


def register_subpackages(package: str, folder: str) -> None:
    """Call ``register()`` in ``<package>.<family>.registration`` for every family folder that has one.

    This is how ``gauntlet.envs`` and the other family packages find their families without a list
    to keep up to date. A family's ``__init__.py`` and ``registration.py`` must stay light (no heavy
    imports): registering happens on every ``import gauntlet``.
    """
    for module in pkgutil.iter_modules([folder]):
        if module.ispkg and (Path(folder) / module.name / "registration.py").is_file():
            importlib.import_module(f"{package}.{module.name}.registration").register()


def make_agent(name: str, **config: Any) -> Any:
    """Build the registered agent ``name`` with ``config`` as keyword arguments."""
    return registry.get("agent", name).load()(**config)


def make_hook(kind: str, name: str, **config: Any) -> Any:
    """Build the registered controller or monitor ``name`` with ``config``, checked against its protocol."""
    from gauntlet.hooks import Controller, Monitor

    if kind not in ("controller", "monitor"):
        raise ValueError(f"hooks are controllers or monitors, not {kind!r}")
    hook = registry.get(kind, name).load()(**config)
    expected = Controller if kind == "controller" else Monitor
    if not isinstance(hook, expected):
        method = "decide(prefix, candidates)" if kind == "controller" else "observe(step)"
        raise TypeError(f"{kind} {name!r} built a {type(hook).__name__}, which has no `name` and `{method}`")
    return hook


def register_core() -> None:
    """Core's own entries: the MCP task bridge env, and the agents every env supports."""
    register_env("ToolTask-v0", "gauntlet.bridges.tool_task_env:ToolTaskEnv")
    registry.add("agent", "random", "gauntlet.basic_agents:RandomAgent",
                 "uniform samples from the action space, seeded per episode")
    registry.add("agent", "replay", "gauntlet.basic_agents:ReplayAgent",
                 "plays back the actions of a recorded episode (config: episode=PATH[, index=N])")
    registry.add("controller", "budget", "gauntlet.basic_hooks:BudgetController",
                 "halts an episode before it exceeds a step or cost budget (config: max_steps, max_cost)")


_plugins_loaded = False


def load_plugins() -> None:
    """Call ``register()`` of every ``gauntlet.plugins`` entry point, once per process."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    register_core()
    for plugin in entry_points(group="gauntlet.plugins"):
        try:
            plugin.load()()
        except Exception as exc:  # one broken plugin must not take the platform down
            warnings.warn(f"gauntlet plugin {plugin.name!r} failed to register: {exc}", stacklevel=2)
