"""A short LLM-agent episode: the offline default model prices nothing yet, but looks a chemical up.

``run_demo(out_dir)`` starts the chem server on the demo-size catalogue, asks the offline model
(``gauntlet.agents.llm.offline_model``, pinned and checked by SHA-256) one question that takes a tool
call and an answer, records the episode through the runner and writes its trace
(``out_dir/llm_episode.jsonl``, ``out_dir/llm_trace.html``). The model runs on the CPU, so it is shown
only the tool the question needs and its replies are capped; the episode takes a few minutes; what
it answers is scored honestly, right or wrong.
"""

from __future__ import annotations

import functools
from pathlib import Path

QUESTION = ("What is the catalogue id (chemical_id) of {name}? Look it up with search_chemical, then answer "
            "with the id alone.")
CHEMICAL = "ethanol"
MAX_MODEL_CALLS = 4
# The model is shown the one tool the question needs: with all of the chem server's tools its first
# prompt is 3,299 tokens and the episode took 451 s on one CPU thread; with one tool, 522 and 209 s.
TOOLS = ("search_chemical",)
# A call or the id fits in this; a reply that rambles past it is cut (8 tokens/s on one core).
MAX_NEW_TOKENS = 96


def run_demo(out_dir: Path, max_model_calls: int = MAX_MODEL_CALLS) -> None:
    from gauntlet import load_episodes, rollout
    from gauntlet.agents.llm.agent import LLMAgent
    from gauntlet.agents.llm.records import conversation
    from gauntlet.bridges.tool_task_env import ToolTaskEnv
    from gauntlet.mcp_servers.chem.build import catalogue_path
    from gauntlet.mcp_servers.chem.demo import DEMO_CATALOGUE
    from gauntlet.mcp_servers.chem.server import build_server, open_catalogue
    from gauntlet.report import write_report
    from gauntlet.tasks import EvalSpec, ToolTask

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    database = catalogue_path(**DEMO_CATALOGUE)
    catalogue, grounder, _ = open_catalogue(Path(database).resolve())
    expected = grounder.search(CHEMICAL, limit=1)[0].chemical_id
    task = ToolTask(id="demo/lookup-ethanol", question=QUESTION.format(name=CHEMICAL), answer=expected,
                    eval_spec=EvalSpec(kind="numeric"))
    env = ToolTaskEnv([task], server=functools.partial(build_server, database))
    print(f"LLM agent demo: the offline model looks up {CHEMICAL!r} on the chem server "
          f"(at most {max_model_calls} model calls on the CPU; the first run converts the model once, about two "
          "minutes; later runs load it in seconds)")
    agent = LLMAgent(model="offline", model_options={"max_new_tokens": MAX_NEW_TOKENS}, max_steps=max_model_calls,
                     tools=TOOLS)
    path = out / "llm_episode.jsonl"
    path.unlink(missing_ok=True)
    try:
        episode = rollout(env, agent, seed=0, record=path)
    finally:
        env.close()
    recorded = load_episodes(path)[0]
    for message in conversation(recorded):
        text = str(message.content or "")
        calls = getattr(message, "tool_calls", None) or []
        shown = "; ".join(f"{call['name']}({call.get('args', call.get('arguments'))})" for call in calls) or text
        print(f"  {message.type:>9}: {shown[:160]}")
    outcome = episode.outcome
    assert outcome is not None
    print(f"answer scored {outcome.score:.1f} (expected chemical_id {expected}); "
          f"{len(recorded.steps)} steps, {outcome.metrics.get('wall_s', 0.0):.0f} s")
    report = write_report([path], out / "llm_trace.html")
    print(f"trace of the episode (conversation, tool calls, model calls): {report}")
