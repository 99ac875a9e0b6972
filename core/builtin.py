"""Registrations that ship with the core: the MCP task bridge env and the env bridge server."""

from __future__ import annotations


def register() -> None:
    from gauntlet.registry import register_env

    register_env("ToolTask-v0", "gauntlet.bridges.tool_task_env:ToolTaskEnv")
