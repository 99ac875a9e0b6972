"""T5 multi-modal report synthesis: a situation report on one event, in the style of a UN OCHA Situation
Report / Flash Update or a Copernicus EMS grading product, as structured fields plus required figures.

``report_templates(event, truth, scene_root)`` returns ``TaskSpec``s like ``tasks._templates``: one per
report *variant* (who reads it, which sensor it rests on). The gold plan runs through the real MCP tools
(``tasks.execute_plan``), the gold answer is read off its results, and the truth answer (the fields, not
the figures) comes from the generator. The eval spec is of type ``report`` (``report_scoring``): each
field is graded with its DORA type and each figure is read back from the session workspace.

Fields (a variant asks for a subset, named in its question):

* ``affected_area_m2`` (numeric): area the hazard affected, 10 m imagery (SAR water for a SAR flood report);
* ``people_exposed`` (numeric): residents of that area (grown one cell where water or fire surrounds roofs);
* ``buildings_damaged.partial`` / ``.destroyed`` (numeric): buildings by damage class, from the pre/post
  pair of the report's sensor inside the footprints;
* ``roads_cut`` (set): ids of road segments flooded or blocked;
* ``facilities_affected`` (set): names of facilities in damaged buildings;
* ``recommended_shelter`` (exact): the shelter nearest the hospital by usable roads whose building is
  undamaged (null if none can be reached), and ``route_length_m`` (numeric): that road distance;
* ``water_truck_trips`` (numeric): 10,000-litre truck trips for 3 days of Sphere drinking water;
* with the event's time series (``timeline.json``; the hazard mapped on every date as T4 maps it, SAR on
  clouded dates): ``trend`` (exact, ``report_extract_evidence``'s class), ``extent_m2.<date>`` (numeric)
  and ``peak_date`` (exact).

Figures: ``damage_map`` (buildings by class over the post-event image of the sensor), ``before_after``
(the sensor's pre/post images), ``chart`` (bar chart of partial then destroyed buildings, or a line chart
of the extent by date), ``hazard_map`` (the affected-area mask over the post-event Sentinel-2 image),
``temporal_panel`` (the dated hazard masks in date order).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

from gauntlet.mcp_servers.disaster import reporting
from gauntlet.mcp_servers.disaster.tasks import (AFFECTED, DAMAGE_DETECTORS, DAMAGE_ONLY, FLOOD_LIKE, NUMERIC, Plan,
                                                 TaskSpec, affected_mask, exposure_mask, first_xy, ref, road_states)
from gauntlet.mcp_servers.disaster.tasks_temporal import DateMasks

DIMENSION = "T5"
SET = {"type": "set"}
EXACT = {"type": "exact"}
DAMAGE_CLASSES = ("partial", "destroyed")
CLASS_WORDS = {"partial": "number of buildings partially damaged", "destroyed": "number of buildings destroyed"}
# The workspace name stem each mask-producing tool writes (a figure's workspace layers are checked by stem).
MASK_STEMS = {"seg_flood_extent": "flood-extent", "seg_burn_severity": "burned", "seg_thermal_anomaly": "thermal",
              "seg_landslide": "landslide", "vec_rasterize": "rasterized", "mask_dilate": "dilate",
              "seg_change_sar": "change-sar"}
DAMAGE_STEMS = {"optical": "building-damage", "sar": "sar-damage"}
SENSOR_WORDS = {"optical": "2.5 m optical", "sar": "SAR (VV backscatter, sees through cloud)"}


class SharedPlan(Plan):
    """A plan whose identical calls are made once: recipes may ask for the same mask twice, and the tools
    are deterministic (content-hashed outputs), so the earlier step's result is the same result."""

    def call(self, tool: str, **args: Any) -> int:
        for index, (name, earlier) in enumerate(self.steps):
            if name == tool and earlier == args:
                return index
        return super().call(tool, **args)


