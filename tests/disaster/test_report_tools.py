"""The report_* tools through a real MCP session: evidence from hand-made masks of known area gives the
areas, peak, rates and trend class worked out by hand; the summary is a fixed template, the same text for
the same facts; bad input is an error the agent can act on."""

from __future__ import annotations

import numpy as np
import pytest
import rasterio
from affine import Affine
from rasterio.crs import CRS

from tests.disaster.helpers import call_all, error_text
from gauntlet.mcp_servers.disaster.server import build_server

# 20 x 20 pixels of 10 m (100 m2 each), UTM 32N.
TRANSFORM = Affine(10, 0, 360000, 0, -10, 5600200)
PIXEL_M2 = 100.0
# Masks by how many pixels they select; 'ws' ones are written into the session's workspace.
PIXELS = [0, 10, 20, 25, 30, 35, 40, 50, 60, 100, 101]


def write_mask(path, selected: int, epsg: int = 32632, transform: Affine = TRANSFORM) -> None:
    data = np.zeros((1, 20, 20), np.uint8)
    data.reshape(-1)[:selected] = 1
    with rasterio.open(path, "w", driver="GTiff", width=20, height=20, count=1, dtype="uint8",
                       crs=CRS.from_epsg(epsg), transform=transform) as dst:
        dst.write(data)


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    """(data root, workspace folder): masks 'data/masks/px<N>.tif' and 'ws/px<N>.tif' selecting N pixels,
    one in degrees and one shifted by 1 km."""
    data, workspace = tmp_path_factory.mktemp("report-scenes"), tmp_path_factory.mktemp("report-ws")
    (data / "masks").mkdir()
    for count in PIXELS:
        write_mask(data / "masks" / f"px{count}.tif", count)
        write_mask(workspace / f"px{count}.tif", count)
    write_mask(data / "masks" / "degrees.tif", 10, epsg=4326, transform=Affine(0.001, 0, 7.0, 0, -0.001, 50.5))
    write_mask(data / "masks" / "shifted.tif", 10, transform=Affine(10, 0, 361000, 0, -10, 5600200))
    return data, workspace


@pytest.fixture(scope="module")
def server(roots):
    data, workspace = roots
    return build_server(data, workspace_dir=workspace)






def mask(count: int, root: str = "data/masks") -> str:
    return f"{root}/px{count}.tif"


def evidence(server, series: list[tuple[str, int]], root: str = "data/masks") -> dict:
    """report_extract_evidence on (date, selected pixels) pairs, given in that (possibly unsorted) order."""
    (result,) = call_all(server, [("report_extract_evidence", {"masks": [mask(count, root) for _, count in series],
                                                                 "dates": [day for day, _ in series]})])
    assert not result.isError, error_text(result)
    return result.structuredContent


def test_an_extent_that_only_grows_is_expanding(server):
    # 10, 20, 20, 35 pixels = 1000, 2000, 2000, 3500 m2; the flat step (0 <= 1% of 3500 = 35 m2) is ignored.
    out = evidence(server, [("2021-07-14", 20), ("2021-07-10", 10), ("2021-07-20", 35), ("2021-07-12", 20)])
    assert out["dates"] == ["2021-07-10", "2021-07-12", "2021-07-14", "2021-07-20"]
    assert out["areas_m2"] == [1000.0, 2000.0, 2000.0, 3500.0]
    assert out["masks"] == [mask(10), mask(20), mask(20), mask(35)]
    assert (out["peak_date"], out["peak_area_m2"]) == ("2021-07-20", 3500.0)
    assert out["growth_rate_m2_per_day"] == pytest.approx(250.0)  # (3500 - 1000) / 10 days
    assert out["recession_rate_m2_per_day"] == 0.0
    assert out["tolerance_m2"] == pytest.approx(35.0)
    assert [step["direction"] for step in out["steps"]] == ["growth", "flat", "growth"]
    assert [step["rate_m2_per_day"] for step in out["steps"]] == pytest.approx([500.0, 0.0, 250.0])
    assert out["trend"] == "expanding"


def test_an_extent_that_only_falls_is_shrinking(server):
    # 40, 25, 10 pixels = 4000, 2500, 1000 m2 over 3 days.
    out = evidence(server, [("2021-07-10", 40), ("2021-07-11", 25), ("2021-07-13", 10)])
    assert out["areas_m2"] == [4000.0, 2500.0, 1000.0]
    assert (out["peak_date"], out["peak_area_m2"]) == ("2021-07-10", 4000.0)
    assert out["growth_rate_m2_per_day"] == 0.0
    assert out["recession_rate_m2_per_day"] == pytest.approx(1000.0)  # (4000 - 1000) / 3 days
    assert out["trend"] == "shrinking"


