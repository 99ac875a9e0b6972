"""Registers the disaster server, its scene data, task suites (the tasks, and their attack view) and demo
(string targets only)."""

from __future__ import annotations

PACKAGE = "gauntlet.mcp_servers.disaster"
# view name: suite (`gauntlet eval disaster --view attack`); the attack view is attack.py's
VIEWS = {"clean": "disaster", "attack": "disaster-attack"}


def register() -> None:
    from gauntlet.registry import registry

    registry.add("server", "disaster", f"{PACKAGE}.server:build_server",
                 "disaster-response geospatial tools (seg/ras/mask/vec/poi/calc/logi) over synthetic scenes at "
                 "real event locations")
    registry.add("data", "disaster", f"{PACKAGE}.scenes:build_scenes",
                 "multi-sensor scenes (optical, SAR, Sentinel-2-like, DEM, buildings, roads, POIs) for 55 real "
                 "past events of 10 hazard types, with damage truth", version="2",
                 inputs=("disaster/events.csv", "disaster/real_layers.json"))
    # polygon answers (GeoJSON outlines) need more than the default 4096 characters
    registry.add("suite", "disaster", f"{PACKAGE}.tasks:suite_path",
                 "DORA-format tasks: T1 perception, T2 spatial analysis, T3 operational planning, with gold "
                 "trajectories", env_kwargs={"scorer": f"{PACKAGE}.scoring:DoraScorer", "max_text_length": 65536},
                 view="clean", views=VIEWS)
    registry.add("server", "disaster-attack", f"{PACKAGE}.attack:build_attack_server",
                 "the disaster server of the attack view: the same tools and results, with an injected instruction "
                 "planted in one result each attack task's gold trajectory reads")
    registry.add("suite", "disaster-attack", f"{PACKAGE}.attack:attack_suite_path",
                 "the disaster tasks through a server that plants prompt injections; scores utility, attack "
                 "success and injection seen", server="disaster-attack",
                 env_kwargs={"scorer": f"{PACKAGE}.attack:attack_scorer", "max_text_length": 65536},
                 view="attack", views=VIEWS)
    registry.add("demo", "disaster", f"{PACKAGE}.demo:run_demo",
                 "one task per dimension through the disaster server, and a map of one event")