class Report:
    """One report under construction: the plan, the answer's readers, the field and figure specs."""

    def __init__(self, event: dict[str, Any], sensor: str, timeline: Timeline | None = None):
        self.event, self.sensor, self.timeline = event, sensor, timeline
        self.eid, self.hazard = event["id"], event["hazard"]
        self.d = f"data/{self.eid}"
        self.plan = SharedPlan()
        self.readers: dict[str, Callable[[list[Any]], Any]] = {}
        self.fields: dict[str, dict[str, Any]] = {}
        self.figures: dict[str, tuple[int, dict[str, Any]]] = {}
        self.asks: list[str] = []

    def field(self, name: str, spec: dict[str, Any], ask: str, read: Callable[[list[Any]], Any]) -> None:
        self.fields[name], self.readers[name] = spec, read
        self.asks.append(f"{name} ({ask})")

    def figure(self, name: str, step: int, spec: dict[str, Any], ask: str) -> None:
        self.figures[name] = (step, spec)
        self.asks.append(f"figures.{name} ({ask})")

    # Steps shared by the fields ------------------------------------------------------------------
    def damage(self) -> int:
        s = self.sensor
        return self.plan.call(DAMAGE_DETECTORS[s], pre_image=f"{self.d}/pre_{s}.tif",
                              post_image=f"{self.d}/post_{s}.tif", buildings=f"{self.d}/buildings.geojson")

    def damaged_of(self, which: str | list[str]) -> int:
        op = "in" if isinstance(which, list) else "=="
        return self.plan.call("vec_filter_attribute", layer=ref(self.damage(), "path"), key="damage", op=op,
                              value=which)

    def mask(self) -> int:
        """The affected area: from SAR water for a SAR report on a flood, else the hazard's own recipe."""
        if self.sensor == "sar" and self.hazard in FLOOD_LIKE:
            pre = self.plan.call("seg_water_sar", image=f"{self.d}/pre_sar.tif")
            post = self.plan.call("seg_water_sar", image=f"{self.d}/post_sar.tif")
            return self.plan.call("seg_flood_extent", pre_water=ref(pre, "path"), post_water=ref(post, "path"))
        return affected_mask(self.plan, self.eid, self.hazard)

    def exposure(self) -> int:
        if self.sensor == "sar" and self.hazard in FLOOD_LIKE:
            return self.plan.call("mask_dilate", mask=ref(self.mask(), "path"), pixels=1)
        return exposure_mask(self.plan, self.eid, self.hazard)

    # Fields ---------------------------------------------------------------------------------------
    def affected_area(self) -> None:
        step = self.plan.call("ras_area_m2", mask=ref(self.mask(), "path"))
        what = AFFECTED[self.hazard]
        source = "the SAR pair" if self.sensor == "sar" and self.hazard in FLOOD_LIKE else "the 10 m imagery"
        self.field("affected_area_m2", NUMERIC, f"m2 {what}, from {source}", lambda r: r[step]["value"])

    def people_exposed(self) -> None:
        step = self.plan.call("poi_population_exposed", population=f"{self.d}/population.tif",
                              mask=ref(self.exposure(), "path"))
        self.field("people_exposed", NUMERIC, f"residents of the area {AFFECTED[self.hazard]}",
                   lambda r: r[step]["value"])

    def buildings_damaged(self) -> list[int]:
        steps = [self.damaged_of(c) for c in DAMAGE_CLASSES]
        for cls, step in zip(DAMAGE_CLASSES, steps):
            self.field(f"buildings_damaged.{cls}", NUMERIC, CLASS_WORDS[cls], read(step, "count"))
        return steps

    def roads_cut(self) -> None:
        roads = road_states(self.plan, self.eid, self.hazard)
        step = self.plan.call("poi_attribute_values", layer=ref(roads, "path"), key="state")
        self.field("roads_cut", SET, "ids of the road segments flooded or blocked",
                   lambda r: sorted(item["id"] for item in r[step]["items"] if item["state"] != "intact"))

    def facilities_affected(self) -> None:
        hit = self.damaged_of(list(DAMAGE_CLASSES))
        inside = self.plan.call("vec_select_intersecting", layer=f"{self.d}/pois.geojson", overlay=ref(hit, "path"))
        step = self.plan.call("poi_search", pois=ref(inside, "path"))
        self.field("facilities_affected", SET, "names of the hospitals, schools, shelters, fire and police stations "
                   "in damaged buildings", lambda r: sorted(item["name"] for item in r[step]["items"]))

    def shelter_and_route(self) -> None:
        roads = road_states(self.plan, self.eid, self.hazard)
        undamaged = self.damaged_of("intact")
        shelters = self.plan.call("vec_filter_attribute", layer=f"{self.d}/pois.geojson", key="type", op="==",
                                  value="shelter")
        usable = self.plan.call("vec_select_intersecting", layer=ref(shelters, "path"), overlay=ref(undamaged, "path"))
        hospital = self.plan.call("poi_search", pois=f"{self.d}/pois.geojson", type="hospital")
        step = self.plan.call("vec_network_distance", roads=ref(roads, "path"), origin=first_xy(hospital),
                              destinations=ref(usable, "path"), avoid_states=["flooded", "blocked"])

        def nearest(results: list[Any]) -> dict[str, Any] | None:
            reachable = [i for i in results[step]["items"] if i["network_distance_m"] is not None]
            return reachable[0] if reachable else None

        self.field("recommended_shelter", EXACT, "name of the shelter nearest the hospital by roads neither flooded "
                   "nor blocked whose building is undamaged; null if none can be reached",
                   lambda r: (nearest(r) or {}).get("name"))
        self.field("route_length_m", NUMERIC, "its road distance from the hospital in m; null if none",
                   lambda r: (nearest(r) or {}).get("network_distance_m"))

    def water_trips(self) -> None:
        people = self.plan.call("poi_population_exposed", population=f"{self.d}/population.tif",
                                mask=ref(self.exposure(), "path"))
        water = self.plan.call("logi_supply_needs", people=ref(people, "value"), days=3.0, item="water_l")
        step = self.plan.call("logi_truck_trips", demand=ref(water, "value"), truck_capacity=10000.0, trucks=1)
        self.field("water_truck_trips", NUMERIC, "trips of one 10,000-litre truck for 3 days of Sphere drinking "
                   "water for those residents", lambda r: r[step]["value"])

    def _dated(self) -> tuple[Timeline, list[int]]:
        """The hazard mask of every acquisition date (SAR where the optical images are clouded)."""
        if self.timeline is None:
            raise ValueError(f"the scene of {self.eid} has no time series")
        masks = DateMasks(self.plan, self.eid, self.hazard, self.timeline.cloudy)
        return self.timeline, [masks.hazard_mask(k) for k in range(len(self.timeline.days))]

    def evidence(self) -> int:
        timeline, masks = self._dated()
        return self.plan.call("report_extract_evidence", masks=[ref(m, "path") for m in masks], dates=timeline.days)

    def trend(self) -> None:
        step = self.evidence()
        self.field("trend", EXACT, f"how the area {AFFECTED[self.hazard]} evolved over the acquisition dates: "
                   "expanding, shrinking, expand-then-recede or mixed (a step counts when it changes the area by more "
                   "than 1% of the peak area)", lambda r: r[step]["trend"])

    def extent_by_date(self) -> None:
        step = self.evidence()
        for k, day in enumerate(self.timeline.days if self.timeline else []):
            self.field(f"extent_m2.{day}", NUMERIC, f"m2 {AFFECTED[self.hazard]} on {day}",
                       read(step, "areas_m2", k))
        self.field("peak_date", EXACT, "the first date of the largest extent, YYYY-MM-DD",
                   lambda r: r[step]["peak_date"])

    # Figures --------------------------------------------------------------------------------------
    def temporal_panel(self) -> None:
        timeline, masks = self._dated()
        step = self.plan.call("viz_temporal_panel", layers=[ref(m, "path") for m in masks], dates=timeline.days,
                              title=f"{self.event['place']}: area {AFFECTED[self.hazard]} by date")
        stems = sorted({MASK_STEMS[self.plan.steps[m][0]] for m in masks})
        self.figure("temporal_panel", step, {"kind": "temporal_panel", "data_layers": [], "workspace_layers": stems,
                                             "dates": timeline.days},
                    f"the area {AFFECTED[self.hazard]} mapped on each acquisition date, in date order")

    def extent_chart(self) -> None:
        step = self.evidence()
        chart = self.plan.call("viz_line_chart", x_labels=ref(step, "dates"),
                               series=[{"name": f"area {AFFECTED[self.hazard]}", "values": ref(step, "areas_m2")}],
                               value_label="m2", title="Mapped extent by date")
        days = self.timeline.days if self.timeline else []
        self.figure("chart", chart, {"kind": "line_chart", "values_of": [f"extent_m2.{day}" for day in days],
                                     "values_key": "series.0.values"},
                    "line chart of the mapped extent (m2) on each date, in date order")

    def damage_map(self, with_map_elements: bool = False) -> None:
        s, place = self.sensor, self.event["place"]
        step = self.plan.call("viz_damage_map", image=f"{self.d}/post_{s}.tif", layer=ref(self.damage(), "path"),
                              title=f"Building damage, {place}")
        ask = f"buildings by damage class from the {s} pair, drawn over the post-event {s} image"
        if with_map_elements:
            step = self.plan.call("viz_add_map_elements", layer=ref(step, "path"),
                                  title=f"{place}: damage grading", north_arrow=True, scale_bar=True)
            ask += ", with a title, north arrow and scale bar"
        self.figure("damage_map", step, {"kind": "damage_map", "data_layers": [f"{self.d}/post_{s}.tif"],
                                         "workspace_layers": [DAMAGE_STEMS[s]]}, ask)

    def before_after(self) -> None:
        s = self.sensor
        layers = [f"{self.d}/pre_{s}.tif", f"{self.d}/post_{s}.tif"]
        step = self.plan.call("viz_before_after_panel", before=layers[0], after=layers[1],
                              before_label="Before", after_label="After", title=self.event["place"])
        self.figure("before_after", step, {"kind": "before_after_panel", "data_layers": layers,
                                           "workspace_layers": []}, f"the pre- and post-event {s} images side by side")

    def chart(self, counts: list[int]) -> None:
        step = self.plan.call("viz_bar_chart", labels=list(DAMAGE_CLASSES), values=[ref(c, "count") for c in counts],
                              value_label="buildings", title="Damaged buildings by class")
        self.figure("chart", step, {"kind": "bar_chart", "values_of": [f"buildings_damaged.{c}"
                                                                        for c in DAMAGE_CLASSES]},
                    "bar chart of the damaged buildings, partial then destroyed")

    def hazard_map(self) -> None:
        mask = self.mask()
        step = self.plan.call("viz_overlay_mask", image=f"{self.d}/post_s2.tif", mask=ref(mask, "path"),
                              label=AFFECTED[self.hazard])
        self.figure("hazard_map", step, {"kind": "overlay_mask", "data_layers": [f"{self.d}/post_s2.tif"],
                                         "workspace_layers": [MASK_STEMS[self.plan.steps[mask][0]]]},
                    f"the area {AFFECTED[self.hazard]} drawn over the post-event Sentinel-2 image")

    # The task ---------------------------------------------------------------------------------------
    def spec(self, category: str, opening: str, truth: Callable[[dict[str, Any]], Any]) -> TaskSpec:
        readers, figures = dict(self.readers), dict(self.figures)

        def answer(results: list[Any]) -> dict[str, Any]:
            report: dict[str, Any] = {}
            for name, read in readers.items():
                _put(report, name, read(results))
            report["figures"] = {name: results[step]["path"] for name, (step, _) in figures.items()}
            return report

        fields = list(self.fields)
        eval_spec = {"type": "report", "fields": self.fields,
                     "figures": {name: spec for name, (_, spec) in figures.items()}}
        question = (f"{opening} Answer with one JSON object holding: " + "; ".join(self.asks) +
                    ". For each figure give the 'ws/...png' path the viz tool returned.")
        fmt = ("JSON object: " + ", ".join(fields) + ", figures {" + ", ".join(figures) + "} (dotted names are "
               "nested objects)")
        layers = sorted({f"pre_{self.sensor}", f"post_{self.sensor}", "buildings", "pois", "roads", "population",
                         "pre_s2", "post_s2", "lst", "slope", "dem", "pre_optical", "post_optical"})
        return TaskSpec(category, DIMENSION, question, self.plan, answer, eval_spec, fmt, layers,
                        truth=lambda t: {k: v for k, v in truth(t).items() if k in {f.split(".")[0] for f in fields}})


