"""In-context demonstrations: the train/eval split, the choice of example, and the conversation it renders."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from gauntlet.agents.llm import demonstrations
from gauntlet.agents.llm.demonstrations import (
    DEMO_MAX_CHARS,
    TRAIN_SHARE,
    demonstration,
    demonstration_chars,
    demonstration_messages,
    demonstration_task,
    eval_tasks,
    split_of,
    task_family,
    task_kind,
    train_tasks,
)
from gauntlet.agents.llm.local_chat import render_messages
from gauntlet.agents.llm.modes import INSTRUCTION
from gauntlet.agents.llm.number_check import numbers_in
from gauntlet.tasks import ToolTask, load_suite
from tests.shared import SMALL_REACTIONS, in_shared_home


@pytest.fixture(scope="module")
def suites(chem_data, disaster_data, shared_data_home) -> dict[str, list[ToolTask]]:
    """The small chem suites (a reaction view and the routes view) and one event's disaster suite, built by the
    suites' own builders."""
    from gauntlet.mcp_servers.chem.suite import suite_path

    with in_shared_home(shared_data_home):
        routes = suite_path("routes", **SMALL_REACTIONS)
    return {"chem": load_suite(chem_data.suite), "chem-routes": load_suite(routes),
            "disaster": load_suite(disaster_data.suite)}


def _ids_in_the_full_suites_format(disaster: list[ToolTask]) -> dict[str, list[str]]:
    """Task ids as the builders name the full suites' tasks: the chem reactions RXN-0001..1440 of the clean
    view, and every event of the catalogue with each task category of the one-event ``disaster`` suite."""
    from gauntlet.mcp_servers.disaster.events import load_events

    categories = sorted({task.metadata["category"] for task in disaster})
    return {"chem": [f"clean-RXN-{number:04d}" for number in range(1, 1441)],
            "disaster": [f"{event.id}/{category}" for event in load_events() for category in categories]}


def _conversation_roles(messages) -> list[str]:
    return [entry["role"] for entry in render_messages(messages, None, "{{ message.tool_calls }}")]


# The split ------------------------------------------------------------------------------------------
def test_split_depends_on_the_task_id_alone_through_sha256():
    # Pinned: a salted or otherwise process-dependent hash would move these between runs.
    assert [split_of(f"clean-RXN-{number:04d}") for number in (19, 20, 21, 24)] == ["train", "eval", "train", "train"]
    assert split_of("lahaina-2023-wildfire/t4_trend") == "train"
    assert split_of("ahr-2021-flood/t4_trend") == "eval"


def test_train_and_eval_partition_a_suite_in_its_order(suites):
    for tasks in suites.values():
        train, held_out = train_tasks(tasks), eval_tasks(tasks)
        assert [t.id for t in train] == [t.id for t in tasks if split_of(t.id) == "train"]
        assert {t.id for t in train}.isdisjoint(t.id for t in held_out)
        assert len(train) + len(held_out) == len(tasks)
        assert train_tasks(reversed(tasks)) == list(reversed(train))


def test_the_training_share_is_about_train_share_over_ids_of_the_full_suites(suites):
    for suite, ids in _ids_in_the_full_suites_format(suites["disaster"]).items():
        share = sum(split_of(task_id) == "train" for task_id in ids) / len(ids)
        # over three binomial standard deviations at these sizes (1,440 and 2,200 ids)
        assert abs(share - TRAIN_SHARE) < 0.035, (suite, share)


# The choice -----------------------------------------------------------------------------------------
def test_every_task_gets_its_most_similar_fitting_training_task_of_its_kind_never_itself(suites):
    for name, tasks in suites.items():
        shown = 0
        for task in tasks:
            fitting = [other for other in train_tasks(tasks) if other.id != task.id
                       and task_kind(other) == task_kind(task) and _fits(other)]
            if not fitting:
                with pytest.raises(ValueError, match="no demonstration"):
                    demonstration_task(task, tasks)
                continue
            demo = demonstration_task(task, tasks)
            assert demo.id != task.id and split_of(demo.id) == "train", (name, task.id, demo.id)
            assert task_kind(demo) == task_kind(task)
            assert demo.metadata.get("dimension") == task.metadata.get("dimension")
            family = [other for other in fitting if task_family(other) == task_family(task)]
            if task_family(task) is not None and family:  # a reaction of the task's class first
                assert task_family(demo) == task_family(task), (name, task.id, demo.id)
                fitting = family
            best = max(demonstrations._similarity(demonstrations._words(task.question),
                                                  demonstrations._words(other.question)) for other in fitting)
            assert demonstrations._similarity(demonstrations._words(task.question),
                                              demonstrations._words(demo.question)) == best
            shown += 1
        assert shown, name


def _fits(task: ToolTask) -> bool:
    try:
        demonstration_messages(task)
    except ValueError:
        return False
    return True


def test_the_choice_does_not_depend_on_the_suites_order(suites):
    tasks = suites["disaster"]
    for task in eval_tasks(tasks)[:10]:
        try:
            demo = demonstration_task(task, tasks)
        except ValueError:
            continue
        assert demonstration_task(task, list(reversed(tasks))).id == demo.id


