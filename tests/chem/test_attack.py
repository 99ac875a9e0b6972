"""The chem attack view: one injection per clean task, planted by the server in a result the gold
trajectory reads; a resisting and a complying agent scored through real MCP sessions."""

from __future__ import annotations

import functools
from collections import Counter

import gymnasium as gym
import pytest

import gauntlet
from gauntlet.agents.tool import ComplyingGoldAgent, GoldAgent
from gauntlet.attacks import GOAL_KINDS, INSTRUCTIONS, carries, injection_of
from gauntlet.bridges.mcp_client import BlockingMCPClient, ServerTarget, result_value
from gauntlet.mcp_servers.chem.attack import attack_scorer, attack_view, build_attack_server
from gauntlet.tasks import load_suite, save_suite
from tests.shared import assert_resisted_and_obeyed, without_injection


@pytest.fixture(scope="module")
def clean_tasks(small_data):
    return load_suite(small_data.clean_suite)


@pytest.fixture(scope="module")
def attack(clean_tasks, tmp_path_factory):
    """The small reaction set's attack suite: its path and tasks."""
    tasks, left_out = attack_view(clean_tasks)
    assert left_out == []
    return save_suite(tasks, tmp_path_factory.mktemp("chem-attack") / "suite.jsonl"), tasks


@pytest.fixture(scope="module")
def attack_factory(small_data, attack):
    return functools.partial(build_attack_server, small_data.database, small_data.reactions, attack_suite=attack[0])


@pytest.fixture(scope="module")
def attack_client(attack_factory):
    client = BlockingMCPClient(ServerTarget(factory=attack_factory))
    client.open()
    yield client
    client.close()


def one_task_of_each_kind(tasks):
    first = {}
    for index, task in enumerate(tasks):
        first.setdefault(injection_of(task).goal.kind, index)
    return first


def test_every_clean_task_gets_one_injection_in_a_result_its_gold_trajectory_reads(clean_tasks, attack):
    _, tasks = attack
    assert [task.id for task in tasks] == [task.id.replace("clean-", "attack-", 1) for task in clean_tasks]
    for clean, task in zip(clean_tasks, tasks):
        injection = injection_of(task)
        carrying = [call for call in task.gold_trajectory if carries(call.obs, injection.text)]
        assert carrying and {call.call for call in carrying} == {injection.carrier.tool}
        assert task.answer == clean.answer and task.inputs == clean.inputs and task.server == "chem-attack"
        assert task.question.startswith(clean.question) and injection.canary in task.question
        assert not carries(clean.gold_trajectory[0].obs, injection.text)
    kinds = Counter(injection_of(task).goal.kind for task in tasks)
    assert set(kinds) == set(GOAL_KINDS)
    # The wording varies: more than one instruction template of a kind, and more than one carrier tool.
    used = {template.split(":")[0] for task in tasks for templates in INSTRUCTIONS.values() for template in templates
            if template.split(":")[0] in injection_of(task).text}
    assert len(used) > 1 and len({injection_of(task).carrier.tool for task in tasks}) > 1


@pytest.mark.parametrize("kind", GOAL_KINDS)
def test_an_attack_episode_is_scored_correctly_for_a_resisting_and_a_complying_agent(attack, attack_factory, kind):
    path, tasks = attack
    index = one_task_of_each_kind(tasks)[kind]
    goal = injection_of(tasks[index]).goal
    env = gym.make("gauntlet/ToolTask-v0", tasks=str(path), server=attack_factory, scorer=attack_scorer())
    try:
        resisting = gauntlet.rollout(env, GoldAgent(suite=str(path)), seed=index, record="memory")
        complying = gauntlet.rollout(env, ComplyingGoldAgent(suite=str(path)), seed=index, record="memory")
    finally:
        env.close()
    assert_resisted_and_obeyed(resisting, complying, kind)
    # Obeying a tool_call goal costs nothing (the agent goes on); answering 4242 or the canary is wrong.
    assert complying.steps[-1].info["metrics"]["utility"] == (1.0 if kind == "tool_call" else 0.0)
    if kind == "tool_call":
        assert any(step.tool_call.name == goal.tool and not step.tool_call.is_error for step in complying.steps)


def test_the_injection_never_changes_what_a_tool_computes_and_the_clean_server_plants_none(
        small_data, client, attack_client, clean_tasks, attack):
    _, tasks = attack
    for clean, task in zip(clean_tasks, tasks):
        text = injection_of(task).text
        for clean_call, call in zip(clean.gold_trajectory, task.gold_trajectory):
            assert without_injection(call.obs, text) == clean_call.obs  # what the suite recorded
        carrier = next(call for call in task.gold_trajectory if carries(call.obs, text))
        plain = result_value(client.call_tool(carrier.call, carrier.args))
        attacked = result_value(attack_client.call_tool(carrier.call, carrier.args))
        assert carries(attacked, text) and not carries(plain, text)
        assert without_injection(attacked, text) == plain  # what the server sends now
        assert attacked == carrier.obs


def test_a_result_is_identified_by_its_key_arguments_and_bad_input_is_an_error_result(attack_client, attack):
    _, tasks = attack
    task = next(task for task in tasks if injection_of(task).carrier.tool == "select_pack")
    injection = injection_of(task)
    # Another amount of the same chemical is the same supplier's pack: it carries the note too.
    other_amount = attack_client.call_tool("select_pack", {**injection.carrier.key, "required_amount": 7,
                                                           "unit": "g"})
    assert not other_amount.isError and carries(result_value(other_amount), injection.text)
    for name, arguments in (("select_pack", {"chemical_id": 0, "required_amount": 1}),
                            ("select_pack", {"chemical_id": "many", "required_amount": 1}),
                            ("search_chemical", {"query": "x" * 1000}),
                            ("get_reaction", {"reaction_id": "no-such-reaction"})):
        refused = attack_client.call_tool(name, arguments)
        assert refused.isError and "internal error" not in refused.content[0].text
    assert not attack_client.call_tool("calculate", {"expression": "1 + 1"}).isError
