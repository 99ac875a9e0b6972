"""Registers TextWorld-v0 and its game builder (string entry points only; nothing heavy is imported)."""

from __future__ import annotations

from gauntlet.envs.textworld.games import GAMES, GAMES_VERSION

PACKAGE = "gauntlet.envs.textworld"


def register() -> None:
    from gauntlet.registry import register_env, registry

    register_env("TextWorld-v0", f"{PACKAGE}.env:TextWorldEnv", max_episode_steps=50)
    register_env("TextWorldTools-v0", f"{PACKAGE}.tools:TextWorldTools", max_episode_steps=50)
    registry.add("data", GAMES, f"{PACKAGE}.games:build_game",
                 "a generated TextWorld game, compiled (config: game=INDEX[, nb_rooms, nb_objects, quest_length])",
                 version=GAMES_VERSION)
