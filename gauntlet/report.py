"""The run report: one self-contained HTML file summarising a run folder or some episode files.

The file has no external assets and no script (plots are inline PNGs and SVG, styles are inline),
so it can be mailed, archived or opened offline. It holds the run's metadata (spec and versions), a
summary table (episode counts, return statistics with a 95% bootstrap confidence interval, mean
length, success rate, total safety cost, monitor and controller events with the time they cost),
four plots, a table of every episode, and each episode's trace (``gauntlet.trace_view``: the
conversation, tool calls, monitor timeline, controller decisions and branch links), reached from
the table. Numbers are shown with three decimals.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gauntlet.episode import Episode, load_episodes
from gauntlet.errors import UserError
from gauntlet.fileio import write_atomically
from gauntlet.stats import bootstrap_ci
from gauntlet.trace_view import TRACE_STYLE, episode_anchor, render_traces, traced

EPISODE_TABLE_MAX_ROWS = 2_000
CURVES_SHOWN = 5


# Statistics ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReturnStats:
    """Summary statistics of episode returns; ``std`` is the sample standard deviation (n - 1)."""

    n: int
    mean: float
    std: float
    min: float
    max: float
    median: float
    ci_low: float
    ci_high: float


def return_stats(values: Sequence[float]) -> ReturnStats | None:
    """Mean, spread and 95% bootstrap CI of ``values``; None when there are none."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        return None
    low, high = bootstrap_ci(data)
    return ReturnStats(n=int(data.size), mean=float(data.mean()),
                       std=float(data.std(ddof=1)) if data.size > 1 else 0.0,
                       min=float(data.min()), max=float(data.max()), median=float(np.median(data)),
                       ci_low=low, ci_high=high)


@dataclass(frozen=True)
class EventTally:
    """How often one monitor or controller spoke, and the time it cost in total."""

    source: str
    kind: str
    count: int
    total_ms: float


@dataclass
class RunSummary:
    """What a set of episodes adds up to. Return statistics use complete episodes only."""

    episodes: int
    complete: int
    returns: ReturnStats | None
    mean_length: float
    success_rate: float | None
    success_known: int
    total_cost: float
    mean_score: float | None
    events: list[EventTally] = field(default_factory=list)

    @property
    def incomplete(self) -> int:
        return self.episodes - self.complete


def summarize(episodes: Sequence[Episode]) -> RunSummary:
    """Summarise ``episodes`` (see ``RunSummary``)."""
    complete = [episode for episode in episodes if episode.complete]
    outcomes = [(episode, episode.outcome) for episode in episodes if episode.outcome is not None]
    successes = [outcome.success for _, outcome in outcomes if outcome.success is not None]
    # A score is worth its own line only where it says something the return does not (graded tasks).
    scores = [outcome.score for _, outcome in outcomes if outcome.score is not None]
    distinct_scores = any(outcome.score is not None and outcome.score != episode.total_reward
                          for episode, outcome in outcomes)
    tallies: dict[tuple[str, str], list[float]] = {}
    for episode in episodes:
        # A controller that halts before the first step leaves its events on the outcome.
        outcome_events = episode.outcome.events if episode.outcome is not None else []
        for event in [*(e for step in episode.steps for e in step.events), *outcome_events]:
            tallies.setdefault((event.source, event.kind), []).append(event.cost_ms)
    return RunSummary(
        episodes=len(episodes), complete=len(complete),
        returns=return_stats([episode.total_reward for episode in complete]),
        mean_length=float(np.mean([len(episode.steps) for episode in episodes])) if episodes else 0.0,
        success_rate=float(np.mean(successes)) if successes else None, success_known=len(successes),
        total_cost=float(sum(step.cost for episode in episodes for step in episode.steps)),
        mean_score=float(np.mean(scores)) if scores and distinct_scores else None,
        events=[EventTally(source, kind, len(costs), float(sum(costs)))
                for (source, kind), costs in sorted(tallies.items())])