def test_a_suite_without_another_training_task_of_the_kind_has_no_demonstration(suites):
    tasks = suites["disaster"]
    trained = train_tasks(tasks)[0]
    with pytest.raises(ValueError, match="no demonstration"):
        demonstration(trained, [trained])
    others = [task for task in tasks if task_kind(task) != task_kind(trained)]
    with pytest.raises(ValueError, match=f"dimension {task_kind(trained)}"):
        demonstration(trained, [trained, *others])


# The conversation -----------------------------------------------------------------------------------
def test_the_demonstration_is_a_conversation_that_replays_the_gold_trajectory(suites):
    for tasks in suites.values():
        for demo in {demonstration_task(task, tasks).id: demonstration_task(task, tasks) for task in tasks
                     if _has_demonstration(task, tasks)}.values():
            messages = demonstration_messages(demo, "answer_it")
            opening, closing = messages[0], messages[-1]
            assert isinstance(opening, HumanMessage) and opening.text.startswith(demonstrations.DEMO_OPENING)
            assert demo.question in opening.text
            assert isinstance(closing, HumanMessage) and closing.text == demonstrations.DEMO_CLOSING
            body = messages[1:-1]
            assert all(isinstance(m, AIMessage) for m in body[::2])
            assert all(isinstance(m, ToolMessage) for m in body[1::2])
            calls = [m.tool_calls for m in body[::2]]
            assert all(len(call) == 1 for call in calls)
            assert [m.tool_call_id for m in body[1::2]] == [call[0]["id"] for call in calls] == \
                [f"demo_call_{n}" for n in range(1, len(calls) + 1)]
            made = [(call[0]["name"], call[0]["args"]) for call in calls]
            assert made == [*((g.call, g.args) for g in demo.gold_trajectory), ("answer_it", {"answer": demo.answer})]
            assert json.loads(body[-1].text) == {"submitted": True}
            # Qwen2.5's template turns: the example's question, then call and result, then the closing note
            assert _conversation_roles(messages) == ["user", *["assistant", "tool"] * len(calls), "user"]


def _has_demonstration(task: ToolTask, tasks: list[ToolTask]) -> bool:
    try:
        demonstration_task(task, tasks)
    except ValueError:
        return False
    return True


def _is_part(shown, full) -> bool:
    """Whether ``shown`` is ``full`` with some fields and list items left out."""
    if isinstance(shown, dict):
        return isinstance(full, dict) and all(key in full and _is_part(value, full[key])
                                              for key, value in shown.items())
    if isinstance(shown, list):
        rest = iter(full) if isinstance(full, list) else iter(())
        return all(any(_is_part(item, candidate) for candidate in rest) for item in shown)
    return shown == full


def test_results_show_the_fields_later_calls_use_and_nothing_that_is_not_in_the_result(suites):
    demo = train_tasks(suites["chem"])[0]
    results = [m.text for m in demonstration_messages(demo) if isinstance(m, ToolMessage)][:-1]
    assert len(results) == len(demo.gold_trajectory)
    shown_numbers = {number for shown in results for number in numbers_in(shown)}
    for index, (gold, shown) in enumerate(zip(demo.gold_trajectory, results)):
        assert _is_part(json.loads(shown), gold.obs) and len(shown) < len(json.dumps(gold.obs)), shown
        # every figure a later call passes that this result holds is shown: where each number comes from
        later = numbers_in([g.args for g in demo.gold_trajectory[index + 1:]] + [demo.answer])
        assert {n for n in numbers_in(gold.obs) if n in later and not n.is_integer()} <= shown_numbers
    reaction = json.loads(results[0])
    assert [c["name"] for c in reaction["components"]] == \
        [g.args["query"] for g in demo.gold_trajectory if g.call == "search_chemical"]


def test_every_demonstration_fits_the_size_bound(suites):
    sizes = [demonstration_chars(demonstration(task, tasks))
             for tasks in suites.values() for task in tasks if _has_demonstration(task, tasks)]
    assert sizes and max(sizes) <= DEMO_MAX_CHARS


def test_a_long_trajectory_is_shown_whole_with_shorter_results(suites):
    shown = {task.id: demonstration_messages(task) for task in suites["chem-routes"] if _fits(task)}
    # trajectories whose full results alone would overflow a demonstration are still shown call by call
    shortened = [task for task in suites["chem-routes"] if task.id in shown
                 and sum(len(json.dumps(gold.obs)) for gold in task.gold_trajectory) > DEMO_MAX_CHARS]
    assert shortened
    for task in shortened:
        calls = [m.tool_calls[0]["name"] for m in shown[task.id] if isinstance(m, AIMessage) and m.tool_calls]
        assert calls[:-1] == [gold.call for gold in task.gold_trajectory]
        assert demonstration_chars(shown[task.id]) <= DEMO_MAX_CHARS


def test_a_mode_that_shows_the_plan_shows_the_examples_plan(suites):
    tasks = suites["disaster"]
    task = next(t for t in eval_tasks(tasks) if _has_demonstration(t, tasks))
    opening = demonstration(task, tasks, mode=INSTRUCTION)[0].text
    demo = demonstration_task(task, tasks, mode=INSTRUCTION)
    assert "Plan:\n1. " + demo.metadata["tool_plan"][0]["call"] in opening
