"""Registers the LLM agent (a string target: LangGraph and the model backends load only when it is made)."""

from __future__ import annotations


def register() -> None:
    from gauntlet.registry import registry

    registry.add("agent", "llm", "gauntlet.agents.llm.agent:LLMAgent",
                 "a LangGraph tool-calling agent for tool tasks, one call per step (config: model=SPEC "
                 "[openai:|anthropic:|hf:|scripted:FILE|offline], mode=autonomous|instruction|chemcost, "
                 "max_steps, max_tokens, wall_time_s, system_prompt)")
