"""Task suites in DORA's format, with gold trajectories executed through a real MCP client session.

A task template builds an expert *plan*: tool calls whose arguments may refer to earlier results
(``{"$ref": [step, key, ...]}``). ``execute_plan`` runs the plan through an MCP client session,
resolving the references, and records the gold trajectory ``[{call, args, obs}]``; the final
answer is read from the results. Dimensions: T1 perception & assessment, T2 spatial relational
analysis, T3 operational planning. Each task is a ``gauntlet.tasks.ToolTask`` whose ``metadata``
holds the DORA fields: ``dimension``, ``category``, ``tool_plan``, ``eval_spec`` (the DORA answer
check), ``answer_format``, ``truth_answer`` (the answer computed from the generator's truth where
the template defines one) and the event.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# 5: T4 plans map the pre date's water once (no repeated call); 4: T4 and T5 (time series, situation
# reports); 3: the hard level, more T2/T3 templates;
# 2: object-detector, SAR-damage and Voronoi templates; polygon answers up to 60,000 chars
TASKS_VERSION = "5"
# 3: T2 road length cut and facilities in the affected area, T3 rescue travel time; hard-level suites
SUITE_FILE = "tasks.jsonl"
# An answer is one agent action. The suite raises ToolTaskEnv's action and observation limit to
# MAX_TEXT_LENGTH (registration.py), so polygon outlines fit; an answer must leave room for the call's JSON.
MAX_TEXT_LENGTH = 65536
MAX_ANSWER_CHARS = 60000
# The suite's step budget (ToolTaskEnv's max_steps, registration.py): the longest gold trajectories (situation
# reports, multi-date timelines) take over 32 calls; a task whose gold calls and answer do not fit is skipped.
MAX_STEPS = 64
FLOOD_LIKE = ("flood", "dam_failure", "tsunami", "tropical_cyclone")
DAMAGE_ONLY = ("earthquake", "tornado", "industrial_explosion")


# DORA's tasks per dimension (the reference's task taxonomy: 515 tasks) and the size of suite the issue
# asks for: every dimension must hold at least its DORA count scaled to MIN_SUITE_TASKS (``proportion_check``).
DORA_TASKS = {"T1": 132, "T2": 108, "T3": 100, "T4": 61, "T5": 114}
MIN_SUITE_TASKS = 1500


def proportion_check(counts: dict[str, int]) -> dict[str, dict[str, float]]:
    """Per DORA dimension: the suite's ``count`` and ``share``, DORA's share, the ``minimum`` count (DORA's
    count scaled to ``MIN_SUITE_TASKS``, rounded up) and the ``shortfall`` (0 when the dimension holds enough).
    The minima add up to at least ``MIN_SUITE_TASKS``, so a suite with no shortfall is large enough too."""
    total = sum(counts.values())
    dora_total = sum(DORA_TASKS.values())
    out = {}
    for dim, dora in DORA_TASKS.items():
        minimum = -(-dora * MIN_SUITE_TASKS // dora_total)
        count = counts.get(dim, 0)
        out[dim] = {"count": count, "share": count / total if total else 0.0, "dora_share": dora / dora_total,
                    "minimum": minimum, "shortfall": max(0, minimum - count)}
    return out


class PlanFailed(RuntimeError):
    """A plan step returned a tool error (the template does not apply to this scene)."""


@dataclass
class Plan:
    """An expert tool plan under construction; ``call`` returns the step index for references."""

    steps: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def call(self, tool: str, **args: Any) -> int:
        self.steps.append((tool, args))
        return len(self.steps) - 1


def ref(step: int, *keys: Any) -> dict[str, Any]:
    return {"$ref": [step, *keys]}


def at(step: int, read: Callable[[Any], Any]) -> Callable[[list[Any]], Any]:
    """A template's answer reader: ``read`` applied to the result of plan step ``step``."""
    return lambda results: read(results[step])


def first_xy(step: int) -> list[dict[str, Any]]:
    """References to [x, y] of the first item a search step returned."""
    return [ref(step, "items", 0, "x"), ref(step, "items", 0, "y")]


def resolve(value: Any, results: list[Any]) -> Any:
    """``value`` with every ``{"$ref": [step, key...]}`` replaced by that part of an earlier result."""
    if isinstance(value, dict) and set(value) == {"$ref"}:
        step, *keys = value["$ref"]
        out = results[step]
        for key in keys:
            out = out[key]
        return out
    if isinstance(value, dict):
        return {k: resolve(v, results) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, results) for v in value]
    return value


