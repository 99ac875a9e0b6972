"""T4 temporal evolution reasoning: task templates over an event's five acquisition dates (``timeseries.py``).

After Copernicus EMS monitoring products, a T4 task asks how the situation changed between dates: the peak
extent and its date, the growth and recession rates, the trend class (``report_extract_evidence``'s rule),
the change between two dates, the buildings affected at any time, when a road or a facility was cut off and
when it reopened, and the share of damaged buildings repaired by the recovery date. Each gold plan maps the
hazard on every date with the detector that sees it there -- on a date whose optical images are clouded
(``cloud_fraction`` > 0 in the layer's manifest entry) only SAR does -- and the truth is the generator's
(``truth/<event>/timeline.json``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

from gauntlet.mcp_servers.disaster import reporting
from gauntlet.mcp_servers.disaster.tasks import (AFFECTED, DAMAGE_ONLY, FLOOD_LIKE, NUMERIC, Plan, TaskSpec, at,
                                                 first_xy, ref)
from gauntlet.mcp_servers.disaster.timeseries import ONSET, PEAK, PHASES, RECESSION, RECOVERY

DATES = range(len(PHASES))
EXACT = {"type": "exact"}
LAVA_THRESHOLD_K = 330.0  # cooling lava stays above it long after the eruption; the ground stays below
SCAR_THRESHOLD_K = 311.0  # a burn scar is 12 K warmer than the unburned ground (305 K)
MIN_DAMAGED_FOR_SHARE = 5
MAX_PLAN_STEPS = 31  # a gold plan and its answer fit ToolTaskEnv's default 32 steps


class DateMasks:
    """Plan steps mapping the hazard on each date (``t{k}_*`` layers), sharing the pre-event steps."""

    def __init__(self, plan: Plan, event: str, hazard: str, cloudy: list[bool]):
        self.plan, self.event, self.hazard, self.cloudy = plan, event, hazard, cloudy
        self.d = f"data/{event}"
        self._pre: dict[str, int] = {}

    def _layer(self, k: int, sensor: str) -> str:
        return f"{self.d}/t{k}_{sensor}.tif"

    def _pre_water(self, sensor: str) -> int:
        if sensor not in self._pre:
            tool = "seg_water_sar" if sensor == "sar" else "seg_water_mndwi"
            self._pre[sensor] = self.plan.call(tool, image=self._layer(0, sensor))
        return self._pre[sensor]

    def damage(self, k: int) -> int:
        """Per-building damage on date k against the pre date (the SAR pair where date k is clouded)."""
        sensor = "sar" if self.cloudy[k] else "optical"
        tool = "seg_building_damage_sar" if self.cloudy[k] else "seg_building_damage"
        return self.plan.call(tool, pre_image=self._layer(0, sensor), post_image=self._layer(k, sensor),
                              buildings=f"{self.d}/buildings.geojson")

    def destroyed(self, k: int) -> int:
        hit = self.plan.call("vec_filter_attribute", layer=ref(self.damage(k), "path"), key="damage", op="==",
                             value="destroyed")
        return self.plan.call("vec_rasterize", layer=ref(hit, "path"), like=f"{self.d}/dem.tif")

    def damaged(self, k: int) -> int:
        """The 10 m mask of the footprints of buildings damaged (partly or destroyed) on date k."""
        hit = self.plan.call("vec_filter_attribute", layer=ref(self.damage(k), "path"), key="damage", op="in",
                             value=["partial", "destroyed"])
        return self.plan.call("vec_rasterize", layer=ref(hit, "path"), like=f"{self.d}/dem.tif")

    def hazard_mask(self, k: int) -> int:
        """The 10 m mask of the area the hazard covers on date k."""
        p, h = self.plan, self.hazard
        if h in FLOOD_LIKE:
            sensor = "sar" if self.cloudy[k] else "s2"
            tool = "seg_water_sar" if sensor == "sar" else "seg_water_mndwi"
            # on the pre date the water map is the reference itself: mapped once (the extent is then empty)
            post = self._pre_water(sensor) if k == 0 else p.call(tool, image=self._layer(k, sensor))
            return p.call("seg_flood_extent", pre_water=ref(self._pre_water(sensor), "path"),
                          post_water=ref(post, "path"))
        if h == "wildfire":
            return p.call("seg_thermal_anomaly", image=self._layer(k, "lst"), threshold_k=SCAR_THRESHOLD_K)
        if h == "volcanic_eruption":
            return p.call("seg_thermal_anomaly", image=self._layer(k, "lst"), threshold_k=LAVA_THRESHOLD_K)
        if h == "landslide":
            if self.cloudy[k]:
                return p.call("seg_change_sar", pre_image=self._layer(0, "sar"), post_image=self._layer(k, "sar"))
            return p.call("seg_landslide", pre_image=self._layer(0, "s2"), post_image=self._layer(k, "s2"),
                          slope=f"{self.d}/slope.tif", min_slope_deg=2.0)
        return self.destroyed(k)

    def road_states(self, k: int) -> int:
        """The road layer with each segment's state on date k (the rule of ``tasks.road_states``)."""
        roads = f"{self.d}/roads.geojson"
        if self.hazard in FLOOD_LIKE:
            return self.plan.call("seg_road_damage", roads=roads, water_mask=ref(self.hazard_mask(k), "path"))
        if self.hazard in ("volcanic_eruption", "landslide"):
            return self.plan.call("seg_road_damage", roads=roads, blocking_mask=ref(self.hazard_mask(k), "path"))
        debris = self.plan.call("mask_dilate", mask=ref(self.destroyed(k), "path"), pixels=2)
        return self.plan.call("seg_road_damage", roads=roads, blocking_mask=ref(debris, "path"))