def test_an_extent_that_rises_to_a_peak_and_falls_expands_then_recedes(server):
    # 10, 30, 50, 20 pixels = 1000, 3000, 5000, 2000 m2; the peak on day 4, the last date 5 days later.
    out = evidence(server, [("2021-07-10", 10), ("2021-07-12", 30), ("2021-07-14", 50), ("2021-07-19", 20)],
                   root="ws")
    assert out["masks"] == [mask(10, "ws"), mask(30, "ws"), mask(50, "ws"), mask(20, "ws")]
    assert out["areas_m2"] == [1000.0, 3000.0, 5000.0, 2000.0]
    assert (out["peak_date"], out["peak_area_m2"]) == ("2021-07-14", 5000.0)
    assert (out["first_date"], out["first_area_m2"], out["last_date"], out["last_area_m2"]) == (
        "2021-07-10", 1000.0, "2021-07-19", 2000.0)
    assert out["growth_rate_m2_per_day"] == pytest.approx(1000.0)  # (5000 - 1000) / 4 days
    assert out["recession_rate_m2_per_day"] == pytest.approx(600.0)  # (5000 - 2000) / 5 days
    assert out["trend"] == "expand-then-recede"


def test_an_extent_that_falls_then_grows_is_mixed(server):
    # 30, 10, 40 pixels = 3000, 1000, 4000 m2: a recession, then a growth.
    out = evidence(server, [("2021-07-10", 30), ("2021-07-11", 10), ("2021-07-12", 40)])
    assert (out["peak_date"], out["peak_area_m2"]) == ("2021-07-12", 4000.0)
    assert out["growth_rate_m2_per_day"] == pytest.approx(500.0)  # (4000 - 3000) / 2 days
    assert out["trend"] == "mixed"


@pytest.mark.parametrize("series, trend", [
    # +100 m2 is within 1% of the 10,100 m2 peak (101 m2): flat, so only the fall counts.
    ([("2021-07-10", 100), ("2021-07-11", 101), ("2021-07-12", 60)], "shrinking"),
    # Nothing changes by more than the tolerance: no direction at all.
    ([("2021-07-10", 100), ("2021-07-11", 101), ("2021-07-12", 100)], "mixed"),
    ([("2021-07-10", 0), ("2021-07-11", 0)], "mixed"),
    # Growth, recession, growth.
    ([("2021-07-10", 10), ("2021-07-11", 30), ("2021-07-12", 20), ("2021-07-13", 50)], "mixed"),
])
def test_steps_within_one_percent_of_the_peak_count_as_flat(server, series, trend):
    assert evidence(server, series)["trend"] == trend


def test_a_flat_step_still_moves_the_peak_and_the_rates(server):
    # 10,000, 10,100, 6,000 m2: the +100 m2 step is flat (<= 101 m2), yet the peak is the 11th.
    out = evidence(server, [("2021-07-10", 100), ("2021-07-11", 101), ("2021-07-12", 60)])
    assert (out["peak_date"], out["peak_area_m2"], out["tolerance_m2"]) == ("2021-07-11", 10100.0, pytest.approx(101.0))
    assert out["growth_rate_m2_per_day"] == pytest.approx(100.0)  # (10,100 - 10,000) / 1 day
    assert out["recession_rate_m2_per_day"] == pytest.approx(4100.0)  # (10,100 - 6,000) / 1 day
    assert [step["direction"] for step in out["steps"]] == ["flat", "recession"] and out["trend"] == "shrinking"


def test_the_peak_is_the_first_date_of_the_largest_area(server):
    out = evidence(server, [("2021-07-10", 10), ("2021-07-11", 50), ("2021-07-12", 50), ("2021-07-14", 20)])
    assert (out["peak_date"], out["peak_area_m2"]) == ("2021-07-11", 5000.0)
    assert out["recession_rate_m2_per_day"] == pytest.approx(1000.0)  # (5000 - 2000) / 3 days


