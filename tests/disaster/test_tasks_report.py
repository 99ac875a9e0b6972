"""T5 report templates: the variants, their fields and figures, the truth they are checked against, and gold
replays that score 1.000 through real MCP sessions (the experiment's smoke size)."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.shared import load_experiment

from gauntlet.mcp_servers.disaster.tasks import truth_context
from gauntlet.mcp_servers.disaster.tasks_report import SharedPlan, report_templates, truth_report

EVENT = "ahr-2021-flood"
VARIANTS = {"sitrep_coordination", "sitrep_sar", "sitrep_logistics", "flash_update", "flash_update_sar", "ems_grading",
            "ems_monitoring"}


@pytest.fixture(scope="module")
def scene_root(tmp_path_factory):
    from gauntlet.mcp_servers.disaster.scenes import build_scenes

    folder = tmp_path_factory.mktemp("report-scenes")
    build_scenes(folder, events=[EVENT], size_px=64, seed=0)
    return folder / "scenes"


def _event(scene_root):
    return next(e for e in json.loads((scene_root / "events.json").read_text())["events"] if e["id"] == EVENT)


def test_every_event_gets_seven_report_variants_of_dimension_t5(scene_root):
    specs = report_templates(_event(scene_root), truth_context(scene_root, EVENT), scene_root)
    assert {s.category for s in specs} == VARIANTS and len(specs) == len(VARIANTS)
    assert {s.dimension for s in specs} == {"T5"} and {s.eval_spec["type"] for s in specs} == {"report"}
    for spec in specs:
        for name in [*spec.eval_spec["fields"], *spec.eval_spec["figures"]]:
            assert name in spec.question, (spec.category, name)


def test_the_situation_report_asks_for_every_field_and_figure_of_a_sitrep(scene_root):
    specs = {s.category: s for s in report_templates(_event(scene_root), truth_context(scene_root, EVENT),
                                                     scene_root)}
    sitrep = specs["sitrep_coordination"].eval_spec
    assert set(sitrep["fields"]) == {"affected_area_m2", "people_exposed", "buildings_damaged.partial",
                                     "buildings_damaged.destroyed", "roads_cut", "facilities_affected",
                                     "recommended_shelter", "route_length_m", "trend"}
    assert {name: f["kind"] for name, f in sitrep["figures"].items()} == {
        "damage_map": "damage_map", "before_after": "before_after_panel", "temporal_panel": "temporal_panel",
        "chart": "bar_chart"}
    d = f"data/{EVENT}"
    assert sitrep["figures"]["damage_map"] == {"kind": "damage_map", "data_layers": [f"{d}/post_optical.tif"],
                                               "workspace_layers": ["building-damage"]}
    days = json.loads((scene_root / EVENT / "timeline.json").read_text())["dates"]
    assert sitrep["figures"]["temporal_panel"]["dates"] == [day["date"] for day in days]
    sar = specs["sitrep_sar"].eval_spec["figures"]
    assert sar["damage_map"]["data_layers"] == [f"{d}/post_sar.tif"] and sar["damage_map"]["workspace_layers"] == [
        "sar-damage"]
    assert sar["before_after"]["data_layers"] == [f"{d}/pre_sar.tif", f"{d}/post_sar.tif"]


def test_a_scene_without_time_series_gets_the_single_date_reports_only(scene_root, tmp_path):
    copy = tmp_path / "scenes"
    shutil.copytree(scene_root / EVENT, copy / EVENT)
    shutil.copytree(scene_root.parent / "truth" / EVENT, tmp_path / "truth" / EVENT)
    (copy / EVENT / "timeline.json").unlink()
    specs = report_templates(_event(scene_root), truth_context(copy, EVENT), copy)
    assert {s.category for s in specs} == VARIANTS - {"ems_monitoring"}
    assert not any("trend" in s.eval_spec["fields"] or "temporal_panel" in s.eval_spec["figures"] for s in specs)


def test_the_truth_report_is_the_generators(scene_root):
    truth = truth_context(scene_root, EVENT)
    pois = json.loads((scene_root / EVENT / "pois.geojson").read_text())["features"]
    shelters = [f["properties"]["name"] for f in pois if f["properties"]["type"] == "shelter"]
    report = truth_report(truth, shelters)
    states = list(truth["buildings"].values())
    assert report["buildings_damaged"] == {"partial": states.count("partial"), "destroyed": states.count("destroyed")}
    assert report["roads_cut"] == sorted(r for r, s in truth["roads"].items() if s != "intact")
    assert report["affected_area_m2"] == truth["hazard_area_m2"]
    if report["recommended_shelter"] is not None:
        ident = next(f["properties"]["id"] for f in pois if f["properties"]["name"] == report["recommended_shelter"])
        assert truth["pois"][ident] == "intact"
        assert report["route_length_m"] == truth["route_truth"]("hospital", report["recommended_shelter"])
    spec = next(s for s in report_templates(_event(scene_root), truth, scene_root) if s.category == "ems_monitoring")
    timeline = json.loads((scene_root.parent / "truth" / EVENT / "timeline.json").read_text())
    assert spec.truth(truth)["trend"] == timeline["trend"] and spec.truth(truth)["peak_date"] == timeline["peak_date"]


def test_identical_calls_in_a_report_plan_are_made_once():
    plan = SharedPlan()
    first = plan.call("seg_water_sar", image="data/e/post_sar.tif")
    assert plan.call("seg_water_sar", image="data/e/post_sar.tif") == first
    assert plan.call("seg_water_sar", image="data/e/pre_sar.tif") != first and len(plan.steps) == 2


def test_the_smoke_size_replays_every_gold_report_at_1_000_through_mcp(tmp_path):
    load_experiment("disaster_reports").run("smoke", tmp_path)
    results = json.loads((tmp_path / "disaster_reports.json").read_text())
    assert results["tasks"] == results["perfect_replays"] == len(VARIANTS) and not results["skipped"]
    assert results["replay_obs_mismatches"] == 0
    assert set(results["variants"]) == VARIANTS
    assert f"| all | {len(VARIANTS)} | 0 |" in (tmp_path / "disaster_reports.md").read_text()


def test_a_gold_report_replays_at_1_000_through_a_real_stdio_server(flood_suite, scenes_root):
    """The shortest T5 task of the flood suite, replayed by the gold agent against ``gauntlet serve disaster``
    over stdio: its figures are written by the server process and read back by the scorer."""
    import sys
    from pathlib import Path

    import gymnasium as gym

    import gauntlet
    from gauntlet.agents.tool import GoldAgent
    from gauntlet.mcp_servers.disaster.scoring import DoraScorer
    from gauntlet.mcp_servers.disaster.tasks import MAX_STEPS, MAX_TEXT_LENGTH
    from gauntlet.tasks import load_suite

    tasks = load_suite(flood_suite)
    index = min((i for i, t in enumerate(tasks) if t.metadata["dimension"] == "T5"),
                key=lambda i: len(tasks[i].gold_trajectory))
    command = [str(Path(sys.executable).with_name("gauntlet")), "serve", "disaster", "--server-kwargs",
               json.dumps({"data_root": str(scenes_root / "scenes")})]
    env = gym.make("gauntlet/ToolTask-v0", tasks=str(flood_suite), server=command, scorer=DoraScorer(),
                   max_text_length=MAX_TEXT_LENGTH, max_steps=MAX_STEPS)
    try:
        episode = gauntlet.rollout(env, GoldAgent(suite=str(flood_suite)), seed=index, record="memory")
    finally:
        env.close()
    final = episode.steps[-1].info
    assert final["score"] == pytest.approx(1.0), episode.steps[-1].privileged
    assert any(step.tool_call.name.startswith("viz_") for step in episode.steps[:-1])
