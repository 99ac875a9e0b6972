"""A tool server that dies mid-episode ends that episode with an error outcome; the next one goes on."""

from __future__ import annotations

import psutil

import gauntlet
from gauntlet.bridges.server_process import serve_command
from gauntlet.bridges.tool_task_env import SERVER_LOST, ToolTaskEnv, tool_call_action

TASK = {"id": "cartpole-size", "server": "env:CartPole-v1", "answer": 4, "eval_spec": {"kind": "numeric"},
        "question": "Reset with seed 0. How many numbers are in the observation?"}


def _children() -> set[int]:
    return {child.pid for child in psutil.Process().children(recursive=True)}


class _KillServerThenAnswer:
    """Calls reset, kills the server process the episode started, then tries to step (scripted)."""

    name = "kill-server"

    def __init__(self, spared: set[int]):
        self.spared = spared  # processes this test did not start (other tests' servers) live on

    def reset(self, **_):
        self.turn = 0

    def spec(self):
        return gauntlet.AgentSpec(name=self.name)

    def act(self, observation, info):
        self.turn += 1
        if self.turn == 2:
            for pid in _children() - self.spared:
                process = psutil.Process(pid)
                process.kill()
                process.wait(10)
        if self.turn <= 2:
            return tool_call_action("reset", {"seed": 0}) if self.turn == 1 else tool_call_action("step", {"action": 1})
        return tool_call_action("submit_answer", {"answer": 4})


def test_a_server_that_dies_ends_its_episode_unanswered_and_the_next_episode_connects_afresh(tmp_path):
    env = ToolTaskEnv([TASK], server=serve_command("env:CartPole-v1"), call_timeout_s=30)
    try:
        lost = gauntlet.rollout(env, _KillServerThenAnswer(_children()), seed=0, record=tmp_path / "lost.jsonl")
        (recorded,) = gauntlet.load_episodes(tmp_path / "lost.jsonl")
        last = recorded.steps[-1]
        assert len(recorded.steps) == 2 and last.truncated and not last.terminated
        assert last.tool_call.is_error and last.tool_call.result == {"error": SERVER_LOST}
        assert last.info["server_lost"] and last.info["score"] == 0.0
        assert lost.outcome.success is False

        # The next episode starts a new server and finishes normally.
        env.reset(seed=0)
        assert not env.step(tool_call_action("reset", {"seed": 0}))[2]
        _, reward, terminated, _, info = env.step(tool_call_action("submit_answer", {"answer": 4}))
        assert terminated and info["score"] == 1.0 and "server_lost" not in info
    finally:
        env.close()


def test_a_call_waiting_when_its_session_ends_fails_as_session_ended_not_as_a_timeout():
    """The race CI hit: writing to a dead server can cancel the transport before its output ends, and the
    SDK then never answers the pending request. The client watches the session's holder instead."""
    import asyncio

    from mcp.server.fastmcp import FastMCP

    from gauntlet.bridges.mcp_client import BlockingMCPClient, ServerTarget, SessionEnded

    entered = asyncio.Event()

    def server() -> FastMCP:
        app = FastMCP("hangs")

        @app.tool()
        async def wait_forever() -> str:
            entered.set()
            await asyncio.Event().wait()
            return "never"

        return app

    client = BlockingMCPClient(ServerTarget(factory=server), timeout_s=120)
    try:
        client.open()
        holder = client._holder
        # End the session's transport from inside once the call is pending (the SDK will not answer it).
        async def end_when_pending():
            await entered.wait()
            for task in asyncio.all_tasks():
                if task.get_coro().__name__ == "_hold_session":
                    task.cancel()

        asyncio.run_coroutine_threadsafe(end_when_pending(), client._loop)
        try:
            client.call_tool("wait_forever", {})
        except SessionEnded:
            pass
        else:
            raise AssertionError("a call whose session ended returned")
        assert holder.done()
        # Any later call fails at once the same way, and a fresh open serves again.
        try:
            client.call_tool("wait_forever", {})
        except SessionEnded:
            pass
        else:
            raise AssertionError("a call on an ended session returned")
        client.open()
        assert [tool.name for tool in client.list_tools()] == ["wait_forever"]
    finally:
        client.close()
