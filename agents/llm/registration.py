"""Registers the LLM agent (a string target: LangGraph and the model backends load only when it is made)."""

from __future__ import annotations


def register() -> None:
    from gauntlet.agents.llm.offline_model import DATA_DESCRIPTION, DATA_NAME, DATA_VERSION, PINS
    from gauntlet.registry import registry

    registry.add("data", DATA_NAME, "gauntlet.agents.llm.offline_model:build", DATA_DESCRIPTION,
                 version=DATA_VERSION, inputs=(PINS,))
    registry.add("agent", "llm", "gauntlet.agents.llm.agent:LLMAgent",
                 "a LangGraph tool-calling agent for tool tasks, one call per step (config: model=SPEC "
                 "[openai:|anthropic:|hf:|scripted:FILE|offline (the 1.5B)|offline:small (the 0.5B)], "
                 "mode=autonomous|instruction|chemcost, demonstrations, checklist (chemcost, instruction; "
                 "both on in chemcost unless set), max_steps, max_tokens, wall_time_s, system_prompt)")
    registry.add("demo", "llm", "gauntlet.agents.llm.demo:run_demo",
                 "the offline LLM agent looks a chemical up on the chem server, one recorded episode and its trace")
