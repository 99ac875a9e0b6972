"""The LLM agent end to end: a scripted model driving real stdio sessions of the chem and disaster
servers through the runner, with a malformed call, a replaced action and a halt, read back from disk."""

from __future__ import annotations

import json

import pytest

import gauntlet
from gauntlet.agents.llm.agent import LLMAgent
from gauntlet.agents.llm.modes import CHEMCOST, INSTRUCTION
from gauntlet.agents.llm.records import conversation
from gauntlet.bridges.server_process import serve_command
from gauntlet.bridges.tool_task_env import ToolTaskEnv, tool_call_action
from gauntlet.mcp_servers.disaster.tasks import MAX_TEXT_LENGTH
from gauntlet.tasks import load_suite
from tests.llm.helpers import HaltAt, ReplaceWhen, answer_turn, gold_turns, text_call


@pytest.fixture(scope="module")
def disaster_env(disaster_data):
    env = ToolTaskEnv(disaster_data.suite,
                      server=serve_command("disaster", "--server-kwargs", disaster_data.server_kwargs()),
                      max_text_length=MAX_TEXT_LENGTH, scorer="gauntlet.mcp_servers.disaster.scoring:DoraScorer")
    yield env
    env.close()


def chem_script(task):
    """The gold calls with a malformed call after the first, then the gold answer."""
    turns = gold_turns(task)
    malformed = text_call("search_chemical", {"query": 5})  # query must be a string: the schema says so
    return [turns[0], malformed, *turns[1:], answer_turn(task.answer)]


def test_chem_episode_with_a_malformed_and_a_replaced_call_is_recorded_on_disk(chem_data, chem_env, write_script,
                                                                               tmp_path):
    task = load_suite(chem_data.suite)[0]
    script = write_script(chem_script(task))
    # The replaced search's chemical id is never shown, so the number check would refuse the gold purchase
    # that follows it; this test is about the replacement and the record, with every gold call run.
    agent = LLMAgent(model=f"scripted:{script}", mode="chemcost", max_steps=40, check_numbers=False)
    first_search = next(call for call in task.gold_trajectory if call.call == "search_chemical")
    replacement = tool_call_action("search_chemical", {"query": "water", "limit": 1})
    path = tmp_path / "chem.jsonl"
    gauntlet.rollout(chem_env, agent, seed=0, record=path,
                     hooks=[ReplaceWhen("search_chemical", replacement)])

    (episode,) = gauntlet.load_episodes(path)
    assert episode.task_id == task.id and episode.outcome is not None
    assert episode.agent.name == "llm" and episode.agent.config["model"] == f"scripted:{script}"
    assert episode.agent.config["system_prompt"] == CHEMCOST.system_prompt and episode.agent.config["max_steps"] == 40
    # Every gold call ran once, except the replaced one; the malformed call never reached the server.
    ran = [(step.tool_call.name, step.tool_call.arguments) for step in episode.steps[:-1]]
    expected = [(call.call, call.args) for call in task.gold_trajectory]
    replaced_at = expected.index((first_search.call, first_search.args))
    assert ran == expected[:replaced_at] + [("search_chemical", {"query": "water", "limit": 1})] + \
        expected[replaced_at + 1:]
    assert ("search_chemical", {"query": 5}) not in ran
    assert episode.steps[-1].terminated and episode.steps[-1].info["score"] == pytest.approx(1.0)

    messages = conversation(episode)
    assert [m.type for m in messages[:2]] == ["system", "human"] and task.question in messages[1].content
    # The model saw the malformed call's error, naming the problem and the tool's schema.
    bad = next(i for i, m in enumerate(messages) if m.type == "ai" and m.tool_calls
               and m.tool_calls[0]["args"] == {"query": 5})
    error = messages[bad + 1]
    assert error.type == "tool" and error.status == "error"
    assert "5 is not of type 'string'" in error.content and '"query"' in error.content
    notes = [e.data for s in episode.steps for e in s.events if e.kind == "note" and "malformed_calls" in e.data]
    assert len(notes) == 1 and notes[0]["malformed_calls"][0]["name"] == "search_chemical"
    # The replaced call: the model's own call stays; its result says what ran instead.
    step = episode.steps[replaced_at]
    assert step.action == replacement
    assert [e.data.get("intervention") for e in step.events if e.kind == "intervention"] == ["replace_action"]
    answer = next(m for m in messages if m.type == "tool" and m.content.startswith("Your call was replaced"))
    assert replacement in answer.content and '"water"' in answer.content
    # One model_call event per model turn, tokens counted.
    model_calls = [e.data for s in episode.steps for e in s.events if e.kind == "model_call"]
    assert len(model_calls) == sum(m.type == "ai" for m in messages) == len(task.gold_trajectory) + 2
    assert all(call["input_tokens"] > 0 and call["output_tokens"] > 0 for call in model_calls)


