"""Calculation (calc_*), logistics (logi_*) and meta (tool_loop, tool_reduce) tools.

Their input problems (a zero divisor, an empty list, records without the field asked for) are
``CalculationError``: the agent's to fix, and nothing to do with rasters or vectors."""

import math
from typing import Annotated, Any, Literal

from pydantic import Field

from gauntlet.bridges.tool_errors import ToolInputError
from gauntlet.mcp_servers.disaster import vectors
from gauntlet.mcp_servers.disaster.models import BoolOut, ItemsOut, ValueOut
from gauntlet.mcp_servers.disaster.toolkit import tool
from gauntlet.mcp_servers.disaster.workspace import Workspace

Numbers = Annotated[list[float], Field(description="a list of numbers", examples=[[1.5, 2.0, 4.0]])]
# Quantities (people, capacities, distances) cannot be negative: a negative capacity would report
# negative unmet demand rather than an error the agent can fix.
Amounts = Annotated[list[Annotated[float, Field(ge=0)]], Field(
    min_length=1, description="a non-empty list of non-negative amounts", examples=[[120.0, 80.0]])]
A = Annotated[float, Field(description="first operand")]
B = Annotated[float, Field(description="second operand")]
NonNegative = Annotated[float, Field(ge=0)]


class CalculationError(ToolInputError):
    """Numbers a calculation cannot take (a zero divisor, an empty list); the message says which."""


def _need(values, what="values") -> None:
    if not values:
        raise CalculationError(f"{what} must not be empty")


# Calculation ----------------------------------------------------------------------------------------
@tool("calc")
def calc_add(ws: Workspace, a: A, b: B) -> ValueOut:
    """Add two numbers: returns a + b (use to combine counts or areas)."""
    return ValueOut(value=a + b)


@tool("calc")
def calc_subtract(ws: Workspace, a: A, b: B) -> ValueOut:
    """Subtract two numbers: returns a - b (e.g. post minus pre)."""
    return ValueOut(value=a - b)


@tool("calc")
def calc_multiply(ws: Workspace, a: A, b: B) -> ValueOut:
    """Multiply two numbers: returns a * b (e.g. people x litres per person)."""
    return ValueOut(value=a * b)


@tool("calc")
def calc_divide(ws: Workspace, a: A, b: B) -> ValueOut:
    """Divide two numbers: returns a / b (b must not be 0)."""
    if b == 0:
        raise CalculationError("cannot divide by zero")
    return ValueOut(value=a / b)


@tool("calc")
def calc_percentage(ws: Workspace, part: Annotated[float, Field(description="the part")],
                    whole: Annotated[float, Field(description="the whole (non-zero)")]) -> ValueOut:
    """part as a percentage of whole: 100 x part / whole (whole must not be 0)."""
    if whole == 0:
        raise CalculationError("whole must not be 0")
    return ValueOut(value=100.0 * part / whole, unit="%")


@tool("calc")
def calc_percent_change(ws: Workspace, before: Annotated[float, Field(description="value before (non-zero)")],
                        after: Annotated[float, Field(description="value after")]) -> ValueOut:
    """Relative change from before to after, in percent."""
    if before == 0:
        raise CalculationError("before must not be 0")
    return ValueOut(value=100.0 * (after - before) / before, unit="%")


@tool("calc")
def calc_compare(ws: Workspace, a: A, op: Annotated[Literal[">", ">=", "<", "<=", "==", "!="], Field(
        description="comparison: a op b")], b: B) -> BoolOut:
    """Compare two numbers: whether 'a op b' holds (true/false)."""
    return BoolOut(value={">": a > b, ">=": a >= b, "<": a < b, "<=": a <= b, "==": a == b, "!=": a != b}[op])


@tool("calc")
def calc_sum(ws: Workspace, values: Numbers) -> ValueOut:
    """Sum of a list of numbers (exact floating-point summation)."""
    return ValueOut(value=float(math.fsum(values)))


