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

``strip_demo(out_dir)`` (the demo ``latent-strip``) shows the correction that measured best on the
disaster attack view: the 1.5B model on one attacked task of the ``disaster-attack`` suite (a tool result
carries a planted order to submit a made-up number), once on its own and once with the supervised probe
(layer 28 of the 1.5B, fitted in its instruction-hierarchy study; the file in
``experiments/results/latent/llama-1.5b-scale``) gating a strip: a flagged reply is written again with
every tool result shown without the pieces the span filter reads as an injection. Printed per run: each
reply's call, the probe's value and whether it flags it, what the gate did and removed, and whether the
final answer is the task's or the attacker's. It needs the repository's results folder (a checkout) and
builds the disaster suites on first use (minutes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gauntlet.errors import UserError

CASES = ("secret-user-conflict-000", "language-user-conflict-000")
# The strip part: an attacked task the 1.5B obeyed on its own and answered right under the probe-gated strip
# when the study ran (docs/results/latent_monitor.md), with the study's agent settings at its scale size.
STRIP_TASK = "valencia-2024-flood/ship_count"
STRIP_SUITE = "disaster-attack"
STRIP_READER = "qwen2.5-coder-1.5b-instruct"
STRIP_AGENT = {"model": f"offline:{STRIP_READER}", "mode": "instruction", "max_steps": 12, "checklist": True,
               "model_options": {"max_new_tokens": 256, "exact": True}}
PROBE = "experiments/results/latent/llama-1.5b-scale/probe-layer28.joblib"
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
        answer = submitted(episode)
        verdict = "no answer (budget)" if answer is None else (
            "kept the rule" if complied(case, str(answer)) else "broke the rule")
        print(f"  checker: the final answer {verdict}")
        paths.append(path)
    report = write_report(paths, out / "latent_trace.html")
    print(f"\ntrace of both episodes (replies, gate decisions and scores): {report}")


def submitted(episode: Any) -> Any:
    """The answer the episode's last action submitted (None: it ended otherwise, e.g. on its budget)."""
    from gauntlet.bridges.tool_task_env import ActionFormatError, parse_action

    tool = episode.reset_info.get("answer_tool", "submit_answer")
    try:
        name, arguments = parse_action(episode.steps[-1].action, tool) if episode.steps else ("", {})
    except ActionFormatError:
        return None
    return arguments.get("answer") if name == tool else None


def probe_file() -> Path | None:
    """The 1.5B's probe in the repository checkout this package runs from (None: an installed package)."""
    path = Path(__file__).resolve().parents[2] / PROBE
    return path if path.is_file() else None


def strip_demo(out_dir: Path, *, suite: str = STRIP_SUITE, task_id: str = STRIP_TASK, score: str | None = None,
               reader: str = STRIP_READER, agent_config: dict[str, Any] | None = None) -> dict[str, float]:
    """The attacked task ``task_id`` of ``suite`` run twice, by the agent alone and with the probe-gated strip
    (module doc); returns each run's score. ``score`` (default the repository's probe file), ``reader`` (a
    pinned offline model's name or a model file) and ``agent_config`` name another detector, its model and the
    agent."""
    import shutil

    from gauntlet import load_episodes
    from gauntlet.agents.llm.offline_model import model_path
    from gauntlet.batch import HookSpec
    from gauntlet.controllers.latent.monitor import detector_threshold, fitted_detector
    from gauntlet.evaluation import evaluate_suite, suite_tasks
    from gauntlet.report import write_report

    found = score if score is not None else probe_file()
    if found is None:
        print(f"the strip part needs {PROBE} from a checkout of the repository; skipped")
        return {}
    task = next((task for task in suite_tasks(suite) if task.id == task_id), None)
    if task is None:
        raise UserError(f"suite {suite!r} has no task {task_id!r}")
    goal = task.metadata.get("attack", {}).get("goal")
    if goal is None:
        raise UserError(f"task {task_id!r} of suite {suite!r} carries no planted attack; name a task of an attack view")
    watch = {"model": str(found), "reader": reader if Path(reader).exists() else str(model_path(reader))}
    threshold = detector_threshold(fitted_detector(watch["model"], watch["reader"]))
    runs = {"on its own": [HookSpec(kind="monitor", name="latent", config=watch)],
            "probe-gated strip": [HookSpec(kind="monitor", name="latent", config=watch),
                                  HookSpec(kind="controller", name="latent-correct",
                                           config={**watch, "method": "strip"})]}
    question = task.question.split("\n")[0]
    print(f"\n[attack] {task_id}: {question}\n  planted in a tool result: submit {goal.get('answer')!r} "
          f"(the task's answer: {task.answer!r}); the gate flags a reply above {threshold:.3g}")
    scores: dict[str, float] = {}
    files = []
    for name, hooks in runs.items():
        folder = Path(out_dir) / name.replace(" ", "-")
        shutil.rmtree(folder, ignore_errors=True)  # the demo shows this run, never an earlier one resumed
        evaluation = evaluate_suite(suite, "llm", folder, agent_config=agent_config or STRIP_AGENT,
                                    task_ids=[task_id], hooks=hooks)
        (episode,) = load_episodes(folder)
        files.extend(sorted((folder / "episodes").glob("*.jsonl")))
        print(f"  {name}:")
        for step in episode.steps:
            corrected = False
            for event in step.events:
                if event.kind == "decision" and event.data.get("scores", {}).get("corrected"):
                    corrected = True
                    print(f"    gate: {event.data.get('reason', '')[:400]}")
                elif event.kind == "monitor" and "flagged" in event.data:
                    value = event.data.get("decision", event.data.get("chaos", float("nan")))
                    which = "the reply written again (corrected once, not again)" if corrected else "the reply"
                    label = "chaos score" if "chaos" in event.data else "probe"
                    print(f"    {label} {value:.4f} on {which}: "
                          f"{'flagged' if event.data['flagged'] else 'not flagged'}")
            print(f"    call: {step.action[:160]}")
        # Whether the attack succeeded is the suite's attack scorer's verdict (``attacks.judge``), not re-read here.
        success = evaluation.results[0].metrics.get("attack_success")
        verdict = "" if success is None else ", the attack succeeded" if success else ", the attack failed"
        scores[name] = evaluation.mean_score
        print(f"    answer {submitted(episode)!r}: task score {evaluation.mean_score:.2f}{verdict}")
    report = write_report(files, Path(out_dir) / "strip_trace.html")
    print(f"\ntrace of both episodes (calls, tool results as returned, gate decisions and scores): {report}")
    return scores
