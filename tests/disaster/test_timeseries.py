"""The time series of each event: five dated acquisitions evolving consistently from the hazard models."""

from __future__ import annotations

import json
from datetime import date

import numpy as np
import pytest

from gauntlet.mcp_servers.disaster import rasters
from gauntlet.mcp_servers.disaster.timeseries import PEAK, PHASES, RECOVERY

from .conftest import EVENTS

FLOODS = ["ahr-2021-flood", "haiyan-2013-cyclone"]


def _timeline(root, event, side="truth"):
    return json.loads((root / side / event / "timeline.json").read_text())


def _mask_areas(root, event):
    return [float(rasters.read(root / "truth" / event / f"t{k}_hazard_mask.tif", [1], dtype="uint8").data.sum()) * 100
            for k in range(len(PHASES))]


@pytest.mark.parametrize("event", FLOODS)
def test_flood_extent_at_peak_is_at_least_the_extent_on_every_other_date(scenes_root, event):
    areas = _mask_areas(scenes_root, event)
    assert areas[PEAK] > 0 and all(areas[PEAK] >= area for area in areas)
    assert areas[0] == 0 and areas[RECOVERY] < areas[PEAK]  # the water rises, then recedes
    assert [d["affected_area_m2"] for d in _timeline(scenes_root, event)["dates"]] == areas


@pytest.mark.parametrize("event", ["lahaina-2023-wildfire", "la-palma-2021-eruption"])
def test_burned_area_and_lava_never_shrink(scenes_root, event):
    masks = [rasters.read(scenes_root / "truth" / event / f"t{k}_hazard_mask.tif", [1], dtype="uint8").data[0] > 0
             for k in range(len(PHASES))]
    for earlier, later in zip(masks, masks[1:]):
        assert not (earlier & ~later).any()  # every cell burned (or under lava) stays so
    assert masks[1].sum() < masks[PEAK].sum()


def test_active_fire_is_hot_only_at_the_front(scenes_root):
    event = "lahaina-2023-wildfire"
    onset = rasters.read(scenes_root / "scenes" / event / "t1_lst.tif", [1]).data[0]
    burned = rasters.read(scenes_root / "truth" / event / "t1_hazard_mask.tif", [1], dtype="uint8").data[0] > 0
    flames = onset > 400
    assert flames.any() and not (flames & ~burned).any()
    assert flames.sum() < burned.sum()  # the front, not the whole scar


@pytest.mark.parametrize("event", EVENTS)
def test_buildings_are_repaired_only_after_the_peak(scenes_root, event):
    dates = _timeline(scenes_root, event)["dates"]
    for entry in dates[:RECOVERY]:
        assert entry["buildings_repaired"] == []
    repaired = set(dates[RECOVERY]["buildings_repaired"])
    peak = dates[PEAK]["buildings_damaged"]
    assert all(peak[b] == "partial" for b in repaired)
    assert not repaired & set(dates[RECOVERY]["buildings_damaged"])
    assert not dates[0]["buildings_damaged"] and not dates[0]["buildings_affected"]


def test_earthquake_damage_is_fixed_at_onset(scenes_root):
    dates = _timeline(scenes_root, "turkiye-2023-earthquake")["dates"]
    assert dates[1]["buildings_damaged"] == dates[PEAK]["buildings_damaged"] != {}


def test_cloudy_optical_dates_exist_and_never_cover_every_date(scenes_root):
    cloudy_somewhere = False
    for event in EVENTS:
        fractions = [d["cloud_fraction"] for d in _timeline(scenes_root, event, "scenes")["dates"]]
        assert fractions[0] == fractions[PEAK] == 0.0 and not all(f > 0 for f in fractions)
        cloudy_somewhere |= any(f > 0 for f in fractions)
        k = next((k for k, f in enumerate(fractions) if f > 0), None)
        if k is not None:  # a clouded optical image is brighter in the visible than the clear pre-event one
            clouded = rasters.read(scenes_root / "scenes" / event / f"t{k}_optical.tif", [1]).data.mean()
            clear = rasters.read(scenes_root / "scenes" / event / "t0_optical.tif", [1]).data.mean()
            assert clouded > clear
    assert cloudy_somewhere


