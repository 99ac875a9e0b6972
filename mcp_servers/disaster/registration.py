"""Registers the disaster server, its scene data, task suite and demo (string targets only)."""

from __future__ import annotations

PACKAGE = "gauntlet.mcp_servers.disaster"


def register() -> None:
    from gauntlet.registry import registry

    registry.add("server", "disaster", f"{PACKAGE}.server:build_server",
                 "disaster-response geospatial tools (seg/ras/mask/vec/poi/calc/logi) over synthetic scenes at "
                 "real event locations")
    registry.add("data", "disaster", f"{PACKAGE}.scenes:build_scenes",
                 "multi-sensor scenes (optical, SAR, Sentinel-2-like, DEM, buildings, roads, POIs) for 55 real "
                 "past events of 10 hazard types, with damage truth", version="2",
                 inputs=("disaster/events.csv", "disaster/real_layers.json"))
    registry.add("suite", "disaster", f"{PACKAGE}.tasks:suite_path",
                 "DORA-format tasks: T1 perception, T2 spatial analysis, T3 operational planning, with gold "
                 "trajectories", env_kwargs={"scorer": f"{PACKAGE}.scoring:DoraScorer",
                                             # polygon answers (GeoJSON outlines) need more than the default 4096
                                             "max_text_length": 65536})
    registry.add("demo", "disaster", f"{PACKAGE}.demo:run_demo",
                 "one task per dimension through the disaster server, and a map of one event")
