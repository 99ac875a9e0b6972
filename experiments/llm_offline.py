"""Task results of the offline LLM agent on the chem and disaster suites, and the harness's ablations.

    python experiments/llm_offline.py [--size smoke|slice|full] [--model SPEC] [--only PART[,PART...]]
                                      [--workers N] [--out DIR]

Parts (each a ``gauntlet eval`` run folder under ``--out``, so a rerun resumes it where it stopped):

* ``chem``: ChemCost setting (``mode: chemcost``), clean view: the first ``chem_tasks`` tasks of the
  suite's *evaluation split* (``gauntlet.agents.llm.demonstrations``: demonstrations come from the
  training split, never from a task evaluated here), each attempted ``repeats`` times; success is
  CTA@25 (the $/g answer within 25 % of the truth); pass@k and pass^k with bootstrap CIs over tasks
  (the tau-bench convention). Attempts of one task must be able to differ, so the local model samples
  (temperature 0.7, top-p 0.8, top-k 20: Qwen2.5's own generation settings), seeded by the attempt's
  recorded seed.
* ``disaster``: DORA T1-T3 in both modes, autonomous planning and instruction following (the
  question, the tools, and in instruction mode the gold tool plan); ``per_dimension`` tasks of each
  dimension drawn with a seeded shuffle from the evaluation split, taken one of each dimension in turn
  (a larger ``--per-dimension`` grows a folder); greedy, one attempt; each mode with
  the harness options it turns on by default written out (``MODE_DEFAULTS``: the instruction mode's
  checklist), so a folder keeps its harness when a default changes. Reported as
  DORA does: answer accuracy per dimension and their macro average (the DORA score), and the
  trajectory metrics.
* ``ablations``: harness settings, greedy, one attempt, on a slice of ``slice`` tasks. On chem a setting
  names the options it turns on; the rest of ``CHEM_HARNESS`` (a worked example, the checklist) is off
  whatever the agent's defaults are: ``bare`` (neither), constrained decoding off, demonstrations, the
  number check off, redrawing repeated replies off, a ``Thought:`` line before each call (with and without
  a demonstration), the checklist of components priced (with and without a demonstration), the other
  pinned model (bare, and with a demonstration and the checklist), and one change at a time against the
  agent's chemcost defaults (a demonstration and the checklist): constrained decoding off, the number check
  off. On disaster (autonomous unless a setting says), the tool scope k = 8, 16, 32 and all 132 tools, and
  the instruction mode without its checklist (the plan's progress after each result), and the autonomous
  mode with a worked example.

For every run: malformed calls (unparseable, unknown tool, arguments that break the schema), repeated
calls answered from memory, replies redrawn because they repeated a call, calls refused for numbers the
episode never showed, replies without a call, model calls, tokens, seconds per episode and per
step, and the peak resident memory of the processes that ran it. Budgets: chem 25 model calls (its
gold trajectories have 10-12 calls), disaster 12 (gold 2-5).

``--model`` takes any agent model spec (``offline`` is the default model on llama.cpp, the 1.5B;
``offline:small`` the 0.5B; ``openai:<model>@<url>`` an OpenAI-compatible endpoint). An offline spec is
recorded by the pinned model it names (``offline`` as ``offline:qwen2.5-coder-1.5b-instruct``), so a
record keeps its meaning when the default changes. The results of a ``--out`` folder are one model's
(default: ``DEFAULT_OUT`` of the pinned model, else ``experiments/results/llm/<model>``); a folder holding
another model's is refused.

The smoke size (tested) runs one or two attempts of two model calls each, so with ``scripted:<file>``
it checks the plumbing in seconds.

Writes ``<out>/llm_offline.json`` and ``<out>/llm_offline.md``, and prints the tables.

Two runs side by side (say a chem part and some ablation settings, each ``--workers 1``): a process
decodes with every CPU it may use, so two unpinned ones share the cores, both slow down, and the
seconds they record say so. Pin each to its own: ``taskset -c 0 python experiments/llm_offline.py ...``
and ``taskset -c 1 ...`` (the decoder follows the process's CPU mask, or ``OMP_NUM_THREADS``).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import resource
import sys
from collections.abc import Sequence
from pathlib import Path
from statistics import fmean
from typing import Any

SIZES: dict[str, dict[str, Any]] = {
    "smoke": {"chem_tasks": 1, "repeats": 2, "chem_steps": 2, "per_dimension": 1, "disaster_steps": 2, "slice": 1},
    # The ablations alone, on 10 tasks each.
    "slice": {"chem_tasks": 0, "repeats": 0, "chem_steps": 25, "per_dimension": 0, "disaster_steps": 12,
              "slice": 10},
    # DORA: 30 tasks a mode, 10 of each of T1-T3 (about 1 h autonomous, 30 min instruction on 2 cores).
    "full": {"chem_tasks": 40, "repeats": 3, "chem_steps": 25, "per_dimension": 10, "disaster_steps": 12,
             "slice": 10},
}
PARTS = ("chem", "disaster", "ablations")
DIMENSIONS = ("T1", "T2", "T3")
DISASTER_MODES = ("autonomous", "instruction")
# Qwen2.5's generation_config: what its authors sample with.
# The other pinned model of each, by the name ``recorded_spec`` gives every offline spec before a run.
OTHER_MODEL = {"offline:qwen2.5-coder-1.5b-instruct": "offline:qwen2.5-coder-0.5b-instruct",
               "offline:qwen2.5-coder-0.5b-instruct": "offline:qwen2.5-coder-1.5b-instruct"}
# The chem harness options a setting names explicitly (on if the setting says so, else off), so that a setting
# means the same harness whatever the agent's defaults are (chemcost now turns both on when unset).
CHEM_HARNESS = {"demonstrations": False, "checklist": False}
# Each pinned model's results folder (the 0.5B's was named when it was the default).
DEFAULT_OUT = {"offline:qwen2.5-coder-0.5b-instruct": "experiments/results/llm/offline",
               "offline:qwen2.5-coder-1.5b-instruct": "experiments/results/llm/offline-1.5b"}
# The harness of ``gauntlet eval chem --agent llm`` (the chemcost mode's defaults, ``MODE_DEFAULTS``; a test
# holds the two together): the chem part's default.
DEFAULT_CHEM_SETTING = "demonstrations + checklist"
CHEM_ABLATIONS: dict[str, dict[str, Any]] = {
    # Neither a worked example nor the checklist: the agent's default before the defaults changed.
    "bare": {},
    "unconstrained": {"model_options": {"constrain_calls": False}},
    "demonstrations": {"demonstrations": True},
    "numbers unchecked": {"check_numbers": False},
    "no redraws": {"model_options": {"resample_repeats": 0}},
    "answer review": {"review_answer": True},
    "demonstrations + review": {"demonstrations": True, "review_answer": True},
    "thoughts": {"thoughts": True},
    "demonstrations + thoughts": {"demonstrations": True, "thoughts": True},
    "checklist": {"checklist": True},
    "demonstrations + checklist": {"demonstrations": True, "checklist": True},
    "other model": {"model": "other"},
    # The other model with the harness that prices reactions, for the choice of the default model.
    "other model + demonstrations + checklist": {"model": "other", "demonstrations": True, "checklist": True},
    # One change at a time against the default harness (a worked example and the checklist).
    "demonstrations + checklist + unconstrained": {"demonstrations": True, "checklist": True,
                                                   "model_options": {"constrain_calls": False}},
    "demonstrations + checklist + numbers unchecked": {"demonstrations": True, "checklist": True,
                                                       "check_numbers": False},
}
# DORA settings run in the autonomous mode unless one names its ``mode``.
DISASTER_ABLATIONS: dict[str, dict[str, Any]] = {
    "scope 8": {"tool_scope": 8}, "scope 16": {"tool_scope": 16}, "scope 32": {"tool_scope": 32},
    "scope all": {"tool_scope": "all"},
    # Against the disaster part's runs on the same tasks (a slice of 3 x n is the part's first n per dimension):
    # the instruction mode without its checklist (the plan's progress after each result, on by default), and
    # the autonomous mode with a worked example (the training task of the same dimension whose question is
    # nearest; its calls' tools are offered too).
    "instruction without checklist": {"mode": "instruction", "checklist": False},
    "autonomous + demonstrations": {"demonstrations": True},
}


def recorded_spec(model: str) -> str:
    """The model spec as results record it: an offline spec by the pinned model it names today
    (``offline`` -> ``offline:qwen2.5-coder-1.5b-instruct``), any other as given (``UserError`` for one
    that names no model)."""
    from gauntlet.agents.llm.models import check_spec
    from gauntlet.agents.llm.offline_model import resolve_name

    parsed = check_spec(model)
    return f"offline:{resolve_name(parsed.model or None)}" if parsed.backend == "offline" else model


def model_options(model: str, *, sample: bool, device: str | None) -> dict[str, Any]:
    """Options for a local model (sampling for repeated attempts, a reply cap, the device of a
    transformers model); none for other backends, whose own defaults apply."""
    from gauntlet.agents.llm.models import LOCAL_BACKENDS, MAX_NEW_TOKENS, SAMPLING, parse_spec

    backend = parse_spec(model).backend
    if backend not in LOCAL_BACKENDS:
        return {}
    options: dict[str, Any] = {"max_new_tokens": MAX_NEW_TOKENS, **(SAMPLING if sample else {})}
    if device and backend == "hf":
        options["device"] = device
    return options


def eval_split(suite: str) -> list[Any]:
    """The registered ``suite``'s tasks in its evaluation split, in suite order."""
    from gauntlet.agents.llm.demonstrations import eval_tasks
    from gauntlet.evaluation import suite_tasks

    return eval_tasks(suite_tasks(suite))