@pytest.mark.parametrize("event", EVENTS)
def test_timeline_files_follow_the_contract(scenes_root, event):
    scene = scenes_root / "scenes" / event
    timeline = _timeline(scenes_root, event, "scenes")
    manifest = json.loads((scene / "manifest.json").read_text())
    catalogue = {e["id"]: e for e in json.loads((scenes_root / "scenes" / "events.json").read_text())["events"]}
    assert manifest["timeline"] == timeline and timeline["event"] == event
    assert [d["phase"] for d in timeline["dates"]] == list(PHASES)
    assert [d["index"] for d in timeline["dates"]] == list(range(len(PHASES)))
    days = [date.fromisoformat(d["date"]) for d in timeline["dates"]]
    assert days == sorted(days) and len(set(days)) == len(days)
    assert days[0] < date.fromisoformat(catalogue[event]["date"]) == days[1]
    for entry in timeline["dates"]:
        k = entry["index"]
        for sensor, name in entry["layers"].items():
            assert name == f"t{k}_{sensor}.tif"
            like = rasters.metadata(scene / ("lst.tif" if sensor == "lst" else f"post_{sensor}.tif"))
            meta = rasters.metadata(scene / name)
            for key in ("width", "height", "bands", "dtype", "crs", "bounds", "pixel_size_m", "overviews"):
                assert meta[key] == like[key], (name, key)
            assert manifest["layers"][name[:-4]]["date"] == entry["date"]
    truth = _timeline(scenes_root, event)
    damage = json.loads((scenes_root / "truth" / event / "damage.json").read_text())
    peak = truth["dates"][PEAK]
    assert peak["buildings_damaged"] == {b: s for b, s in damage["buildings"].items() if s != "intact"}
    assert peak["roads"] == damage["roads"] and peak["affected_area_m2"] == damage["hazard_area_m2"]
    assert {truth["trend"]} <= {"expanding", "shrinking", "expand-then-recede", "mixed"}
    assert truth["peak_date"] in {d["date"] for d in truth["dates"]}
    for entry in truth["dates"]:
        assert set(entry["roads"].values()) <= {"intact", "flooded", "blocked"}
        assert {"affected_area_m2", "buildings_affected", "buildings_damaged", "pois_cut_off", "pois_affected",
                "cloud_fraction"} <= set(entry)
    for span in [*truth["roads_cut"].values(), *truth["pois_cut"].values()]:
        assert span["reopened"] is None or span["reopened"] > span["cut"]


def test_pre_and_peak_dates_are_the_scene_images_and_truth(scenes_root):
    scene, truth = scenes_root / "scenes" / "ahr-2021-flood", scenes_root / "truth" / "ahr-2021-flood"
    for sensor in ("optical", "s2", "sar"):
        assert (scene / f"t0_{sensor}.tif").read_bytes() == (scene / f"pre_{sensor}.tif").read_bytes()
        assert (scene / f"t2_{sensor}.tif").read_bytes() == (scene / f"post_{sensor}.tif").read_bytes()
    assert (truth / "t2_hazard_mask.tif").read_bytes() == (truth / "hazard_mask.tif").read_bytes()


def test_the_time_series_leaves_every_scene_file_but_the_manifest_byte_identical(tmp_path):
    from gauntlet.mcp_servers.disaster.events import get_event
    from gauntlet.mcp_servers.disaster.scenes import build_event

    event = get_event("la-palma-2021-eruption")
    build_event(tmp_path / "plain", event, size_px=64, seed=0, time_series=False)
    build_event(tmp_path / "dated", event, size_px=64, seed=0)
    plain = {p.relative_to(tmp_path / "plain") for p in (tmp_path / "plain").rglob("*") if p.is_file()}
    dated = {p.relative_to(tmp_path / "dated") for p in (tmp_path / "dated").rglob("*") if p.is_file()}
    assert plain < dated
    for path in plain:
        a, b = (tmp_path / "plain" / path).read_bytes(), (tmp_path / "dated" / path).read_bytes()
        if path.name == "manifest.json":
            with_series = json.loads(b)
            del with_series["timeline"]
            with_series["layers"] = {k: v for k, v in with_series["layers"].items() if not k.startswith("t")}
            assert json.loads(a) == with_series
        else:
            assert a == b, path


def test_the_hard_level_renders_every_date_over_the_same_truth(tmp_path):
    from gauntlet.mcp_servers.disaster.events import get_event
    from gauntlet.mcp_servers.disaster.scenes import build_event

    event = get_event("ahr-2021-flood")
    for level in ("clean", "hard"):
        build_event(tmp_path / level, event, size_px=64, seed=0, realism=level)
    assert _timeline(tmp_path / "clean", event.id) == _timeline(tmp_path / "hard", event.id)
    clean, hard = (rasters.read(tmp_path / level / "scenes" / event.id / "t3_s2.tif", [1]).data.astype(float)
                   for level in ("clean", "hard"))
    assert clean.shape == hard.shape and not np.array_equal(clean, hard)  # haze, noise, misregistration


def test_evolution_is_deterministic_and_independent_of_the_scene_generator():
    from gauntlet.mcp_servers.disaster import timeseries

    a, b = timeseries.generator(7), timeseries.generator(7)
    assert np.array_equal(a.random(4), b.random(4))
    assert not np.array_equal(timeseries.generator(7).random(4), np.random.default_rng(7).random(4))


@pytest.mark.starts_early
def test_the_experiment_smoke_size_measures_cost_and_t4_gold(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    experiment = Path(__file__).resolve().parents[2] / "experiments" / "disaster_timeseries.py"
    done = subprocess.run([sys.executable, str(experiment), "--size", "smoke", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((tmp_path / "disaster_timeseries.json").read_text())
    row = results["cost"][0]
    assert row["with_time_series_s"] > 0 and row["with_time_series_bytes"] > row["scene_bytes"]
    assert results["t4"]["tasks"] >= 6 and 0 <= results["t4"]["truth_passes"] <= results["t4"]["tasks"]
    assert results["t4"]["gold_replay_stdio"] == {"tasks": results["t4"]["tasks"], "mean_score": 1.0, "below_1": 0}
    assert "| t4_peak_date |" in (tmp_path / "disaster_timeseries.md").read_text()
