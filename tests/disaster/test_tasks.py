"""Task suites: gold trajectories replay through MCP and score 100%; the DORA scorer's checks."""

from __future__ import annotations

import functools
from collections import Counter

import pytest

from gauntlet.mcp_servers.disaster import scoring
from gauntlet.mcp_servers.disaster.scoring import DoraScorer, grade_answer, score_task, trajectory_metrics
from gauntlet.tasks import NO_ANSWER, GoldCall, load_suite


@pytest.fixture(scope="module")
def suite(flood_suite):
    return flood_suite


def test_suite_tasks_carry_the_dora_fields_for_all_five_dimensions(suite):
    tasks = load_suite(suite)
    assert Counter(t.metadata["dimension"] for t in tasks).keys() == {"T1", "T2", "T3", "T4", "T5"}
    for task in tasks:
        assert task.server == "disaster" and task.gold_trajectory
        assert {"category", "tool_plan", "eval_spec", "answer_format", "truth_answer"} <= set(task.metadata)
        assert len(task.metadata["tool_plan"]) == len(task.gold_trajectory)
        assert all(layer["crs"] == "EPSG:32632" for layer in task.inputs["layers"].values())


@pytest.mark.starts_early
def test_gold_replay_through_an_mcp_session_scores_100_percent(suite, scenes_root, tmp_path):
    import gymnasium as gym

    import gauntlet
    from gauntlet.agents.tool import GoldAgent
    from gauntlet.mcp_servers.disaster.server import build_server
    from gauntlet.mcp_servers.disaster.tasks import MAX_STEPS, MAX_TEXT_LENGTH

    tasks = load_suite(suite)
    # Every task under the DORA scorer; the default scorer (the answer check alone) on each dimension's first.
    first_of_dimension = {t.metadata["dimension"]: index for index, t in reversed(list(enumerate(tasks)))}
    factory = functools.partial(build_server, scenes_root / "scenes")
    for scorer, chosen in ((None, sorted(first_of_dimension.values())), (DoraScorer(), range(len(tasks)))):
        env = gym.make("gauntlet/ToolTask-v0", tasks=str(suite), server=factory, scorer=scorer,
                       max_text_length=MAX_TEXT_LENGTH, max_steps=MAX_STEPS)
        agent = GoldAgent(suite=str(suite))
        try:
            for index in chosen:
                task = tasks[index]
                episode = gauntlet.rollout(env, agent, seed=index, record="memory")
                final = episode.steps[-1].info
                assert final["score"] == pytest.approx(1.0), (task.id, final["privileged"])
                mismatches = [e for s in episode.steps for e in s.events if e.kind == "note"]
                assert not mismatches, (task.id, mismatches)
        finally:
            env.close()


def test_agent_paths_match_gold_paths_by_structural_role_not_by_name():
    gold = [GoldCall(call="seg_water_ndwi", args={"image": "data/e/post.tif"}, obs={"path": "ws/water-aaa.tif"}),
            GoldCall(call="ras_area_m2", args={"mask": "ws/water-aaa.tif"}, obs={"value": 1.0})]
    mine = [{"name": "seg_water_ndwi", "arguments": {"image": "data/e/post.tif"},
             "result": {"path": "ws/water-bbb.tif"}},
            {"name": "ras_area_m2", "arguments": {"mask": "ws/water-bbb.tif"}, "result": {"value": 1.0}}]
    assert trajectory_metrics(gold, mine)["parameter_accuracy"] == 1.0
    wrong = [mine[0], {"name": "ras_area_m2", "arguments": {"mask": "ws/other.tif"}, "result": {}}]
    assert trajectory_metrics(gold, wrong)["parameter_accuracy"] == pytest.approx(0.5)


def test_trajectory_metrics_grade_order_exactness_and_efficiency():
    gold = [GoldCall(call=name) for name in ("a", "b", "c")]
    metrics = trajectory_metrics(gold, [{"name": n, "arguments": {}} for n in ("c", "a", "x", "b")])
    assert metrics["tool_any_order"] == 1.0
    assert metrics["tool_in_order"] == pytest.approx(2 / 3)
    assert metrics["exact_match"] == 0.0
    assert metrics["efficiency"] == pytest.approx(3 / 4)
    errors_do_not_count = [{"name": "a", "arguments": {}, "is_error": True}]
    assert trajectory_metrics(gold, errors_do_not_count)["tool_any_order"] == 0.0


@pytest.mark.parametrize("spec, expected, answer, correct", [
    ({"type": "numeric"}, 100.0, 120.9, True), ({"type": "numeric"}, 100.0, 121.5, False),
    ({"type": "numeric"}, 0, 1, True), ({"type": "numeric"}, 3, "4", True), ({"type": "numeric"}, 3, "many", False),
    ({"type": "exact"}, "Shelter A", "  shelter   a ", True),
    ({"type": "set"}, ["a", "b"], ["B", "a"], True), ({"type": "set"}, ["a", "b"], ["a"], False),
    ({"type": "set"}, [], [], True),
    ({"type": "kendall"}, ["x", "y", "z"], ["x", "y", "z"], True),
    ({"type": "kendall"}, ["x", "y", "z"], ["y", "x", "z"], False),
    ({"type": "point", "pixel_size_m": 10.0, "max_pixels": 20}, [0, 0], [120, 150], True),
    ({"type": "point", "pixel_size_m": 10.0, "max_pixels": 20}, [0, 0], [150, 150], False),
])
def test_answer_checks(spec, expected, answer, correct):
    assert grade_answer(spec, expected, answer)[1] is correct


