"""What a disaster report says: evidence from a dated series of hazard areas (the peak, growth and
recession rates, DORA's trend class) and a summary written from a fixed template. Knows nothing of MCP.

The trend rule (``trend_class``), on areas A_1..A_n (n >= 2) in date order:

* each step d_i = A_(i+1) - A_i is *growth* if d_i > tau, *recession* if d_i < -tau, else *flat*, with the
  tolerance tau = ``FLAT_FRACTION`` x max_i A_i (1% of the peak area);
* leaving out the flat steps, the directions read:
  growth only -> ``expanding``; recession only -> ``shrinking``; one or more growths followed by one or
  more recessions (no growth after a recession) -> ``expand-then-recede``; anything else (a growth after
  a recession, or no growth or recession at all) -> ``mixed``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Annotated, Literal

from pydantic import BaseModel, Field

FLAT_FRACTION = 0.01
Trend = Literal["expanding", "shrinking", "expand-then-recede", "mixed"]
Direction = Literal["growth", "recession", "flat"]


@dataclass(frozen=True)
class Step:
    start: date
    end: date
    days: int
    change_m2: float
    rate_m2_per_day: float
    direction: Direction


@dataclass(frozen=True)
class Evidence:
    """A dated area series (sorted by date: ``order`` lists the given series' indices in that order) and what
    it shows."""

    order: list[int]
    dates: list[date]
    areas_m2: list[float]
    peak_index: int
    growth_rate_m2_per_day: float
    recession_rate_m2_per_day: float
    tolerance_m2: float
    steps: list[Step]
    trend: Trend


def step_direction(change_m2: float, tolerance_m2: float) -> Direction:
    if change_m2 > tolerance_m2:
        return "growth"
    if change_m2 < -tolerance_m2:
        return "recession"
    return "flat"


def trend_class(directions: Sequence[str]) -> Trend:
    """DORA's trend class of a series' step directions (the module docstring states the rule)."""
    moves = [d for d in directions if d != "flat"]
    if not moves:
        return "mixed"
    if all(d == "growth" for d in moves):
        return "expanding"
    if all(d == "recession" for d in moves):
        return "shrinking"
    first_recession = moves.index("recession")
    if moves[0] == "growth" and all(d == "recession" for d in moves[first_recession:]):
        return "expand-then-recede"
    return "mixed"


def area_evidence(dates: Sequence[date], areas_m2: Sequence[float]) -> Evidence:
    """The evidence of areas (m2) observed on distinct ``dates`` (any order; sorted here)."""
    order = sorted(range(len(dates)), key=lambda index: dates[index])
    days_sorted = [dates[index] for index in order]
    areas = [float(areas_m2[index]) for index in order]
    peak = max(range(len(areas)), key=lambda index: (areas[index], -index))  # the first date of the maximum
    tolerance = FLAT_FRACTION * areas[peak]
    steps = []
    for (start, a), (end, b) in zip(zip(days_sorted, areas), zip(days_sorted[1:], areas[1:])):
        days = (end - start).days
        steps.append(Step(start, end, days, b - a, (b - a) / days, step_direction(b - a, tolerance)))
    first, last = 0, len(areas) - 1
    growth = (areas[peak] - areas[first]) / (days_sorted[peak] - days_sorted[first]).days if peak > first else 0.0
    recession = (areas[peak] - areas[last]) / (days_sorted[last] - days_sorted[peak]).days if peak < last else 0.0
    return Evidence(order, days_sorted, areas, peak, growth, recession, tolerance, steps,
                    trend_class([step.direction for step in steps]))


# The summary template ------------------------------------------------------------------------------
def quantity(value: float | str, unit: str = "") -> str:
    """A value as the summary writes it: a whole number with thousands separators, others with at most two
    decimals (three significant digits below 1), trailing zeros dropped; 'm2' as 'm²', 'km2' as 'km²'."""
    if isinstance(value, str):
        text = value
    elif float(value).is_integer():
        text = f"{int(value):,}"
    elif abs(value) < 1:
        text = f"{value:.3g}"
    else:
        text = f"{value:,.2f}".rstrip("0").rstrip(".")
    shown_unit = {"m2": "m²", "km2": "km²"}.get(unit, unit)
    return f"{text} {shown_unit}".strip()


AreaM2 = Annotated[float, Field(ge=0, le=1e15, allow_inf_nan=False, description="area, m2")]


class TrendFacts(BaseModel):
    """The facts a trend sentence states (``report_extract_evidence`` returns them all, among others)."""

    trend: Trend = Field(description="expanding, shrinking, expand-then-recede or mixed")
    first_date: date = Field(description="the first date, e.g. '2021-07-10'")
    first_area_m2: AreaM2
    peak_date: date = Field(description="the date of the largest area")
    peak_area_m2: AreaM2
    last_date: date = Field(description="the last date")
    last_area_m2: AreaM2


def trend_sentence(facts: TrendFacts) -> str:
    """One sentence per trend class, naming the dates and areas that show it."""
    first = f"{quantity(facts.first_area_m2, 'm2')} on {facts.first_date.isoformat()}"
    peak = f"{quantity(facts.peak_area_m2, 'm2')} on {facts.peak_date.isoformat()}"
    last = f"{quantity(facts.last_area_m2, 'm2')} on {facts.last_date.isoformat()}"
    if facts.trend == "expanding":
        return f"The mapped extent expanded from {first} to {last}."
    if facts.trend == "shrinking":
        return f"The mapped extent shrank from {first} to {last}."
    if facts.trend == "expand-then-recede":
        return f"The mapped extent expanded from {first} to a peak of {peak}, then receded to {last}."
    return f"The mapped extent changed without one direction, from {first} to {last}, peaking at {peak}."


def summary_sentences(event: str, hazard: str | None, findings: Sequence[tuple[str, float | str, str]],
                      trend: TrendFacts | None, recommendations: Sequence[str]) -> list[str]:
    """The summary, sentence by sentence: what it is about, each finding, the trend, the recommendations."""
    opening = f"Summary for {event.strip()}" + (f" ({hazard.strip()})" if hazard and hazard.strip() else "") + "."
    sentences = [opening]
    sentences += [f"{label.strip()}: {quantity(value, unit)}." for label, value, unit in findings]
    if trend is not None:
        sentences.append(trend_sentence(trend))
    if recommendations:
        listed = "; ".join(f"({number}) {text.strip().rstrip('.')}" for number, text in
                           enumerate(recommendations, start=1))
        sentences.append(f"Recommended actions: {listed}.")
    return sentences



# Prose by the client's language model (report_summarize with writer='client_model') ---------------------
WRITER_SYSTEM = ("You write the summary paragraph of a disaster situation report. Use only the facts given. "
                 "Keep every number exactly as written in the facts, with its unit. Do not add facts, numbers "
                 "or advice. Write plain prose, at most 150 words, no headings or lists.")
WRITER_MAX_TOKENS = 300


def writer_prompt(sentences: Sequence[str]) -> str:
    """What the client's model is asked: the template's sentences as the facts to rewrite."""
    facts = "\n".join(f"- {sentence}" for sentence in sentences)
    return f"Facts:\n{facts}\n\nRewrite these facts as one readable paragraph for responders."


def facts_missing(text: str, findings: Sequence[tuple[str, float | str, str]]) -> list[str]:
    """Labels of the findings whose value does not appear in ``text`` as the template writes it (numbers with
    or without thousands separators; text values case-insensitively): a model's rewrite that drops or alters
    a number is caught, one that paraphrases it ('1.25 million') is counted as missing too."""
    lowered = text.lower()
    missing = []
    for label, value, _unit in findings:
        written = quantity(value)
        forms = {written.lower(), written.replace(",", "").lower()}
        if not any(form in lowered for form in forms):
            missing.append(label.strip())
    return missing
