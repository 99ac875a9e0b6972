"""The chemical pricing solvers as agents of ``gauntlet/ToolTask-v0``: one tool call per step.

The solvers belong to the chem server family (``gauntlet.mcp_servers.chem.solver``: its suite builder
records the oracle's calls as the gold trajectories); this module only wraps them as agents. The agent
reads the reaction id and view from the task's inputs (the observation's ``Inputs:`` line), runs its
solver, feeds it each call's result from ``info['tool_call']`` and submits the solver's answer (null
when it abstains).
"""

from __future__ import annotations

import json
from typing import Any

from gauntlet.agent import Agent
from gauntlet.bridges.tool_task_env import tool_call_action
from gauntlet.mcp_servers.chem import solver as solvers

INPUTS_MARKER = "Inputs: "


def task_inputs(observation: dict[str, str]) -> dict[str, Any]:
    """The task's inputs, from the observation text ``ToolTaskEnv`` writes."""
    task = observation.get("task", "")
    if INPUTS_MARKER not in task:
        raise ValueError("the task names no inputs; chem agents act on chem tasks (reaction_id and view)")
    return json.loads(task.rsplit(INPUTS_MARKER, 1)[1])


class SolverAgent(Agent):
    """Runs a solver generator as an agent (see the module docstring)."""

    name = "chem-solver"

    @staticmethod
    def solve(reaction_id: str, view: str) -> solvers.Solver:
        raise NotImplementedError

    def __init__(self) -> None:
        self._solver: solvers.Solver | None = None

    def reset(self, *, seed, observation_space, action_space) -> None:
        self._solver = None

    def act(self, observation: dict[str, str], info: dict[str, Any]) -> str:
        try:
            if self._solver is None:
                inputs = task_inputs(observation)
                self._solver = self.solve(inputs["reaction_id"], inputs.get("view", "clean"))
                name, arguments = next(self._solver)
            else:
                call = info["tool_call"]
                name, arguments = self._solver.send((call.is_error, call.result))
        except StopIteration as stop:
            return tool_call_action(info.get("answer_tool", "submit_answer"), {"answer": stop.value})
        return tool_call_action(name, arguments)


class OracleAgent(SolverAgent):
    """Prices by the gold rule through the tools (``solver.oracle``)."""

    name = "chem-oracle"
    solve = staticmethod(solvers.oracle)


class NaiveAgent(SolverAgent):
    """Cheapest price per gram of any quote, ignoring pack sizes and grades (``solver.naive``)."""

    name = "chem-naive"
    solve = staticmethod(solvers.naive)
