"""`make demo`'s LLM part: one offline-model episode on the chem server, recorded and traced."""

from __future__ import annotations

import pytest

from gauntlet import load_episodes
from gauntlet.agents.llm.demo import MAX_MODEL_CALLS, TOOLS, run_demo


@pytest.mark.xdist_group("offline-model")
@pytest.mark.timeout(900)
def test_the_llm_demo_records_a_scored_episode_of_the_offline_model_and_its_trace(tmp_path, capsys, offline_home,
                                                                                monkeypatch):
    monkeypatch.setenv("GAUNTLET_HOME", str(offline_home))  # the model the model tests loaded
    run_demo(tmp_path, max_model_calls=2)  # the demo's four calls cost 2 minutes of CPU; two show the same
    (episode,) = load_episodes(tmp_path / "llm_episode.jsonl")
    assert episode.complete and episode.agent.name == "llm"
    assert episode.agent.config["model"] == "offline"
    assert episode.agent.config["tools"] == list(TOOLS)
    model_calls = [event for step in episode.steps for event in step.events if event.kind == "model_call"]
    assert 1 <= len(model_calls) <= 2 < MAX_MODEL_CALLS
    assert all(event.data["input_tokens"] > 0 for event in model_calls)
    assert episode.outcome is not None and episode.outcome.score in (0.0, 1.0)
    page = (tmp_path / "llm_trace.html").read_text()
    assert "search_chemical" in page and "ethanol" in page
    assert "answer scored" in capsys.readouterr().out
