"""The generated TextWorld games: one game per (index, difficulty), generated from its index and cached.

Game ``i`` is TextWorld's generator seeded with ``i`` (``GameOptions.seeds = i``: the map, objects,
quest and text each draw from a stream derived from it) and compiled to a Z-machine file by the
Inform 7 compiler TextWorld ships. Generation and compilation take a few seconds (some seeds of
long quests take tens), so each game is built once into the data cache and verified by checksum
afterwards; generation is deterministic across processes, so every machine builds the same files.

Only the knobs that differ from ``GameKnobs()`` are part of a game's cache key, so
``gauntlet data build textworld-game --config '{"game": 3}'`` builds exactly the game that
``TextWorld-v0`` with ``game=3`` and the default knobs plays.

This module stays light (TextWorld is imported inside the builder): the family's registration reads
``GAMES`` and ``GAMES_VERSION`` from it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gauntlet.datacache import ensure_built

GAMES = "textworld-game"
GAMES_VERSION = "1"  # 1: TextWorld's generator with GameOptions.seeds = game index
GAME_FILE = "game.z8"
"""The compiled game in a cache entry; TextWorld reads the game's logic from ``game.json`` beside it."""


@dataclass(frozen=True)
class GameKnobs:
    """How hard a generated game is. The defaults give expert solutions of about 14-17 commands.

    ``quest_length`` is the number of quest actions the generator chains (navigation included), so
    it is close to the length of the expert's walkthrough; ``nb_rooms`` and ``nb_objects`` set how
    much there is to get lost in and to lapse with.
    """

    nb_rooms: int = 10
    nb_objects: int = 20
    quest_length: int = 15

    def __post_init__(self) -> None:
        if self.nb_rooms < 1 or self.quest_length < 1 or self.nb_objects < 0:
            raise ValueError(f"need nb_rooms >= 1, nb_objects >= 0, quest_length >= 1; got {self}")


def game_params(game: int, knobs: GameKnobs) -> dict[str, Any]:
    """The cache key of a game: its index and the knobs that differ from the defaults."""
    if game < 0:
        raise ValueError(f"game must be a non-negative index; got {game}")
    defaults = asdict(GameKnobs())
    return {"game": game, **{name: value for name, value in asdict(knobs).items() if value != defaults[name]}}


def build_game(folder: Path, game: int = 0, **knobs: int) -> None:
    """The data builder of ``textworld-game``: generate game ``game`` with ``knobs`` and compile it
    into ``folder`` (``game.z8``, its logic ``game.json`` and the Inform 7 source ``game.ni``)."""
    from textworld import GameOptions
    from textworld.generator import compile_game, make_game

    settings = GameKnobs(**knobs)
    options = GameOptions()
    options.seeds = game
    options.nb_rooms, options.nb_objects = settings.nb_rooms, settings.nb_objects
    options.quest_length = settings.quest_length
    options.path = str(Path(folder) / GAME_FILE)
    options.force_recompile = True
    compile_game(make_game(options), options)


def game_file(game: int, knobs: GameKnobs) -> Path:
    """The compiled file of game ``game`` (built into the data cache on first use)."""
    folder = ensure_built(GAMES, GAMES_VERSION, build_game, params=game_params(game, knobs))
    return folder / GAME_FILE