class Timeline:
    """An event's acquisition dates (``scenes/<event>/timeline.json``) and the true evolution
    (``truth/<event>/timeline.json``)."""

    def __init__(self, scene_root: Path, event: dict[str, Any]):
        scenes = json.loads((Path(scene_root) / event["id"] / "timeline.json").read_text())["dates"]
        truth = json.loads((Path(scene_root).parent / "truth" / event["id"] / "timeline.json").read_text())["dates"]
        self.days = [entry["date"] for entry in scenes]
        self.cloudy = [entry["cloud_fraction"] > 0 for entry in scenes]
        # The mapped area, as in T4: the hazard's footprint, or the collapsed buildings' for shaking, wind, blast.
        key = "destroyed_area_m2" if event["hazard"] in DAMAGE_ONLY else "affected_area_m2"
        self.true_areas_m2 = [float(entry[key]) for entry in truth]

    def truth_fields(self) -> dict[str, Any]:
        evidence = reporting.area_evidence([date.fromisoformat(day) for day in self.days], self.true_areas_m2)
        return {"trend": evidence.trend, "peak_date": evidence.dates[evidence.peak_index].isoformat(),
                "extent_m2": dict(zip(self.days, self.true_areas_m2))}


def read(step: int, *keys: Any) -> Callable[[list[Any]], Any]:
    """An answer reader: the part ``keys`` of the result of plan step ``step``."""
    def reader(results: list[Any]) -> Any:
        value = results[step]
        for key in keys:
            value = value[key]
        return value

    return reader


