"""Script builders and controllers shared by the LLM agent's tests."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

from gauntlet.agents.llm.agent import CONFIDENCE_QUESTION
from gauntlet.agents.llm.scripted import ScriptedChatModel

from gauntlet.hooks import Decision, Prefix
from gauntlet.tasks import EvalSpec, ToolTask


def text_call(name: str, arguments: dict[str, Any]) -> dict[str, str]:
    """A turn writing one call as a small local model does: prose, then bare JSON."""
    return {"text": f"I will call {name}. " + json.dumps({"name": name, "arguments": arguments})}


def gold_turns(task: ToolTask) -> list[dict[str, Any]]:
    """Turns that make the task's gold calls one by one."""
    return [text_call(call.call, call.args) for call in task.gold_trajectory]


def answer_turn(answer: Any) -> dict[str, str]:
    """A turn that ends the task: a call of the env's answer tool, as the agent's harness asks."""
    return text_call("submit_answer", {"answer": answer})


class ReplaceWhen:
    """Replaces the first proposed call of tool ``name`` with ``action``."""

    name = "replace-when"

    def __init__(self, tool: str, action: str):
        self.tool, self.action, self.done = tool, action, False

    def decide(self, prefix: Prefix, candidates: list[Any]) -> Decision:
        proposed = json.loads(candidates[0])
        if not self.done and proposed.get("name") == self.tool:
            self.done = True
            return Decision.intervene("replace_action", action=self.action, reason="test replacement")
        return Decision.proceed()


class HaltAt:
    """Halts before step ``index``."""

    name = "halt-at"

    def __init__(self, index: int):
        self.index = index

    def decide(self, prefix: Prefix, candidates: list[Any]) -> Decision:
        if len(prefix.steps) == self.index:
            return Decision.intervene("halt", reason="test halt")
        return Decision.proceed()


def small_server() -> FastMCP:
    """A small tool server: ``add``, ``wait`` (sleeps, to outlive a timeout) and ``meet`` (returns
    once two calls are in flight at the same time, so only concurrent calls finish)."""
    server = FastMCP("small", log_level="WARNING")
    arrivals: list[str] = []
    together = asyncio.Event()

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True, idempotentHint=True))
    def add(a: float, b: float) -> float:
        """a + b."""
        return a + b

    @server.tool()
    async def wait(seconds: float) -> str:
        """Sleeps ``seconds``, then says so."""
        await asyncio.sleep(seconds)
        return f"waited {seconds} s"

    @server.tool()
    async def meet(name: str) -> str:
        """Returns once a second caller is waiting too."""
        arrivals.append(name)
        if len(arrivals) >= 2:
            together.set()
        await together.wait()
        return f"{name} met {', '.join(other for other in arrivals if other != name)}"

    return server


def small_task(question: str = "Add 2 and 3.", answer: Any = 5.0) -> ToolTask:
    return ToolTask(id="small", question=question, answer=answer, eval_spec=EvalSpec(kind="numeric"))


def run_scripted(turns: list[dict[str, Any]], **options: Any) -> Any:
    """One episode of the small task by an LLM agent whose model replies ``turns`` (agent ``options``)."""
    import gauntlet
    from gauntlet.agents.llm.agent import LLMAgent
    from gauntlet.agents.llm.scripted import ScriptedChatModel
    from gauntlet.bridges.tool_task_env import ToolTaskEnv

    env = ToolTaskEnv([small_task()], small_server)
    try:
        return gauntlet.rollout(env, LLMAgent(model=ScriptedChatModel.model_validate({"turns": turns}), **options),
                                seed=0)
    finally:
        env.close()


class Confident(ScriptedChatModel):
    """Plays its script, and answers the agent's confidence question with the next of ``answers`` (the last
    one again once they run out), noting the conversation length at each question in ``asked``."""

    answers: list[str] = []
    asked: list[int] = []

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        last = messages[-1]
        if isinstance(last, HumanMessage) and last.content == CONFIDENCE_QUESTION:
            self.asked.append(len(messages))
            answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=answer))])
        return super()._generate(messages, stop, run_manager, **kwargs)