def disaster_sample(per_dimension: int, suite: str = "disaster", seed: int = 0) -> list[str]:
    """``per_dimension`` task ids of each of T1-T3 of the evaluation split, a seeded draw, one task of each
    dimension in turn (T1, T2, T3, T1, ...)."""
    tasks = eval_split(suite)
    drawn: list[list[str]] = []
    for dimension in DIMENSIONS:
        ids = sorted(task.id for task in tasks if task.metadata.get("dimension") == dimension)
        random.Random(f"{seed}-{dimension}").shuffle(ids)
        drawn.append(ids[:per_dimension])
    # One seeded order per dimension, taken in turn: a smaller sample is the start of a larger one, so a run
    # folder grows by resuming it with a larger size (``prepare_run_folder`` reopens it).
    return [ids[k] for k in range(per_dimension) for ids in drawn if k < len(ids)]


def chem_sample(count: int, suite: str = "chem") -> list[str]:
    """The first ``count`` task ids of the evaluation split."""
    return [task.id for task in eval_split(suite)[:count]]


def usage(evaluation: Any, folder: Path) -> dict[str, Any]:
    """Model calls, tokens and seconds per attempt and per step (the evaluation's own figures), and
    what the harness caught, read from the episodes: malformed calls (a ``note`` event: such a call
    never runs), repeated calls answered from memory and replies without a call (``note`` events too),
    against the calls that ran on the server (each a step's ``tool_call``; answers and stops are the
    env's own calls)."""
    from gauntlet import load_episodes
    from gauntlet.bridges.tool_task_env import ENV_SERVER

    results = evaluation.results
    episodes = load_episodes(folder)
    steps = [step for episode in episodes for step in episode.steps]
    notes = [event.data for step in steps for event in step.events if event.kind == "note"]
    ran = sum(step.tool_call is not None and step.tool_call.server != ENV_SERVER for step in steps)
    malformed = sum(len(note["malformed_calls"]) for note in notes if "malformed_calls" in note)
    repeated = sum("repeated_call" in note for note in notes)
    redrawn = sum(int(note["redrawn_repeats"]) for note in notes if "redrawn_repeats" in note)
    ungrounded = sum("ungrounded_numbers" in note for note in notes)
    seconds = [result.wall_s for result in results if result.wall_s is not None]
    return {"episodes": len(results), "model_calls": sum(result.model_calls for result in results),
            "calls_proposed": ran + malformed, "malformed_calls": malformed,
            "malformed_share": malformed / (ran + malformed) if ran + malformed else None,
            "repeated_calls": repeated, "replies_without_call": sum("no_call" in note for note in notes),
            "redrawn_replies": redrawn, "ungrounded_calls": ungrounded,
            "tokens_per_episode": fmean(r.input_tokens + r.output_tokens for r in results) if results else None,
            "seconds_per_episode": fmean(seconds) if seconds else None,
            "seconds_per_step": sum(seconds) / len(steps) if steps and seconds else None,
            "model_calls_per_episode": fmean(r.model_calls for r in results) if results else None,
            # Measured only where this invocation ran episodes (a rerun that resumes them all measures nothing;
            # main keeps the figure the folder's earlier run recorded).
            "peak_rss_gb": peak_rss_gb() if evaluation.ran else None}


