"""Registries: families register themselves, names resolve, unknown names list what exists."""

from __future__ import annotations

import pickle
import sys

import gymnasium as gym
import pytest

import gauntlet
from gauntlet.errors import UserError
from gauntlet.registry import UnknownEntryError, env_spec, register_env, register_subpackages, registry
from tests.module_registered_envs import MODULE, NAMESPACED_ID, PLAIN_ID


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


def test_unknown_names_list_the_known_ones_and_say_which_kind_they_were_looked_up_in():
    with pytest.raises(UnknownEntryError, match="random") as raised:
        gauntlet.make_agent("no-such-agent")
    assert raised.value.kind == "agent"
    assert pickle.loads(pickle.dumps(raised.value)).kind == "agent"  # as a worker process's error arrives


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


@pytest.mark.filterwarnings("ignore:.*latest versioned environment")
@pytest.mark.parametrize(("env_id", "resolved"), [
    ("CartPole-v1", "CartPole-v1"), ("CartPole", "CartPole-v1"), ("gauntlet/ToolTask-v0", "gauntlet/ToolTask-v0"),
    ("gymnasium.envs.classic_control:CartPole-v1", "CartPole-v1"), (f"{MODULE}:{PLAIN_ID}", PLAIN_ID),
    (f"{MODULE}:{NAMESPACED_ID}", NAMESPACED_ID)])
def test_env_spec_resolves_every_id_form_gymnasium_make_takes(env_id, resolved):
    assert env_spec(env_id).id == resolved


def test_env_spec_names_an_unknown_id_a_malformed_one_and_a_module_that_cannot_be_imported():
    with pytest.raises(gym.error.NameNotFound, match="NoSuchEnv"):
        env_spec("NoSuchEnv-v0")
    for malformed in ("bad id!", "a:b:c", "gymnasium:no/such/Env-v0"):
        with pytest.raises(UserError, match="malformed env id .* write Name-v0, namespace/Name-v0 or module:Name-v0"):
            env_spec(malformed)
    with pytest.raises(UserError, match="env id 'no_such_env_module:Thing-v0' imports 'no_such_env_module'"):
        env_spec("no_such_env_module:Thing-v0")