@pytest.mark.parametrize("args, message", [
    ({"masks": [mask(10), mask(20), mask(30)], "dates": ["2021-07-10", "2021-07-11"]}, "differ in length"),
    ({"masks": [mask(10)], "dates": ["2021-07-10"]}, "at least 2"),
    ({"masks": [], "dates": []}, "at least 2"),
    ({"masks": [mask(10), mask(20)], "dates": ["2021-07-10", "2021-07-10"]}, "more than once"),
    ({"masks": [mask(10), mask(20)], "dates": ["2021-07-10", "10 July"]}, "date"),
    ({"masks": [mask(10), "data/masks/shifted.tif"], "dates": ["2021-07-10", "2021-07-11"]}, "different extents"),
    ({"masks": [mask(10), "data/masks/degrees.tif"], "dates": ["2021-07-10", "2021-07-11"]}, "different CRS"),
    ({"masks": ["data/masks/degrees.tif", "data/masks/degrees.tif"], "dates": ["2021-07-10", "2021-07-11"]},
     "not a CRS in metres"),
    ({"masks": [mask(10), "data/masks/missing.tif"], "dates": ["2021-07-10", "2021-07-11"]}, "does not exist"),
    ({"masks": [mask(10), "../../etc/passwd"], "dates": ["2021-07-10", "2021-07-11"]}, "neither under"),
])
def test_bad_evidence_requests_are_errors_without_internal_paths(server, roots, args, message):
    (bad,) = call_all(server, [("report_extract_evidence", args)])
    text = error_text(bad)
    assert message in text, text
    assert not any(str(folder) in text for folder in roots)
    assert not text.startswith("internal error") and "Traceback" not in text


FACTS = {"event": "Ahr valley flood, July 2021", "hazard": "flood",
         "findings": [{"label": "Flooded area", "value": 1250000, "unit": "m2"},
                      {"label": "People exposed", "value": 4210.5, "unit": "people"},
                      {"label": "Most exposed district", "value": "Bad Neuenahr"}],
         "recommendations": ["Evacuate the riverside streets.", "Open shelter B"]}


def test_the_summary_is_the_template_filled_in_and_the_same_every_time(server, scene_free_server):
    first, second = call_all(server, [("report_summarize", FACTS), ("report_summarize", FACTS)])
    (elsewhere,) = call_all(scene_free_server, [("report_summarize", FACTS)])
    assert first.structuredContent == second.structuredContent == elsewhere.structuredContent
    assert first.structuredContent["sentences"] == [
        "Summary for Ahr valley flood, July 2021 (flood).",
        "Flooded area: 1,250,000 m².",
        "People exposed: 4,210.5 people.",
        "Most exposed district: Bad Neuenahr.",
        "Recommended actions: (1) Evacuate the riverside streets; (2) Open shelter B.",
    ]
    assert first.structuredContent["text"] == "\n".join(first.structuredContent["sentences"])


@pytest.fixture
def scene_free_server(tmp_path):
    """Another server, over another (empty) data root: the summary depends on the facts alone."""
    (tmp_path / "data").mkdir()
    return build_server(tmp_path / "data", families=["report"], workspace_dir=tmp_path / "ws")


def test_the_evidence_result_can_be_passed_whole_as_the_summary_trend(server):
    out = evidence(server, [("2021-07-10", 10), ("2021-07-12", 30), ("2021-07-14", 50), ("2021-07-19", 20)])
    (summary,) = call_all(server, [("report_summarize", {"event": "Ahr valley flood", "findings": [],
                                                         "trend": out})])
    assert summary.structuredContent["sentences"] == [
        "Summary for Ahr valley flood.",
        "The mapped extent expanded from 1,000 m² on 2021-07-10 to a peak of 5,000 m² on 2021-07-14, then "
        "receded to 2,000 m² on 2021-07-19.",
    ]


@pytest.mark.parametrize("args, message", [
    ({"event": "Ahr", "findings": []}, "at least one finding"),
    ({"event": "", "findings": FACTS["findings"]}, "at least 1 character"),
    ({"event": "Ahr", "findings": [{"label": "Area", "value": float("nan")}]}, "findings"),
    ({"event": "Ahr", "findings": [{"label": "Area", "value": 1e300}]}, "findings"),
    ({"event": "Ahr", "findings": [], "trend": {"trend": "expanding", "first_date": "2021-07-12",
                                                "first_area_m2": 10, "peak_date": "2021-07-10", "peak_area_m2": 20,
                                                "last_date": "2021-07-14", "last_area_m2": 20}}, "peak date"),
    ({"event": "Ahr", "findings": [], "trend": {"trend": "growing", "first_date": "2021-07-10",
                                                "first_area_m2": 10, "peak_date": "2021-07-12", "peak_area_m2": 20,
                                                "last_date": "2021-07-14", "last_area_m2": 20}}, "trend"),
])
def test_bad_summary_requests_are_errors_the_agent_can_act_on(server, args, message):
    (bad,) = call_all(server, [("report_summarize", args)])
    text = error_text(bad)
    assert message in text, text
    assert not text.startswith("internal error")
