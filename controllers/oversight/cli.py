"""``gauntlet oversight``: collect branched rows, train an action-conditioned controller, evaluate overseers.

Mounted on the command line through the registry (kind ``command``), so this module imports lightly:
everything heavy loads inside the commands.

    gauntlet oversight collect taxi --episodes 200 --out runs/oversight-taxi        # resumable
    gauntlet oversight evaluate runs/oversight-taxi                                  # the result table
    gauntlet oversight train runs/oversight-taxi --out taxi-controller.joblib
    gauntlet oversight deploy taxi --model taxi-controller.joblib --episodes 50      # online, through the runner
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from gauntlet.cli_commands.common import Backend, parse_json_object
from gauntlet.errors import UserError

app = typer.Typer(no_args_is_help=True, help=(
    "Prefix-branching oversight: branch every prefix into continue / intervene / quit, learn which to choose."))


class Kind(StrEnum):
    rf = "rf"
    gbr = "gbr"


def _csv(option: str, text: str | None) -> list[str] | None:
    if text is None:
        return None
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise UserError(f"{option} names nothing; give a comma-separated list")
    return items


def _episodes(benchmark: str, options: dict[str, Any], first: int | None, count: int) -> range:
    """The ``count`` episodes of ``benchmark`` from ``first`` (None: the held-out default, ``held_out_first``),
    refused in one line where they run past the end of a benchmark with a fixed number of episodes."""
    from gauntlet.controllers.oversight.benchmarks import episode_count, get_benchmark

    try:
        total = episode_count(get_benchmark(benchmark, **options))
    except TypeError as exc:
        raise UserError(f"benchmark {benchmark!r} does not take --options {json.dumps(options)} ({exc}); "
                        "fix --options") from None
    except ValueError as exc:
        raise UserError(f"{exc}; fix the benchmark or --options") from None
    if total is not None and count > total:
        raise UserError(f"{benchmark} has {total} episodes: --episodes {count} runs past its end; "
                        f"use --episodes <= {total}")
    if first is None:
        from gauntlet.controllers.oversight.online import held_out_first

        first = held_out_first(total, count)
    elif total is not None and first + count > total:
        raise UserError(f"{benchmark} has {total} episodes: --first {first} --episodes {count} runs past its end; "
                        f"use --first <= {total - count}")
    return range(first, first + count)


def _references(text: str | None) -> tuple[str, ...] | None:
    """``--reference`` parsed: None for the benchmark's default, () for 'none', else the named actions."""
    if text is None:
        return None
    if text.strip().lower() == "none":
        return ()
    return tuple(_csv("--reference", text) or ())


def _overseer_actions(rows: list[dict[str, Any]], intervention: str | None,
                      reference: tuple[str, ...] | None) -> tuple[str, tuple[str, ...]]:
    """The scalar routers' intervention and the reference actions for ``rows``: as given (``reference`` as
    ``_references`` parses it), or the defaults of their benchmark (``overseer_defaults``: on the LLM
    benchmarks the privileged expert is a reference and the routers escalate to the stronger model), refused
    in one line where the rows lack them."""
    from gauntlet.controllers.oversight.benchmarks import overseer_defaults
    from gauntlet.controllers.oversight.models import actions_in

    present = actions_in(rows)
    default_intervention, default_reference = overseer_defaults(str(rows[0]["benchmark"]))
    if reference is None:
        left_out = tuple(action for action in default_reference if action in present)
    else:
        left_out = reference
    intervention = intervention or default_intervention
    unknown = [action for action in [*left_out, intervention] if action not in present]
    if unknown:
        raise UserError(f"the rows have no branches of {unknown}; their actions are {list(present)}: "
                        "choose among those with --intervention and --reference")
    if intervention in left_out:
        raise UserError(f"--intervention {intervention} is also a --reference, which no overseer chooses; route to "
                        "another action")
    return intervention, left_out


def _rows(folder: Path) -> list[dict[str, Any]]:
    from gauntlet.controllers.oversight.collect import load_rows

    try:
        rows = load_rows(folder)
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None
    if not rows:
        raise UserError(f"{folder} holds no finished rows yet; run `gauntlet oversight collect` into it")
    return rows