# Sources and metadata -----------------------------------------------------------------------------
def _paths(source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[Path]:
    if isinstance(source, (str, os.PathLike)):
        return [Path(source)]
    return [Path(item) for item in source]


def _run_file(paths: list[Path]) -> dict[str, Any] | None:
    """The run.json of a run folder given alone, if it has one."""
    if len(paths) == 1 and (paths[0] / "run.json").is_file():
        try:
            return json.loads((paths[0] / "run.json").read_text())
        except ValueError:
            return None
    return None


def _metadata(paths: list[Path], run: dict[str, Any] | None, episodes: Sequence[Episode]) -> list[tuple[str, str]]:
    rows = [("source", ", ".join(str(path) for path in paths))]
    if run is not None:
        spec = run.get("spec", {})
        rows.append(("run id", str(run.get("run_id", ""))))
        for key in ("env_id", "env_kwargs", "agent", "seed", "max_steps"):
            if key in spec:
                rows.append((key.replace("_", " "), _as_text(spec[key])))
    else:
        rows.append(("run ids", ", ".join(sorted({episode.run_id for episode in episodes}))))
        rows.append(("env ids", ", ".join(sorted({str(episode.env_id or episode.task_id) for episode in episodes}))))
        rows.append(("agents", ", ".join(sorted({_as_text(episode.agent.model_dump()) for episode in episodes}))))
    versions = run.get("versions") if run is not None else episodes[0].versions
    rows.extend((f"version: {name}", value) for name, value in sorted((versions or {}).items()))
    return rows


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _episode_index(episode: Episode, position: int) -> int:
    index = episode.config.get("run_index")
    return index if isinstance(index, int) else position


# Plots ------------------------------------------------------------------------------------------
def _png(figure: Any) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=96, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _figure(title: str, xlabel: str, ylabel: str) -> tuple[Any, Any]:
    # Figure directly, not pyplot: no global state, no GUI backend, safe in any process.
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.0, 3.2))
    axes = figure.add_subplot()
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(alpha=0.3)
    return figure, axes


