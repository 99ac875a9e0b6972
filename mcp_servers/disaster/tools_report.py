"""Report tools (report_*): evidence from dated hazard masks, and a summary from a fixed template (or, when a
call asks, rewritten by the calling client's language model): thin wrappers over reporting.py."""

from collections.abc import Sequence
from datetime import date
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from gauntlet.bridges.client_model import ask_client_model
from gauntlet.bridges.tool_errors import ToolInputError
from gauntlet.mcp_servers.disaster import rasters, reporting
from gauntlet.mcp_servers.disaster.models import EvidenceOut, EvidenceStep, SummaryOut
from gauntlet.mcp_servers.disaster.rasters import RasterError, crs_name
from gauntlet.mcp_servers.disaster.reporting import TrendFacts
from gauntlet.mcp_servers.disaster.toolkit import tool
from gauntlet.mcp_servers.disaster.tools_raster import TIF
from gauntlet.mcp_servers.disaster.workspace import Workspace

MAX_DATES = 24

Dates = Annotated[list[date], Field(min_length=2, max_length=MAX_DATES, description="the date of each mask, "
                                    "'YYYY-MM-DD', in the same order as the masks", examples=[["2021-07-12",
                                                                                              "2021-07-15"]])]


@tool("report")
def report_extract_evidence(ws: Workspace, masks: Annotated[list[str], Field(
        min_length=2, max_length=MAX_DATES, description="0/1 hazard masks of the same place on different dates "
        "('ws/...' from seg_*/mask_* tools, or 'data/...'), same CRS and extent")], dates: Dates) -> EvidenceOut:
    """Evidence of how a hazard's extent changed over time, from one mask per date: the area (m2) of each date,
    the peak date and area, the growth rate (peak - first area, per day to the peak) and the recession rate
    (peak - last area, per day after the peak), every step's change, and DORA's trend class.

    Trend rule, on the areas in date order: a step grows if it adds more than 1% of the peak area, recedes if
    it loses more than that, else is flat. Ignoring flat steps: only growth = 'expanding'; only recession =
    'shrinking'; growth then recession (no growth after a recession) = 'expand-then-recede'; anything else,
    including no growth or recession at all, = 'mixed'."""
    if len(masks) != len(dates):
        raise ToolInputError(f"arguments 'masks' and 'dates' differ in length ({len(masks)} masks, {len(dates)} "
                             "dates); give one date per mask, in the same order")
    repeated = sorted({day.isoformat() for day in dates if dates.count(day) > 1})
    if repeated:
        raise ToolInputError(f"argument 'dates': each mask needs its own date, but {', '.join(repeated)} is given "
                             "more than once")
    reals = [ws.resolve(mask, suffixes=TIF) for mask in masks]
    described = [rasters.metadata(real) for real in reals]
    for mask, meta in zip(masks[1:], described[1:]):
        rasters.same_extent(described[0], meta, f"masks {masks[0]!r} and {mask!r}")
    areas = []
    for mask, real in zip(masks, reals):
        grid = rasters.read(real, [1], dtype="uint8")
        if not rasters.is_metric(grid.profile["crs"]):
            raise RasterError(f"mask {mask!r} is in {crs_name(grid.profile['crs'])}, not a CRS in metres, so its "
                              "area in m2 is undefined; reproject it to the scene's UTM CRS (ras_reproject)")
        areas.append(rasters.mask_stats(grid)["area_m2"])
    evidence = reporting.area_evidence(dates, areas)
    first, peak, last = 0, evidence.peak_index, len(evidence.dates) - 1
    return EvidenceOut(
        dates=evidence.dates, masks=[ws.virtual(reals[index]) for index in evidence.order],
        areas_m2=evidence.areas_m2,
        first_date=evidence.dates[first], first_area_m2=evidence.areas_m2[first],
        peak_date=evidence.dates[peak], peak_area_m2=evidence.areas_m2[peak],
        last_date=evidence.dates[last], last_area_m2=evidence.areas_m2[last],
        growth_rate_m2_per_day=evidence.growth_rate_m2_per_day,
        recession_rate_m2_per_day=evidence.recession_rate_m2_per_day, tolerance_m2=evidence.tolerance_m2,
        steps=[EvidenceStep(start_date=step.start, end_date=step.end, days=step.days, change_m2=step.change_m2,
                            rate_m2_per_day=step.rate_m2_per_day, direction=step.direction)
               for step in evidence.steps],
        trend=evidence.trend)