def _first_cut_and_reopening(states: list[tuple[str, bool]]) -> str:
    """'cut <date>, reopened <date>' from (date, cut?) in date order ('never' where it does not happen)."""
    first = next((k for k, (_, cut) in enumerate(states) if cut), None)
    if first is None:
        return "never cut"
    reopened = next((day for day, cut in states[first + 1:] if not cut), "never")
    return f"cut {states[first][0]}, reopened {reopened}"


def _truth_span(span: dict[str, str | None] | None) -> str:
    if span is None:
        return "never cut"
    return f"cut {span['cut']}, reopened {span['reopened'] or 'never'}"


def temporal_templates(event: dict[str, Any], scene_root: Path) -> list[TaskSpec]:
    """The T4 templates of one event whose scene (with its time series) is under ``scene_root``."""
    eid, hazard, place = event["id"], event["hazard"], event["place"]
    timeline = json.loads((scene_root / eid / "timeline.json").read_text())
    truth = json.loads((scene_root.parent / "truth" / eid / "timeline.json").read_text())
    days = [entry["date"] for entry in timeline["dates"]]
    cloudy = [entry["cloud_fraction"] > 0 for entry in timeline["dates"]]
    sensors = ["optical", "s2", "sar"] + (["lst"] if "lst" in timeline["dates"][0]["layers"] else [])
    layers = [f"t{k}_{s}" for k in DATES for s in sensors] + ["slope", "dem", "buildings", "roads", "pois"]
    what = hazard.replace("_", " ")
    covered = AFFECTED[hazard]
    listed = ", ".join(f"{day} ({PHASES[k]})" for k, day in enumerate(days))
    # The area the questions ask about: the hazard's footprint, or for shaking, wind and blast (as in T1) the
    # footprints of the collapsed buildings.
    area_key = "destroyed_area_m2" if hazard in DAMAGE_ONLY else "affected_area_m2"
    areas = [entry[area_key] for entry in truth["dates"]]
    evidence = reporting.area_evidence([date.fromisoformat(day) for day in days], areas)
    true_facts: dict[str, Any] = {"peak_area_m2": evidence.areas_m2[evidence.peak_index],
                  "peak_date": evidence.dates[evidence.peak_index].isoformat(), "trend": evidence.trend,
                  "growth_rate_m2_per_day": evidence.growth_rate_m2_per_day,
                  "recession_rate_m2_per_day": evidence.recession_rate_m2_per_day}
    specs: list[TaskSpec] = []

    def evidence_plan(dates: list[int]) -> tuple[Plan, int]:
        p = Plan()
        masks = DateMasks(p, eid, hazard, cloudy)
        steps = [masks.hazard_mask(k) for k in dates]
        last = p.call("report_extract_evidence", masks=[ref(step, "path") for step in steps],
                      dates=[days[k] for k in dates])
        return p, last

    intro = f"The {what} at {place} was imaged on {listed}."
    for category, key, spec, fmt, question in (
            ("t4_peak_extent", "peak_area_m2", NUMERIC, "number (m2)",
             f"What was the largest area (m2) {covered} on any of these dates?"),
            ("t4_peak_date", "peak_date", EXACT, "date YYYY-MM-DD",
             f"On which of these dates did the area {covered} peak (the first date of the largest extent)?"),
            ("t4_trend", "trend", EXACT, "expanding | shrinking | expand-then-recede | mixed",
             f"Classify how the area {covered} evolved over the dates: expanding, shrinking, expand-then-recede or "
             "mixed (a step counts when it changes the area by more than 1% of the peak area)."),
            ("t4_growth_rate", "growth_rate_m2_per_day", NUMERIC, "number (m2 per day)",
             f"At what mean rate (m2 per day) did the area {covered} grow from the first date to the peak?"),
            ("t4_recession_rate", "recession_rate_m2_per_day", NUMERIC, "number (m2 per day)",
             f"At what mean rate (m2 per day) did the area {covered} shrink from the peak to the last date?")):
        truth_value = true_facts[key]
        if category == "t4_recession_rate" and truth_value <= 0:
            continue  # nothing recedes (fire scars, lava, rubble): the question has no content
        p, last = evidence_plan(list(DATES))
        specs.append(TaskSpec(category, "T4", f"{intro} {question}", p, at(last, _field(key)), spec, fmt, layers,
                              truth=_constant(truth_value)))

    p, last = evidence_plan([ONSET, RECESSION])
    specs.append(TaskSpec("t4_extent_change", "T4", f"{intro} By how much (m2) did the area {covered} change "
                          f"from {days[ONSET]} to {days[RECESSION]} (negative if it shrank)?", p,
                          at(last, lambda r: r["steps"][0]["change_m2"]), NUMERIC, "number (m2, signed)", layers,
                          truth=lambda t: areas[RECESSION] - areas[ONSET]))

    # Buildings affected at any time: the union over the dates of each date's affected area.
    p = Plan()
    masks = DateMasks(p, eid, hazard, cloudy)
    union = None
    for k in (ONSET, PEAK, RECESSION, RECOVERY):
        step = masks.damaged(k) if hazard in DAMAGE_ONLY else masks.hazard_mask(k)
        union = step if union is None else p.call("mask_union", mask_a=ref(union, "path"), mask_b=ref(step, "path"))
    assert union is not None
    if hazard in FLOOD_LIKE or hazard == "wildfire":  # a roof is never seen as water or scar: grow by a cell
        union = p.call("mask_dilate", mask=ref(union, "path"), pixels=1)
    if hazard == "tropical_cyclone":  # the wind damages buildings the surge never reaches; damage only grows
        union = p.call("mask_union", mask_a=ref(union, "path"), mask_b=ref(masks.damaged(PEAK), "path"))
    inside = p.call("vec_select_in_mask", layer=f"data/{eid}/buildings.geojson", mask=ref(union, "path"))
    last = p.call("vec_count", layer=ref(inside, "path"))
    ever = {bid for entry in truth["dates"] for bid in entry["buildings_affected"]}
    specs.append(TaskSpec("t4_buildings_affected_any_time", "T4", f"{intro} How many buildings did the {what} "
                          "affect (covered or damaged) on at least one of these dates?", p,
                          at(last, lambda r: r["value"]), NUMERIC, "integer", layers, truth=lambda t: len(ever)))

    # A road that was cut: when, and when it reopened.
    road = next(iter(sorted(truth["roads_cut"])), None)
    if road is not None:
        p = Plan()
        masks = DateMasks(p, eid, hazard, cloudy)
        road_reads = []
        for k in (ONSET, PEAK, RECESSION, RECOVERY):
            one = p.call("vec_filter_attribute", layer=ref(masks.road_states(k), "path"), key="id", op="==",
                         value=road)
            road_reads.append((k, p.call("vec_get_features", layer=ref(one, "path"), limit=1)))
        specs.append(TaskSpec(
            "t4_road_cut", "T4", f"{intro} Every road was usable on {days[0]}. When was road segment {road} first "
            "cut (flooded or blocked), and on which later date was it usable again? Answer 'cut YYYY-MM-DD, reopened "
            "YYYY-MM-DD' ('reopened never' if it stayed cut; 'never cut' if it never was).", p,
            lambda r: _first_cut_and_reopening(
                [(days[k], r[step]["items"][0]["properties"]["state"] != "intact") for k, step in road_reads]),
            EXACT, "'cut <date>, reopened <date or never>'", layers,
            truth=_constant(_truth_span(truth["roads_cut"].get(road)))))

    # A facility cut off from the hospital by road: when, and when it was reachable again.
    facility = next(iter(sorted(truth["pois_cut"])), None)
    if facility is not None:
        p = Plan()
        masks = DateMasks(p, eid, hazard, cloudy)
        hospital = p.call("poi_search", pois=f"data/{eid}/pois.geojson", type="hospital")
        facility_reads = []
        for k in (ONSET, PEAK, RECESSION, RECOVERY):
            step = p.call("vec_network_distance", roads=ref(masks.road_states(k), "path"), origin=first_xy(hospital),
                          destinations=f"data/{eid}/pois.geojson", avoid_states=["flooded", "blocked"])
            facility_reads.append((k, step))
        name = _poi_name(scene_root / eid / "pois.geojson", facility)

        def distance(result: dict[str, Any]) -> float | None:
            return next(item["network_distance_m"] for item in result["items"] if item["id"] == facility)

        specs.append(TaskSpec(
            "t4_facility_cut_off", "T4", f"{intro} On {days[0]} every facility could be reached by road from the "
            f"hospital. When was {name} first cut off from the hospital (no road route avoiding flooded and "
            "blocked roads), and on which later date could it be reached again? Answer 'cut YYYY-MM-DD, reopened "
            "YYYY-MM-DD' ('reopened never' if it stayed cut off; 'never cut' if it never was).", p,
            lambda r: _first_cut_and_reopening([(days[k], distance(r[step]) is None) for k, step in facility_reads]),
            EXACT, "'cut <date>, reopened <date or never>'", layers + ["roads", "pois"],
            truth=_constant(_truth_span(truth["pois_cut"].get(facility)))))

    # Recovery: the share of the buildings damaged at the peak that are repaired by the recovery date.
    damaged_peak = truth["dates"][PEAK]["buildings_damaged"]
    if len(damaged_peak) >= MIN_DAMAGED_FOR_SHARE:
        p = Plan()
        masks = DateMasks(p, eid, hazard, cloudy)
        at_peak = p.call("poi_count_by", layer=ref(masks.damage(PEAK), "path"), key="damage")
        at_recovery = p.call("poi_count_by", layer=ref(masks.damage(RECOVERY), "path"), key="damage")

        def share(r: list[Any], at_peak: int = at_peak, at_recovery: int = at_recovery) -> float:
            before = sum(r[at_peak]["counts"].get(s, 0) for s in ("partial", "destroyed"))
            after = sum(r[at_recovery]["counts"].get(s, 0) for s in ("partial", "destroyed"))
            return round(100.0 * max(before - after, 0) / before, 2) if before else 0.0

        repaired = len(truth["dates"][RECOVERY]["buildings_repaired"])
        specs.append(TaskSpec(
            "t4_recovery_share", "T4", f"{intro} What percentage of the buildings damaged (partly or destroyed) on "
            f"{days[PEAK]} had been repaired by {days[RECOVERY]}? Compare each date's images with those of "
            f"{days[0]} inside the building footprints.", p, share, NUMERIC, "number (percent)", layers,
            truth=lambda t: round(100.0 * repaired / len(damaged_peak), 2)))
    too_long = [spec.category for spec in specs if len(spec.plan.steps) > MAX_PLAN_STEPS]
    assert not too_long, f"gold plans longer than {MAX_PLAN_STEPS} steps: {too_long}"
    return specs


def _field(key: str) -> Callable[[dict[str, Any]], Any]:
    return lambda result: result[key]


def _constant(value: Any) -> Callable[[dict[str, Any]], Any]:
    """A truth reader that ignores the truth context: T4 truths come from the event's timeline."""
    return lambda context: value


def _poi_name(path: Path, poi_id: str) -> str:
    for feature in json.loads(path.read_text())["features"]:
        if feature["properties"]["id"] == poi_id:
            return str(feature["properties"]["name"])
    raise KeyError(poi_id)
