"""The timeline of one episode: monitor scores over the step index, with controller decisions marked.

Drawn as inline SVG, so the page needs no script and no external asset. Each numeric score a
monitor reported (``Event.data``) and each score a controller attached to a decision
(``data["scores"]``) is one line named ``source · score``, on one shared y axis. Interventions are
vertical marks at the step they were decided about: ``replace_action`` orange, ``halt`` red (after
the last step taken, or before step 0 when the episode was halted before it began), any other
intervention purple. Decisions to continue are small grey ticks under the axis. Every point and
mark is a link to its step in the step list.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gauntlet.episode import Episode, Event

WIDTH, HEIGHT = 760, 210
LEFT, RIGHT, TOP, BOTTOM = 52, 16, 22, 34
# Orange and red are kept out of the series palette: on this chart they mean an intervention. None of
# these is a matplotlib default, so the run report's plots never show a colour of the timeline.
SERIES_COLOURS = ("#3366cc", "#109618", "#990099", "#0099c6", "#66aa00", "#316395", "#22aa99", "#6633cc")
MARKER_COLOURS = {"replace_action": "#e67e00", "halt": "#c0182a"}
OTHER_INTERVENTION_COLOUR = "#7b1fa2"
CONTINUE_COLOUR = "#9e9e9e"


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


@dataclass(frozen=True)
class Mark:
    """A controller's intervention (or, with ``intervention`` None, decisions to continue) at ``x``."""

    x: float
    intervention: str | None
    label: str
    step: int | None  # the step the mark links to; None when there is none (a halt before step 0)


@dataclass
class Timeline:
    """What the chart of one episode plots: score series by name, and the controllers' marks."""

    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    marks: list[Mark] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.series and not self.marks


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _scores(event: Event) -> dict[str, Any]:
    if event.kind == "monitor":
        return event.data
    scores = event.data.get("scores") if event.kind == "decision" else None
    return scores if isinstance(scores, dict) else {}


def _intervention_mark(event: Event, index: int | None) -> Mark:
    name = str(event.data.get("intervention", "intervention"))
    reason = event.data.get("reason") or ""
    if name == "halt":
        # The runner records a halt on the last step taken (the step it was asked about never
        # happened) or, before step 0, on the outcome.
        x, where = (-0.5, "before step 0") if index is None else (index + 0.5, f"after step {index}")
    else:
        x, where = float(index if index is not None else 0), f"at step {index}"
    label = f"{name} by {event.source} {where}" + (f": {reason}" if reason else "")
    return Mark(x, name, label, index)


def episode_timeline(episode: Episode) -> Timeline:
    """The series and marks of ``episode`` (see the module docstring)."""
    timeline = Timeline()
    outcome_events = episode.outcome.events if episode.outcome is not None else []
    located: list[tuple[int | None, Event]] = [(step.index, e) for step in episode.steps for e in step.events]
    located += [(None, event) for event in outcome_events]
    continuing: dict[int, list[str]] = {}
    for index, event in located:
        for name, value in _scores(event).items():
            number = _number(value)
            if number is not None and index is not None:
                timeline.series.setdefault(f"{event.source} · {name}", []).append((index, number))
        if event.kind == "intervention":
            timeline.marks.append(_intervention_mark(event, index))
        elif event.kind == "decision" and event.data.get("kind", "continue") == "continue" and index is not None:
            continuing.setdefault(index, []).append(event.source)
    for index, sources in sorted(continuing.items()):
        timeline.marks.append(Mark(float(index), None, f"continue at step {index} ({', '.join(sources)})", index))
    return timeline


def _ticks(low: float, high: float, count: int = 10) -> list[int]:
    span = max(1, math.ceil(high) - math.floor(low))
    every = max(1, math.ceil(span / count))
    start = math.ceil(max(low, 0) / every) * every
    return list(range(start, math.floor(high) + 1, every))


def _mark_svg(mark: Mark, x: float, href: str | None) -> str:
    bottom = HEIGHT - BOTTOM
    if mark.intervention is None:
        shape = (f'<line x1="{x:.1f}" y1="{bottom + 2}" x2="{x:.1f}" y2="{bottom + 9}" '
                 f'stroke="{CONTINUE_COLOUR}" stroke-width="2"/>')
        css = "mark decision-continue"
    else:
        colour = MARKER_COLOURS.get(mark.intervention, OTHER_INTERVENTION_COLOUR)
        tag = "replace" if mark.intervention == "replace_action" else mark.intervention
        right = x > LEFT + 0.8 * (WIDTH - LEFT - RIGHT)  # a label near the right edge goes on the left
        shape = (f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{bottom}" stroke="{colour}" stroke-width="2" '
                 f'stroke-dasharray="5 3"/>'
                 f'<path d="M{x - 5:.1f},{TOP - 9} L{x + 5:.1f},{TOP - 9} L{x:.1f},{TOP - 1} Z" fill="{colour}"/>'
                 f'<text x="{x - 4 if right else x + 4:.1f}" y="{TOP + 10}" fill="{colour}" '
                 f'text-anchor="{"end" if right else "start"}" class="mark-label">{_e(tag)}</text>')
        css = "mark intervention"
    kind = mark.intervention or "continue"
    body = f"<title>{_e(mark.label)}</title>{shape}"
    group = f'<g class="{css}" data-kind="{_e(kind)}">{body}</g>'
    return f'<a href="{_e(href)}">{group}</a>' if href is not None else group


