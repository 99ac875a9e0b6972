"""The T5 report scorer on hand-worked examples: figures made by the real viz tools in an MCP session on a tiny
hand-made scene, then read back from the workspace. A missing figure, one of the wrong kind, one made from the
wrong layer, a tampered one and a chart showing other numbers each lose exactly that figure's point."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import rasterio
from affine import Affine
from rasterio.crs import CRS

from tests.disaster.helpers import call_all
from gauntlet.mcp_servers.disaster.report_scoring import grade_fields, grade_report
from gauntlet.mcp_servers.disaster.server import build_server
from gauntlet.tasks import NO_ANSWER

SCENE = "data/tiny"
PRE, POST, BUILDINGS = f"{SCENE}/pre.tif", f"{SCENE}/post.tif", f"{SCENE}/buildings.geojson"
TRANSFORM = Affine(10, 0, 360000, 0, -10, 5600400)  # 40 x 40 pixels of 10 m, UTM 32N
CLASSES = ["intact", "partial", "destroyed", "partial", "destroyed"]  # 2 partial, 2 destroyed

# Five fields and three figures: eight report items, each worth 1/8 of the answer score.
SPEC = {"type": "report",
        "fields": {"affected_area_m2": {"type": "numeric"}, "buildings_damaged.partial": {"type": "numeric"},
                   "buildings_damaged.destroyed": {"type": "numeric"}, "roads_cut": {"type": "set"},
                   "recommended_shelter": {"type": "exact"}},
        "figures": {"damage_map": {"kind": "damage_map", "data_layers": [POST], "workspace_layers": ["features"]},
                    "before_after": {"kind": "before_after_panel", "data_layers": [PRE, POST],
                                     "workspace_layers": []},
                    "chart": {"kind": "bar_chart", "values_of": ["buildings_damaged.partial",
                                                                 "buildings_damaged.destroyed"]}}}
FIELDS = {"affected_area_m2": 1000.0, "buildings_damaged": {"partial": 2, "destroyed": 2},
          "roads_cut": ["r1", "r2"], "recommended_shelter": "Shelter A"}


def _write(path, data):
    with rasterio.open(path, "w", driver="GTiff", width=40, height=40, count=3, dtype="uint16",
                       crs=CRS.from_epsg(32632), transform=TRANSFORM) as dst:
        dst.write(data)
        for index, name in enumerate(["red", "green", "blue"], start=1):
            dst.set_band_description(index, name)


def _square(x, y, **properties):
    ring = [[x, y], [x + 25, y], [x + 25, y + 25], [x, y + 25], [x, y]]
    return {"type": "Feature", "properties": properties, "geometry": {"type": "Polygon", "coordinates": [ring]}}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The tiny scene, its workspace folder, and the figures made in one session: the calls (as the server
    returned them) and each figure's path."""
    tmp_path = tmp_path_factory.mktemp("report-scoring")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GAUNTLET_HOME", str(tmp_path / "home"))
        return _make(tmp_path)


@pytest.fixture
def session(made, tmp_path):
    """``made`` with a copy of its workspace of the test's own (tests delete and tamper with files)."""
    workspace = shutil.copytree(made["workspace"], tmp_path / "ws")
    return {**made, "workspace": workspace}