@dataclass
class TaskSpec:
    """A template instantiated for one event: question, plan, answer reader and eval spec."""

    category: str
    dimension: str
    question: str
    plan: Plan
    answer: Callable[[list[Any]], Any]
    eval_spec: dict[str, Any]
    answer_format: str
    layers: list[str]
    truth: Callable[[dict[str, Any]], Any] | None = None


# Recipes ------------------------------------------------------------------------------------------
def affected_mask(plan: Plan, event: str, hazard: str) -> int:
    """Steps producing the 10 m mask of the area the hazard affected; returns the step index."""
    d = f"data/{event}"
    if hazard in FLOOD_LIKE:
        pre = plan.call("seg_water_mndwi", image=f"{d}/pre_s2.tif")
        post = plan.call("seg_water_mndwi", image=f"{d}/post_s2.tif")
        return plan.call("seg_flood_extent", pre_water=ref(pre, "path"), post_water=ref(post, "path"))
    if hazard == "wildfire":
        return plan.call("seg_burn_severity", pre_image=f"{d}/pre_s2.tif", post_image=f"{d}/post_s2.tif")
    if hazard == "volcanic_eruption":
        return plan.call("seg_thermal_anomaly", image=f"{d}/lst.tif", threshold_k=350.0)
    if hazard == "landslide":
        return plan.call("seg_landslide", pre_image=f"{d}/pre_s2.tif", post_image=f"{d}/post_s2.tif",
                         slope=f"{d}/slope.tif", min_slope_deg=2.0)
    return destroyed_mask(plan, event)


def destroyed_mask(plan: Plan, event: str) -> int:
    """Steps producing the 10 m mask of destroyed building footprints; returns the step index."""
    d = f"data/{event}"
    damage = plan.call("seg_building_damage", pre_image=f"{d}/pre_optical.tif", post_image=f"{d}/post_optical.tif",
                       buildings=f"{d}/buildings.geojson")
    destroyed = plan.call("vec_filter_attribute", layer=ref(damage, "path"), key="damage", op="==", value="destroyed")
    return plan.call("vec_rasterize", layer=ref(destroyed, "path"), like=f"{d}/dem.tif")


def exposure_mask(plan: Plan, event: str, hazard: str) -> int:
    """The affected mask, grown by one 10 m cell where the hazard surrounds buildings without covering
    their roofs (water, fire): a mixed roof pixel is not detected as water or burned."""
    mask = affected_mask(plan, event, hazard)
    if hazard in FLOOD_LIKE or hazard == "wildfire":
        return plan.call("mask_dilate", mask=ref(mask, "path"), pixels=1)
    return mask


def road_states(plan: Plan, event: str, hazard: str) -> int:
    """Steps producing the road layer with per-segment state; returns the step index.

    Water floods roads; lava and landslide deposits block them; elsewhere (fire, shaking, wind, blast)
    what blocks a road is the debris of collapsed buildings, so their footprints grown by 20 m block."""
    roads = f"data/{event}/roads.geojson"
    if hazard in FLOOD_LIKE:
        mask = affected_mask(plan, event, hazard)
        return plan.call("seg_road_damage", roads=roads, water_mask=ref(mask, "path"))
    if hazard in ("volcanic_eruption", "landslide"):
        mask = affected_mask(plan, event, hazard)
        return plan.call("seg_road_damage", roads=roads, blocking_mask=ref(mask, "path"))
    debris = plan.call("mask_dilate", mask=ref(destroyed_mask(plan, event), "path"), pixels=2)
    return plan.call("seg_road_damage", roads=roads, blocking_mask=ref(debris, "path"))


def route_plan(event: str, hazard: str, tool: str, origin: dict[str, str]) -> tuple[Plan, int]:
    """Road states, the origin facility and the hospital found by search, then ``tool`` between them."""
    plan = Plan()
    roads = road_states(plan, event, hazard)
    start = plan.call("poi_search", pois=f"data/{event}/pois.geojson", **origin)
    hospital = plan.call("poi_search", pois=f"data/{event}/pois.geojson", type="hospital")
    last = plan.call(tool, roads=ref(roads, "path"), start=first_xy(start), end=first_xy(hospital),
                     avoid_states=["flooded", "blocked"])
    return plan, last


