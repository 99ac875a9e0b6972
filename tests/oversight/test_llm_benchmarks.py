"""The tool benchmarks with the LLM agent as base agent: rows replay exactly, the stronger model takes over the
base agent's conversation, and under ``expert_k`` the base agent reads the expert's calls before it acts again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langchain_core.messages import HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import TypeAdapter

from gauntlet.agents.llm.scripted import ScriptedChatModel, Turn
from gauntlet.controllers.oversight.benchmarks import get_benchmark
from gauntlet.agents.llm.models import SAMPLING
from gauntlet.controllers.oversight.benchmarks.llm import NOTICE_OPENING, llm_disaster
from gauntlet.controllers.oversight.protocol import collect_episode
from gauntlet.controllers.oversight.utility import UtilityConfig
from gauntlet.errors import UserError
from tests.llm.helpers import Confident

tool_servers = pytest.mark.xdist_group("oversight-tools")
pytestmark = pytest.mark.filterwarnings("ignore:Use `@` matmul:PendingDeprecationWarning:rasterio.*")
# Every tool offered, numbers the script writes allowed, and no confidence question (a script has no answer to it).
HARNESS = {"tool_scope": "all", "check_numbers": False, "ask_confidence": False}
WRONG = -12345
_turn: TypeAdapter = TypeAdapter(Turn)


def _turn_list(turns: list[dict]) -> list:
    return [_turn.validate_python(turn) for turn in turns]


def _call(name: str, arguments: dict) -> dict:
    return {"text": f"I will call {name}. " + json.dumps({"name": name, "arguments": arguments})}


def _script(path: Path, turns: list[dict]) -> str:
    path.write_text(json.dumps(turns))
    return f"scripted:{path}"


@pytest.fixture
def one_call_task(small_disaster):
    """The episode index and task of the first T1 task whose gold trajectory is one call."""
    benchmark = llm_disaster(**small_disaster, split="T1", model="scripted:none", strong_model=None)
    episode = next(index for index, task in enumerate(benchmark.tasks) if len(task.gold_trajectory) == 1)
    return episode, benchmark.tasks[episode]


def _takeover_benchmark(small_disaster, task, tmp_path: Path):
    """``llm-disaster`` where the base makes the gold call, then answers wrong, and the stronger model's script
    answers wrong at its first turn and right at its second: it answers right only where it continues a
    conversation that has a turn already."""
    gold = task.gold_trajectory[0]
    weak = _script(tmp_path / "weak.json", [_call(gold.call, gold.args), _call("submit_answer", {"answer": WRONG})])
    strong = _script(tmp_path / "strong.json", [_call("submit_answer", {"answer": WRONG}),
                                                 _call("submit_answer", {"answer": task.answer})])
    return llm_disaster(**small_disaster, split="T1", model=weak, strong_model=strong, agent_config=HARNESS)


@tool_servers
def test_llm_rows_replay_and_the_stronger_model_takes_over_the_conversation(small_disaster, one_call_task, tmp_path):
    episode, task = one_call_task
    benchmark = _takeover_benchmark(small_disaster, task, tmp_path)
    weak = benchmark.model
    assert benchmark.has_stronger and benchmark.stronger_takes_over
    rows = collect_episode(benchmark, episode, config=UtilityConfig(k=1))
    assert [row["t"] for row in rows] == [0, 1]
    assert all(row["prefix_match"] for row in rows)  # the restored agent replays its own continuation
    assert not any(row["base_success"] for row in rows)
    at = {row["t"]: row["branches"] for row in rows}
    for t in (0, 1):
        assert not at[t]["continue"]["success"] and at[t]["expert"]["success"]
    # The stronger model continues the base agent's conversation: at t = 0 it is empty (the script's first turn, a
    # wrong answer); at t = 1 it holds the base's gold call, so the script's second turn, the right answer, is next.
    # A stronger agent started afresh would play its first turn at both.
    assert at[0]["stronger"] == {"success": False, "steps": 1, "utility": pytest.approx(-0.05 - 0.01)}
    assert at[1]["stronger"] == {"success": True, "steps": 1, "utility": pytest.approx(1 - 0.05 - 0.01)}
    # expert_k (k = 1) from t = 0: the expert makes the gold call, then the base answers (wrong): two steps
    # (that the base reads the expert's call is the next test's).
    assert at[0]["expert_k"]["steps"] == 2 and not at[0]["expert_k"]["success"]
    assert rows[0]["benchmark_meta"]["model"] == weak and rows[0]["benchmark_meta"]["mode"] == "autonomous"
    assert rows[0]["benchmark_meta"]["exact"] is False  # each row says how its models read their prompts


@tool_servers
def test_a_base_agent_that_reads_the_handover_answers_after_the_expert_call(small_disaster, one_call_task, tmp_path):
    """The base proposes something else at the expert's step; its next turn sees that call replaced."""
    episode, task = one_call_task
    weak = _script(tmp_path / "weak.json", [_call("submit_answer", {"answer": WRONG}),
                                           _call("submit_answer", {"answer": task.answer})])
    benchmark = llm_disaster(**small_disaster, split="T1", model=weak, strong_model=None, agent_config=HARNESS)
    rows = collect_episode(benchmark, episode, config=UtilityConfig(k=1), prefixes=[0])
    (row,) = rows
    assert set(row["branches"]) == {"continue", "quit", "expert", "expert_k", "rollback", "hint", "confirm"}
    assert not row["branches"]["continue"]["success"]
    # The expert's gold call ran instead of the base's wrong answer; the base's next turn is the right answer.
    assert row["branches"]["expert_k"] == {"success": True, "steps": 2, "utility": pytest.approx(1 - 0.05 - 0.02)}