def _put(report: dict[str, Any], name: str, value: Any) -> None:
    *parents, last = name.split(".")
    for key in parents:
        report = report.setdefault(key, {})
    report[last] = value


def truth_report(truth: dict[str, Any], shelters: list[str]) -> dict[str, Any]:
    """Every report field from the generator's truth (``tasks.truth_context``)."""
    states = list(truth["buildings"].values())
    intact = [name for name in shelters
              if truth["pois"].get(_poi_id(truth, name)) == "intact"]
    routes = [(length, name) for name in intact
              if (length := truth["route_truth"]("hospital", name)) is not None]
    best = min(routes) if routes else None
    population = truth["population_in_hazard"]
    return {"affected_area_m2": truth["hazard_area_m2"], "people_exposed": population,
            "buildings_damaged": {c: sum(s == c for s in states) for c in DAMAGE_CLASSES},
            "roads_cut": sorted(rid for rid, state in truth["roads"].items() if state != "intact"),
            "facilities_affected": sorted(truth["poi_names"][k] for k, v in truth["pois"].items() if v != "intact"),
            "recommended_shelter": best[1] if best else None, "route_length_m": best[0] if best else None,
            "water_truck_trips": -(-population * 45 // 10000)}


def _poi_id(truth: dict[str, Any], name: str) -> str | None:
    return next((pid for pid, n in truth["poi_names"].items() if n == name), None)


def report_templates(event: dict[str, Any], truth: dict[str, Any], scene_root: Path) -> list[TaskSpec]:
    """The T5 report variants of one event (see the module docstring); the trend, the extent by date and
    the temporal figures where the scene has its time series (``timeline.json``)."""
    pois = json.loads((Path(scene_root) / event["id"] / "pois.geojson").read_text())["features"]
    shelters = [f["properties"]["name"] for f in pois if f["properties"]["type"] == "shelter"]
    timeline = Timeline(scene_root, event) if (Path(scene_root) / event["id"] / "timeline.json").is_file() else None

    def expected(t: dict[str, Any]) -> dict[str, Any]:
        return {**truth_report(t, shelters), **(timeline.truth_fields() if timeline else {})}

    hazard, place = event["hazard"].replace("_", " "), event["place"]
    dated = f" The scene was imaged on {', '.join(timeline.days)}." if timeline else ""
    specs: list[TaskSpec] = []

    # OCHA Situation Report for the humanitarian coordination team: every field, optical damage.
    r = Report(event, "optical", timeline)
    r.affected_area()
    r.people_exposed()
    counts = r.buildings_damaged()
    r.roads_cut()
    r.facilities_affected()
    r.shelter_and_route()
    if timeline:
        r.trend()
    r.damage_map()
    r.before_after()
    if timeline:
        r.temporal_panel()
    r.chart(counts)
    specs.append(r.spec("sitrep_coordination", f"Write the situation report on the {hazard} at {place} for the "
                        "humanitarian coordination team (OCHA Situation Report style), assessing building damage "
                        f"from the {SENSOR_WORDS['optical']} pre/post images; single-date fields describe the "
                        f"pre/post pair.{dated}", expected))

    # The same report when clouds hide the optical images: damage (and flood water) from SAR.
    r = Report(event, "sar", timeline)
    r.affected_area()
    r.people_exposed()
    counts = r.buildings_damaged()
    r.facilities_affected()
    r.damage_map()
    r.before_after()
    r.chart(counts)
    specs.append(r.spec("sitrep_sar", f"Clouds cover {place} after the {hazard}. Write the situation report from "
                        f"the {SENSOR_WORDS['sar']} pre/post images for building damage.", expected))

    # Shelter / logistics cluster: access, shelter, water.
    r = Report(event, "optical", timeline)
    r.people_exposed()
    r.roads_cut()
    r.facilities_affected()
    r.shelter_and_route()
    r.water_trips()
    r.damage_map()
    r.hazard_map()
    specs.append(r.spec("sitrep_logistics", f"Write the access and shelter section of the situation report on the "
                        f"{hazard} at {place} for the shelter and logistics clusters (optical damage assessment).",
                        expected))

    # Flash Update for headquarters: the headline numbers and their figures.
    r = Report(event, "optical", timeline)
    r.affected_area()
    r.people_exposed()
    counts = r.buildings_damaged()
    if timeline:
        r.trend()
    r.hazard_map()
    r.chart(counts)
    if timeline:
        r.temporal_panel()
    specs.append(r.spec("flash_update", f"Write a Flash Update on the {hazard} at {place} for headquarters: the "
                        f"headline numbers and their figures (optical damage assessment).{dated}", expected))

    # The Flash Update when clouds hide the optical images: the same headline numbers from SAR.
    r = Report(event, "sar", timeline)
    r.affected_area()
    r.people_exposed()
    counts = r.buildings_damaged()
    r.hazard_map()
    r.chart(counts)
    specs.append(r.spec("flash_update_sar", f"Clouds cover {place} after the {hazard}. Write a Flash Update for "
                        f"headquarters from the {SENSOR_WORDS['sar']} pre/post images: the headline numbers and "
                        "their figures.", expected))

    # Copernicus EMS grading product: damage grades and roads on a finished map.
    r = Report(event, "optical", timeline)
    r.affected_area()
    counts = r.buildings_damaged()
    r.roads_cut()
    r.damage_map(with_map_elements=True)
    r.before_after()
    specs.append(r.spec("ems_grading", f"Produce a Copernicus EMS-style grading product for the {hazard} at "
                        f"{place}: the damage grading from the {SENSOR_WORDS['optical']} pre/post images and the "
                        "cut roads.", expected))

    # Copernicus EMS monitoring product: how the situation evolved over the acquisition dates.
    if timeline:
        r = Report(event, "optical", timeline)
        r.extent_by_date()
        r.trend()
        r.temporal_panel()
        r.extent_chart()
        specs.append(r.spec("ems_monitoring", f"Produce a Copernicus EMS-style monitoring update on the {hazard} at "
                            f"{place}.{dated} Map the area {AFFECTED[event['hazard']]} on every date (SAR where "
                            "clouds cover a date's optical images).", expected))
    return specs