AFFECTED = {"flood": "newly flooded", "dam_failure": "newly flooded", "tsunami": "inundated",
            "tropical_cyclone": "flooded by the storm surge", "wildfire": "burned",
            "volcanic_eruption": "covered by lava",
            "landslide": "hit by landslides", "earthquake": "covered by collapsed buildings",
            "tornado": "covered by collapsed buildings", "industrial_explosion": "covered by collapsed buildings"}
NUMERIC = {"type": "numeric"}
RESCUE_SPEED_KMH = 30.0  # an emergency vehicle's average speed on damaged urban roads (the T3 travel-time task)
# The building-damage detector of each sensor pair (pre- and post-event images of one sensor).
DAMAGE_DETECTORS = {"optical": "seg_building_damage", "sar": "seg_building_damage_sar"}


def destroyed_buildings(event: str, sensor: str, category: str, question: str) -> TaskSpec:
    """T1 "how many buildings were destroyed?", read by the damage detector of the ``sensor`` pair
    ("optical" or "sar") inside the building footprints; the question says which pair to compare."""
    d = f"data/{event}"
    p = Plan()
    dmg = p.call(DAMAGE_DETECTORS[sensor], pre_image=f"{d}/pre_{sensor}.tif", post_image=f"{d}/post_{sensor}.tif",
                 buildings=f"{d}/buildings.geojson")
    last = p.call("poi_count_by", layer=ref(dmg, "path"), key="damage")
    return TaskSpec(category, "T1", question, p, at(last, lambda r: r["counts"].get("destroyed", 0)), NUMERIC,
                    "integer", [f"pre_{sensor}", f"post_{sensor}", "buildings"],
                    truth=lambda t: sum(v == "destroyed" for v in t["buildings"].values()))


