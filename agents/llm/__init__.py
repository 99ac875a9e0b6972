"""gauntlet.agents.llm: LangGraph tool-calling agents that drive Gauntlet's tool servers and envs."""