@tool("calc")
def calc_mean(ws: Workspace, values: Numbers) -> ValueOut:
    """Arithmetic mean of a list of numbers."""
    _need(values)
    return ValueOut(value=float(math.fsum(values) / len(values)))


@tool("calc")
def calc_max(ws: Workspace, values: Numbers) -> ValueOut:
    """Largest of a non-empty list of numbers."""
    _need(values)
    return ValueOut(value=float(max(values)))


@tool("calc")
def calc_min(ws: Workspace, values: Numbers) -> ValueOut:
    """Smallest of a non-empty list of numbers."""
    _need(values)
    return ValueOut(value=float(min(values)))


@tool("calc")
def calc_round(ws: Workspace, value: Annotated[float, Field(description="number to round")],
               digits: Annotated[int, Field(0, ge=-6, le=10,
                                            description="decimal places (negative: tens, hundreds)")] = 0
               ) -> ValueOut:
    """Round a number to a number of decimal digits (negative digits round to tens, hundreds...)."""
    return ValueOut(value=round(value, digits))


@tool("calc")
def calc_convert_area(ws: Workspace, value: Annotated[float, Field(ge=0, description="area to convert")],
                      from_unit: Annotated[Literal["m2", "ha", "km2"], Field(description="unit of value")],
                      to_unit: Annotated[Literal["m2", "ha", "km2"], Field(description="unit wanted")]) -> ValueOut:
    """Convert an area between m2, hectares and km2."""
    factor = {"m2": 1.0, "ha": 1e4, "km2": 1e6}
    return ValueOut(value=value * factor[from_unit] / factor[to_unit], unit=to_unit)


@tool("calc")
def calc_convert_length(ws: Workspace, value: Annotated[float, Field(ge=0, description="length to convert")],
                        from_unit: Annotated[Literal["m", "km", "mi"], Field(description="unit of value")],
                        to_unit: Annotated[Literal["m", "km", "mi"], Field(description="unit wanted")]) -> ValueOut:
    """Convert a length between metres, kilometres and miles."""
    factor = {"m": 1.0, "km": 1000.0, "mi": 1609.344}
    return ValueOut(value=value * factor[from_unit] / factor[to_unit], unit=to_unit)


@tool("calc")
def calc_rank(ws: Workspace, items: Annotated[list[dict[str, Any]], Field(description="records to rank")],
              key: Annotated[str, Field(description="numeric field of every record to sort by")],
              descending: Annotated[bool, Field(description="largest first")] = True) -> ItemsOut:
    """Sort records by a numeric field (ties keep their order) and add a 1-based 'rank'."""
    if any(not isinstance(item.get(key), (int, float)) for item in items):
        raise CalculationError(f"every item needs a numeric {key!r}")
    ranked = sorted(items, key=lambda item: item[key], reverse=descending)
    out = [{**item, "rank": i + 1} for i, item in enumerate(ranked)]
    return ItemsOut(items=out, count=len(out))


@tool("calc")
def calc_distance_m(ws: Workspace, a: Annotated[list[float], Field(min_length=2, max_length=2, description="[x, y]")],
                    b: Annotated[list[float], Field(min_length=2, max_length=2, description="[x, y]")]) -> ValueOut:
    """Straight-line distance between two projected points (m)."""
    if len(a) != 2 or len(b) != 2:
        raise CalculationError("points must be [x, y]")
    return ValueOut(value=math.dist(a, b), unit="m")


# Logistics ------------------------------------------------------------------------------------------
@tool("logi")
def logi_truck_trips(ws: Workspace, demand: Annotated[float, Field(ge=0, description="amount to move")],
                     truck_capacity: Annotated[float, Field(gt=0, description="amount one truck carries per trip")],
                     trucks: Annotated[int, Field(1, ge=1, description="trucks in the fleet")] = 1) -> ValueOut:
    """Round trips needed per truck to move demand with trucks of truck_capacity: ceil(demand / (capacity x trucks))."""
    trips = demand / (truck_capacity * trucks)
    if not math.isfinite(trips):
        raise CalculationError("demand / (truck_capacity x trucks) is beyond any number of trips: check the units of "
                               "'demand' and 'truck_capacity'; a valid example: "
                               '{"demand": 12000, "truck_capacity": 8000, "trucks": 2}')
    return ValueOut(value=float(math.ceil(trips)), unit="trips")


