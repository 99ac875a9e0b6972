"""Rows collected on Ray are the rows local workers collect, for a scripted-expert benchmark and an LLM one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gauntlet.batch import ray_cluster
from gauntlet.controllers.oversight.collect import CollectSpec, collect, load_rows

pytest.importorskip("ray")


def _keyed(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda row: (row["episode"], row["expert_strength"], row["t"], row["draw"]))


@pytest.mark.xdist_group("oversight-ray")
def test_rows_collected_on_ray_are_the_rows_of_local_workers(tmp_path: Path, monkeypatch) -> None:
    # Set before Ray starts, so its workers read (and write) the same generated games.
    monkeypatch.setenv("GAUNTLET_HOME", str(tmp_path / "home"))
    play = {"text": json.dumps({"name": "play", "arguments": {"command": "look"}})}
    script = tmp_path / "script.json"
    script.write_text(json.dumps([play] * 30))
    llm = {"model": f"scripted:{script}", "strong_model": f"scripted:{script}", "confidence": False,
           "agent_config": {"check_numbers": False}, "nb_rooms": 1, "nb_objects": 2, "quest_length": 2,
           "max_steps": 4}
    specs = {
        "corridor": CollectSpec("corridor", episodes=(0, 1, 2, 3), options={"length": 6, "max_steps": 12},
                                strengths=(1.0, 0.5)),
        "llm-textworld": CollectSpec("llm-textworld", episodes=(0,), options=llm, prefixes=2,
                                     actions=("continue", "quit", "expert", "rollback", "stronger", "hint", "confirm")),
    }
    with ray_cluster(2):
        for name, spec in specs.items():
            remote = collect(spec, tmp_path / "ray" / name, workers=2, backend="ray")
            assert remote.jobs_run == len(spec.jobs()) and remote.rows > 0, name
    for name, spec in specs.items():
        collect(spec, tmp_path / "local" / name, workers=2)
        on_ray, local = _keyed(load_rows(tmp_path / "ray" / name)), _keyed(load_rows(tmp_path / "local" / name))
        assert on_ray == local, name
        assert all(row["prefix_match"] for row in local), name
    assert {"hint", "confirm", "stronger"} <= set(local[0]["branches"])