class Finding(BaseModel):
    """One fact of the report: a label, its value and the value's unit."""

    label: str = Field(min_length=1, max_length=80, description="what the value is, e.g. 'Flooded area'")
    value: Annotated[float, Field(allow_inf_nan=False, ge=-1e15, le=1e15)] | Annotated[str, Field(max_length=120)] = (
        Field(description="a number (finite) or a short text, e.g. 1250000 or 'Bad Neuenahr'"))
    unit: str = Field("", max_length=20, description="unit of a number, e.g. 'm2', 'people', 'buildings'")


@tool("report")
async def report_summarize(ws: Workspace,
                     event: Annotated[str, Field(min_length=1, max_length=120, description="what the report is "
                                                 "about, e.g. 'Ahr valley flood, July 2021'")],
                     findings: Annotated[list[Finding], Field(max_length=20, description="the facts to state, in "
                                                              "order", examples=[[{"label": "Flooded area",
                                                                                   "value": 1250000, "unit": "m2"}]])],
                     hazard: Annotated[str | None, Field(None, max_length=60, description="the hazard type, e.g. "
                                                         "'flood'")] = None,
                     trend: Annotated[TrendFacts | None, Field(None, description="the extent's trend: the result of "
                                                               "report_extract_evidence (its other fields are "
                                                               "ignored)")] = None,
                     recommendations: Annotated[Sequence[Annotated[str, Field(min_length=1, max_length=200)]], Field(
                         max_length=10, description="recommended actions, in priority order")] = (),
                     writer: Annotated[Literal["template", "client_model"], Field(
                         "template", description="'template' (default: deterministic) or 'client_model' (your "
                         "client's language model rewrites the template's text as prose, if the client offers "
                         "one)")] = "template",
                     ) -> SummaryOut:
    """A summary of structured facts. By default deterministic (no language model: the same facts always give
    the same text): an opening sentence naming the event and hazard, one sentence per finding ('label: value
    unit.'; whole numbers with thousands separators, others to at most two decimals (three significant digits
    below 1), m2 as m²), one sentence for the trend (if given: its class, first, peak and last areas and dates),
    and the recommendations numbered in order. With writer='client_model' the server asks the calling client's
    language model (MCP sampling) to rewrite that text as one paragraph; the result names the model, keeps the
    template's text, and lists the findings whose value the model's text lost (facts_missing)."""
    if not findings and trend is None:
        raise ToolInputError("give at least one finding or a trend to summarise; a valid example: "
                             '{"event": "Ahr valley flood", "findings": [{"label": "Flooded area", "value": 1250000, '
                             '"unit": "m2"}]}')
    if trend is not None:
        if not trend.first_date <= trend.peak_date <= trend.last_date:
            raise ToolInputError("argument 'trend': the peak date must lie between the first and the last date")
        if trend.peak_area_m2 < max(trend.first_area_m2, trend.last_area_m2):
            raise ToolInputError("argument 'trend': the peak area must be at least the first and the last area")
    facts = [(f.label, f.value, f.unit) for f in findings]
    sentences = reporting.summary_sentences(event, hazard, facts, trend, recommendations)
    text = "\n".join(sentences)
    if writer == "template":
        return SummaryOut(text=text, sentences=sentences, word_count=len(text.split()))
    reply = await ask_client_model(ws.client_session(), reporting.writer_prompt(sentences),
                                   tool=report_summarize.__name__,
                                   system=reporting.WRITER_SYSTEM, max_tokens=reporting.WRITER_MAX_TOKENS,
                                   fallback="call again with writer='template'")
    lines = [line.strip() for line in reply.text.splitlines() if line.strip()]
    return SummaryOut(text=reply.text, sentences=lines, word_count=len(reply.text.split()), writer=writer,
                      model=reply.model, template_text=text, facts_missing=reporting.facts_missing(reply.text, facts))