def peak_rss_gb() -> float:
    """The largest resident set of this process and of any worker it waited for, in GB (Linux: kB)."""
    peak_kb = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    return round(peak_kb / 1e6, 2)


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
    """Answer accuracy per dimension and their macro average (the DORA score) with a bootstrap 95 % CI over
    tasks (``dora_score_ci``), and mean trajectory metrics."""
    from gauntlet.stats import macro_mean_ci

    by_dimension = {dimension: [r for r in reports if r["dimension"] == dimension] for dimension in DIMENSIONS}
    accuracy = {dimension: fmean(r["answer_score"] for r in rows) for dimension, rows in by_dimension.items() if rows}
    metrics = sorted({key for r in reports for key in r["trajectory"]})
    scores = [[r["answer_score"] for r in rows] for rows in by_dimension.values() if rows]
    return {"accuracy": accuracy, "dora_score": fmean(accuracy.values()) if accuracy else None,
            "dora_score_ci": list(macro_mean_ci(scores)) if scores else None,
            "trajectory": {key: fmean(r["trajectory"][key] for r in reports) for key in metrics} if reports else {},
            "attempts": len(reports)}


def chem_task_scores(folder: Path) -> dict[str, float]:
    """Each task's share of successful attempts (CTA@25) in a chem run folder, from its ``scores.json``."""
    tallies: dict[str, list[bool]] = {}
    for row in json.loads((folder / "scores.json").read_text())["tasks"]:
        tallies.setdefault(row["task_id"], []).append(bool(row["success"]))
    return {task: fmean(successes) for task, successes in tallies.items()}