def _make(tmp_path):
    folder = tmp_path / "scenes" / "tiny"
    folder.mkdir(parents=True)
    rows, cols = np.indices((40, 40))
    _write(folder / "pre.tif", np.stack([rows * 50 + 100, cols * 50 + 100, (rows + cols) * 25 + 300]).astype("uint16"))
    _write(folder / "post.tif", np.stack([cols * 50 + 100, rows * 50 + 100, (rows + cols) * 20 + 200]).astype("uint16"))
    damage = {"type": "FeatureCollection", "crs": {"type": "name", "properties": {"name": "EPSG:32632"}},
              "features": [_square(360020 + 70 * i, 5600200, id=f"b{i}", damage=c) for i, c in enumerate(CLASSES)]}
    (folder / "buildings.geojson").write_text(json.dumps(damage))
    workspace = tmp_path / "ws"
    server = build_server(tmp_path / "scenes", workspace_dir=workspace)
    calls = [("vec_from_geojson", {"geojson": damage}),
             ("viz_before_after_panel", {"before": PRE, "after": POST}),
             ("viz_bar_chart", {"labels": ["partial", "destroyed"], "values": [2, 2]}),
             ("viz_bar_chart", {"labels": ["partial", "destroyed"], "values": [2, 5]}),
             ("viz_damage_map", {"image": PRE, "layer": BUILDINGS})]
    results = call_all(server, calls)
    layer = results[0].structuredContent["path"]
    calls += [("viz_damage_map", {"image": POST, "layer": layer}), ("viz_damage_map", {"image": PRE, "layer": layer}),
              ("viz_damage_map", {"image": POST, "layer": BUILDINGS})]
    results += call_all(server, calls[len(results):])
    calls.append(("viz_add_map_elements", {"layer": results[5].structuredContent["path"], "title": "Damage grading"}))
    results += call_all(server, calls[len(results):])
    assert not any(r.isError for r in results)
    made = [{"name": name, "arguments": args, "result": r.structuredContent} for (name, args), r in zip(calls, results)]
    paths = [r.structuredContent["path"] for r in results]
    figures = {"before_after": paths[1], "chart": paths[2], "chart_wrong_values": paths[3],
               "damage_map_of_data_layer_over_pre": paths[4], "damage_map": paths[5], "damage_map_over_pre": paths[6],
               "damage_map_of_data_layer": paths[7], "damage_map_with_elements": paths[8]}
    return {"scenes": tmp_path / "scenes", "workspace": workspace, "calls": made, "figures": figures}


def _answer(session, **figures):
    chosen = {name: session["figures"][name] for name in ("damage_map", "before_after", "chart")}
    chosen.update(figures)
    return {**FIELDS, "figures": {k: v for k, v in chosen.items() if v is not None}}


def _grade(session, answer, calls=None):
    return grade_report(SPEC, {**FIELDS, "figures": {}}, answer, session["calls"] if calls is None else calls,
                        [session["workspace"]])


def test_a_complete_report_with_the_right_figures_scores_one(session):
    score, correct, reason = _grade(session, _answer(session))
    assert (score, correct) == (1.0, True), reason
    assert reason == "8/8 report items right"


def test_a_report_submitted_as_json_text_is_read_the_same(session):
    assert _grade(session, json.dumps(_answer(session)))[:2] == (1.0, True)


@pytest.mark.parametrize("figure, why", [
    (None, "no 'ws/...png' path given"),                                   # missing from the answer
    ("ws/figure-damage-map-0123456789abcdef.png", "was not returned by a tool call of this session"),
    ("before_after", "a before_after_panel figure, not a damage_map"),     # wrong kind
    ("damage_map_over_pre", "made from data layers ['data/tiny/pre.tif']"),  # wrong image layer
    ("damage_map_of_data_layer", "made from data layers ['data/tiny/buildings.geojson', "),  # wrong damage layer
    ("damage_map_of_data_layer_over_pre", "made from data layers"),       # both wrong
])
def test_a_missing_or_wrong_damage_map_loses_exactly_its_point(session, figure, why):
    path = session["figures"].get(figure, figure)
    score, correct, reason = _grade(session, _answer(session, damage_map=path))
    assert score == pytest.approx(7 / 8) and not correct
    assert why in reason and "figure damage_map" in reason


def test_map_elements_added_to_a_damage_map_still_count_as_that_damage_map(session):
    answer = _answer(session, damage_map=session["figures"]["damage_map_with_elements"])
    assert _grade(session, answer)[:2] == (1.0, True)


def test_a_chart_showing_other_numbers_than_the_report_loses_its_point(session):
    score, correct, reason = _grade(session, _answer(session, chart=session["figures"]["chart_wrong_values"]))
    assert score == pytest.approx(7 / 8) and not correct
    assert "shows values [2.0, 5.0], not [2, 2]" in reason


