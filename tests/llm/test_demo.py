"""`make demo`'s LLM part: one offline-model episode on the chem server, recorded and traced."""

from __future__ import annotations

import pytest

from gauntlet import load_episodes
from gauntlet.agents.llm.demo import DEMO_TASK, MAX_MODEL_CALLS, run_demo


@pytest.mark.xdist_group("offline-model")
@pytest.mark.timeout(900)
def test_the_llm_demo_records_a_scored_episode_of_the_offline_model_and_its_trace(tmp_path, capsys, offline_home,
                                                                                monkeypatch):
    monkeypatch.setenv("GAUNTLET_HOME", str(offline_home))  # the model the model tests loaded
    # The demo's episode costs minutes of CPU; one model call of the small model (the prompt with the tools,
    # a call under the grammar, the budget's stop) goes down the same path.
    run_demo(tmp_path, max_model_calls=1, model="offline:small")
    (episode,) = load_episodes(tmp_path / "llm_episode.jsonl")
    assert episode.complete and episode.agent.name == "llm" and episode.task_id == DEMO_TASK
    assert (episode.agent.config["model"], episode.agent.config["mode"]) == ("offline:small", "chemcost")
    # The mode's default harness, recorded as it ran: the demo sets neither option.
    assert episode.agent.config["demonstrations"] is True and episode.agent.config["checklist"] is True
    model_calls = [event for step in episode.steps for event in step.events if event.kind == "model_call"]
    assert len(model_calls) == 1 < MAX_MODEL_CALLS
    assert all(event.data["input_tokens"] > 0 for event in model_calls)
    # The one reply is one well-formed call: the grammar leaves no malformed call to send back.
    assert not [e for step in episode.steps for e in step.events if "malformed_calls" in e.data]
    assert episode.outcome is not None and episode.outcome.score == 0.0  # stopped by the budget, unanswered
    page = (tmp_path / "llm_trace.html").read_text()
    assert "get_reaction" in page and DEMO_TASK in page
    assert "answer scored" in capsys.readouterr().out


@pytest.mark.xdist_group("offline-model")
@pytest.mark.timeout(900)
def test_the_latent_demo_gates_the_offline_models_replies_on_its_own_decoding_states(tmp_path, capsys, offline_home,
                                                                                    monkeypatch):
    from gauntlet.controllers.latent.demo import CASES
    from gauntlet.controllers.latent.demo import run_demo as run_latent_demo

    monkeypatch.setenv("GAUNTLET_HOME", str(offline_home))
    run_latent_demo(tmp_path, cases=CASES[:1], max_new_tokens=48)  # one short episode shows the whole path
    assert sorted(path.name for path in tmp_path.glob("*.jsonl")) == [f"{CASES[0]}.jsonl"]
    (episode,) = load_episodes(tmp_path / f"{CASES[0]}.jsonl")
    gate = [event.data["scores"] for step in episode.steps for event in step.events
            if event.kind == "decision" and "chaos" in event.data.get("scores", {})]
    watched = [event.data for step in episode.steps for event in step.events if event.kind == "monitor" and event.data]
    # The offline model's own decoding states were scored: no second read, by the gate or by the monitor.
    assert gate and all(scores["reused"] == 1.0 for scores in gate)
    assert watched and all(scores["reused"] == 1.0 for scores in watched)
    assert watched[0]["chaos"] == pytest.approx(gate[0].get("chaos_after", gate[0]["chaos"]))
    assert (tmp_path / "latent_trace.html").is_file()
    assert "gate: chaos" in capsys.readouterr().out