def dora_task_scores(folder: Path, suite: str) -> dict[str, float]:
    """Each task's DORA answer score in a disaster run folder (one attempt a task)."""
    return {report["task_id"]: report["answer_score"] for report in dora_reports(folder, suite)}


def paired(reference: dict[str, float], other: dict[str, float], against: str) -> dict[str, Any]:
    """``other`` against ``reference`` task by task, on the tasks both ran: on how many it scored higher,
    lower and the same, and the sign test's p (ties dropped)."""
    from gauntlet.stats import sign_test

    common = sorted(set(reference) & set(other))
    better = sum(other[task] > reference[task] for task in common)
    worse = sum(other[task] < reference[task] for task in common)
    return {"against": against, "tasks": len(common), "better": better, "worse": worse,
            "equal": len(common) - better - worse, "sign_test_p": sign_test(better, worse)}


def reference_folder(name: str, places: Sequence[Path]) -> Path | None:
    """The first run folder ``name`` (a part's, e.g. ``disaster-autonomous``) in ``places`` that has results."""
    return next((place / name for place in places if (place / name / "scores.json").is_file()), None)


def agent_config(model: str, mode: str, max_steps: int, *, sample: bool, device: str | None,
                 **changes: Any) -> dict[str, Any]:
    """The LLM agent's config for one run: the default harness, with ``changes`` (an ablation's); in the
    ``chemcost`` mode every option of ``CHEM_HARNESS`` is written out."""
    options = {**model_options(model, sample=sample, device=device), **changes.pop("model_options", {})}
    harness = CHEM_HARNESS if mode == "chemcost" else {}
    return {"model": model, "mode": mode, "max_steps": max_steps, "model_options": options, **harness, **changes}


def evaluate(folder: Path, suite: str, config: dict[str, Any], task_ids: Sequence[str], repeats: int,
             workers: int) -> tuple[Any, dict[str, Any]]:
    from gauntlet.evaluation import evaluate_suite

    evaluation = evaluate_suite(suite, "llm", folder, agent_config=config, task_ids=list(task_ids), repeats=repeats,
                                workers=workers)
    report = json.loads((Path(evaluation.out_dir) / "scores.json").read_text()).get("report") or {}
    # The chem scorer's diagnosis: how many of the reaction's components the agent acted on by id (read, quoted,
    # bought or converted: recall) and how many of the chemicals it acted on were components (precision),
    # which shows progress that CTA@25 alone does not.
    # And the answers within 25 % that did not act on every component: numbers the episode showed (a molar
    # mass, one pack's price) that happen to lie near the gold price, not prices of the reaction.
    diagnosis = {key: report[key] for key in ("component_recall", "component_precision", "correct_unpriced",
                                              "cta@25_priced") if key in report}
    return evaluation, {"config": config, "mean_score": evaluation.mean_score,
                        "success_rate": evaluation.success_rate, **diagnosis, **usage(evaluation, folder)}