def _plots(episodes: Sequence[Episode], indices: list[int]) -> list[tuple[str, str]]:
    """(caption, base64 PNG) for each plot."""
    returns = [episode.total_reward for episode in episodes]
    lengths = [len(episode.steps) for episode in episodes]
    bins = min(30, max(5, len(episodes) // 3))
    plots = []

    figure, axes = _figure("Return per episode", "episode", "return")
    axes.plot(indices, returns, marker="o", markersize=3, linewidth=0.8)
    axes.axhline(float(np.mean(returns)), color="tab:red", linewidth=1, label="mean")
    axes.legend()
    plots.append(("Return of each episode, in episode order; the red line is the mean.", _png(figure)))

    figure, axes = _figure("Return histogram", "return", "episodes")
    axes.hist(returns, bins=bins, color="tab:blue", edgecolor="white")
    plots.append(("How returns are distributed.", _png(figure)))

    figure, axes = _figure("Episode length histogram", "steps", "episodes")
    axes.hist(lengths, bins=bins, color="tab:green", edgecolor="white")
    plots.append(("How long episodes ran.", _png(figure)))

    figure, axes = _figure("Cumulative reward", "step", "cumulative reward")
    for position in _curve_choice(returns):
        rewards = [step.reward for step in episodes[position].steps]
        axes.plot(np.arange(1, len(rewards) + 1), np.cumsum(rewards), linewidth=1,
                  label=f"episode {indices[position]}")
    axes.legend(fontsize="small")
    plots.append(("Cumulative reward within a few episodes: the best, the worst, the median, and the first.",
                  _png(figure)))
    return plots


def _curve_choice(returns: list[float]) -> list[int]:
    order = list(np.argsort(returns, kind="stable"))
    chosen = [int(order[-1]), int(order[0]), int(order[len(order) // 2])]
    chosen += range(len(returns))
    unique = list(dict.fromkeys(chosen))
    return unique[:CURVES_SHOWN]


# HTML -------------------------------------------------------------------------------------------
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; color: #222; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.5rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ddd; padding: 0.25rem 0.6rem; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f4f4f4; }
figure { display: inline-block; margin: 0.5rem 1rem 0.5rem 0; }
figcaption { font-size: 0.85rem; color: #555; max-width: 36rem; }
.note { color: #666; font-size: 0.9rem; }
"""


class _Html(str):
    """A table cell that is HTML already (built here from escaped parts), inserted as it is."""


def _e(value: Any) -> str:
    return value if isinstance(value, _Html) else html.escape(str(value), quote=True)


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Collection[int] = ()) -> str:
    head = "".join(f"<th>{_e(cell)}</th>" for cell in header)
    body = "".join("<tr>" + "".join(f'<td class="num">{_e(cell)}</td>' if i in numeric else f"<td>{_e(cell)}</td>"
                                    for i, cell in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _summary_rows(summary: RunSummary) -> list[tuple[str, str]]:
    rows = [("episodes", str(summary.episodes)), ("complete", str(summary.complete)),
            ("incomplete", str(summary.incomplete))]
    stats = summary.returns
    if stats is not None:
        rows += [("mean return", _num(stats.mean)),
                 ("95% CI of mean return (bootstrap)", f"[{_num(stats.ci_low)}, {_num(stats.ci_high)}]"),
                 ("std return", _num(stats.std)), ("min return", _num(stats.min)),
                 ("median return", _num(stats.median)), ("max return", _num(stats.max))]
    rows.append(("mean length (steps)", _num(summary.mean_length)))
    if summary.mean_score is not None:
        rows.append(("mean score", _num(summary.mean_score)))
    if summary.success_rate is not None:
        rows.append(("success rate", f"{_num(summary.success_rate)} (of {summary.success_known} episodes)"))
    rows.append(("total cost", _num(summary.total_cost)))
    return rows


def _episode_rows(episodes: Sequence[Episode], indices: list[int]) -> list[list[str]]:
    rows = []
    for position, (episode, index) in enumerate(zip(episodes[:EPISODE_TABLE_MAX_ROWS], indices, strict=False)):
        known = episode.outcome.success if episode.outcome is not None else None
        success = "" if known is None else str(known).lower()
        rows.append([str(index), episode.episode_id, "" if episode.seed is None else str(episode.seed),
                     str(len(episode.steps)), _num(episode.total_reward), success,
                     _num(sum(step.cost for step in episode.steps)), "yes" if episode.complete else "no",
                     _Html(f'<a href="#{episode_anchor(position)}">trace</a>') if traced(position) else ""])
    return rows


def render_report(episodes: Sequence[Episode], metadata: list[tuple[str, str]], title: str) -> str:
    """The report's HTML for ``episodes`` (see the module docstring)."""
    summary = summarize(episodes)
    indices = [_episode_index(episode, position) for position, episode in enumerate(episodes)]
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{_e(title)}</title>",
             f"<style>{_STYLE}{TRACE_STYLE}</style></head><body><h1>{_e(title)}</h1>",
             '<p class="nav"><a href="#summary">summary</a> · <a href="#plots">plots</a> · '
             '<a href="#episodes">episodes</a> · <a href="#traces">traces</a></p>',
             "<h2>Run</h2>", _table(("field", "value"), metadata),
             "<h2 id=\"summary\">Summary</h2>", _table(("statistic", "value"), _summary_rows(summary), numeric={1})]
    if summary.complete < summary.episodes:
        parts.append(f'<p class="note">Return statistics use the {summary.complete} complete episodes; '
                     "an incomplete episode was cut short before its outcome was written.</p>")
    parts.append("<h3>Monitor and controller events</h3>")
    if summary.events:
        parts.append(_table(("source", "kind", "events", "total time (ms)", "mean time (ms)"),
                            [(tally.source, tally.kind, tally.count, _num(tally.total_ms),
                              _num(tally.total_ms / tally.count)) for tally in summary.events],
                            numeric={2, 3, 4}))
    else:
        parts.append('<p class="note">No monitor or controller events were recorded.</p>')
    parts.append('<h2 id="plots">Plots</h2>')
    for caption, png in _plots(episodes, indices):
        parts.append(f'<figure><img alt="{_e(caption)}" src="data:image/png;base64,{png}">'
                     f"<figcaption>{_e(caption)}</figcaption></figure>")
    parts.append('<h2 id="episodes">Episodes</h2>')
    if len(episodes) > EPISODE_TABLE_MAX_ROWS:
        parts.append(f'<p class="note">The first {EPISODE_TABLE_MAX_ROWS} of {len(episodes)} episodes.</p>')
    parts.append(_table(("#", "episode id", "seed", "steps", "return", "success", "cost", "complete", "trace"),
                        _episode_rows(episodes, indices), numeric={0, 2, 3, 4, 6}))
    parts += ['<h2 id="traces">Episode traces</h2>', render_traces(episodes, indices)]
    parts.append("</body></html>\n")
    return "".join(parts)


def write_report(run_dir_or_episode_files: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
                 out_html: str | os.PathLike[str]) -> Path:
    """Write the HTML report of a run folder (from ``run_many``) or of episode files; return its path."""
    paths = _paths(run_dir_or_episode_files)
    out = Path(out_html)
    out.parent.mkdir(parents=True, exist_ok=True)  # an unwritable destination fails before the work
    episodes = [episode for path in paths for episode in load_episodes(path)]
    if not episodes:
        raise UserError(f"no episodes in {', '.join(map(str, paths))}; "
                        "give a run folder from `gauntlet run` or an episode .jsonl file")
    run = _run_file(paths)
    env = run["spec"]["env_id"] if run is not None and "spec" in run else (episodes[0].env_id or episodes[0].task_id)
    page = render_report(episodes, _metadata(paths, run, episodes), f"Gauntlet report: {env}")
    write_atomically(out, page)
    return out


__all__ = ["EventTally", "ReturnStats", "RunSummary", "render_report", "return_stats",
           "summarize", "write_report"]