def timeline_svg(timeline: Timeline, steps: int, step_href: Callable[[int], str | None]) -> str:
    """The chart of ``timeline`` over ``steps`` steps, as an SVG element; ``step_href`` links a step."""
    xs = [float(x) for points in timeline.series.values() for x, _ in points] + [m.x for m in timeline.marks]
    x0, x1 = min([0.0, *xs]), max([float(max(steps - 1, 0)), *xs])
    x1 = max(x1, x0 + 1.0)  # a scale even for one step, or none
    values = [v for points in timeline.series.values() for _, v in points]
    y0, y1 = (min(values), max(values)) if values else (0.0, 1.0)
    if y1 - y0 < 1e-12:
        y0, y1 = y0 - 0.5, y1 + 0.5
    width, height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * width

    def py(v: float) -> float:
        return TOP + (1.0 - (v - y0) / (y1 - y0)) * height

    parts = [f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="monitor scores and controller decisions '
             f'over the step index">',
             f'<rect x="{LEFT}" y="{TOP}" width="{width}" height="{height}" fill="#fbfbfb" stroke="#ccc"/>']
    for fraction in (0.0, 0.5, 1.0):
        value = y0 + fraction * (y1 - y0)
        y = py(value)
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + width}" y2="{y:.1f}" stroke="#e4e4e4"/>'
                     f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end" class="tick">{value:.3g}</text>')
    for tick in _ticks(x0, x1):
        x = px(tick)
        parts.append(f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 21}" text-anchor="middle" class="tick">{tick}</text>')
    parts.append(f'<text x="{LEFT + width / 2:.1f}" y="{HEIGHT - 2}" text-anchor="middle" class="axis">step</text>')
    for number, (name, points) in enumerate(sorted(timeline.series.items())):
        colour = SERIES_COLOURS[number % len(SERIES_COLOURS)]
        path = " ".join(f"{px(x):.1f},{py(v):.1f}" for x, v in points)
        parts.append(f'<g class="series" data-series="{_e(name)}"><polyline points="{path}" fill="none" '
                     f'stroke="{colour}" stroke-width="1.8"/>')
        for x, v in points:
            dot = (f'<circle cx="{px(x):.1f}" cy="{py(v):.1f}" r="3" fill="{colour}">'
                   f"<title>{_e(name)} at step {x}: {v:.4g}</title></circle>")
            href = step_href(x)
            parts.append(f'<a href="{_e(href)}">{dot}</a>' if href is not None else dot)
        parts.append("</g>")
    for mark in timeline.marks:
        parts.append(_mark_svg(mark, px(mark.x), step_href(mark.step) if mark.step is not None else None))
    parts.append("</svg>")
    return "".join(parts)


def legend_html(timeline: Timeline) -> str:
    """The chart's key: one swatch per series, and the marks that appear on it."""
    items = [f'<span class="key"><span class="swatch" style="background:{SERIES_COLOURS[n % len(SERIES_COLOURS)]}">'
             f"</span>{_e(name)}</span>" for n, name in enumerate(sorted(timeline.series))]
    kinds = {mark.intervention for mark in timeline.marks}
    for kind, text in (("replace_action", "replace_action"), ("halt", "halt")):
        if kind in kinds:
            items.append(f'<span class="key"><span class="swatch" style="background:{MARKER_COLOURS[kind]}"></span>'
                         f"{text}</span>")
    if kinds - {"replace_action", "halt", None}:
        items.append(f'<span class="key"><span class="swatch" style="background:{OTHER_INTERVENTION_COLOUR}">'
                     "</span>other intervention</span>")
    if None in kinds:
        items.append(f'<span class="key"><span class="swatch" style="background:{CONTINUE_COLOUR}"></span>'
                     "decision to continue</span>")
    return f'<div class="legend">{"".join(items)}</div>'


__all__ = ["Mark", "Timeline", "episode_timeline", "legend_html", "timeline_svg"]