def _templates(event: dict[str, Any]) -> list[TaskSpec]:
    eid, hazard, place = event["id"], event["hazard"], event["place"]
    d = f"data/{eid}"
    what = AFFECTED[hazard]
    specs: list[TaskSpec] = []

    # T1 perception & assessment
    p = Plan()
    m = affected_mask(p, eid, hazard)
    last = p.call("ras_area_m2", mask=ref(m, "path"))
    specs.append(TaskSpec("affected_area", "T1", f"After the {hazard.replace('_', ' ')} at {place}, what area (m2) "
                          f"was {what}? Use the 10 m imagery.", p, at(last, lambda r: r["value"]), NUMERIC,
                          "number (m2)", ["pre_s2", "post_s2", "lst", "slope", "dem", "pre_optical", "post_optical"],
                          truth=lambda t: t["hazard_area_m2"]))
    specs.append(destroyed_buildings(eid, "optical", "destroyed_buildings", f"How many buildings were destroyed at "
                                     f"{place}? Compare the pre- and post-event optical images inside the building "
                                     "footprints."))
    p = Plan()
    dmg = p.call("seg_building_damage", pre_image=f"{d}/pre_optical.tif", post_image=f"{d}/post_optical.tif",
                 buildings=f"{d}/buildings.geojson")
    hit = p.call("vec_filter_attribute", layer=ref(dmg, "path"), key="damage", op="in", value=["partial", "destroyed"])
    sel = p.call("vec_select_intersecting", layer=f"{d}/pois.geojson", overlay=ref(hit, "path"))
    last = p.call("poi_search", pois=ref(sel, "path"))
    specs.append(TaskSpec("damaged_facilities", "T1", f"Which facilities (hospitals, schools, shelters, fire and "
                          f"police stations) at {place} are in damaged buildings? Give their names.", p,
                          at(last, lambda r: sorted(item["name"] for item in r["items"])), {"type": "set"},
                          "list of names", ["pre_optical", "post_optical", "buildings", "pois"],
                          truth=lambda t: sorted(t["poi_names"][k] for k, v in t["pois"].items() if v != "intact")))
    if hazard in FLOOD_LIKE:
        p = Plan()
        pre = p.call("seg_water_sar", image=f"{d}/pre_sar.tif")
        post = p.call("seg_water_sar", image=f"{d}/post_sar.tif")
        fl = p.call("seg_flood_extent", pre_water=ref(pre, "path"), post_water=ref(post, "path"))
        last = p.call("ras_area_m2", mask=ref(fl, "path"))
        specs.append(TaskSpec("sar_flood_area", "T1", f"Using only the SAR images (they see through cloud), what "
                              f"area (m2) at {place} is under water after the event that was dry before?", p,
                              at(last, lambda r: r["value"]), NUMERIC, "number (m2)", ["pre_sar", "post_sar"],
                              truth=lambda t: t["hazard_area_m2"]))

    # T2 spatial relational analysis
    p = Plan()
    m = exposure_mask(p, eid, hazard)
    last = p.call("poi_population_exposed", population=f"{d}/population.tif", mask=ref(m, "path"))
    specs.append(TaskSpec("exposed_population", "T2", f"How many residents of {place} live in the area {what}?", p,
                          at(last, lambda r: r["value"]), NUMERIC, "number of people",
                          ["pre_s2", "post_s2", "lst", "slope", "population", "pre_optical", "post_optical"],
                          truth=lambda t: t["population_in_hazard"]))
    p = Plan()
    m = affected_mask(p, eid, hazard)
    last = p.call("mask_components", mask=ref(m, "path"))
    specs.append(TaskSpec("largest_zone_centroid", "T2", f"Where is the centroid of the largest connected area "
                          f"{what} at {place}? Give [x, y] in the scene's UTM CRS.", p,
                          at(last, lambda r: [r["items"][0]["x"], r["items"][0]["y"]]),
                          {"type": "point", "pixel_size_m": 10.0, "max_pixels": 20}, "[x, y] (m, scene CRS)",
                          ["pre_s2", "post_s2", "lst", "slope", "dem"]))
    p = Plan()
    m = affected_mask(p, eid, hazard)
    big = p.call("mask_largest_component", mask=ref(m, "path"))
    poly = p.call("ras_vectorize", mask=ref(big, "path"))
    largest = p.call("vec_largest_polygon", layer=ref(poly, "path"))
    simple = p.call("vec_simplify", layer=ref(largest, "path"), tolerance_m=15.0)
    last = p.call("vec_get_features", layer=ref(simple, "path"), limit=1)
    specs.append(TaskSpec("largest_zone_polygon", "T2", f"Outline the largest connected area {what} at {place} as "
                          "a GeoJSON polygon in the scene's UTM CRS.", p,
                          at(last, lambda r: r["items"][0]["geometry"]), {"type": "polygon", "min_iou": 0.5},
                          "GeoJSON Polygon geometry", ["pre_s2", "post_s2", "lst", "slope", "dem"]))
    p = Plan()
    m = affected_mask(p, eid, hazard)
    poly = p.call("ras_vectorize", mask=ref(m, "path"))
    near = p.call("vec_within_distance", layer=f"{d}/pois.geojson", reference=ref(poly, "path"), distance_m=500.0)
    last = p.call("poi_count_by", layer=ref(near, "path"), key="type")
    specs.append(TaskSpec("schools_near_hazard", "T2", f"How many schools at {place} lie within 500 m of the area "
                          f"{what}?", p, at(last, lambda r: r["counts"].get("school", 0)), NUMERIC, "integer",
                          ["pre_s2", "post_s2", "lst", "slope", "dem", "pois"]))
    p = Plan()
    m = affected_mask(p, eid, hazard)
    masked = p.call("ras_mask_apply", image=f"{d}/population.tif", mask=ref(m, "path"))
    last = p.call("ras_zonal_stats", image=ref(masked, "path"), zones=f"{d}/admin.geojson", id_field="name")
    specs.append(TaskSpec("district_ranking", "T2", f"Rank the districts of {place} by the number of residents in "
                          f"the area {what}, most first.", p,
                          at(last, lambda r: [z["zone"] for z in sorted(r["items"], key=lambda z: -z["sum"])]),
                          {"type": "kendall"}, "list of district names, most exposed first",
                          ["pre_s2", "post_s2", "lst", "slope", "population", "admin"]))
    p = Plan()
    roads = road_states(p, eid, hazard)
    cut = p.call("vec_filter_attribute", layer=ref(roads, "path"), key="state", op="in", value=["flooded", "blocked"])
    last = p.call("vec_length_m", layer=ref(cut, "path"))
    specs.append(TaskSpec("road_length_cut", "T2", f"What total length (m) of the road network of {place} is flooded "
                          "or blocked after the event?", p, at(last, lambda r: r["value"]), NUMERIC, "number (m)",
                          ["roads", "pre_s2", "post_s2", "lst", "slope", "dem", "pre_optical", "post_optical",
                           "buildings"], truth=lambda t: t["road_cut_length_m"]))
    if hazard not in DAMAGE_ONLY:
        grown = hazard in FLOOD_LIKE or hazard == "wildfire"
        p = Plan()
        m = exposure_mask(p, eid, hazard)
        inside = p.call("vec_select_in_mask", layer=f"{d}/pois.geojson", mask=ref(m, "path"))
        last = p.call("poi_search", pois=ref(inside, "path"))
        edge = " or within one 10 m cell of it" if grown else ""
        specs.append(TaskSpec("facilities_in_affected_area", "T2", f"Which facilities (hospitals, schools, "
                              f"shelters, fire and police stations) at {place} stand in the area {what}{edge}? "
                              "Give their names.", p, at(last, lambda r: sorted(item["name"] for item in r["items"])),
                              {"type": "set"}, "list of names", ["pre_s2", "post_s2", "lst", "slope", "pois"],
                              truth=lambda t: t["pois_in_hazard"](grown)))

    # T3 operational planning
    p, route = route_plan(eid, hazard, "vec_shortest_path", {"type": "fire_station"})
    specs.append(TaskSpec("rescue_route", "T3", f"How long (m) is the shortest road route from the fire station to "
                          f"the hospital at {place} that avoids flooded and blocked roads?", p,
                          at(route, lambda r: r["length_m"]), NUMERIC, "number (m)", ["roads", "pois"],
                          truth=lambda t: t["route_truth"]("fire_station", "hospital")))
    p, last = route_plan(eid, hazard, "vec_min_repairs", {"type": "shelter", "name_contains": "Shelter A"})
    specs.append(TaskSpec("minimum_repairs", "T3", f"What is the fewest road segments that must be cleared or "
                          f"repaired to connect Shelter A to the hospital at {place}?", p,
                          at(last, lambda r: r["count"]), NUMERIC, "integer", ["roads", "pois"],
                          truth=lambda t: t["repairs_truth"]("Shelter A", "hospital")))
    p = Plan()
    m = exposure_mask(p, eid, hazard)
    people = p.call("poi_population_exposed", population=f"{d}/population.tif", mask=ref(m, "path"))
    water = p.call("logi_supply_needs", people=ref(people, "value"), days=3.0, item="water_l")
    last = p.call("logi_truck_trips", demand=ref(water, "value"), truck_capacity=10000.0, trucks=1)
    specs.append(TaskSpec("water_trucking", "T3", f"Residents of the area {what} at {place} need drinking water for "
                          "3 days (Sphere standard). How many trips of one 10,000-litre water truck are needed?", p,
                          at(last, lambda r: r["value"]), NUMERIC, "integer (trips)",
                          ["pre_s2", "post_s2", "lst", "slope", "population"],
                          truth=lambda t: -(-t["population_in_hazard"] * 45 // 10000)))
    p = Plan()
    roads = road_states(p, eid, hazard)
    hosp = p.call("poi_search", pois=f"{d}/pois.geojson", type="hospital")
    shelters = p.call("vec_filter_attribute", layer=f"{d}/pois.geojson", key="type", op="==", value="shelter")
    last = p.call("vec_network_distance", roads=ref(roads, "path"), origin=first_xy(hosp),
                  destinations=ref(shelters, "path"), avoid_states=["flooded", "blocked"])
    specs.append(TaskSpec("shelter_ranking", "T3", f"Rank the shelters at {place} by road distance from the hospital "
                          "over usable roads, nearest first (unreachable shelters last).", p,
                          at(last, lambda r: [item["name"] for item in r["items"]]), {"type": "kendall"},
                          "list of shelter names, nearest first", ["roads", "pois"]))
    p, route = route_plan(eid, hazard, "vec_shortest_path", {"type": "fire_station"})
    minutes = p.call("logi_travel_time_min", distance_m=ref(route, "length_m"), speed_kmh=RESCUE_SPEED_KMH)
    last = p.call("calc_multiply", a=ref(minutes, "value"), b=60.0)
    specs.append(TaskSpec("rescue_travel_time", "T3", f"A fire engine drives from the fire station to the hospital at "
                          f"{place} by the shortest road route that avoids flooded and blocked roads, at an average "
                          f"{RESCUE_SPEED_KMH:g} km/h. How many seconds does the drive take?", p,
                          at(last, lambda r: r["value"]), NUMERIC, "number (s)", ["roads", "pois"],
                          truth=lambda t: _travel_s(t["route_truth"]("fire_station", "hospital"))))
    return specs


def _travel_s(length_m: float | None) -> float | None:
    """Seconds to drive ``length_m`` at the rescue speed (None when no route exists)."""
    return None if length_m is None else length_m / (RESCUE_SPEED_KMH / 3.6)


# Execution ----------------------------------------------------------------------------------------
class CallMemo:
    """Results of the calls a session has made, for the tools the server declares idempotent: the same
    call with the same arguments is answered from here (the plans of one event repeat most of their calls,
    e.g. the same water map under every flood question; a suite's gold trajectories are unchanged).

    Idempotent (no further effect when repeated) is taken to mean the same result here, which holds for
    the gold plans: every disaster tool is a function of its arguments and the data, writing
    content-named files; the one exception, ``report_summarize(writer="client_model")`` (a client's
    model writes the prose), is in no gold plan."""

    def __init__(self, idempotent: set[str]):
        self.idempotent = idempotent
        self.results: dict[tuple[str, str], Any] = {}

    @classmethod
    async def of(cls, session: Any) -> CallMemo:
        listed = await session.list_tools()
        return cls({t.name for t in listed.tools if t.annotations is not None and t.annotations.idempotentHint})

    async def call(self, session: Any, tool: str, args: dict[str, Any]) -> Any:
        if tool not in self.idempotent:
            return await session.call_tool(tool, args)
        key = (tool, json.dumps(args, sort_keys=True))
        if key not in self.results:
            self.results[key] = await session.call_tool(tool, args)
        return self.results[key].model_copy(deep=True)


async def execute_plan(session: Any, plan: Plan,
                       memo: CallMemo | None = None) -> tuple[list[dict[str, Any]], list[Any]]:
    """Run ``plan`` through an MCP client session (calls made before answered from ``memo``, if given);
    returns the trajectory and the structured results."""
    trajectory: list[dict[str, Any]] = []
    results: list[Any] = []
    for tool, args in plan.steps:
        concrete = resolve(args, results)
        result = await (memo.call(session, tool, concrete) if memo is not None else session.call_tool(tool, concrete))
        if result.isError:
            text = " ".join(getattr(block, "text", "") for block in result.content)
            raise PlanFailed(f"{tool}: {text}")
        results.append(result.structuredContent)
        trajectory.append({"call": tool, "args": concrete, "obs": result.structuredContent})
    return trajectory, results


def _eval_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The core ``EvalSpec`` closest to a DORA answer check (exact where the core has no equivalent)."""
    kind = spec["type"]
    common = {"trajectory": "ordered", "trajectory_weight": 0.3}
    if kind == "numeric":
        return {"kind": "numeric", "rel_tol": 0.2, "abs_tol": 1.0, **common}
    if kind == "set":
        return {"kind": "set", "partial_credit": True, **common}
    if kind == "kendall":
        return {"kind": "list", "partial_credit": True, **common}
    if kind == "point":
        return {"kind": "numeric", "abs_tol": spec["pixel_size_m"] * spec["max_pixels"], **common}
    return {"kind": "exact", **common}


def _manifest(scene_root: Path, event: str, layers: list[str]) -> dict[str, Any]:
    manifest = json.loads((scene_root / event / "manifest.json").read_text())
    return {"sample": event, "note": manifest["note"],
            "layers": {name: manifest["layers"][name] for name in layers if name in manifest["layers"]}}


def build_tasks(folder: Path, *, scene_root: Path, events: list[str] | None = None) -> list[Any]:
    """Instantiate every template for every event, execute the plans through the real server, and save
    the suite (tasks.jsonl) in catalogue order; progress per event on stderr."""
    import shutil
    import sys
    import time

    from gauntlet.tasks import save_suite

    scene_set = json.loads((scene_root / "events.json").read_text())
    chosen = [e for e in scene_set["events"] if events is None or e["id"] in events]
    workspace = Path(folder) / ".workspace"
    tasks: list[Any] = []
    skipped: list[dict[str, str]] = []
    started = time.perf_counter()
    for number, event in enumerate(chosen, start=1):
        built, left_out = _event_tasks(event, scene_root, scene_set.get("realism", "clean"), workspace)
        tasks.extend(built)
        skipped.extend(left_out)
        print(f"disaster tasks [{number}/{len(chosen)}] {event['id']}: {len(built)} tasks, {len(left_out)} "
              f"skipped ({time.perf_counter() - started:.0f} s so far)", file=sys.stderr, flush=True)
    shutil.rmtree(workspace, ignore_errors=True)
    save_suite(tasks, Path(folder) / SUITE_FILE)
    (Path(folder) / "skipped.json").write_text(json.dumps(skipped, indent=1, sort_keys=True))
    return tasks


def _event_tasks(event: dict[str, Any], scene_root: Path, realism: str,
                 workspace: Path) -> tuple[list[Any], list[dict[str, str]]]:
    """One event's tasks and skipped templates (``build_tasks``), its plans run through an in-memory MCP
    session of its own of the real server, writing into ``workspace``."""
    import anyio

    from gauntlet.mcp_servers.disaster.task_objects import object_templates
    from gauntlet.mcp_servers.disaster.tasks_report import report_templates
    from gauntlet.mcp_servers.disaster.tasks_temporal import temporal_templates
    from gauntlet.tasks import ToolTask

    # Tasks over hard scenes name the server that serves them and carry their level; clean tasks stay as they were.
    server_name, level = ("disaster", {}) if realism == "clean" else (f"disaster-{realism}", {"realism": realism})
    tasks: list[ToolTask] = []
    skipped: list[dict[str, str]] = []

    async def run_event() -> None:
        from mcp.shared.memory import create_connected_server_and_client_session

        from gauntlet.bridges.mcp_compat import validate_once
        from gauntlet.mcp_servers.disaster.server import build_server

        server = build_server(scene_root, workspace_dir=workspace)
        async with create_connected_server_and_client_session(server) as session:
            validate_once(session)
            memo = await CallMemo.of(session)
            truth = truth_context(scene_root, event["id"])
            for spec in [*_templates(event), *object_templates(event, truth),
                         *temporal_templates(event, scene_root), *report_templates(event, truth, scene_root)]:
                try:
                    trajectory, results = await execute_plan(session, spec.plan, memo)
                except PlanFailed as exc:
                    skipped.append({"event": event["id"], "category": spec.category, "reason": str(exc)})
                    continue
                answer = spec.answer(results)
                if len(trajectory) + 1 > MAX_STEPS:
                    skipped.append({"event": event["id"], "category": spec.category, "reason":
                                    f"{len(trajectory)} gold calls and the answer exceed {MAX_STEPS} steps"})
                    continue
                if len(json.dumps({"answer": answer})) > MAX_ANSWER_CHARS:
                    skipped.append({"event": event["id"], "category": spec.category,
                                    "reason": "the answer is too long for one agent action"})
                    continue
                tasks.append(ToolTask(
                    id=f"{event['id']}/{spec.category}", server=server_name, question=spec.question,
                    inputs=_manifest(scene_root, event["id"], spec.layers),
                    gold_trajectory=trajectory, answer=answer, eval_spec=_eval_spec(spec.eval_spec),
                    metadata={"dimension": spec.dimension, "category": spec.category, "event": event["id"],
                              "hazard": event["hazard"], "tool_plan": [{"call": t, "args": a}
                                                                       for t, a in spec.plan.steps],
                              "eval_spec": spec.eval_spec, "answer_format": spec.answer_format,
                              "truth_answer": spec.truth(truth) if spec.truth else None, **level}))

    anyio.run(run_event)
    return tasks, skipped


def truth_context(scene_root: Path, event: str) -> dict[str, Any]:
    """The generator's truth for one event, with helpers computing true routes and repairs."""
    import numpy as np

    from gauntlet.mcp_servers.disaster import rasters, vectors

    truth_dir = scene_root.parent / "truth" / event
    damage = json.loads((truth_dir / "damage.json").read_text())
    mask = rasters.read(truth_dir / "hazard_mask.tif", [1], dtype="uint8")
    population = rasters.read(scene_root / event / "population.tif", [1])
    pois, _ = vectors.read_features(scene_root / event / "pois.geojson")
    roads, _ = vectors.read_features(scene_root / event / "roads.geojson")
    bad = {rid for rid, state in damage["roads"].items() if state != "intact"}

    def locate(which: str) -> tuple[float, float]:
        for f in pois:
            if f["properties"]["type"] == which or which in f["properties"]["name"]:
                return tuple(f["geometry"]["coordinates"])
        raise KeyError(which)

    def route_truth(a: str, b: str) -> float | None:
        try:
            return round(vectors.shortest_path(vectors.road_graph(roads, bad), locate(a), locate(b))[0], 3)
        except (KeyError, vectors.VectorError):
            return None

    def repairs_truth(a: str, b: str) -> int | None:
        try:
            return len(vectors.minimum_repairs(roads, bad, locate(a), locate(b))[0])
        except (KeyError, vectors.VectorError):
            return None

    def pois_in_hazard(grown: bool) -> list[str]:
        """Names of the facilities on a true hazard cell (grown by one 8-connected cell when ``grown``)."""
        from scipy import ndimage

        area = mask.data[0] > 0
        if grown:
            area = ndimage.binary_dilation(area, np.ones((3, 3), bool))
        names = []
        for f in pois:
            row, col = rasters.world_to_pixel(mask.profile, *f["geometry"]["coordinates"])
            if 0 <= row < area.shape[0] and 0 <= col < area.shape[1] and area[row, col]:
                names.append(f["properties"]["name"])
        return sorted(names)

    from shapely.geometry import shape

    cut_m = sum(shape(f["geometry"]).length for f in roads if f["properties"]["id"] in bad)
    objects = json.loads((truth_dir / "objects.json").read_text())
    return {**damage, "objects": objects, "population_in_hazard": float(population.data[0][mask.data[0] > 0].sum()),
            "poi_names": {f["properties"]["id"]: f["properties"]["name"] for f in pois},
            "route_truth": route_truth, "repairs_truth": repairs_truth, "pois_in_hazard": pois_in_hazard,
            "road_cut_length_m": float(cut_m)}


# Suite entry points -------------------------------------------------------------------------------
def _scene_params(scene_params: dict[str, Any] | None) -> dict[str, Any]:
    """The scene entry's parameters (events, size, seed) of a suite's ``scene_params``; the realism level
    picks the entry (``data.scene_entry``), not its parameters."""
    if not scene_params or "events" not in scene_params:
        return {}
    return {"events": list(scene_params["events"]), "size_px": scene_params.get("size_px", 128),
            "seed": scene_params.get("seed", 0)}


def _realism(scene_params: dict[str, Any] | None) -> str:
    return (scene_params or {}).get("realism", "clean")


def _suite_params(scene_params: dict[str, Any] | None) -> dict[str, Any]:
    """The suite entry's ``scene_params``: the clean level's keys as they always were, plus the level."""
    level = _realism(scene_params)
    params = {**_scene_params(scene_params), **({} if level == "clean" else {"realism": level})}
    return {"scene_params": params} if params else {}


def build_suite(folder: Path, *, scene_params: dict[str, Any] | None = None) -> None:
    """Data builder of the task suite over the scenes built with ``scene_params`` (default: all events at
    the clean level; ``{"realism": "hard"}``: all events at the hard level).

    The scenes must already be built (``suite_path`` builds them first): the data cache's lock is not
    re-entrant, so one builder cannot build another's entry.
    """
    from gauntlet.datacache import entry_dir
    from gauntlet.mcp_servers.disaster.data import scene_entry
    from gauntlet.mcp_servers.disaster.scenes import CURATED_INPUTS

    root = entry_dir(*scene_entry(_realism(scene_params)), _scene_params(scene_params), CURATED_INPUTS)
    build_tasks(Path(folder), scene_root=root / "scenes")


def suite_path(scene_params: dict[str, Any] | None = None) -> Path:
    """The task suite file (scenes, then tasks, built and cached on first use): the ``disaster`` suite entry.

    ``scene_params``: ``events``, ``size_px``, ``seed`` (a subset) and ``realism`` (``clean``, the default,
    or ``hard``: the ``disaster-hard`` suite, whose tasks name the ``disaster-hard`` server)."""
    from gauntlet.datacache import ensure_built
    from gauntlet.mcp_servers.disaster.data import build_default, build_subset, scene_entry
    from gauntlet.mcp_servers.disaster.scenes import CURATED_INPUTS

    level = _realism(scene_params)
    subset = _scene_params(scene_params)
    build_subset(**subset, realism=level) if subset else build_default(level)
    # The tasks' gold answers are read off the scenes: new scenes (of either level) must mean new tasks.
    return ensure_built("disaster-tasks", tasks_version(scene_entry(level)[1]), build_suite,
                        params=_suite_params(scene_params), inputs=CURATED_INPUTS) / SUITE_FILE


def hard_suite_path(scene_params: dict[str, Any] | None = None) -> Path:
    """The hard view's task suite file (the ``disaster-hard`` suite): ``suite_path`` at the hard level."""
    return suite_path({**(scene_params or {}), "realism": "hard"})


def tasks_version(builder_version: str) -> str:
    """The task suite's cache version: the templates' version and the scenes' (builder, and for the hard
    level the hard renderer's)."""
    return f"{TASKS_VERSION}-scenes{builder_version}"
