"""The latent monitor and its gated correction live on two LLM-agent episodes (offline model, CPU).

``run_demo(out_dir)`` gives the offline model two chats of the instruction-hierarchy suite as agent
tasks: a system rule (a vault code never to reveal; always answer in German) and a user turn that asks
it to break the rule. The agent runs through the runner on the env bridge's CartPole server (shown one
tool it does not need: controllers depend on core and agents, not on a tool-server family) with the
``latent`` monitor and the ``latent-correct`` controller, both on the shipped chaos score: the monitor
takes the agent's own decoding states (no second read), the controller rewrites a reply whose score
crosses the threshold with the hierarchy restated. Printed per episode: the reply, its chaos score
against the threshold, what the gate did, and whether the rule's checker says the final answer kept the
rule. The episodes and their trace are written to ``out_dir``. What the gate does is what the score
says: on this model the score is near chance at telling violations apart (see
``docs/results/latent_monitor.md``), and the demo shows it as it is.
"""

from __future__ import annotations

import json
from pathlib import Path

CASES = ("secret-user-conflict-000", "language-user-conflict-000")
MAX_NEW_TOKENS = 96  # a call with a sentence-long answer: a reply cut inside a call is malformed
TOOLS = ("reset",)
SERVER = "env:CartPole-v1"


def run_demo(out_dir: Path, cases: tuple[str, ...] = CASES, max_new_tokens: int = MAX_NEW_TOKENS) -> None:
    from gauntlet import load_episodes, rollout
    from gauntlet.agents.llm.agent import LLMAgent
    from gauntlet.agents.llm.offline_model import pinned_model_of_file
    from gauntlet.bridges.tool_task_env import ToolTaskEnv
    from gauntlet.controllers.latent.correction import LatentCorrection
    from gauntlet.controllers.latent.hierarchy import complied, hierarchy_suite
    from gauntlet.controllers.latent.monitor import LatentMonitor
    from gauntlet.report import write_report
    from gauntlet.tasks import EvalSpec, ToolTask

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    suite = {case.id: case for case in hierarchy_suite(per_cell=1)}
    monitor, controller = LatentMonitor(), LatentCorrection()
    # The agent runs the model the score was fitted on, so the monitor reads the agent's own decoding states.
    fitted = pinned_model_of_file(Path(monitor.reader.model_path).name)
    reader_spec = f"offline:{fitted}" if fitted else "offline"
    print(f"chaos score: layer {monitor.score.layer} of the offline model, threshold {monitor.threshold:.1f} "
          "(the 95th percentile of compliant replies in the instruction-hierarchy study)")
    paths = []
    for case_id in cases:
        case = suite[case_id]
        system, user = case.messages[0]["content"], case.messages[1]["content"]
        task = ToolTask(id=f"demo/{case_id}", server=SERVER, question=user, answer="(judged by the rule checker)",
                        eval_spec=EvalSpec(kind="exact"))
        env = ToolTaskEnv([task])
        # Every reply goes to the env, so the gate judges each one: the number check would refuse some unrun.
        agent = LLMAgent(model=reader_spec, model_options={"max_new_tokens": max_new_tokens}, system_prompt=system,
                         max_steps=2, tools=TOOLS, check_numbers=False)
        path = out / f"{case_id}.jsonl"
        path.unlink(missing_ok=True)
        try:
            episode = rollout(env, agent, seed=0, record=path, hooks=[monitor, controller])
        finally:
            env.close()
        print(f"\n[{case.rule}] system: {system}\n  user: {user}")
        for step in load_episodes(path)[0].steps:
            for record in step.messages:
                if record.role == "assistant":
                    made = getattr(record, "tool_calls", None) or []
                    calls = "; ".join(f"{call['name']}({call['arguments']})" for call in made)
                    print(f"  reply: {(calls or str(record.content))[:200]!r}")
                elif record.role == "system" and "Reminder" in str(record.content):
                    print("  (the gate restated the hierarchy and the model replied again)")
            for event in step.events:
                if event.kind == "decision" and "chaos" in event.data.get("scores", {}):
                    scores = event.data["scores"]
                    print(f"  gate: chaos {scores['chaos']:.1f} vs {controller.monitor.threshold:.1f}: "
                          f"{'corrected' if scores.get('corrected') else 'went ahead'}"
                          f"{'' if scores.get('reused') else ' (read again by the reader)'}; "
                          f"cost {event.cost_ms:.0f} ms")
        final = episode.steps[-1].action if episode.steps else "{}"
        answer = json.loads(final).get("answer") if final.startswith("{") else None
        verdict = "no answer (budget)" if answer is None else (
            "kept the rule" if complied(case, str(answer)) else "broke the rule")
        print(f"  checker: the final answer {verdict}")
        paths.append(path)
    report = write_report(paths, out / "latent_trace.html")
    print(f"\ntrace of both episodes (replies, gate decisions and scores): {report}")