def test_disaster_instruction_episode_follows_the_plan_and_a_halt_is_recorded(disaster_data, disaster_env,
                                                                              write_script, tmp_path):
    tasks = load_suite(disaster_data.suite)
    task = next(t for t in tasks if len(t.gold_trajectory) >= 3)
    index = tasks.index(task)
    script = write_script([*gold_turns(task), answer_turn(task.answer)])

    finished = gauntlet.rollout(disaster_env, LLMAgent(model=f"scripted:{script}", mode="instruction",
                                                       suite=str(disaster_data.suite)),
                                seed=index, record=tmp_path / "full.jsonl")
    assert finished.outcome.score == pytest.approx(1.0) and finished.outcome.success
    (on_disk,) = gauntlet.load_episodes(tmp_path / "full.jsonl")
    first = conversation(on_disk)[:2]
    assert first[0].content == INSTRUCTION.system_prompt
    assert "Plan:\n1. " + task.gold_trajectory[0].call in first[1].content
    assert "<step 1 result: path>" in first[1].content

    halted_path = tmp_path / "halted.jsonl"  # the recorded agent config rebuilds the agent
    gauntlet.rollout(disaster_env, gauntlet.make_agent("llm", **on_disk.agent.config),
                     seed=index, record=halted_path, hooks=[HaltAt(2)])
    (halted,) = gauntlet.load_episodes(halted_path)
    assert len(halted.steps) == 2 and halted.steps[-1].truncated and not halted.steps[-1].terminated
    assert [e.data["intervention"] for e in halted.steps[-1].events if e.kind == "intervention"] == ["halt"]
    assert [step.tool_call.name for step in halted.steps] == [call.call for call in task.gold_trajectory[:2]]
    assert json.loads(halted.steps[0].action)["arguments"] == task.gold_trajectory[0].args


def test_the_instruction_checklist_follows_the_gold_calls_through_the_plan_with_the_server_s_paths(
        disaster_data, disaster_env, write_script, tmp_path):
    tasks = load_suite(disaster_data.suite)
    task = next(t for t in tasks if len(t.gold_trajectory) >= 3)
    script = write_script([*gold_turns(task), answer_turn(task.answer)])
    agent = LLMAgent(model=f"scripted:{script}", mode="instruction", checklist=True, suite=str(disaster_data.suite))
    finished = gauntlet.rollout(disaster_env, agent, seed=tasks.index(task), record=tmp_path / "plan.jsonl")
    assert finished.outcome.score == pytest.approx(1.0)  # the notes change nothing that runs
    (episode,) = gauntlet.load_episodes(tmp_path / "plan.jsonl")
    assert episode.agent.config["checklist"] is True
    notes = [message.content.split("Checklist: ", 1)[1] for message in conversation(episode) if message.type == "tool"]
    assert len(notes) == len(task.gold_trajectory)
    # The truth: the gold trajectory's own results, each step's path named as the server gave it.
    done = [f"step {number}" + (f" -> {call.obs['path']}" if isinstance(call.obs, dict) and "path" in call.obs else "")
            for number, call in enumerate(task.gold_trajectory, start=1)]
    for count, note in enumerate(notes[:-1], start=1):
        assert note.startswith(f"Plan steps done: {'; '.join(done[:count])}. Next: step {count + 1}. "
                               f"{task.gold_trajectory[count].call}(")
    assert notes[-1].startswith(f"Every step of the plan is done ({'; '.join(done)}).")


def test_gauntlet_replay_re_executes_an_llm_episode_from_its_recorded_calls_and_checks_the_results(
        chem_data, write_script, tmp_path):
    import gymnasium as gym

    from gauntlet.replay import replay_episode

    task = load_suite(chem_data.suite)[0]
    agent = LLMAgent(model=f"scripted:{write_script([*gold_turns(task), answer_turn(task.answer)])}",
                     mode="chemcost")
    server = serve_command("chem", "--server-kwargs", chem_data.server_kwargs())
    env = gym.make("gauntlet/ToolTask-v0", tasks=str(chem_data.suite), server=server,
                   scorer="gauntlet.mcp_servers.chem.scoring:ChemScorer")
    path = tmp_path / "llm.jsonl"
    try:
        gauntlet.rollout(env, agent, seed=0, record=path)
    finally:
        env.close()
    (episode,) = gauntlet.load_episodes(path)
    assert replay_episode(episode).matches  # every tool result came back as recorded, no model needed

    # A recorded tool result that the server no longer gives is found at its step.
    lines = path.read_text().splitlines()
    step_line = next(i for i, line in enumerate(lines) if '"kind":"step"' in line and '"index":1' in line)
    record = json.loads(lines[step_line])
    record["observation"]["result"] = record["observation"]["result"].replace("1", "7", 1)
    lines[step_line] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    check = replay_episode(gauntlet.load_episodes(path)[0])
    assert not check.matches and "step 1" in (check.divergence or "")
