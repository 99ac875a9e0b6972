"""Task templates built on the object detectors (vehicles, ships, storage tanks, pools, bridges), SAR
building damage and Voronoi service areas. ``object_templates(event, truth)`` returns ``TaskSpec``s
like ``tasks._templates``; a template is offered only where the scene holds what it asks about (no
"how many ships?" over dry land), which is decided from the generator's truth, never the answer.
"""

from __future__ import annotations

from typing import Any

from gauntlet.mcp_servers.disaster.tasks import FLOOD_LIKE, NUMERIC, Plan, TaskSpec, at, destroyed_buildings, ref

COVERING = (*FLOOD_LIKE, "wildfire", "volcanic_eruption", "landslide")  # hazards that bury or burn cars


def object_templates(event: dict[str, Any], truth: dict[str, Any]) -> list[TaskSpec]:
    eid, hazard, place = event["id"], event["hazard"], event["place"]
    d = f"data/{eid}"
    objects = truth["objects"]
    specs: list[TaskSpec] = []

    p = Plan()
    last = p.call("seg_vehicles", image=f"{d}/pre_optical.tif", limit=0)
    specs.append(TaskSpec("vehicle_count", "T1", f"How many vehicles are on the streets of {place} in the pre-event "
                          "optical image?", p, at(last, lambda r: r["count"]), NUMERIC, "integer", ["pre_optical"],
                          truth=lambda t: len(t["objects"]["vehicles"])))
    if hazard in COVERING:
        p = Plan()
        pre = p.call("seg_vehicles", image=f"{d}/pre_optical.tif", limit=0)
        post = p.call("seg_vehicles", image=f"{d}/post_optical.tif", limit=0)
        last = p.call("calc_subtract", a=ref(pre, "count"), b=ref(post, "count"))
        specs.append(TaskSpec("vehicles_lost", "T1", f"How many of the vehicles seen at {place} before the "
                              f"{hazard.replace('_', ' ')} can no longer be seen after it (submerged, buried or "
                              "burned)?", p, at(last, lambda r: r["value"]), NUMERIC, "integer",
                              ["pre_optical", "post_optical"],
                              truth=lambda t: sum(not v["visible_post"] for v in t["objects"]["vehicles"])))
    if objects["ships"]:
        p = Plan()
        last = p.call("seg_ships", image=f"{d}/pre_optical.tif", limit=0)
        specs.append(TaskSpec("ship_count", "T1", f"How many ships or boats are in the water at {place} in the "
                              "pre-event optical image?", p, at(last, lambda r: r["count"]), NUMERIC, "integer",
                              ["pre_optical"], truth=lambda t: len(t["objects"]["ships"])))
    if objects["tanks"]:
        p = Plan()
        last = p.call("seg_storage_tanks", image=f"{d}/pre_optical.tif", limit=50)
        specs.append(TaskSpec("storage_tank_count", "T1", f"How many circular storage tanks stand at the industrial "
                              f"site of {place}?", p, at(last, lambda r: r["count"]), NUMERIC, "integer",
                              ["pre_optical"], truth=lambda t: len(t["objects"]["tanks"])))
        p = Plan()
        last = p.call("seg_storage_tanks", image=f"{d}/pre_optical.tif", limit=50)
        specs.append(TaskSpec("largest_tank_radius", "T1", f"What is the radius (m) of the largest storage tank at "
                              f"{place}?", p,
                              at(last, lambda r: max((t["radius_m"] for t in r["items"]), default=0.0)),
                              NUMERIC, "number (m)", ["pre_optical"],
                              truth=lambda t: max(x["radius_m"] for x in t["objects"]["tanks"])))
    if objects["pools"]:
        p = Plan()
        last = p.call("seg_pools", image=f"{d}/pre_optical.tif", limit=0)
        specs.append(TaskSpec("pool_count", "T1", f"Swimming pools are emergency water sources for fire fighting. "
                              f"How many are there at {place} (pre-event optical image)?", p,
                              at(last, lambda r: r["count"]), NUMERIC, "integer", ["pre_optical"],
                              truth=lambda t: len(t["objects"]["pools"])))
    if objects["bridges"]:
        p = Plan()
        bridges = p.call("seg_bridges", image=f"{d}/pre_optical.tif", roads=f"{d}/roads.geojson")
        last = p.call("poi_count_by", layer=ref(bridges, "path"), key="id")
        specs.append(TaskSpec("bridges", "T1", f"Which road segments of {place} are bridges over water? Give their "
                              "ids.", p, at(last, lambda r: sorted(r["counts"])), {"type": "set"},
                              "list of road segment ids", ["pre_optical", "roads"],
                              truth=lambda t: sorted(t["objects"]["bridges"])))
    specs.append(destroyed_buildings(eid, "sar", "sar_destroyed_buildings", f"Clouds hide {place} after the event. "
                                     "Using only the pre- and post-event SAR images, how many buildings were "
                                     "destroyed?"))
    p = Plan()
    shelters = p.call("vec_filter_attribute", layer=f"{d}/pois.geojson", key="type", op="==", value="shelter")
    cells = p.call("vec_voronoi_polygons", facilities=ref(shelters, "path"), extent=f"{d}/admin.geojson")
    last = p.call("ras_zonal_stats", image=f"{d}/population.tif", zones=ref(cells, "path"), id_field="name")
    specs.append(TaskSpec("shelter_catchment", "T3", f"If every resident of {place} goes to the nearest shelter "
                          "(straight-line Voronoi service areas), rank the shelters by the number of residents "
                          "they serve, most first.", p,
                          at(last, lambda r: [z["zone"] for z in sorted(r["items"], key=lambda z: (-z["sum"],
                                                                                                 z["zone"]))]),
                          {"type": "kendall"}, "list of shelter names, most residents first",
                          ["pois", "admin", "population"]))
    return specs