@tool("logi")
def logi_travel_time_min(ws: Workspace, distance_m: Annotated[float, Field(ge=0, description="distance to travel, m")],
                         speed_kmh: Annotated[float, Field(gt=0, le=300, description="average speed, km/h")]
                         ) -> ValueOut:
    """Travel time in minutes for a distance at a speed."""
    return ValueOut(value=distance_m / 1000.0 / speed_kmh * 60.0, unit="min")


@tool("logi")
def logi_supply_needs(ws: Workspace, people: Annotated[float, Field(ge=0, description="people to supply")],
                      days: Annotated[float, Field(gt=0, description="days to cover")],
                      item: Annotated[Literal["water_l", "food_kcal", "shelter_m2"], Field(
                          description="what to supply")]) -> ValueOut:
    """Sphere-standard needs: water 15 l/person/day, food 2100 kcal/person/day, covered shelter 3.5 m2/person."""
    per_day = {"water_l": 15.0, "food_kcal": 2100.0}
    if item == "shelter_m2":
        return ValueOut(value=people * 3.5, unit="m2")
    return ValueOut(value=people * days * per_day[item], unit=item.split("_")[1])


# A weight is a preference, not a quantity: a negative one is meaningful (a larger distance lowers the
# priority). What has no meaning is a ranking where every weight is 0, a weight that is not finite, or
# a field value the normalisation by the field's maximum cannot take (negative or not finite).
PriorityWeights = Annotated[dict[str, Annotated[float, Field(allow_inf_nan=False)]], Field(
    min_length=1, description="field -> weight; score = sum(weight x value / max value of the field). A negative "
                              "weight makes a larger value lower the priority (e.g. a distance)",
    examples=[{"people": 1.0, "distance_m": -0.5}])]
PRIORITY_EXAMPLE = ('{"items": [{"id": "A", "people": 120, "distance_m": 800}, {"id": "B", "people": 40, '
                    '"distance_m": 200}], "weights": {"people": 1.0, "distance_m": -0.5}}')


@tool("logi")
def logi_priority_scores(ws: Workspace, items: Annotated[list[dict[str, Any]], Field(
        min_length=1, description="records, each with every weighted field as a number >= 0")],
        weights: PriorityWeights) -> ItemsOut:
    """Weighted priority score per record (each field normalised by its maximum), highest first, with rank.

    Weighted fields hold amounts >= 0 (people, damage, distance); a negative weight counts a field
    against the priority, e.g. {"people": 1.0, "distance_m": -0.5} ranks many people close by first."""
    if not any(weights.values()):
        raise CalculationError("argument 'weights': every weight is 0, so every record would score 0 and the "
                               "ranking would mean nothing; give at least one non-zero weight; a valid example: "
                               + PRIORITY_EXAMPLE)
    columns: dict[str, list[float]] = {}
    for key in weights:
        columns[key] = [amount for item in items if (amount := _amount(item.get(key))) is not None]
        if len(columns[key]) < len(items):
            raise CalculationError(f"argument 'items': every record needs a finite number >= 0 in {key!r} (scores "
                                   f"divide by the field's maximum); a valid example: {PRIORITY_EXAMPLE}")
    top = {key: max(max(column), 1e-12) for key, column in columns.items()}
    scored = [{**item, "score": round(sum(w * columns[k][i] / top[k] for k, w in weights.items()), 6)}
              for i, item in enumerate(items)]
    scored.sort(key=lambda item: -item["score"])
    return ItemsOut(items=[{**item, "rank": i + 1} for i, item in enumerate(scored)], count=len(scored))


def _amount(value: Any) -> float | None:
    """``value`` as a finite float >= 0, or None when it is not one (text, NaN, negative, beyond a float)."""
    if not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer too large for any float
        return None
    return number if math.isfinite(number) and number >= 0 else None