def test_a_figure_deleted_from_the_workspace_loses_its_point(session):
    path = session["figures"]["before_after"]
    (session["workspace"] / path.removeprefix("ws/")).unlink()
    score, _, reason = _grade(session, _answer(session))
    assert score == pytest.approx(7 / 8) and "is not in the session workspace" in reason


def test_a_figure_changed_after_it_was_written_is_not_trusted(session):
    real = session["workspace"] / session["figures"]["damage_map"].removeprefix("ws/")
    real.write_bytes(real.read_bytes() + b"\0")
    assert _grade(session, _answer(session))[0] == pytest.approx(7 / 8)


def test_a_sidecar_that_disagrees_with_the_png_is_not_trusted(session):
    sidecar = session["workspace"] / session["figures"]["chart"].removeprefix("ws/").replace(".png", ".json")
    described = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({**described, "kind": "pie_chart"}))
    score, _, reason = _grade(session, _answer(session))
    assert score == pytest.approx(7 / 8) and "sidecar does not match" in reason


def test_a_figure_is_not_taken_from_the_agents_word_without_the_sessions_record(session):
    # The same files, but the session's record shows no call that returned them: no figure counts.
    score, _, reason = _grade(session, _answer(session), calls=[])
    assert score == pytest.approx(5 / 8) and reason.startswith("5/8")


def test_fields_are_graded_with_their_own_dora_types():
    # roads_cut: F1 of {r1} against {r1, r2} = 2/3; area within 1 + 20 %; shelter exact after case-folding.
    answer = {**FIELDS, "affected_area_m2": 1150, "roads_cut": ["r1"], "recommended_shelter": " shelter a"}
    score, correct, reason = grade_fields(SPEC, FIELDS, answer)
    assert score == pytest.approx((4 + 2 / 3) / 5) and not correct and "roads_cut: F1 0.667" in reason
    missing = {k: v for k, v in FIELDS.items() if k != "buildings_damaged"}
    assert grade_fields(SPEC, FIELDS, missing)[0] == pytest.approx(3 / 5)


def test_a_null_expected_field_needs_a_null_answer():
    spec = {"type": "report", "fields": {"recommended_shelter": {"type": "exact"}}}
    assert grade_fields(spec, {"recommended_shelter": None}, {"recommended_shelter": None})[:2] == (1.0, True)
    assert grade_fields(spec, {"recommended_shelter": None}, {"recommended_shelter": "Shelter A"})[0] == 0.0


def test_no_answer_or_not_a_report_scores_zero(session):
    assert _grade(session, NO_ANSWER) == (0.0, False, "no answer")
    assert _grade(session, "a flood happened")[:2] == (0.0, False)
    assert _grade(session, ["not", "an", "object"])[:2] == (0.0, False)


def test_the_dora_scorer_grades_a_report_task_with_its_figures_from_the_default_workspace(session, tmp_path):
    from gauntlet.mcp_servers.disaster.scoring import score_task
    from gauntlet.tasks import ToolTask

    # A server with its default workspace (under the data cache), as gauntlet eval builds it.
    server = build_server(session["scenes"])
    results = call_all(server, [("viz_before_after_panel", {"before": PRE, "after": POST})])
    calls = [{"name": "viz_before_after_panel", "arguments": {}, "result": results[0].structuredContent}]
    spec = {"type": "report", "fields": {"roads_cut": {"type": "set"}},
            "figures": {"before_after": SPEC["figures"]["before_after"]}}
    task = ToolTask(id="tiny/report", question="?", answer={"roads_cut": ["r1"], "figures": {}},
                    metadata={"eval_spec": spec, "dimension": "T5"})
    good = {"roads_cut": ["r1"], "figures": {"before_after": results[0].structuredContent["path"]}}
    assert score_task(task, good, calls).answer_score == 1.0
    assert score_task(task, {"roads_cut": ["r1"], "figures": {}}, calls).answer_score == 0.5
