"""Registries: families register themselves, names resolve, unknown names list what exists."""

from __future__ import annotations

import sys

import gymnasium as gym
import pytest

import gauntlet
from gauntlet.registry import UnknownEntryError, register_env, register_subpackages, registry


def test_a_family_with_a_registration_module_is_found_and_registered(tmp_path, monkeypatch):
    family = tmp_path / "toyfamilies" / "widgets"
    family.mkdir(parents=True)
    (tmp_path / "toyfamilies" / "__init__.py").write_text("")
    (family / "__init__.py").write_text("")
    (family / "registration.py").write_text(
        "def register():\n"
        "    from gauntlet.registry import registry\n"
        "    registry.add('agent', 'toy-widget-agent', 'gauntlet.basic_agents:RandomAgent', 'test')\n")
    (tmp_path / "toyfamilies" / "no_registration").mkdir()
    (tmp_path / "toyfamilies" / "no_registration" / "__init__.py").write_text(
        "raise ImportError('must not be imported')")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        register_subpackages("toyfamilies", str(tmp_path / "toyfamilies"))
        assert registry.get("agent", "toy-widget-agent").load() is gauntlet.basic_agents.RandomAgent
    finally:
        registry._entries["agent"].pop("toy-widget-agent", None)
        for name in [m for m in sys.modules if m.startswith("toyfamilies")]:
            del sys.modules[name]


def test_unknown_names_list_the_known_ones():
    with pytest.raises(UnknownEntryError, match="random"):
        gauntlet.make_agent("no-such-agent")


def test_gauntlet_envs_register_lazily_under_the_namespace():
    register_env("RegistryProbe-v0", "gymnasium.envs.classic_control.cartpole:CartPoleEnv")
    assert "gauntlet/RegistryProbe-v0" in registry.env_ids()
    env = gym.make("gauntlet/RegistryProbe-v0")
    assert env.action_space.n == 2
    del gym.registry["gauntlet/RegistryProbe-v0"]


def test_an_entry_with_params_loads_as_its_target_with_them_bound():
    entry = registry.add("suite", "toy-params-suite", "gauntlet.registry:load_target", "test",
                         params={"target": "gauntlet.basic_agents:RandomAgent"}, server="toy")
    try:
        loaded = entry.load()
        assert loaded() is gauntlet.basic_agents.RandomAgent
        assert entry.params == {"target": "gauntlet.basic_agents:RandomAgent"}
        assert entry.metadata == {"server": "toy"}  # params are not metadata
        assert registry.get("agent", "random").load() is gauntlet.basic_agents.RandomAgent  # no params: the target
    finally:
        registry._entries["suite"].pop("toy-params-suite")


def test_controllers_and_monitors_have_registry_kinds_and_unknown_kinds_are_refused():
    for kind, protocol in (("controller", "gauntlet.hooks:Controller"), ("monitor", "gauntlet.hooks:Monitor")):
        entry = registry.add(kind, f"toy-{kind}", protocol, "test")
        try:
            assert entry in registry.entries(kind) and registry.get(kind, f"toy-{kind}") is entry
        finally:
            registry._entries[kind].pop(f"toy-{kind}")
    with pytest.raises(ValueError, match="unknown registry kind 'oracle'"):
        registry.add("oracle", "x", "gauntlet.hooks:Decision")