@tool("logi")
def logi_allocate(ws: Workspace, demands: Amounts, capacities: Amounts,
                  distances_m: Annotated[list[Annotated[list[NonNegative], Field(min_length=1)]], Field(
                      min_length=1, description="distances_m[i][j] >= 0: demand i to facility j, m",
                      examples=[[[500.0, 1200.0]]])]) -> ItemsOut:
    """Allocate people (demands) to shelters (capacities), nearest pairs first, never over capacity.
    Items: per demand, the people sent to each facility; the last item reports 'unmet'."""
    if len(distances_m) != len(demands) or any(len(row) != len(capacities) for row in distances_m):
        raise CalculationError("distances_m must have one row per demand and one column per facility")
    assigned, unmet = vectors.allocate_capacity(list(demands), list(capacities), [list(r) for r in distances_m])
    items = [{"demand": i, "assigned": row} for i, row in enumerate(assigned)] + [{"unmet": unmet}]
    return ItemsOut(items=items, count=len(demands))


@tool("logi")
def logi_shelter_capacity_gap(ws: Workspace, people: Annotated[float, Field(ge=0, description="people to shelter")],
                              capacities: Amounts) -> ValueOut:
    """People left without a place: max(0, people - total capacity)."""
    try:
        total = math.fsum(capacities)
    except OverflowError:  # fsum refuses a sum beyond any float
        total = math.inf
    if not math.isfinite(total) or not math.isfinite(float(people)):
        raise CalculationError("argument 'capacities' (or 'people') is beyond any number of places; a valid "
                               'example: {"people": 1200, "capacities": [500, 300]}')
    return ValueOut(value=max(0.0, people - total), unit="people")


# Meta -----------------------------------------------------------------------------------------------
@tool("tool")
async def tool_loop(ws: Workspace, tool_name: Annotated[str, Field(description="the tool to call for every item")],
                    items: Annotated[list[Any], Field(description="values to map over")],
                    item_arg: Annotated[str, Field(description="argument of the tool that receives each item")],
                    args: Annotated[dict[str, Any], Field(default_factory=dict, description="fixed arguments")],
                    ) -> ItemsOut:
    """Call a tool once per item (item passed as item_arg, plus the fixed args); items of the result are the
    calls' results in order. Use it to map e.g. ras_area_m2 over several masks from earlier calls."""
    if tool_name not in ws.tools or tool_name in ("tool_loop", "tool_reduce"):
        raise CalculationError(f"tool_loop cannot call {tool_name!r}; give a tool of this server")
    if len(items) > 1000:
        raise CalculationError("tool_loop maps over at most 1000 items")
    results = []
    for item in items:
        result = await ws.tools[tool_name]({**args, item_arg: item})
        results.append(result.model_dump() if hasattr(result, "model_dump") else result)
    return ItemsOut(items=results, count=len(results))


@tool("tool")
def tool_reduce(ws: Workspace, values: Annotated[list[Any], Field(description="numbers, or records with 'field'")],
                op: Annotated[Literal["sum", "mean", "min", "max", "count", "argmax", "argmin"], Field(
                    description="the reduction")],
                field: Annotated[str | None, Field(None, description="record field holding the number")] = None,
                ) -> ValueOut:
    """Reduce a list (e.g. tool_loop's items) to one number; argmax/argmin give the 0-based index."""
    found = [v.get(field) if isinstance(v, dict) and field else v for v in values]
    if op == "count":
        return ValueOut(value=float(len(found)))
    if not found or any(not isinstance(n, (int, float)) or isinstance(n, bool) for n in found):
        raise CalculationError("values must be a non-empty list of numbers (or records with a numeric 'field')")
    numbers = [float(n) for n in found if isinstance(n, (int, float))]
    table = {"sum": lambda: math.fsum(numbers), "mean": lambda: math.fsum(numbers) / len(numbers),
             "min": lambda: min(numbers), "max": lambda: max(numbers),
             "argmax": lambda: numbers.index(max(numbers)), "argmin": lambda: numbers.index(min(numbers))}
    return ValueOut(value=float(table[op]()))

