"""``gauntlet demo``: the platform end to end in well under a minute, on CartPole-v1.

1. record 40 episodes of the random agent with ``run_many`` on two worker processes;
2. replay one of them and verify that every step reproduces;
3. branch it halfway with the other action and compare the two returns;
4. serve CartPole over MCP and step it from a client session, trying an action and coming back with
   snapshot/restore, while the operator's side sees the rewards the client does not;
5. write the HTML report of the run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from gauntlet.batch import RunSpec, run_many
from gauntlet.episode import AgentSpec, load_episodes
from gauntlet.replay import branch_episode, replay_episode
from gauntlet.report import return_stats, write_report

ENV_ID = "CartPole-v1"
EPISODES = 40
WORKERS = 2


def run_demo(out_dir: str | os.PathLike[str], *, console: Console | None = None) -> Path:
    """Run the demo into ``out_dir`` (run/, branch.jsonl, report.html) and return the report's path."""
    console = console or Console(highlight=False)
    out = Path(out_dir)

    console.rule(f"1. Record {EPISODES} episodes of {ENV_ID}")
    spec = RunSpec(env_id=ENV_ID, agent=AgentSpec(name="random"), seed=0)
    result = run_many(spec, EPISODES, out / "run", workers=WORKERS)
    stats = return_stats([summary.score for summary in result.episodes if summary.score is not None])
    assert stats is not None, "every finished episode has a score"
    console.print(f"recorded in {result.out_dir}: mean return {stats.mean:.2f} "
                  f"(95% CI {stats.ci_low:.2f} to {stats.ci_high:.2f}), one JSONL file per episode")

    console.rule("2. Replay an episode from its record alone")
    episode = load_episodes(out / "run")[0]
    check = replay_episode(episode)
    verdict = "every step matches" if check.matches else f"MISMATCH at {check.divergence}"
    console.print(f"episode {episode.episode_id}: {check.replayed_steps}/{check.recorded_steps} steps "
                  f"re-executed from seed {episode.seed}; {verdict}")

    at = len(episode.steps) // 2
    console.rule(f"3. Branch it at step {at} with the other action")
    recorded_action = int(episode.steps[at].action)
    branched = branch_episode(episode, at, action=1 - recorded_action, record=out / "branch.jsonl")
    table = Table()
    for column in ("", f"action at step {at}", "steps", "return"):
        table.add_column(column)
    table.add_row("original", str(recorded_action), str(len(episode.steps)), f"{episode.total_reward:.0f}")
    table.add_row("branch", str(1 - recorded_action), str(len(branched.steps)), f"{branched.total_reward:.0f}")
    console.print(table)
    console.print(f"the branch is an episode like any other: {out / 'branch.jsonl'}")

    console.rule(f"4. Serve {ENV_ID} over MCP and step it from a client")
    _serve_and_step(console)

    console.rule("5. Report")
    report = write_report(out / "run", out / "report.html")
    console.print(f"report: [bold]{report.resolve()}[/bold]")
    return report


def _serve_and_step(console: Console) -> None:
    try:
        from gauntlet.bridges.env_server import build_env_server
    except ImportError as exc:
        console.print(f"[yellow]skipped: the MCP serving bridge is not available here ({exc})[/yellow]")
        return
    import anyio

    server = build_env_server(ENV_ID)
    try:
        anyio.run(_client_session, server, console)
    finally:
        server.control.close()


async def _client_session(server: Any, console: Console) -> None:
    from mcp.shared.memory import create_connected_server_and_client_session

    async def call(session: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await session.call_tool(tool, arguments)
        if result.isError:
            raise RuntimeError(f"MCP tool {tool} failed: {result.content[0].text}")
        return result.structuredContent

    async with create_connected_server_and_client_session(server) as session:
        listed = await session.list_tools()
        console.print("tools offered to the agent: " + ", ".join(tool.name for tool in listed.tools))
        start = await call(session, "reset", {"seed": 0})
        console.print(f"reset(seed=0) -> observation {_rounded(start['observation'])}")
        saved = await call(session, "snapshot", {})
        tries = []
        for action in (0, 1):  # try each action from the same state, coming back in between
            await call(session, "restore", {"snapshot_id": saved["snapshot_id"]})
            stepped = await call(session, "step", {"action": action})
            tries.append(stepped["observation"])
            console.print(f"restore, step({action}) -> observation {_rounded(stepped['observation'])}")
        again = await call(session, "restore", {"snapshot_id": saved["snapshot_id"]})
        repeat = await call(session, "step", {"action": 1})
        same = repeat["observation"] == tries[1]
        verdict = "the same observation, bit for bit" if same else "a DIFFERENT observation"
        console.print(f"restore, step(1) again -> {verdict} (restored to step {again['step']})")
        # The operator's side, in process here (over MCP it is a separate server the agent never gets).
        for summary in server.control.sessions():
            returns = [episode.total_reward for episode in summary.episodes] + [summary.total_reward]
            console.print(f"the operator sees the rewards the client did not: {summary.session_id} played "
                          f"{len(returns)} episode branches with returns {', '.join(f'{r:g}' for r in returns)}")


def _rounded(values: list[float]) -> str:
    return "[" + ", ".join(f"{value:+.3f}" for value in values) + "]"
