"""Task results of an LLM agent on the chem and disaster suites: by default the offline model.

    python experiments/llm_offline.py [--size smoke|full] [--model SPEC] [--only chem|disaster]
                                      [--out experiments/results/llm/offline]

What it runs (each part is a ``gauntlet eval`` run folder under ``--out``, so a rerun resumes it):

* **chem**, ChemCost setting (``mode: chemcost``): the first ``tasks`` tasks of the clean view, each
  attempted ``repeats`` times; success is CTA@25 (the $/g answer within 25 % of the truth); pass@k and
  pass^k with bootstrap CIs over tasks (the tau-bench convention). The attempts of one task must be
  able to differ, so a local model samples (temperature 0.7, top-p 0.8, top-k 20: Qwen2.5's own
  generation settings), seeded by the attempt's recorded seed: a rerun gives the same replies.
* **disaster**, DORA T1-T3, in both modes: autonomous planning (question and all 132 tools) and
  instruction following (the same plus the gold tool plan as numbered steps); ``per_dimension`` tasks
  of each dimension, drawn with a seeded shuffle; greedy decoding, one attempt. Reported as DORA
  does: answer accuracy per dimension and their macro average (the DORA score), and the trajectory
  metrics (tool in-order, tool exact match, parameter accuracy).

For every part: the share of the model's calls that were malformed (unparseable, unknown tool,
arguments that break the schema), model calls, tokens and seconds per episode. Budgets: chem 16
model calls (its gold trajectories have 10-12 calls), disaster 10 (gold 2-5).

``--model`` takes any agent model spec (``openai:<model>@<url>`` for an OpenAI-compatible endpoint,
``hf:<path>`` with ``--device cuda:0`` for a GPU). The smoke size (tested) runs one or two attempts of
two model calls each, so with ``scripted:<file>`` it checks the plumbing in seconds.

Writes ``<out>/llm_offline.json`` and ``<out>/llm_offline.md``, and prints the tables.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from statistics import fmean
from typing import Any

SIZES: dict[str, dict[str, Any]] = {
    "smoke": {"chem": {"tasks": 1, "repeats": 2, "max_steps": 2},
              "disaster": {"per_dimension": 1, "max_steps": 2}},
    # Sized for about two hours on 2 cores with the offline model on CPU: its chem calls took 35-170 s
    # each (3,400-4,500-token prompts, one thread, the machine shared), one chem attempt 9-32 minutes,
    # disaster's first prompt 19-24 minutes.
    "full": {"chem": {"tasks": 1, "repeats": 3, "max_steps": 16},
             "disaster": {"per_dimension": 2, "max_steps": 10}},
}
DIMENSIONS = ("T1", "T2", "T3")
DISASTER_MODES = ("autonomous", "instruction")
# Qwen2.5's generation_config: what its authors sample with.
SAMPLING = {"temperature": 0.7, "top_p": 0.8, "top_k": 20}
MAX_NEW_TOKENS = 256
LOCAL_BACKENDS = ("offline", "hf")


def model_options(model: str, *, sample: bool, device: str | None) -> dict[str, Any]:
    """Options for a local model (sampling for repeated attempts, a reply cap, the device); none for
    other backends, whose own defaults apply."""
    from gauntlet.agents.llm.models import parse_spec

    if parse_spec(model).backend not in LOCAL_BACKENDS:
        return {}
    options: dict[str, Any] = {"max_new_tokens": MAX_NEW_TOKENS, **(SAMPLING if sample else {})}
    if device:
        options["device"] = device
    return options


def disaster_sample(per_dimension: int, suite: str = "disaster", seed: int = 0) -> list[str]:
    """``per_dimension`` task ids of each of T1-T3, a seeded draw from the registered ``suite``."""
    from gauntlet.evaluation import suite_tasks

    tasks = suite_tasks(suite)
    rng = random.Random(seed)
    chosen: list[str] = []
    for dimension in DIMENSIONS:
        ids = sorted(task.id for task in tasks if task.metadata.get("dimension") == dimension)
        chosen += rng.sample(ids, per_dimension)
    return chosen


def usage(evaluation: Any, folder: Path) -> dict[str, Any]:
    """Model calls, tokens and seconds per attempt (the evaluation's own figures), and the calls the
    model proposed and how many were malformed (read from the episodes: a malformed call never runs, so
    it is a ``note`` event, and every call that ran on the server is a step's ``tool_call``; answers
    and stops are the env's own calls)."""
    from gauntlet import load_episodes
    from gauntlet.bridges.tool_task_env import ENV_SERVER

    results = evaluation.results
    steps = [step for episode in load_episodes(folder) for step in episode.steps]
    ran = sum(step.tool_call is not None and step.tool_call.server != ENV_SERVER for step in steps)
    malformed = sum(len(event.data["malformed_calls"]) for step in steps for event in step.events
                    if event.kind == "note" and "malformed_calls" in event.data)
    seconds = [result.wall_s for result in results if result.wall_s is not None]
    return {"episodes": len(results), "model_calls": sum(result.model_calls for result in results),
            "calls_proposed": ran + malformed, "malformed_calls": malformed,
            "malformed_share": malformed / (ran + malformed) if ran + malformed else None,
            "tokens_per_episode": fmean(r.input_tokens + r.output_tokens for r in results) if results else None,
            "seconds_per_episode": fmean(seconds) if seconds else None,
            "model_calls_per_episode": fmean(r.model_calls for r in results) if results else None}


def dora_reports(folder: Path, suite: str) -> list[dict[str, Any]]:
    """The DORA report of every finished attempt in a run folder, its answer graded again with the
    current grader (the recorded report is what the grader said when the episode ran; a grader fix
    since then changes the answer score, and ``recorded_answer_score`` keeps the old one)."""
    from gauntlet import load_episodes
    from gauntlet.evaluation import suite_tasks
    from gauntlet.mcp_servers.disaster.scoring import grade_answer

    tasks = {task.id: task for task in suite_tasks(suite)}
    reports = []
    for episode in load_episodes(folder):
        final = episode.steps[-1] if episode.steps else None
        details = (final.privileged or {}).get("details", {}) if final is not None else {}
        if "dora" not in details:
            continue
        report = dict(details["dora"])
        answer = json.loads(final.action).get("answer") if final is not None and final.action.startswith("{") else None
        task = tasks[report["task_id"]]
        if answer is not None:
            score, correct, check = grade_answer(task.metadata["eval_spec"], task.answer, answer)
            report.update(recorded_answer_score=report["answer_score"], answer_score=score, answer_correct=correct,
                          answer_check=check)
        reports.append(report)
    return reports


def dora_summary(reports: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Answer accuracy per dimension and their macro average (the DORA score), and mean trajectory metrics."""
    by_dimension = {dimension: [r for r in reports if r["dimension"] == dimension] for dimension in DIMENSIONS}
    accuracy = {dimension: fmean(r["answer_score"] for r in rows) for dimension, rows in by_dimension.items() if rows}
    metrics = sorted({key for r in reports for key in r["trajectory"]})
    return {"accuracy": accuracy, "dora_score": fmean(accuracy.values()) if accuracy else None,
            "trajectory": {key: fmean(r["trajectory"][key] for r in reports) for key in metrics} if reports else {},
            "attempts": len(reports)}


def run_chem(out: Path, model: str, plan: dict[str, Any], device: str | None, suite: str) -> dict[str, Any]:
    from gauntlet.evaluation import evaluate_suite

    folder = out / "chem"
    config = {"model": model, "mode": "chemcost", "max_steps": plan["max_steps"],
              "model_options": model_options(model, sample=plan["repeats"] > 1, device=device)}
    evaluation = evaluate_suite(suite, "llm", folder, agent_config=config, limit=plan["tasks"],
                                repeats=plan["repeats"], workers=1)
    return {"config": config, "tasks": plan["tasks"], "repeats": plan["repeats"],
            "mean_score": evaluation.mean_score, "success_rate": evaluation.success_rate,
            "per_task": [{"task": tally.task_id, "successes": tally.successes, "attempts": tally.attempts}
                         for tally in evaluation.tallies()],
            "pass_k": [{"k": row.k, "pass_at_k": row.pass_at_k, "pass_at_k_ci": row.pass_at_k_ci,
                        "pass_hat_k": row.pass_hat_k, "pass_hat_k_ci": row.pass_hat_k_ci}
                       for row in evaluation.pass_k()],
            **usage(evaluation, folder)}


def run_disaster(out: Path, model: str, plan: dict[str, Any], device: str | None, suite: str) -> dict[str, Any]:
    from gauntlet.evaluation import evaluate_suite

    ids = disaster_sample(plan["per_dimension"], suite)
    result: dict[str, Any] = {"tasks": ids}
    for mode in DISASTER_MODES:
        folder = out / f"disaster-{mode}"
        config = {"model": model, "mode": mode, "max_steps": plan["max_steps"],
                  "model_options": model_options(model, sample=False, device=device)}
        evaluation = evaluate_suite(suite, "llm", folder, agent_config=config, task_ids=ids, workers=1)
        result[mode] = {"config": config, "mean_score": evaluation.mean_score,
                        **dora_summary(dora_reports(folder, suite)), **usage(evaluation, folder)}
    return result


def tables(results: dict[str, Any]) -> str:
    lines = [f"# LLM agent task results: {results['model']} ({results['size']} size)", ""]
    chem = results.get("chem")
    if chem:
        lines += [f"## chem, ChemCost, clean view: first {chem['tasks']} tasks x {chem['repeats']} attempts", "",
                  "| k | pass@k [95% CI] | pass^k [95% CI] |", "|---|---|---|"]
        for row in chem["pass_k"]:
            lines.append(f"| {row['k']} | {row['pass_at_k']:.3f} [{row['pass_at_k_ci'][0]:.3f}, "
                         f"{row['pass_at_k_ci'][1]:.3f}] | {row['pass_hat_k']:.3f} [{row['pass_hat_k_ci'][0]:.3f}, "
                         f"{row['pass_hat_k_ci'][1]:.3f}] |")
        lines += ["", _usage_line(chem), ""]
    disaster = results.get("disaster")
    if disaster:
        lines += [f"## disaster, DORA T1-T3: {len(disaster['tasks'])} tasks, one attempt each", "",
                  "| mode | T1 | T2 | T3 | DORA score | tool in-order | tool exact | parameter accuracy | "
                  "malformed calls | s / episode |", "|---|---|---|---|---|---|---|---|---|---|"]
        for mode in DISASTER_MODES:
            row = disaster[mode]
            acc = row["accuracy"]
            trajectory = row["trajectory"]
            lines.append(f"| {mode} | " + " | ".join(f"{acc.get(d, float('nan')):.2f}" for d in DIMENSIONS) +
                         f" | {_num(row['dora_score'])} | {_num(trajectory.get('tool_in_order'))} | "
                         f"{_num(trajectory.get('exact_match'))} | {_num(trajectory.get('parameter_accuracy'))} | "
                         f"{row['malformed_calls']}/{row['calls_proposed']} | {_num(row['seconds_per_episode'], 0)} |")
        lines.append("")
    return "\n".join(lines)


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _usage_line(part: dict[str, Any]) -> str:
    return (f"{part['episodes']} episodes; malformed calls {part['malformed_calls']} of {part['calls_proposed']}; "
            f"{_num(part['model_calls_per_episode'], 1)} model calls, {_num(part['tokens_per_episode'], 0)} tokens "
            f"and {_num(part['seconds_per_episode'], 0)} s per episode.")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--model", default="offline", help="agent model spec (default: the offline model)")
    parser.add_argument("--device", default=None, help="torch device of a local model, e.g. cuda:0")
    parser.add_argument("--only", choices=("chem", "disaster"), default=None)
    parser.add_argument("--out", type=Path, default=Path("experiments/results/llm/offline"))
    parser.add_argument("--chem-suite", default="chem", help="registered suite for the chem part")
    parser.add_argument("--disaster-suite", default="disaster", help="registered suite for the DORA part")
    args = parser.parse_args(argv)
    import gauntlet  # noqa: F401 - registers the suites and the agent
    from gauntlet.errors import UserError

    plan = SIZES[args.size]
    out = args.out if args.size == "full" else args.out / "smoke"
    out.mkdir(parents=True, exist_ok=True)
    path = out / "llm_offline.json"
    ran: dict[str, Any] = {}
    try:
        for part, runner, suite in (("chem", run_chem, args.chem_suite),
                                    ("disaster", run_disaster, args.disaster_suite)):
            if args.only in (None, part):
                ran[part] = runner(out, args.model, plan[part], args.device, suite)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    from gauntlet.fileio import write_atomically

    # Parts may run in separate processes (--only): each adds its own to what the file holds now.
    results: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    if results.get("model") not in (None, args.model):
        results = {}
    results.update({"model": args.model, "size": args.size, "plan": plan, **ran})
    write_atomically(path, json.dumps(results, indent=2, default=str))
    text = tables(results)
    write_atomically(out / "llm_offline.md", text)
    print(text)
    return results


if __name__ == "__main__":
    main()