def test_set_f1_and_kendall_give_partial_credit():
    assert grade_answer({"type": "set"}, ["a", "b"], ["a", "c"])[0] == pytest.approx(0.5)
    assert scoring.kendall_tau(["x", "y", "z"], ["z", "y", "x"]) == -1.0
    # Named items rank above the rest; two unnamed items are a discordant pair.
    assert scoring.kendall_tau(["x", "y", "z"], ["x"]) == pytest.approx(1 / 3)
    assert scoring.kendall_tau(["x", "y", "z"], ["y"]) == pytest.approx(-1 / 3)


@pytest.mark.parametrize("answer", [[], ["Attapeu-2018-dam-failure"], ["w", "v"]])
def test_a_ranking_that_names_none_of_the_items_scores_nothing(answer):
    # Found by the offline LLM: it answered a district ranking with the event's name, which scored 1.0
    # when left-out items were appended in the expected order.
    assert scoring.kendall_tau(["x", "y", "z"], answer) == -1.0
    assert grade_answer({"type": "kendall"}, ["x", "y", "z"], answer) == (0.0, False, "tau -1.000")


def test_polygon_answers_pass_at_iou_one_half():
    square = {"type": "Polygon", "coordinates": [[[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]]]}
    shifted = {"type": "Polygon", "coordinates": [[[3, 0], [13, 0], [13, 10], [3, 10], [3, 0]]]}
    far = {"type": "Polygon", "coordinates": [[[6, 0], [16, 0], [16, 10], [6, 10], [6, 0]]]}
    spec = {"type": "polygon", "min_iou": 0.5}
    assert grade_answer(spec, square, shifted)[1] and not grade_answer(spec, square, far)[1]
    assert grade_answer(spec, square, "not a polygon")[0] == 0.0


def test_the_if_prompt_is_the_agents_instruction_mode_with_every_gold_call_in_order(suite):
    """One definition of each DORA mode: the LLM agent's (AP = autonomous, IF = instruction)."""
    from gauntlet.agents.llm.modes import AUTONOMOUS, INSTRUCTION, user_prompt

    task = load_suite(suite)[0]
    assert user_prompt(AUTONOMOUS, task.question, task.metadata).startswith(task.question)
    plan = user_prompt(INSTRUCTION, task.question, task.metadata).split("Plan:\n", 1)[1]
    assert [line.split(". ", 1)[1].split("(", 1)[0] for line in plan.splitlines()] == [
        call.call for call in task.gold_trajectory]
    assert score_task(task, NO_ANSWER, (), "IF").answer_score == 0.0
    with pytest.raises(ValueError, match="AP or IF"):
        score_task(task, NO_ANSWER, (), "XX")


def test_truth_vs_gold_is_reported_per_dimension(suite):
    report = scoring.truth_vs_gold(load_suite(suite))
    assert set(report) <= {"T1", "T2", "T3", "T4", "T5"} and report
    for row in report.values():
        assert 0 <= row["share"] <= 1 and row["with_truth"] >= 1


def test_demo_solves_one_task_of_t1_to_t4_and_saves_a_map(tmp_path, capsys):
    from gauntlet.mcp_servers.disaster.demo import run_demo

    run_demo(tmp_path)
    printed = capsys.readouterr().out
    assert all(f"[{dimension}]" in printed for dimension in ("T1", "T2", "T3", "T4"))
    assert "report_extract_evidence(" in printed  # the T4 task reads the trend off the dated masks
    assert (tmp_path / "disaster-map.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


class _CountingSession:
    """A client session whose two tools return their arguments (one declared idempotent), counting calls."""

    def __init__(self):
        self.calls = 0

    async def list_tools(self):
        from mcp.types import ListToolsResult, Tool, ToolAnnotations

        schema = {"type": "object"}
        return ListToolsResult(tools=[
            Tool(name="same", inputSchema=schema, annotations=ToolAnnotations(idempotentHint=True)),
            Tool(name="fresh", inputSchema=schema, annotations=ToolAnnotations(idempotentHint=False))])

    async def call_tool(self, name, args):
        from mcp.types import CallToolResult, TextContent

        self.calls += 1
        return CallToolResult(content=[TextContent(type="text", text=name)],
                              structuredContent={"args": dict(args), "call": self.calls})


def test_a_plans_repeated_idempotent_calls_are_answered_from_the_memo_and_others_are_made_again():
    import anyio

    from gauntlet.mcp_servers.disaster.tasks import CallMemo, Plan, execute_plan

    plan = Plan()
    plan.call("same", x=1)
    plan.call("fresh", x=1)
    plan.call("same", x=2)

    async def run():
        session = _CountingSession()
        memo = await CallMemo.of(session)
        first, _ = await execute_plan(session, plan, memo)
        first[0]["obs"]["args"]["x"] = 99  # a caller changing its result leaves the memo as it was
        second, _ = await execute_plan(session, plan, memo)
        return session.calls, first, second

    calls, first, second = anyio.run(run)
    assert calls == 4  # same(x=1), fresh, same(x=2); then fresh again only
    assert [step["obs"]["call"] for step in second] == [1, 4, 3]
    assert second[0]["obs"]["args"] == {"x": 1} and first[2]["obs"] == second[2]["obs"]