def test_the_base_model_decodes_greedily_unless_asked_to_sample_and_the_options_are_checked(small_disaster):
    benchmark = get_benchmark("llm-disaster", **small_disaster, model="offline:small", strong_model=None)
    config = benchmark._config("offline:small")
    # Greedy by default: a sampled reply does not always replay on llama.cpp (see the benchmark's docstring).
    assert config["model_options"] == {"max_new_tokens": 256}
    assert config["mode"] == "autonomous" and config["max_steps"] == 12 and config["suite"] == small_disaster["tasks"]
    assert get_benchmark("llm-disaster", **small_disaster, sample=True,
                         strong_model=None)._config("offline:small")["model_options"] == {"max_new_tokens": 256,
                                                                                          **SAMPLING}
    # The exact mode (docs/oversight.md) reaches the model through the agent options, beside the benchmark's.
    exact = get_benchmark("llm-disaster", **small_disaster, strong_model=None,
                          agent_config={"model_options": {"reuse_prefix": False}})._config("offline:small")
    assert exact["model_options"] == {"max_new_tokens": 256, "reuse_prefix": False}
    # ``exact`` says the same for the base and the stronger model, and only to a local backend's options: on
    # llama.cpp the model's own exact reuse, on transformers no reuse at all.
    exact = get_benchmark("llm-disaster", **small_disaster, exact=True)
    for model in ("offline:small", "offline"):
        assert exact._config(model)["model_options"] == {"max_new_tokens": 256, "exact": True}
    assert exact._config("hf:some/folder")["model_options"] == {"max_new_tokens": 256, "reuse_prefix": False}
    assert "model_options" not in exact._config("scripted:none")
    with pytest.raises(ValueError, match="no lapse rates .*p_lapse"):
        get_benchmark("llm-disaster", **small_disaster, p_lapse=(0.0, 0.1))
    with pytest.raises(UserError):
        get_benchmark("llm-disaster", **small_disaster, model="nonsense-backend:x")


@tool_servers
def test_the_collect_command_branches_llm_episodes_and_refuses_lapse_rates(small_disaster, one_call_task, tmp_path):
    from gauntlet.controllers.oversight.collect import load_rows
    from tests.test_cli import assert_one_line_error, gauntlet

    episode, task = one_call_task
    gold = task.gold_trajectory[0]
    weak = _script(tmp_path / "weak.json", [_call(gold.call, gold.args), _call("submit_answer", {"answer": WRONG})])
    options = {**small_disaster, "split": "T1", "model": weak, "strong_model": None, "agent_config": HARNESS}
    out = tmp_path / "rows"
    collected = gauntlet("oversight", "collect", "llm-disaster", "--options", json.dumps(options), "-n", "1",
                         "--first", str(episode), "--actions", "continue,quit,expert", "--out", str(out),
                         "--workers", "1")
    assert collected.returncode == 0, collected.stderr
    rows = load_rows(out)
    assert [row["t"] for row in rows] == [0, 1] and all(row["prefix_match"] for row in rows)
    assert all(set(row["branches"]) == {"continue", "quit", "expert"} for row in rows)
    assert rows[0]["benchmark_meta"]["task_id"] == task.id
    refused = gauntlet("oversight", "collect", "llm-disaster", "--out", str(tmp_path / "x"),
                       "--options", json.dumps({**options, "p_lapse": [0.0, 0.1]}))
    assert_one_line_error(refused, "no lapse rates", "--options")


