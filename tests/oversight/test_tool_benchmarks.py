"""The chem and disaster tool suites as oversight benchmarks: every branched prefix replays exactly, the
gold continuation is gold from any prefix, lapses are wrong calls and premature answers are wrong."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gauntlet.bridges.tool_task_env import parse_action
from gauntlet.controllers.oversight.features import History, prefix_features
from gauntlet.controllers.oversight.lapsing import EXPERT_ACTION
from gauntlet.controllers.oversight.protocol import collect_episode
from gauntlet.controllers.oversight.benchmarks.tool import chem, disaster
from gauntlet.controllers.oversight.benchmarks.tool_expert import answer_action, gold_continuation
from gauntlet.controllers.oversight.benchmarks.tool_features import TOOL_FEATURES, tool_features
from gauntlet.controllers.oversight.benchmarks.tool_lapses import WrongAnswers, WrongCalls
from gauntlet.episode import ToolCall
from gauntlet.info_keys import PRIVILEGED, TASK_ID, TOOL_CALL
from gauntlet.tasks import EvalSpec, GoldCall, Scorer, ToolTask

# Lapse often, so the replayed prefixes hold wrong tools, wrong arguments and malformed calls.
CLUMSY = {"p_lapse": (0.3, 0.4), "p_loop": (0.05, 0.1), "p_premature": (0.0, 0.02)}
tool_servers = pytest.mark.xdist_group("oversight-tools")
# rasterio's own window helpers use an affine operator affine now deprecates (as in tests/disaster).
pytestmark = pytest.mark.filterwarnings("ignore:Use `@` matmul:PendingDeprecationWarning:rasterio.*")


def _check_rows(rows: list[dict]) -> None:
    assert rows
    assert all(row["prefix_match"] for row in rows), [row["t"] for row in rows if not row["prefix_match"]]
    assert all(row["branches"]["quit"] == {"success": False, "steps": 0, "utility": 0.0} for row in rows)
    first = next(row for row in rows if row["t"] == 0)
    assert first["branches"]["expert"]["success"], "the gold continuation from the reset must succeed"


@tool_servers
def test_chem_branches_replay_exactly_and_the_gold_expert_succeeds_from_the_start(small_chem):
    benchmark = chem(**small_chem, n_episodes=3, **CLUMSY)
    rows = [row for episode in range(3) for row in collect_episode(benchmark, episode, prefixes=3)]
    _check_rows(rows)
    # The replayed prefixes really held failed calls (else the check above proves little).
    assert max(row["features"]["tool_errors"] for row in rows) > 0


@tool_servers
def test_disaster_branches_replay_exactly_and_the_gold_expert_succeeds_from_the_start(small_disaster):
    benchmark = disaster(**small_disaster, split="T2", n_episodes=2, **CLUMSY)
    rows = [row for episode in range(2) for row in collect_episode(benchmark, episode, prefixes=3)]
    _check_rows(rows)
    assert max(row["features"]["tool_errors"] for row in rows) > 0


@tool_servers
def test_gold_continuation_is_gold_from_every_prefix_of_a_lapsing_episode(small_chem):
    """Hand over to the expert at any step of a clumsy base episode: it finishes the task (the budget allowing)."""
    benchmark = chem(**small_chem, n_episodes=1, max_steps=40, **CLUMSY)
    env, agent, expert = benchmark.make_env(0), benchmark.make_agent(0), benchmark.make_expert()
    needs = len(benchmark.task(0).gold_trajectory) + 1
    try:
        observation, info = env.reset(seed=benchmark.episode_seed(0))
        agent.reset(seed=0, observation_space=env.observation_space, action_space=env.action_space)
        snapshots, done = [], False
        while not done:
            if len(snapshots) + needs <= benchmark.max_steps:  # the expert has the budget to finish from here
                snapshots.append((env.unwrapped.snapshot(), observation, info))
            observation, _, terminated, truncated, info = env.step(agent.act(observation, info))
            done = terminated or truncated
        assert len(snapshots) > 3
        for snapshot, observation, info in snapshots[::2]:
            env.unwrapped.restore(snapshot)
            for _ in range(benchmark.max_steps):
                observation, _, terminated, truncated, info = env.step(expert.act(observation, info))
                if terminated or truncated:
                    break
            assert terminated and benchmark.success(info), len(snapshot.actions)
    finally:
        env.close()


@tool_servers
def test_a_weakened_expert_lapses_and_replays_its_lapses_after_a_restore(small_chem):
    benchmark = chem(**small_chem, n_episodes=1, max_steps=40)
    env, expert = benchmark.make_env(0), benchmark.make_expert(strength=0.5)
    try:
        observation, info = env.reset(seed=0)
        expert.reset(seed=0, observation_space=env.observation_space, action_space=env.action_space)
        start = expert.snapshot()
        first = []
        for _ in range(8):
            gold = info[PRIVILEGED][EXPERT_ACTION]
            action = expert.act(observation, info)
            first.append((action, action != gold))
            observation, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        assert any(lapsed for _, lapsed in first) and not all(lapsed for _, lapsed in first)
        expert.restore(start)
        observation, info = env.reset(seed=0)
        again = []
        for _ in first:
            action = expert.act(observation, info)
            again.append(action)
            observation, *_, info = env.step(action)
        assert again == [action for action, _ in first]
    finally:
        env.close()


# Without a server: the expert's rule, lapses, premature answers, features -------------------------
TASK = ToolTask(id="t1", question="How much?", server="kv",
                inputs={"layer": "data/e/dem.tif", "note": "a long free text note"},
                gold_trajectory=[GoldCall(call="load", args={"image": "data/e/post.tif"}, obs={"path": "ws/a.tif"}),
                                 GoldCall(call="area", args={"mask": "ws/a.tif", "unit": "m2"}),
                                 GoldCall(call="load", args={"image": "data/e/post.tif"})],
                answer=120.0, eval_spec=EvalSpec(kind="numeric", rel_tol=0.1))
OTHER = ToolTask(id="t2", question="How many?", server="kv", gold_trajectory=[
    GoldCall(call="count", args={"layer": "data/f/pois.gpkg", "key": "type"})], answer=7.0,
    eval_spec=EvalSpec(kind="numeric", rel_tol=0.1))
TOOLS = [{"name": "load", "input_schema": {"type": "object", "required": ["image"],
                                           "properties": {"image": {"type": "string"}}}},
         {"name": "area", "input_schema": {"type": "object", "required": ["mask", "unit"],
                                           "properties": {"mask": {"type": "string"},
                                                          "unit": {"type": "string", "enum": ["m2", "ha"]}}}},
         {"name": "count", "input_schema": {"type": "object", "required": ["layer", "key"],
                                            "properties": {"layer": {"type": "string"}, "key": {"type": "string"},
                                                           "limit": {"type": "integer"}}}}]


def _call(name: str, arguments: dict, *, is_error: bool = False) -> ToolCall:
    return ToolCall(server="kv", name=name, arguments=arguments, is_error=is_error)


def test_the_gold_continuation_issues_the_gold_calls_not_yet_seen_to_succeed_in_order_then_the_answer():
    load, area = _call("load", {"image": "data/e/post.tif"}), _call("area", {"mask": "ws/a.tif", "unit": "m2"})
    assert json.loads(gold_continuation(TASK, [])) == {"name": "load", "arguments": {"image": "data/e/post.tif"}}
    # A failed call does not count; a call made out of turn does.
    failed = _call("load", {"image": "data/e/post.tif"}, is_error=True)
    assert json.loads(gold_continuation(TASK, [failed]))["name"] == "load"
    assert json.loads(gold_continuation(TASK, [area]))["name"] == "load"
    assert json.loads(gold_continuation(TASK, [load]))["name"] == "area"
    # One successful call matches every gold call it equals, so the gold's repeat of `load` is not repeated.
    assert gold_continuation(TASK, [load, _call("noise", {}), area]) == answer_action(120.0)


def _expected_info(action: str) -> dict:
    return {TASK_ID: TASK.id, PRIVILEGED: {EXPERT_ACTION: action}}


def test_lapses_are_wrong_calls_that_never_name_a_workspace_file_the_expected_call_does_not():
    lapses = WrongCalls([TASK, OTHER], TOOLS)
    rng = np.random.default_rng(0)
    expected = json.dumps({"name": "area", "arguments": {"mask": "ws/a.tif", "unit": "m2"}})
    actions = [lapses({}, _expected_info(expected), rng) for _ in range(300)]
    assert expected not in actions
    for action in actions:
        try:
            name, arguments = parse_action(action, "submit_answer")
        except ValueError:
            continue  # cut-off JSON: a malformed call
        workspace_files = {value for value in arguments.values() if isinstance(value, str) and value.startswith("ws/")}
        assert workspace_files <= {"ws/a.tif"}, action
    names = {json.loads(a)["name"] for a in actions if a.startswith("{") and a.endswith("}")}
    assert {"load", "count", "area"} <= names  # wrong tools and the expected tool with a wrong argument
    assert any(name not in {"load", "area", "count"} for name in names)  # misspelled tools
    # Past the last gold call a lapse re-does a gold call wrongly or calls another tool, never answers.
    after = [lapses({}, _expected_info(answer_action(120.0)), rng) for _ in range(50)]
    assert not any('"answer"' in action for action in after)


def test_wrong_arguments_come_from_the_tasks_other_entities():
    lapses = WrongCalls([TASK, OTHER], TOOLS)
    value = lapses.entities(TASK).other_value("image", "data/e/post.tif", ["string"], np.random.default_rng(1))
    assert value != "data/e/post.tif" and value in {"data/e/dem.tif", "m2"}


def test_premature_answers_are_graded_wrong_or_give_up():
    answers = WrongAnswers([TASK, OTHER], Scorer())
    assert answers.candidates(TASK) and 120.0 not in answers.candidates(TASK)
    assert 7.0 in answers.candidates(TASK)  # another task's answer
    rng = np.random.default_rng(0)
    actions = [json.loads(answers({}, {TASK_ID: TASK.id}, rng)) for _ in range(200)]
    assert {"stop"} in [set(a) for a in actions] and {"answer"} in [set(a) for a in actions]
    for action in actions:
        if "answer" in action:
            assert not Scorer().score(TASK, action["answer"], []).answer_correct


def _history(steps: list[tuple[str, ToolCall, bool]]) -> History:
    observation = {"task": "How much?", "result": ""}
    history = History.start(observation, {TASK_ID: "t1"}, max_steps=10)
    for action, call, invalid in steps:
        result = json.dumps({"tool": call.name, "is_error": call.is_error, "result": call.result})
        history.append(action, 0.0, {"task": "How much?", "result": result},
                       {TOOL_CALL: call, "invalid_action": invalid, PRIVILEGED: {EXPERT_ACTION: "secret"}})
    return history


def test_features_count_errors_repeats_tools_and_invalid_actions():
    load = json.dumps({"name": "load", "arguments": {"image": "x"}})
    history = _history([(load, _call("load", {"image": "x"}), False),
                        (load, _call("load", {"image": "x"}), False),
                        ("{oops", _call("", {}, is_error=True), True),
                        ("{oops", _call("", {}, is_error=True), True)])
    features = tool_features(history)
    assert set(features) == set(TOOL_FEATURES)
    assert features["tool_errors"] == 2 and features["tool_error_share"] == 0.5
    assert features["tool_last_error"] == 1 and features["tool_error_run"] == 2
    assert features["tool_invalid_actions"] == 2 and features["tool_repeated_calls"] == 2
    assert features["tool_distinct_tools"] == 1 and features["tool_steps_since_new_call"] == 1
    assert features["tool_task_chars"] == len("How much?")
    assert tool_features(history.prefix(0))["tool_errors"] == 0


def test_features_join_the_generic_ones_and_success_is_the_envs(small_chem):
    benchmark = chem(**small_chem, n_episodes=2)
    features = prefix_features(_history([]), benchmark)
    assert set(TOOL_FEATURES) <= set(features) and "t" in features
    assert benchmark.success({"success": True})
    assert not benchmark.success({}) and not benchmark.success({"success": False})


def test_splits_keep_or_drop_tasks_and_an_unknown_value_names_the_known_ones(small_chem):
    benchmark = chem(**small_chem)
    reaction_class = benchmark.tasks[0].metadata["reaction_class"]
    narrowed = chem(**small_chem, split=reaction_class)
    assert narrowed.tasks and all(task.metadata["reaction_class"] == reaction_class for task in narrowed.tasks)
    left = chem(**small_chem, exclude=[reaction_class])
    assert sorted(t.id for t in left.tasks + narrowed.tasks) == sorted(t.id for t in benchmark.tasks)
    with pytest.raises(ValueError, match=reaction_class):
        chem(**small_chem, split="no such class")
    with pytest.raises(ValueError, match="no such class"):
        chem(**small_chem, exclude=["no such class"])
    with pytest.raises(ValueError, match="episodes 0.."):
        benchmark.make_env(benchmark.n_episodes)
    with pytest.raises(ValueError, match="at most 1"):
        chem(**small_chem, p_lapse=(0.6, 0.9), p_loop=(0.0, 0.2))
    with pytest.raises(ValueError, match="0 <= low <= high <= 1"):  # the shared check: a range upside down
        chem(**small_chem, p_loop=(0.1, 0.0))


def test_episodes_are_a_seeded_shuffle_of_the_suite_with_a_budget_from_its_longest_gold(small_chem):
    first, again, other = chem(**small_chem), chem(**small_chem), chem(**small_chem, seed=1)
    assert [t.id for t in first.tasks] == [t.id for t in again.tasks] != [t.id for t in other.tasks]
    assert sorted(t.id for t in first.tasks) == sorted(t.id for t in other.tasks)
    longest = max(len(task.gold_trajectory) for task in first.tasks) + 1
    assert first.max_steps == int(np.ceil(1.5 * longest))
    assert Path(small_chem["tasks"]).is_file()


def test_held_out_episodes_are_a_suites_last_tasks_and_past_any_collection_on_a_generated_benchmark(small_chem):
    from gauntlet.controllers.oversight.online import UNSEEN_FIRST, held_out_episodes

    total = chem(**small_chem).n_episodes
    assert held_out_episodes("chem", small_chem, 3) == range(total - 3, total)
    assert held_out_episodes("chem", small_chem, 3, collected=total - 3) == range(total - 3, total)
    with pytest.raises(ValueError, match=f"its {total} episodes cannot hold {total - 2} collected and 3 held out"):
        held_out_episodes("chem", small_chem, 3, collected=total - 2)
    assert held_out_episodes("corridor", {}, 4) == range(UNSEEN_FIRST, UNSEEN_FIRST + 4)