def run_chem(out: Path, model: str, plan: dict[str, Any], device: str | None, suite: str,
             workers: int, setting: str = DEFAULT_CHEM_SETTING) -> dict[str, Any]:
    """The chem part with the harness of ``setting`` (a ``CHEM_ABLATIONS`` name other than the other model),
    in the folder ``chem-<setting>``."""
    change = dict(CHEM_ABLATIONS[setting])
    config = agent_config(model, "chemcost", plan["chem_steps"], sample=plan["repeats"] > 1, device=device, **change)
    folder = out / chem_key(setting)
    evaluation, summary = evaluate(folder, suite, config, chem_sample(plan["chem_tasks"], suite),
                                   plan["repeats"], workers)
    return {**summary, "setting": setting, "tasks": plan["chem_tasks"], "repeats": plan["repeats"],
            "per_task": [{"task": tally.task_id, "successes": tally.successes, "attempts": tally.attempts}
                         for tally in evaluation.tallies()],
            "pass_k": [{"k": row.k, "pass_at_k": row.pass_at_k, "pass_at_k_ci": row.pass_at_k_ci,
                        "pass_hat_k": row.pass_hat_k, "pass_hat_k_ci": row.pass_hat_k_ci}
                       for row in evaluation.pass_k()]}


def run_disaster(out: Path, model: str, plan: dict[str, Any], device: str | None, suite: str,
                 workers: int) -> dict[str, Any]:
    from gauntlet.agents.llm.agent import MODE_DEFAULTS

    ids = disaster_sample(plan["per_dimension"], suite)
    result: dict[str, Any] = {"tasks": ids}
    for mode in DISASTER_MODES:
        folder = out / f"disaster-{mode}"
        # The options the mode turns on by default, written out: a record keeps its harness when a default changes.
        config = agent_config(model, mode, plan["disaster_steps"], sample=False, device=device,
                              **MODE_DEFAULTS.get(mode, {}))
        _, summary = evaluate(folder, suite, config, ids, 1, workers)
        result[mode] = {**summary, **dora_summary(dora_reports(folder, suite))}
    return result


