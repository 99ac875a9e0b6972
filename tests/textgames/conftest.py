"""A small generated TextWorld game, built once per test session in its own cache."""

from __future__ import annotations

from pathlib import Path

import pytest

SMALL_GAME = {"game": 0, "nb_rooms": 4, "nb_objects": 8, "quest_length": 5}
"""Quick to generate (about a second) with a five-command quest and enough objects to lapse with."""


@pytest.fixture(scope="session")
def small_game_home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("textworld-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GAUNTLET_HOME", str(home))
        from gauntlet.envs.textworld.games import GameKnobs, game_file

        game_file(SMALL_GAME["game"], GameKnobs(**{k: v for k, v in SMALL_GAME.items() if k != "game"}))
    return home


@pytest.fixture
def small_game(small_game_home, monkeypatch) -> dict[str, int]:
    """The small game's ``TextWorld-v0`` arguments, with the cache that holds it in place."""
    monkeypatch.setenv("GAUNTLET_HOME", str(small_game_home))
    return dict(SMALL_GAME)