@app.command()
def collect(
    benchmark: Annotated[str, typer.Argument(help="corridor, taxi, textworld, scienceworld, chem or disaster.")],
    out: Annotated[Path, typer.Option(help="Collection folder; collecting into it again resumes.")],
    episodes: Annotated[int, typer.Option("--episodes", "-n", min=1, help="Base episodes to branch.")] = 20,
    first: Annotated[int, typer.Option(min=0, help=(
        "Index of the first episode (a benchmark with a fixed number of episodes, a tool suite or "
        "ScienceWorld, has episodes 0 to its size - 1)."))] = 0,
    options: Annotated[str | None, typer.Option(help="Benchmark options as a JSON object.")] = None,
    actions: Annotated[str | None, typer.Option(help=(
        "Overseer actions to branch, comma-separated (default: all the benchmark supports)."))] = None,
    draws: Annotated[int, typer.Option(min=1, help="Draws per prefix (>1 measures within-action variance).")] = 1,
    stride: Annotated[int, typer.Option(min=1, help="Branch every stride-th prefix (1: every prefix).")] = 1,
    expert_strength: Annotated[str, typer.Option(help=(
        "Expert strengths, comma-separated (1: the expert; 0.5: it lapses half the time) for the "
        "intervention-strength ablation."))] = "1.0",
    w: Annotated[float, typer.Option(help="Utility weight of success.")] = 1.0,
    c_intervene: Annotated[float, typer.Option(help="Cost of an intervention.")] = 0.05,
    c_hint: Annotated[float, typer.Option(help="Cost of a hint (LLM benchmarks).")] = 0.02,
    c_confirm: Annotated[float, typer.Option(help="Cost of asking for confirmation (LLM benchmarks).")] = 0.01,
    s: Annotated[float, typer.Option(help="Cost per step.")] = 0.01,
    k: Annotated[int, typer.Option(min=1, help="expert_k: steps the expert takes before handing back.")] = 3,
    r: Annotated[int, typer.Option(min=1, help="rollback: steps undone.")] = 2,
    workers: Annotated[int, typer.Option(min=1, help="Worker processes (or Ray CPUs).")] = 1,
    backend: Annotated[Backend, typer.Option(help="local processes or a Ray cluster.")] = Backend.local,
    ray_address: Annotated[str | None, typer.Option(help="Address of a Ray cluster (with --backend ray).")] = None,
) -> None:
    """Branch every prefix of a benchmark's base episodes into each overseer action, to the end."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
    from rich.table import Table

    from gauntlet.cli_commands.common import console
    from gauntlet.controllers.oversight.collect import CollectionError, CollectSpec
    from gauntlet.controllers.oversight.collect import collect as run_collection
    from gauntlet.controllers.oversight.protocol import CollectStats
    from gauntlet.controllers.oversight.utility import ACTIONS, UtilityConfig

    if ray_address is not None and backend is not Backend.ray:
        raise UserError("--ray-address goes with --backend ray; add --backend ray or drop --ray-address")
    try:
        strengths = tuple(float(value) for value in _csv("--expert-strength", expert_strength) or ())
    except ValueError:
        raise UserError(f"--expert-strength takes numbers in [0, 1], e.g. 1.0,0.5; not {expert_strength}") from None
    bench_options = parse_json_object("--options", options)
    chosen = _episodes(benchmark, bench_options, first, episodes)
    try:
        config = UtilityConfig(w=w, c_intervene=c_intervene, c_hint=c_hint, c_confirm=c_confirm, s=s, k=k, r=r)
        spec = CollectSpec(benchmark=benchmark, episodes=tuple(chosen), options=bench_options, config=config,
                           actions=tuple(_csv("--actions", actions) or ACTIONS), draws=draws,
                           prefixes="all" if stride == 1 else stride, strengths=strengths)
    except ValueError as exc:
        raise UserError(f"{exc}; fix the option") from None
    columns = (TextColumn(f"collect {benchmark}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
               TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("collect", total=len(spec.jobs()), rate="")

        def progress(done: int, total: int, stats: CollectStats) -> None:
            bar.update(task, completed=done, rate=f"{stats.rows} rows")

        try:
            result = run_collection(spec, out, workers=workers, backend=backend.value, ray_address=ray_address,
                                    progress=progress)
        except CollectionError as exc:
            raise UserError(str(exc)) from None
    table = Table(title=f"oversight rows: {benchmark}")
    table.add_column("statistic")
    table.add_column("value", justify="right")
    stats = result.stats
    table.add_row("jobs run / resumed", f"{result.jobs_run} / {result.jobs_resumed}")
    table.add_row("rows in the folder", str(result.rows))
    table.add_row("rows collected now", str(stats.rows))
    table.add_row("rows/s (wall)", f"{result.rows_per_s:.2f}")
    table.add_row("branches / env steps", f"{stats.branches} / {stats.env_steps}")
    table.add_row("replay match rate", f"{stats.match_rate:.4f} ({stats.replays_matched}/{stats.replays})")
    if stats.action_s:
        table.add_row("wall s by part", ", ".join(f"{name} {seconds:.1f}" for name, seconds in stats.action_s.items()))
    if result.jobs_resumed:
        every = result.all_stats
        table.add_row("every job in the folder: busy s", f"{every.seconds:.1f}"
                      + (f" ({result.jobs_unmeasured} jobs not timed)" if result.jobs_unmeasured else ""))
        if every.action_s:
            table.add_row("every job: s by part", ", ".join(f"{name} {seconds:.1f}"
                                                             for name, seconds in every.action_s.items()))
    table.add_row("wall s", f"{result.wall_s:.1f}")
    console.print(table)
    console.print(f"rows in [bold]{result.out_dir}[/bold]; next: gauntlet oversight evaluate {result.out_dir}")


@app.command()
def evaluate(
    rows: Annotated[Path, typer.Argument(help="A collection folder (gauntlet oversight collect).")],
    test_fraction: Annotated[float, typer.Option(min=0.05, max=0.95, help="Share of episodes held out.")] = 0.3,
    folds: Annotated[int | None, typer.Option(min=2, help=(
        "Cross-fit over this many folds of episodes instead of one held-out split: every episode is tested "
        "once, by overseers trained on the others (for small collections)."))] = None,
    seed: Annotated[int, typer.Option(help="Seed of the episode split and the learners.")] = 0,
    dispersion: Annotated[float | None, typer.Option(min=0.0, help=(
        "Tree-dispersion penalty of the controller (default: tuned on a calibration split of the training "
        "episodes, as the scalar router's threshold is)."))] = None,
    by_strength: Annotated[bool, typer.Option(help="Also evaluate each expert strength on its own.")] = False,
    trees: Annotated[int | None, typer.Option(min=1, help=(
        "Trees of every random forest (risk score and rf controller); default: the paper's 200."))] = None,
    intervention: Annotated[str | None, typer.Option(help=(
        "The action the scalar routers escalate to (default: stronger on the LLM benchmarks, expert "
        "elsewhere)."))] = None,
    reference: Annotated[str | None, typer.Option(help=(
        "Comma-separated actions measured only as references, never chosen, or 'none' (default: on the LLM "
        "benchmarks the privileged expert, elsewhere none)."))] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the full result here (JSON).")] = None,
) -> None:
    """Regret of scalar routing vs the action-conditioned controller vs oracle, calibration before/after."""
    from gauntlet.cli_commands.common import console
    from gauntlet.controllers.oversight.metrics import (EvaluationConfig, comparison_lines, cross_evaluate,
                                                        cross_evaluate_by_strength, evaluate_by_strength,
                                                        markdown_table, split_by_episode)
    from gauntlet.controllers.oversight.metrics import evaluate as run_evaluation
    from gauntlet.fileio import write_atomically

    references = _references(reference)
    data = _rows(rows)
    intervention, left_out = _overseer_actions(data, intervention, references)
    config = EvaluationConfig(dispersion=dispersion, trees=trees, intervention=intervention, reference=left_out)
    if folds is None:
        train, test = split_by_episode(data, test_fraction, seed)
        if not train or not test:
            raise UserError(f"{rows} has too few episodes to split {test_fraction:g} of them off; "
                            "collect more episodes")
    try:
        if folds is not None:
            result = cross_evaluate(data, folds, config, seed=seed)
            by = cross_evaluate_by_strength(data, folds, config, seed=seed) if by_strength else None
            split = (f"{len(data)} rows of {result['n_test_episodes']} episodes, cross-fitted over {folds} folds of "
                     f"episodes (seed {seed}): every prefix decided by overseers that never saw its episode")
        else:
            result = run_evaluation(train, test, config, seed=seed)
            by = evaluate_by_strength(train, test, config, seed=seed) if by_strength else None
            split = (f"{len(train)} training rows, {len(test)} test rows (episodes split {1 - test_fraction:g}/"
                     f"{test_fraction:g}, seed {seed})")
    except ValueError as exc:
        raise UserError(f"cannot evaluate {rows}: {exc}") from None
    console.print(split)
    console.print(markdown_table(result), soft_wrap=True)
    console.print(comparison_lines(result), soft_wrap=True)
    console.print(_calibration_lines(result), soft_wrap=True)
    if by is not None:
        for strength, part in by.items():
            console.print(f"\nexpert strength {strength}")
            console.print(markdown_table(part), soft_wrap=True)
    if json_out is not None:
        how: dict[str, Any] = {"folds": folds} if folds is not None else {"test_fraction": test_fraction}
        payload = {"rows": str(rows), **how, "seed": seed, "result": result,
                   "by_strength": by}
        write_atomically(json_out, json.dumps(payload, indent=2, default=float))
        console.print(f"result in [bold]{json_out}[/bold]")


def _calibration_lines(result: dict[str, Any]) -> str:
    calibration = result.get("calibration", {})
    lines = []
    for name, values in calibration.items():
        if isinstance(values, dict) and "ece" in values:
            lines.append(f"risk {name}: ECE {values['ece']:.3f}, AUROC {values['auroc']:.3f}")
    identical = result.get("identical_risk_different_action", {})
    for name, count in identical.items():
        if name not in ("bins", "prefixes"):
            lines.append(f"prefixes with identical risk ({name}, {identical['bins']} bins) but a different "
                         f"optimal action: {count} of {identical['prefixes']}")
    return "\n".join(lines)


@app.command()
def train(
    rows: Annotated[Path, typer.Argument(help="A collection folder (gauntlet oversight collect).")],
    out: Annotated[Path, typer.Option(help="Model file to write (joblib).")],
    kind: Annotated[Kind, typer.Option(help=(
        "rf: random forests (the paper's); gbr: bagged gradient boosting."))] = Kind.rf,
    test_fraction: Annotated[float, typer.Option(min=0.0, max=0.95, help=(
        "Share of episodes held out (as evaluate splits them), so the model never sees test episodes."))] = 0.3,
    seed: Annotated[int, typer.Option(help="Seed of the split and the learner.")] = 0,
    dispersion: Annotated[float | None, typer.Option(min=0.0, help=(
        "Tree-dispersion penalty (default: tuned on a calibration split of the training episodes)."))] = None,
    trees: Annotated[int | None, typer.Option(min=1, help=(
        "Trees of each model (default: the paper's 200 for rf, 100 per boosted model for gbr); the scalar "
        "router's forest gets the same number."))] = None,
    intervention: Annotated[str | None, typer.Option(help=(
        "The action the scalar router escalates to (default: stronger on the LLM benchmarks, expert "
        "elsewhere)."))] = None,
    reference: Annotated[str | None, typer.Option(help=(
        "Comma-separated actions left out of training, as evaluate leaves them out of the choice, or 'none' "
        "(default: on the LLM benchmarks the privileged expert, elsewhere none)."))] = None,
) -> None:
    """Train the action-conditioned controller (and the scalar router it is compared with) on the
    training episodes and save both for deployment: OUT and OUT with the suffix .scalar.joblib."""
    from gauntlet.cli_commands.common import console
    from gauntlet.controllers.oversight.collect import load_meta
    from gauntlet.controllers.oversight.metrics import drop_actions, split_by_episode, tune_dispersion
    from gauntlet.controllers.oversight.models import (ActionConditioned, RiskScore, ScalarRouter, failure_data,
                                                       save_model, utility_data)
    from gauntlet.controllers.oversight.utility import UtilityConfig

    references = _references(reference)
    data = _rows(rows)
    intervention, left_out = _overseer_actions(data, intervention, references)
    data = drop_actions(data, left_out)
    meta = load_meta(rows)
    train_rows = split_by_episode(data, test_fraction, seed)[0] if test_fraction > 0 else data
    fit_rows, calibration_rows = split_by_episode(train_rows, 0.3, seed)
    if not fit_rows or not calibration_rows:
        raise UserError(f"{rows} has too few episodes to train on; collect more episodes")
    utility = UtilityConfig(**meta["config"])
    common = {"rows": str(rows), "training_rows": len(train_rows), "test_fraction": test_fraction, "seed": seed,
              "options": meta["options"]}
    if dispersion is None:
        dispersion = tune_dispersion(kind.value, fit_rows, calibration_rows, (0.0, 0.25, 0.5, 1.0, 2.0), seed=seed,
                                     n_estimators=trees)
    model = ActionConditioned(kind.value, n_estimators=trees, dispersion=dispersion, seed=seed).fit(
        *utility_data(train_rows))
    save_model(out, model, utility=utility, benchmark=meta["benchmark"], metadata=common)
    # The scalar baseline as `evaluate` builds it: risk on one part, the threshold tuned on the other.
    risk = RiskScore("rf", seed=seed, n_estimators=trees).fit(*failure_data(fit_rows))
    router = ScalarRouter(risk, intervention=intervention).fit(*utility_data(calibration_rows, risk.feature_names))
    scalar_out = scalar_path(out)
    save_model(scalar_out, router, utility=utility, benchmark=meta["benchmark"],
               metadata={**common, "threshold": router.threshold})
    console.print(f"trained on {len(train_rows)} rows ({kind.value}, dispersion {dispersion:g}, actions "
                  f"{', '.join(model.actions)}); "
                  f"model in [bold]{out}[/bold], scalar router (threshold {router.threshold:.3f}) in {scalar_out}")
    console.print(f"deploy: gauntlet oversight deploy {meta['benchmark']} --model {out}")


def scalar_path(model: Path) -> Path:
    """Where ``train`` puts the scalar router beside the action-conditioned model ``model``."""
    return model.with_name(model.name.removesuffix(".joblib") + ".scalar.joblib")


@app.command()
def deploy(
    benchmark: Annotated[str, typer.Argument(help="The benchmark the model was trained on.")],
    model: Annotated[Path, typer.Option(help="Model file (gauntlet oversight train).")],
    episodes: Annotated[int, typer.Option("--episodes", "-n", min=1, help="Held-out episodes to run.")] = 20,
    first: Annotated[int | None, typer.Option(
        min=0, help="Index of the first episode (use ones not collected). Default: the last --episodes of a "
                    "benchmark with a fixed number (the tool suites, ScienceWorld), else episodes from 100,000 "
                    "on.")] = None,
    options: Annotated[str | None, typer.Option(help="Benchmark options as a JSON object.")] = None,
    out: Annotated[Path | None, typer.Option(help="Record every overseen episode in this folder.")] = None,
) -> None:
    """Run held-out episodes with no oversight and under the controller, through the runner; compare utility."""
    from gauntlet.cli_commands.common import console
    from gauntlet.controllers.oversight.online import compare_online

    scalar = scalar_path(model)
    bench_options = parse_json_object("--options", options)
    chosen = _episodes(benchmark, bench_options, first, episodes)
    try:
        result = compare_online(benchmark, model, chosen, bench_options,
                                scalar_model=scalar if scalar.exists() else None, record_dir=out)
    except (FileNotFoundError, ValueError) as exc:
        raise UserError(str(exc)) from None
    for name, summary in result["methods"].items():
        console.print(f"{name}: mean utility {summary['mean_utility']:.3f} "
                      f"[{summary['ci'][0]:.3f}, {summary['ci'][1]:.3f}], success {summary['success_rate']:.3f}, "
                      f"interventions {summary['intervention_rate']:.3f}")
    if out is not None:
        console.print(f"episodes in [bold]{out}[/bold]")