class Heeding(ScriptedChatModel):
    """Plays its script, but replies to an overseer's notice (the conversation's last message) with ``heeded``,
    and records the notice."""

    heeded: dict
    notices: list = []

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        last = messages[-1]
        if not (isinstance(last, HumanMessage) and str(last.content).startswith(NOTICE_OPENING)):
            return super()._generate(messages, stop, run_manager, **kwargs)
        self.notices.append(str(last.content))
        tools = [tool["function"]["name"] for tool in kwargs.get("tools", [])]
        reply = self._reply(0, _turn.validate_python(self.heeded), tools)
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool_servers
def test_a_hint_shows_the_expert_call_and_a_confirmation_shows_the_proposal_back(small_disaster, one_call_task):
    episode, task = one_call_task
    gold = task.gold_trajectory[0]
    # The base answers wrong at once, twice over; after any notice it makes the gold call (the right next step).
    model = Heeding(turns=_turn_list([_call("submit_answer", {"answer": WRONG})] * 2),
                    heeded=_call(gold.call, gold.args), notices=[])
    benchmark = llm_disaster(**small_disaster, split="T1", model=model, strong_model=None, agent_config=HARNESS)
    (row,) = collect_episode(benchmark, episode, prefixes=[0], actions=("continue", "hint", "confirm"))
    branches = row["branches"]
    assert not branches["continue"]["success"] and branches["continue"]["steps"] == 1
    # Both revised replies made the gold call, then the script's next turn (turn 1 of the task) answered wrong.
    for action, cost in (("hint", 0.02), ("confirm", 0.01)):
        assert branches[action] == {"success": False, "steps": 2, "utility": pytest.approx(-cost - 0.02)}
    hint, confirm = model.notices
    assert json.loads(hint.split("the call ", 1)[1].split(". Write", 1)[0]) == {"name": gold.call,
                                                                                 "arguments": gold.args}
    assert f'"answer": {WRONG}' in confirm and gold.call not in confirm
    assert row["prefix_match"]


@tool_servers
def test_a_rollback_tells_the_greedy_base_agent_which_calls_it_undid(small_disaster, one_call_task):
    episode, task = one_call_task
    gold = task.gold_trajectory[0]
    # The base makes the gold call, then answers wrong; told of an undo, it answers right.
    model = Heeding(turns=_turn_list([_call(gold.call, gold.args), _call("submit_answer", {"answer": WRONG})]),
                    heeded=_call("submit_answer", {"answer": task.answer}), notices=[])
    benchmark = llm_disaster(**small_disaster, split="T1", model=model, strong_model=None, agent_config=HARNESS)
    assert benchmark.rollback_notice
    rows = collect_episode(benchmark, episode, config=UtilityConfig(r=1), actions=("continue", "rollback"))
    at = {row["t"]: row["branches"] for row in rows}
    assert all(row["prefix_match"] for row in rows) and not rows[0]["base_success"]
    # At t = 0 nothing is undone: the restored agent replays its own episode (no notice), at c_intervene.
    assert at[0]["rollback"] == {"success": False, "steps": 2, "utility": pytest.approx(-0.05 - 0.02)}
    # At t = 1 the gold call is undone and named; the agent's reply after the notice answers right at once.
    # (Without the notice it would make the gold call again and answer wrong: the continue branch's end.)
    assert not at[1]["continue"]["success"]
    assert at[1]["rollback"] == {"success": True, "steps": 1, "utility": pytest.approx(1 - 0.05 - 0.01)}
    (notice,) = model.notices
    assert notice.startswith(NOTICE_OPENING) and "last 1 calls were undone" in notice
    assert json.loads(notice.split("They were: ", 1)[1].split(". Write", 1)[0]) == {"name": gold.call,
                                                                                     "arguments": gold.args}
    with pytest.raises(ValueError, match="rollback with the calls undone"):
        benchmark.revised_output("rollback", benchmark.make_agent(episode), None, {})


