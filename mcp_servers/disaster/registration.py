"""Registers the disaster server, its scene data, task suites (the tasks, and their attack view) and demo
(string targets only)."""

from __future__ import annotations

PACKAGE = "gauntlet.mcp_servers.disaster"
# view name: suite (`gauntlet eval disaster --view attack`); the attack view is attack.py's, the hard view
# the same templates over the `hard` realism level's scenes (built only when asked for)
VIEWS = {"clean": "disaster", "hard": "disaster-hard", "attack": "disaster-attack"}
# `gauntlet eval disaster --mode ap|if`: DORA's autonomous-planning and instruction-following modes, i.e. the
# LLM agent's mode (gauntlet.agents.llm.modes) and the scorer that records the mode's label
MODES = {"ap": {"agent_config": {"mode": "autonomous"}, "env_kwargs": {"scorer": f"{PACKAGE}.scoring:DoraScorer"}},
         "if": {"agent_config": {"mode": "instruction"},
                "env_kwargs": {"scorer": f"{PACKAGE}.scoring:instruction_following_scorer"}}}
# The hard scenes' cache version: the scene builder's and the hard renderer's (data.scene_entry; tested)
HARD_DATA_VERSION = "3-hard1"


def register() -> None:
    from gauntlet.registry import registry

    registry.add("server", "disaster", f"{PACKAGE}.server:build_server",
                 "disaster-response geospatial tools (seg/ras/mask/vec/poi/calc/logi) over synthetic scenes at "
                 "real event locations")
    registry.add("data", "disaster", f"{PACKAGE}.data:build_clean_scenes",
                 "multi-sensor scenes (optical, SAR, Sentinel-2-like, DEM, buildings, roads, POIs) for 55 real "
                 "past events of 10 hazard types, with damage truth and five dated acquisitions each", version="3",
                 inputs=("disaster/events.csv", "disaster/real_layers.json"))
    registry.add("data", "disaster-hard", f"{PACKAGE}.data:build_hard_scenes",
                 "the disaster scenes at the hard realism level: shadows, tree canopy, coloured cars and roofs, "
                 "parking lots, haze, sensor noise, misregistration, SAR layover", version=HARD_DATA_VERSION,
                 inputs=("disaster/events.csv", "disaster/real_layers.json"))
    # polygon answers (GeoJSON outlines) need more than the default 4096 characters, and the longest gold
    # trajectories more than the default 32 steps (tasks.MAX_TEXT_LENGTH, tasks.MAX_STEPS)
    registry.add("suite", "disaster", f"{PACKAGE}.tasks:suite_path",
                 "DORA-format tasks: T1 perception, T2 spatial analysis, T3 operational planning, with gold "
                 "trajectories",
                 env_kwargs={"scorer": f"{PACKAGE}.scoring:DoraScorer", "max_text_length": 65536, "max_steps": 64},
                 view="clean", views=VIEWS, modes=MODES)
    registry.add("server", "disaster-hard", f"{PACKAGE}.server:build_hard_server",
                 "the disaster tools over the hard realism level's scenes (the hard view's server)")
    registry.add("suite", "disaster-hard", f"{PACKAGE}.tasks:hard_suite_path",
                 "the disaster tasks over the hard realism level's scenes (built on first use), gold answers "
                 "read off those scenes", server="disaster-hard",
                 env_kwargs={"scorer": f"{PACKAGE}.scoring:DoraScorer", "max_text_length": 65536, "max_steps": 64},
                 view="hard", views=VIEWS, modes=MODES)
    registry.add("server", "disaster-attack", f"{PACKAGE}.attack:build_attack_server",
                 "the disaster server of the attack view: the same tools and results, with an injected instruction "
                 "planted in one result each attack task's gold trajectory reads")
    registry.add("suite", "disaster-attack", f"{PACKAGE}.attack:attack_suite_path",
                 "the disaster tasks through a server that plants prompt injections; scores utility, attack "
                 "success and injection seen", server="disaster-attack",
                 env_kwargs={"scorer": f"{PACKAGE}.attack:attack_scorer", "max_text_length": 65536, "max_steps": 64},
                 view="attack", views=VIEWS)
    registry.add("demo", "disaster", f"{PACKAGE}.demo:run_demo",
                 "one task per dimension through the disaster server, and a map of one event")
