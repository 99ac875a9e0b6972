"""Coupled branching: an agent episode forked mid-way (agent checkpoint and env together) has the
original's future under the same model outputs, and forks are independent of each other afterwards.
The tools are the env bridge's (CartPole behind MCP), whose server keeps state per session."""

from __future__ import annotations

import pickle
from typing import Any

import gauntlet
from gauntlet.agents.llm.agent import LLMAgent
from gauntlet.agents.llm.branching import AgentEpisode, check_coupled_branching
from gauntlet.agents.llm.records import message_record
from gauntlet.agents.llm.scripted import ScriptedChatModel
from gauntlet.bridges.tool_task_env import ToolTaskEnv, tool_call_action
from gauntlet.hooks import Decision, Prefix
from gauntlet.tasks import EvalSpec, ToolTask
from tests.llm.helpers import answer_turn, text_call

TASK = ToolTask(id="cartpole-push", server="env:CartPole-v1", answer=0.0, eval_spec=EvalSpec(kind="numeric", abs_tol=1),
                question="Reset with seed 0, push the cart a few times, and report its position.")
SCRIPT = [text_call("reset", {"seed": 0}),
          text_call("step", {"action": 1}),
          {"content": "Two pushes.", "tool_calls": [{"name": "step", "args": {"action": 1}},
                                                    {"name": "step", "args": {"action": 0}}]},
          text_call("step", {"action": 1}),
          text_call("step", {"action": 1}),
          answer_turn(0.05)]


def new_episode(script_path) -> AgentEpisode:
    # parallel_calls: the script's third reply makes two calls, and a fork can stand between them.
    episode = AgentEpisode(LLMAgent(model=ScriptedChatModel.from_file(script_path), parallel_calls=True),
                           ToolTaskEnv([TASK]))
    episode.reset(seed=0)
    return episode


def future(episode: AgentEpisode) -> list[tuple]:
    return episode.play_out()


def conversation_of(episode: AgentEpisode) -> list[dict]:
    return [message_record(m).model_dump() for m in episode.agent._state()["messages"]]


def test_a_fork_mid_reply_has_the_originals_future_and_forks_are_independent(write_script):
    episode = new_episode(write_script(SCRIPT))
    for _ in range(3):  # reset, step, and the first of the reply's two calls
        episode.step()
    snapshot = episode.snapshot()
    pickled = pickle.loads(pickle.dumps(snapshot))
    first, second = gauntlet.fork(episode, snapshot), gauntlet.fork(episode, pickled)

    pushed_right = second.step(action=tool_call_action("step", {"action": 1}))  # the script pushes left here
    original = future(episode)
    assert len(original) == 4 and original[-1][3]
    assert pushed_right.observation != original[0][1]  # the second fork's cart went elsewhere...
    assert future(first) == original  # ...and the first fork's did not notice
    assert conversation_of(first) == conversation_of(episode)
    diverged = future(second)
    assert [step[0] for step in diverged] == [step[0] for step in original[1:]]
    assert [step[1] for step in diverged] != [step[1] for step in original[1:]]

    episode.restore(snapshot)
    assert future(episode) == original


def test_a_fork_at_a_pending_proposal_runs_the_same_action(write_script):
    episode = new_episode(write_script(SCRIPT))
    episode.step()
    proposal = episode.propose()
    twin = gauntlet.fork(episode, episode.snapshot())
    assert twin.propose() == proposal
    assert future(twin) == future(episode)


class LookAhead:
    """Before each step, forks the episode and plays the candidate and the rest of it out."""

    name = "look-ahead"

    def __init__(self) -> None:
        self.futures: list[list[tuple]] = []

    def decide(self, prefix: Prefix, candidates: list[Any]) -> Decision:
        episode = AgentEpisode.at_decision(prefix, candidates[0])
        twin = gauntlet.fork(episode, episode.snapshot())
        self.futures.append(future(twin))
        twin.close()
        return Decision.proceed()


def test_a_controller_can_play_a_fork_out_before_each_step_and_foresees_the_episode(write_script):
    look_ahead = LookAhead()
    env = ToolTaskEnv([TASK])
    episode = gauntlet.rollout(env, LLMAgent(model=ScriptedChatModel.from_file(write_script(SCRIPT)),
                                             parallel_calls=True), seed=0, hooks=[look_ahead])
    env.close()
    actual = [(s.action, s.observation, s.reward, s.terminated, s.truncated) for s in episode.steps]
    assert len(look_ahead.futures) == len(actual) == 7
    assert all(foreseen == actual[index:] for index, foreseen in enumerate(look_ahead.futures))


def test_a_restored_agent_replays_its_messages_from_the_snapshot_on(write_script):
    episode = new_episode(write_script(SCRIPT))
    outputs = [episode.step().output for _ in range(2)]
    snapshot = episode.snapshot()
    later = [episode.step().output for _ in range(3)]
    episode.restore(snapshot)
    again = [episode.step().output for _ in range(3)]
    assert [o.messages for o in again] == [o.messages for o in later]
    assert all(o.messages for o in outputs)


def test_a_chem_agent_episode_honours_the_coupled_branching_contract(chem_data, write_script):
    from gauntlet.tasks import load_suite
    from tests.llm.helpers import gold_turns

    task = load_suite(chem_data.suite)[0]
    script = write_script([*gold_turns(task), answer_turn(task.answer)])
    check_coupled_branching(lambda: AgentEpisode(LLMAgent(model=ScriptedChatModel.from_file(script),
                                                          mode="chemcost"),
                                                 ToolTaskEnv(chem_data.suite, server=chem_data.server_factory())),
                            prefix_steps=3)