@tool_servers
def test_the_base_models_confidence_after_its_last_call_is_a_feature_of_the_prefix(small_disaster, one_call_task):
    episode, task = one_call_task
    gold = task.gold_trajectory[0]
    model = Confident(turns=_turn_list([_call(gold.call, gold.args), _call("submit_answer", {"answer": WRONG})]),
                      answers=["80", "30"], asked=[])
    benchmark = llm_disaster(**small_disaster, split="T1", model=model, strong_model=None,
                             agent_config={"tool_scope": "all", "check_numbers": False})
    assert benchmark._config(model)["ask_confidence"] is True  # the benchmark's default
    rows = collect_episode(benchmark, episode, actions=("continue", "quit"))
    features = {row["t"]: row["features"] for row in rows}
    assert (features[0]["verbal_confidence"], features[0]["verbal_confidence_missing"]) == (0.5, 1.0)  # not yet asked
    assert (features[1]["verbal_confidence"], features[1]["verbal_confidence_missing"]) == (0.8, 0.0)
    assert all(row["prefix_match"] for row in rows)  # the question beside the conversation changes no action


class Stated(ScriptedChatModel):
    """Plays its script; each reply carries made-up states at layer 12 of a 0.5B-wide model, different per turn
    (what a local model that keeps the latent score's layer attaches to its replies)."""

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        import numpy as np
        from langchain_core.messages import AIMessage

        from gauntlet.agents.llm.kept_states import ReplyStates, with_states

        result = super()._generate(messages, stop, run_manager, **kwargs)
        message = result.generations[0].message
        turn = sum(isinstance(item, AIMessage) for item in messages)
        rows = np.random.default_rng(turn).normal(0.0, 1.0 + 4.0 * turn, (3, 896)).astype(np.float32)
        metadata = with_states(dict(message.response_metadata), ReplyStates("scripted", 25, {12: rows}))
        return ChatResult(generations=[ChatGeneration(message=message.model_copy(
            update={"response_metadata": metadata}))])


@tool_servers
def test_the_latent_monitors_score_of_the_last_reply_is_a_feature_of_the_prefix(small_disaster, one_call_task):
    import numpy as np

    from gauntlet.controllers.latent.detector_file import load_detector, reply_example
    from gauntlet.controllers.latent.monitor import shipped_score
    from gauntlet.controllers.oversight.benchmarks.llm import latent_risk

    episode, task = one_call_task
    gold = task.gold_trajectory[0]
    model = Stated(turns=_turn_list([_call(gold.call, gold.args), _call("submit_answer", {"answer": WRONG})]))
    benchmark = llm_disaster(**small_disaster, split="T1", model=model, strong_model=None, agent_config=HARNESS,
                             latent="shipped")
    rows = collect_episode(benchmark, episode, actions=("continue", "quit"))
    features = {row["t"]: row["features"] for row in rows}
    assert (features[0]["latent_risk"], features[0]["latent_risk_missing"]) == (0.5, 1.0)  # no reply yet
    # After the first reply: the shipped chaos score of that reply's states, as a risk.
    detector = load_detector(shipped_score())
    first = np.random.default_rng(0).normal(0.0, 1.0, (3, 896)).astype(np.float32)
    expected = latent_risk(float(detector.decision_function([reply_example(first, 12)])[0]))
    assert features[1]["latent_risk"] == pytest.approx(expected) and features[1]["latent_risk_missing"] == 0.0
    assert 0.0 < expected < 1.0 and all(row["prefix_match"] for row in rows)
    assert rows[0]["benchmark_meta"]["latent"] == "shipped"
    # A local base model is asked to keep the score's layer while it decodes; the stronger one is left alone.
    local = llm_disaster(**small_disaster, split="T1", model="offline:small", strong_model="offline", latent="shipped")
    assert local.make_agent(episode).config()["model_options"]["keep_hidden_layers"] == [12]
    assert "keep_hidden_layers" not in local.make_agent(episode, "strong").config()["model_options"]
    # A score reads the states of the model it was fitted on: the shipped one is the 0.5B's, not the 1.5B's.
    with pytest.raises(UserError, match="fitted on .*0.5b.*the base model offline is .*1.5b"):
        llm_disaster(**small_disaster, split="T1", model="offline", strong_model=None, latent="shipped")
    with pytest.raises(UserError, match="nowhere.npz"):
        llm_disaster(**small_disaster, split="T1", model=model, strong_model=None, latent="nowhere.npz")