def run_ablations(out: Path, model: str, plan: dict[str, Any], device: str | None, suites: tuple[str, str],
                  workers: int, settings: Sequence[str] | None = None,
                  parts: Sequence[Path] = ()) -> dict[str, Any]:
    """Each ablation is one harness setting (``CHEM_ABLATIONS``, ``DISASTER_ABLATIONS``); greedy, one attempt,
    ``slice`` tasks.
    ``settings`` (names of ``CHEM_ABLATIONS`` and ``DISASTER_ABLATIONS``) picks some; default all.
    Each setting run with the experiment's model is compared task by task (``paired``) with the part it
    changes, when a folder of ``parts`` holds that part's run: a chem setting with the chem part's default
    harness, a disaster setting with the disaster part's run of its mode, on the tasks both ran."""
    from gauntlet.agents.llm.models import runs_on_llama

    chem_suite, disaster_suite = suites
    wanted = set(settings) if settings is not None else set(CHEM_ABLATIONS) | set(DISASTER_ABLATIONS)
    chem_ids = chem_sample(plan["slice"], chem_suite)
    disaster_ids = disaster_sample(max(1, plan["slice"] // len(DIMENSIONS)), disaster_suite)
    result: dict[str, Any] = {"chem": {"tasks": chem_ids}, "disaster": {"tasks": disaster_ids}}
    for name, change in CHEM_ABLATIONS.items():
        if name not in wanted:
            continue
        change = dict(change)
        run_model = OTHER_MODEL.get(model) if change.pop("model", None) == "other" else model
        if run_model is None:
            continue  # no other pinned model to compare a non-offline model with
        if "model_options" in change and not runs_on_llama(run_model):
            continue  # only the llama.cpp backends decode under a call grammar
        config = agent_config(run_model, "chemcost", plan["chem_steps"], sample=False, device=device, **change)
        folder = out / "ablations" / f"chem-{slug(name)}"
        _, result["chem"][name] = evaluate(folder, chem_suite, config, chem_ids, 1, workers)
        reference = reference_folder(chem_key(DEFAULT_CHEM_SETTING), parts)
        if reference is not None and name != DEFAULT_CHEM_SETTING:
            result["chem"][name]["paired"] = paired(chem_task_scores(reference), chem_task_scores(folder),
                                                    reference.name)
    for name, change in DISASTER_ABLATIONS.items():
        if name not in wanted:
            continue
        folder = out / "ablations" / f"disaster-{slug(name)}"
        change = dict(change)
        mode = change.pop("mode", "autonomous")
        config = agent_config(model, mode, plan["disaster_steps"], sample=False, device=device, **change)
        _, summary = evaluate(folder, disaster_suite, config, disaster_ids, 1, workers)
        result["disaster"][name] = {**summary, **dora_summary(dora_reports(folder, disaster_suite)),
                                    "prompt_tokens_first_call": first_prompt_tokens(folder)}
        reference = reference_folder(f"disaster-{mode}", parts)
        if reference is not None:
            result["disaster"][name]["paired"] = paired(dora_task_scores(reference, disaster_suite),
                                                        dora_task_scores(folder, disaster_suite), reference.name)
    # A suite none of whose settings ran keeps no task list: runs of other settings (another process, another
    # --slice) merge theirs into the file, and an empty run's list would overwrite the one their rows were run on.
    return {part: rows for part, rows in result.items() if len(rows) > 1}


def chem_key(setting: str) -> str:
    """The chem part's folder and result key for a harness ``setting``: ``chem-<slug>``."""
    return f"chem-{slug(setting)}"


def slug(name: str) -> str:
    """A setting's folder name: its words joined by dashes (``demonstrations + review`` ->
    ``demonstrations-review``)."""
    return "-".join(re.findall(r"[a-z0-9]+", name.lower()))


def first_prompt_tokens(folder: Path) -> float | None:
    """The mean prompt size of each episode's first model call (the system prompt, tools and task)."""
    from gauntlet import load_episodes

    sizes = []
    for episode in load_episodes(folder):
        calls = [event.data for step in episode.steps for event in step.events if event.kind == "model_call"]
        if calls:
            sizes.append(calls[0].get("input_tokens") or 0)
    return fmean(sizes) if sizes else None


def tables(results: dict[str, Any]) -> str:
    lines = [f"# LLM agent task results: {results['model']} ({results['size']} size)", ""]
    for key in sorted(key for key in results if key.startswith("chem-")):
        chem = results[key]
        harness = chem["setting"]
        lines += [f"## chem, ChemCost, clean view, harness {harness}: {chem['tasks']} tasks of the evaluation split x "
                  f"{chem['repeats']} attempts (CTA@25)", "", "| k | pass@k [95% CI] | pass^k [95% CI] |",
                  "|---|---|---|"]
        for row in chem["pass_k"]:
            lines.append(f"| {row['k']} | {row['pass_at_k']:.3f} [{row['pass_at_k_ci'][0]:.3f}, "
                         f"{row['pass_at_k_ci'][1]:.3f}] | {row['pass_hat_k']:.3f} [{row['pass_hat_k_ci'][0]:.3f}, "
                         f"{row['pass_hat_k_ci'][1]:.3f}] |")
        if "correct_unpriced" in chem:
            lines += ["", f"Components acted on: recall {_num(chem.get('component_recall'))}, precision "
                      f"{_num(chem.get('component_precision'))}. {chem['correct_unpriced']} of the attempts within "
                      "25 % did not act on every component of the reaction (a number the episode showed that lies near "
                      f"the gold price); CTA@25 over attempts that did: {_num(chem.get('cta@25_priced'), 3)}."]
        lines += ["", _usage_line(chem), ""]
    disaster = results.get("disaster")
    if disaster:
        lines += [f"## disaster, DORA T1-T3: {len(disaster['tasks'])} tasks, one attempt each", "",
                  *_dora_table({mode: disaster[mode] for mode in DISASTER_MODES}), ""]
    ablations = results.get("ablations")
    if ablations and ablations.get("chem"):
        lines += [f"## ablations: chem ChemCost, {len(ablations['chem']['tasks'])} tasks, greedy", "",
                  "| setting | CTA@25 | components acted on (recall / precision) | malformed | repeated | redrawn | "
                  "ungrounded | no call | model calls / ep | s / step | s / episode | "
                  "against the default, task by task |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for name, row in ablations["chem"].items():
            if name != "tasks":
                lines.append(f"| {name} ({row['config']['model']}) | {_num(row['success_rate'])} | "
                             f"{_num(row.get('component_recall'))} / {_num(row.get('component_precision'))} | "
                             f"{row['malformed_calls']}/{row['calls_proposed']} | "
                             f"{row['repeated_calls']} | {row.get('redrawn_replies', '–')} | "
                             f"{row.get('ungrounded_calls', '–')} | {row['replies_without_call']} | "
                             f"{_num(row['model_calls_per_episode'], 1)} | {_num(row['seconds_per_step'], 1)} | "
                             f"{_num(row['seconds_per_episode'], 0)} | {_paired_cell(row)} |")
    if ablations and ablations.get("disaster"):  # a run of chem settings only has no disaster table
        disaster_rows = {name: row for name, row in ablations["disaster"].items() if name != "tasks"}
        if disaster_rows:
            lines += ["", "## ablations: disaster, the first tasks of each dimension (settings run on slices of their "
                      "own size: the tasks column), tool scope (autonomous), the instruction checklist and a worked "
                      "example", "", *_dora_table(disaster_rows, prompt=True), ""]
    return "\n".join(lines)


def _dora_table(rows: dict[str, dict[str, Any]], prompt: bool = False) -> list[str]:
    """The DORA table; ``prompt`` (the ablations') adds the first prompt's size and the comparison with the part."""
    lines = ["| run | " + ("tasks | " if prompt else "") + "T1 | T2 | T3 | DORA score [95% CI] | tool in-order | "
             "tool exact | parameter accuracy | malformed | repeated | "
             + ("first prompt tokens | " if prompt else "") + "s / step | s / episode |"
             + (" against the part's run of its mode, task by task |" if prompt else ""),
             "|---" * (12 + 3 * int(prompt)) + "|"]
    for name, row in rows.items():
        acc, trajectory = row["accuracy"], row["trajectory"]
        lines.append(f"| {name} | " + (f"{row['attempts']} | " if prompt else "") +
                     " | ".join(_num(acc.get(d)) for d in DIMENSIONS) +
                     f" | {_num(row['dora_score'])}{_ci(row.get('dora_score_ci'))} | "
                     f"{_num(trajectory.get('tool_in_order'))} | "
                     f"{_num(trajectory.get('exact_match'))} | {_num(trajectory.get('parameter_accuracy'))} | "
                     f"{row['malformed_calls']}/{row['calls_proposed']} | {row['repeated_calls']} | " +
                     (f"{_num(row.get('prompt_tokens_first_call'), 0)} | " if prompt else "") +
                     f"{_num(row['seconds_per_step'], 1)} | {_num(row['seconds_per_episode'], 0)} |" +
                     (f" {_paired_cell(row)} |" if prompt else ""))
    return lines


def _paired_cell(row: dict[str, Any]) -> str:
    """A setting's task-by-task comparison (``paired``), or '-' when its reference was not run."""
    found = row.get("paired")
    if not found or not found["tasks"]:
        return "-"
    return (f"better on {found['better']}, worse on {found['worse']}, same on {found['equal']} of {found['tasks']} "
            f"(sign test p = {found['sign_test_p']:.2f}; {found['against']})")


def keep_measured_memory(old: Any, new: Any) -> None:
    """Where ``new`` (a part's results) did not measure ``peak_rss_gb`` (it ran no episode) and ``old`` (the
    same part's results in the file) did, keep the old figure; nested parts (modes, settings) alike."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return
    if new.get("peak_rss_gb", 0) is None and old.get("peak_rss_gb") is not None:
        new["peak_rss_gb"] = old["peak_rss_gb"]
    for key, value in new.items():
        keep_measured_memory(old.get(key), value)


def _ci(interval: Sequence[float] | None) -> str:
    return "" if not interval else f" [{interval[0]:.2f}, {interval[1]:.2f}]"


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _usage_line(part: dict[str, Any]) -> str:
    return (f"{part['episodes']} episodes; malformed calls {part['malformed_calls']} of {part['calls_proposed']}; "
            f"{part['repeated_calls']} repeated calls answered from memory; {part['replies_without_call']} replies "
            f"without a call; {_num(part['model_calls_per_episode'], 1)} model calls, "
            f"{_num(part['tokens_per_episode'], 0)} tokens, {_num(part['seconds_per_step'], 1)} s per step and "
            f"{_num(part['seconds_per_episode'], 0)} s per episode; peak memory {_num(part['peak_rss_gb'])} GB.")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--model", default="offline", help="agent model spec (default: the offline model)")
    parser.add_argument("--device", default=None, help="torch device of an hf: model, e.g. cuda:0")
    parser.add_argument("--only", default=None, help=f"comma-separated parts to run, of {', '.join(PARTS)}")
    parser.add_argument("--workers", type=int, default=2, help="episodes at once (2: one per core)")
    parser.add_argument("--slice", type=int, default=None, help="tasks in each ablation's slice (default: the size's)")
    parser.add_argument("--per-dimension", type=int, default=None,
                        help="DORA tasks of each of T1-T3 (default: the size's); a smaller sample is the start "
                             "of a larger one")
    parser.add_argument("--settings", default=None,
                        help="comma-separated ablation settings to run (default all): "
                             + ", ".join([*CHEM_ABLATIONS, *DISASTER_ABLATIONS]))
    parser.add_argument("--chem-setting", default=DEFAULT_CHEM_SETTING,
                        help=f"harness of the chem part, a chem ablation setting (default: {DEFAULT_CHEM_SETTING!r}, "
                             "the agent's chemcost defaults)")
    parser.add_argument("--chem-tasks", type=int, default=None, help="chem tasks (default: the size's)")
    parser.add_argument("--repeats", type=int, default=None, help="attempts per chem task (default: the size's)")
    parser.add_argument("--out", type=Path, default=None,
                        help="results folder (default: the model's, see DEFAULT_OUT)")
    parser.add_argument("--chem-suite", default="chem", help="registered suite for the chem parts")
    parser.add_argument("--disaster-suite", default="disaster", help="registered suite for the DORA parts")
    args = parser.parse_args(argv)
    parts = PARTS if args.only is None else tuple(part.strip() for part in args.only.split(","))
    settings = None if args.settings is None else [name.strip() for name in args.settings.split(",")]
    unknown = sorted(set(parts) - set(PARTS))
    unknown_settings = sorted(set(settings or ()) - set(CHEM_ABLATIONS) - set(DISASTER_ABLATIONS))
    sizes = (("workers", args.workers), ("per-dimension", args.per_dimension), ("slice", args.slice),
             ("chem-tasks", args.chem_tasks), ("repeats", args.repeats))
    too_few = next((f"--{name} {value}" for name, value in sizes if value is not None and value < 1), None)
    if args.chem_setting not in CHEM_ABLATIONS or "model" in CHEM_ABLATIONS[args.chem_setting]:
        unknown_settings.append(args.chem_setting)
    if unknown or unknown_settings or too_few:
        what = (f"unknown part {unknown[0]!r}" if unknown else f"unknown setting {unknown_settings[0]!r}"
                if unknown_settings else too_few)
        print(f"error: {what}; --only takes parts of {', '.join(PARTS)}, --settings names of "
              f"{', '.join([*CHEM_ABLATIONS, *DISASTER_ABLATIONS])} (--chem-setting one chem setting other "
              "than 'other model'); --workers, --per-dimension, --slice, --chem-tasks and --repeats take numbers >= 1",
              file=sys.stderr)
        raise SystemExit(2)
    import gauntlet  # noqa: F401 - registers the suites and the agent
    from gauntlet.errors import UserError

    try:
        args.model = recorded_spec(args.model)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if args.out is None:
        named = re.sub(r"[^A-Za-z0-9.]+", "-", args.model)
        args.out = Path(DEFAULT_OUT.get(args.model, f"experiments/results/llm/{named}"))
    plan = {**SIZES[args.size], **({"slice": args.slice} if args.slice else {}),
            **({"per_dimension": args.per_dimension} if args.per_dimension else {}),
            **({"chem_tasks": args.chem_tasks} if args.chem_tasks else {}),
            **({"repeats": args.repeats} if args.repeats else {})}
    out = args.out / args.size if args.size != "full" else args.out
    path = out / "llm_offline.json"
    held = json.loads(path.read_text()).get("model") if path.exists() else None
    if held not in (None, args.model):
        print(f"error: {path} holds results of {held}, not {args.model}; give another --out", file=sys.stderr)
        raise SystemExit(2)
    out.mkdir(parents=True, exist_ok=True)
    ran: dict[str, Any] = {}
    try:
        if "chem" in parts and plan["chem_tasks"]:
            ran[chem_key(args.chem_setting)] = run_chem(out, args.model, plan, args.device, args.chem_suite,
                                                        args.workers, args.chem_setting)
        if "disaster" in parts and plan["per_dimension"]:
            ran["disaster"] = run_disaster(out, args.model, plan, args.device, args.disaster_suite, args.workers)
        if "ablations" in parts and plan["slice"]:
            ran["ablations"] = run_ablations(out, args.model, plan, args.device, (args.chem_suite, args.disaster_suite),
                                             args.workers, settings, parts=(out, args.out))
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    from gauntlet.fileio import write_atomically

    # Parts may run in separate processes (--only): each adds its own to what the file holds now.
    results: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    if results.get("model") not in (None, args.model):  # checked before the run too; a folder could change meanwhile
        print(f"error: {path} holds results of {results['model']}, not {args.model}; give another --out",
              file=sys.stderr)
        raise SystemExit(2)
    if "ablations" in ran and "ablations" in results:  # settings run one at a time add to the others
        for suite_part in ("chem", "disaster"):
            merged = {**results["ablations"].get(suite_part, {}), **ran["ablations"].get(suite_part, {})}
            if merged:
                ran["ablations"][suite_part] = merged
    for key, part in ran.items():
        keep_measured_memory(results.get(key), part)
    results.update({"model": args.model, "size": args.size, "plan": plan, **ran})
    write_atomically(path, json.dumps(results, indent=2, default=str))
    text = tables(results)
    write_atomically(out / "llm_offline.md", text)
    print(text)
    return results


if __name__ == "__main__":
    main()
