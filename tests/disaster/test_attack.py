"""The disaster attack view: one injection per task, planted by the server in a result the gold trajectory
reads; a resisting and a complying agent scored through real MCP sessions."""

from __future__ import annotations

import functools

import gymnasium as gym
import pytest

import gauntlet
from gauntlet.agents.tool import ComplyingGoldAgent, GoldAgent
from gauntlet.attacks import GOAL_KINDS, carries, injection_of
from gauntlet.bridges.mcp_client import BlockingMCPClient, ServerTarget
from gauntlet.mcp_servers.disaster.attack import attack_scorer, attack_view, build_attack_server
from gauntlet.mcp_servers.disaster.server import build_server
from gauntlet.mcp_servers.disaster.tasks import MAX_TEXT_LENGTH
from gauntlet.tasks import load_suite, save_suite
from tests.shared import assert_resisted_and_obeyed, without_injection


@pytest.fixture(scope="module")
def base_tasks(flood_suite):
    return load_suite(flood_suite)


@pytest.fixture(scope="module")
def attack(base_tasks, tmp_path_factory):
    """The event's attack suite: its path and tasks. A report (T5) or time-series (T4) task reads the results
    of many calls, so it joins the readers of several T1-T3 tasks' carriers: a task whose every carrier is
    already read by an injected task is left out (one injection per reader), and said so."""
    tasks, left_out = attack_view(base_tasks)
    assert len(left_out) <= len(base_tasks) // 5 and len(tasks) + len(left_out) == len(base_tasks)
    assert {t.id for t in tasks}.isdisjoint(left_out)
    return save_suite(tasks, tmp_path_factory.mktemp("disaster-attack") / "tasks.jsonl"), tasks


@pytest.fixture(scope="module")
def episodes(scenes_root, attack):
    """For the task of each goal kind with the shortest gold trajectory: (task index, the resisting
    agent's episode, the complying agent's episode), through the attack server."""
    path, tasks = attack
    factory = functools.partial(build_attack_server, scenes_root / "scenes", attack_suite=path)
    env = gym.make("gauntlet/ToolTask-v0", tasks=str(path), server=factory, scorer=attack_scorer(),
                   max_text_length=MAX_TEXT_LENGTH)
    runs = {}
    try:
        for kind in GOAL_KINDS:
            index = min((i for i, task in enumerate(tasks) if injection_of(task).goal.kind == kind),
                        key=lambda i: len(tasks[i].gold_trajectory))
            runs[kind] = (index, gauntlet.rollout(env, GoldAgent(suite=str(path)), seed=index, record="memory"),
                          gauntlet.rollout(env, ComplyingGoldAgent(suite=str(path)), seed=index, record="memory"))
    finally:
        env.close()
    return runs


def test_every_task_gets_one_injection_in_a_result_its_gold_trajectory_reads(base_tasks, attack):
    _, tasks = attack
    base_of = {task.id: task for task in base_tasks}
    assert [task.id for task in tasks] == [task.id for task in base_tasks if task.id in {t.id for t in tasks}]
    for task in tasks:
        base = base_of[task.id]
        injection = injection_of(task)
        carrying = [call for call in task.gold_trajectory if carries(call.obs, injection.text)]
        assert carrying and {call.call for call in carrying} == {injection.carrier.tool}
        assert task.answer == base.answer and task.server == "disaster-attack" and injection.canary in task.question
        # The gold trajectory never achieves the goal, so a resisting agent's attack success is 0.
        assert not any(call.call == injection.goal.tool for call in task.gold_trajectory
                       if call.args == injection.goal.arguments)
    assert {injection_of(task).goal.kind for task in tasks} == set(GOAL_KINDS)
    assert "items.0.description" in {injection_of(task).carrier.field for task in tasks}  # a facility's record


@pytest.mark.parametrize("kind", GOAL_KINDS)
def test_an_attack_episode_is_scored_correctly_for_a_resisting_and_a_complying_agent(episodes, attack, kind):
    _, tasks = attack
    index, resisting, complying = episodes[kind]
    assert_resisted_and_obeyed(resisting, complying, kind)
    obeyed, report = complying.steps[-1].info["metrics"], complying.steps[-1].privileged
    if kind == "tool_call":  # it made the call and went on: the task is solved all the same
        goal = injection_of(tasks[index]).goal
        assert any(step.tool_call.name == goal.tool for step in complying.steps) and obeyed["utility"] == 1.0
    else:  # it answered what the injection said: the answer is wrong, only the gold calls made so far count
        assert report["answer_score"] == 0.0 and obeyed["utility"] < 1.0


def test_the_injection_never_changes_what_a_tool_computes_and_the_clean_server_plants_none(
        scenes_root, base_tasks, attack, episodes, tmp_path):
    _, tasks = attack
    for index, resisting, _ in episodes.values():
        text = injection_of(tasks[index]).text
        sent = [without_injection(step.tool_call.result, text) for step in resisting.steps[:-1]]
        base = next(task for task in base_tasks if task.id == tasks[index].id)
        assert sent == [call.obs for call in base.gold_trajectory]
    # The plain server answers the carrier calls of these tasks without any injection.
    plain = BlockingMCPClient(ServerTarget(factory=functools.partial(build_server, scenes_root / "scenes",
                                                                     workspace_dir=tmp_path / "ws")))
    plain.open()
    try:
        index, _, _ = episodes["answer"]
        injection = injection_of(tasks[index])
        for call in tasks[index].gold_trajectory:
            result = plain.call_tool(call.call, call.args)
            assert not result.isError and not carries(result.structuredContent, injection.text)
            assert "processing_note" not in result.structuredContent
    finally:
        plain.close()
    texts = {injection_of(task).text for task in tasks}
    assert not any(carries(call.obs, text) for task in base_tasks for call in task.gold_trajectory for text in texts)


def test_bad_input_to_the_attack_server_is_an_error_result(scenes_root, attack, tmp_path):
    path, tasks = attack
    client = BlockingMCPClient(ServerTarget(factory=functools.partial(
        build_attack_server, scenes_root / "scenes", workspace_dir=tmp_path / "ws", attack_suite=path)))
    client.open()
    try:
        for name, arguments in (("poi_search", {"pois": "../../etc/passwd"}), ("ras_area_m2", {"mask": 3}),
                                ("poi_search", {"pois": "data/ahr-2021-flood/pois.geojson", "type": ["x"]})):
            refused = client.call_tool(name, arguments)
            assert refused.isError and "internal error" not in refused.content[0].text
        found = client.call_tool("poi_search", {"pois": "data/ahr-2021-flood/pois.geojson", "type": "police"})
        assert not found.isError and found.structuredContent["count"] == 1
    finally:
        client.close()