def _deployed(benchmark, episode: int, intervention: str, choices: list[str], tmp_path: Path):
    """Episode ``episode`` of ``benchmark`` through the runner under a scalar-routing controller whose choices are
    ``choices`` at the first decisions (then ``continue``): what is under test is how each is carried out, not
    how it is chosen. The episode as recorded on disk, read back."""
    import numpy as np

    from gauntlet.controllers.oversight.controller import ScalarRoutingController
    from gauntlet.controllers.oversight.models import RiskScore, ScalarRouter, failure_data, save_model
    from gauntlet.episode import load_episodes
    from gauntlet.runner import rollout

    rows = [{"t": t, "features": {"t": float(t)}, "branches": {"continue": {"success": t % 2 == 0}}, "episode": t}
            for t in range(8)]
    router = ScalarRouter(RiskScore("logistic").fit(*failure_data(rows)), threshold=np.inf, intervention=intervention)
    model = save_model(tmp_path / "router.joblib", router, utility=UtilityConfig(), benchmark=benchmark.name)
    # The benchmark object itself: options cannot carry an in-process chat model.
    controller = ScalarRoutingController(model, benchmark=benchmark)
    planned = iter(choices)
    controller._choose = lambda features: (next(planned, "continue"), {})  # type: ignore[method-assign]
    controller.for_episode(episode)
    path = tmp_path / "episode.jsonl"
    rollout(benchmark.make_env(episode), benchmark.make_agent(episode), seed=benchmark.episode_seed(episode),
            max_steps=benchmark.max_steps, hooks=[controller], record=path)
    (loaded,) = load_episodes(path)
    return loaded


@tool_servers
def test_online_a_hint_has_the_running_agent_write_its_reply_again_and_the_step_records_the_revision(
        small_disaster, one_call_task, tmp_path):
    from gauntlet.controllers.oversight.controller import online_utility, overseer_choices

    episode, task = one_call_task
    gold = task.gold_trajectory[0]
    # The base answers wrong at once; after a notice it makes the gold call, and its next turn is the right answer.
    model = Heeding(turns=_turn_list([_call("submit_answer", {"answer": WRONG}),
                                      _call("submit_answer", {"answer": task.answer})]),
                    heeded=_call(gold.call, gold.args), notices=[])
    benchmark = llm_disaster(**small_disaster, split="T1", model=model, strong_model=None, agent_config=HARNESS)
    played = _deployed(benchmark, episode, "hint", ["hint"], tmp_path)
    assert overseer_choices(played, "oversight-scalar") == [(0, "hint"), (1, "continue")]
    first = played.steps[0]
    assert json.loads(first.action) == {"name": gold.call, "arguments": gold.args}  # the revision ran, not the proposal
    (intervention,) = [event for event in first.events if event.kind == "intervention"]
    assert json.loads(intervention.data["original_action"]) == {"name": "submit_answer", "arguments": {"answer": WRONG}}
    # The step records the revision's messages: the overseer's notice, then the reply written again.
    assert [m.role for m in first.messages][-2:] == ["user", "assistant"]
    assert first.messages[-2].content.startswith(NOTICE_OPENING) and gold.call in first.messages[-2].content
    assert len(model.notices) == 1 and played.outcome.success
    # Priced as its branch is: a hint costs c_hint.
    assert online_utility(played, UtilityConfig(), "oversight-scalar") == pytest.approx(1 - 0.02 - 0.02)


@tool_servers
def test_online_the_stronger_model_takes_over_the_running_agents_conversation(small_disaster, one_call_task,
                                                                              tmp_path):
    from gauntlet.controllers.oversight.controller import online_utility, overseer_choices

    episode, task = one_call_task
    # As in the branching test above: only a takeover of the base's conversation (which holds the gold call)
    # answers right.
    benchmark = _takeover_benchmark(small_disaster, task, tmp_path)
    played = _deployed(benchmark, episode, "stronger", ["continue", "stronger"], tmp_path)
    assert overseer_choices(played, "oversight-scalar") == [(0, "continue"), (1, "stronger")]
    assert played.outcome.success and len(played.steps) == 2
    second = played.steps[1]
    assert json.loads(second.action) == {"name": "submit_answer", "arguments": {"answer": task.answer}}
    (intervention,) = [event for event in second.events if event.kind == "intervention"]
    assert json.loads(intervention.data["original_action"])["arguments"] == {"answer": WRONG}  # the base's proposal
    # The step records what both cost: the base's call that wrote the proposal and the stronger model's reply.
    assert [event.kind for event in second.events].count("model_call") == 2
    assert online_utility(played, UtilityConfig(), "oversight-scalar") == pytest.approx(1 - 0.05 - 0.02)
