"""The T5 scorer: a situation report graded field by field with DORA's answer types, and figure by figure
from the files in the session workspace.

A report task's ``eval_spec`` (type ``report``) lists the report's *fields* and *figures*::

    {"type": "report",
     "fields": {"affected_area_m2": {"type": "numeric"}, "buildings_damaged.destroyed": {"type": "numeric"},
                "roads_cut": {"type": "set"}, "recommended_shelter": {"type": "exact"}, ...},
     "figures": {"damage_map": {"kind": "damage_map", "data_layers": ["data/<event>/post_optical.tif"],
                                "workspace_layers": ["building-damage"]},
                 "chart": {"kind": "bar_chart", "values_of": ["buildings_damaged.partial", ...]},
                 "temporal_panel": {"kind": "temporal_panel", "data_layers": [...], "dates": [...]}}}

A report answer is a JSON object holding the fields (a dotted name reads a nested object:
``buildings_damaged.destroyed`` is ``answer["buildings_damaged"]["destroyed"]``) and ``figures``, the
``ws/...png`` path of each required figure.

**Fields** are graded by ``scoring.grade_answer`` with their own DORA type (numeric within 1 + 20 %,
set by F1, exact, kendall...); a field whose expected value is null (e.g. no shelter can be reached) is
right only when the answer's is null too.

**Figures** are never taken on the agent's word: the answer only says *where* a figure is. The figure
scores 1 when all of these hold, else 0 (the reason names the first that fails):

1. the answer names a ``ws/...png`` path for it, and one of the session's successful tool calls
   returned that path (the server's record of the session, not the agent's text);
2. the file is in the session workspace and its bytes hash to the digest in its content-hashed name
   (``figure-<kind>-<sha256[:16]>.png``), so it is the file the tool wrote;
3. it decodes as a PNG and carries its provenance in the PNG's ``Description`` chunk (the sidecar
   ``.json``, if present, must say the same);
4. its ``kind`` is the required one (a ``map_elements`` figure counts as the figure it was drawn on);
5. its ``source_layers`` are the required ones: the ``data/...`` layers exactly, and the workspace
   layers by the *stem* of their names (``ws/building-damage-<hash>.geojson`` has stem
   ``building-damage``: which tool made it), exactly;
6. what it shows matches: a chart's values equal the expected values of the fields it plots (DORA's
   numeric check), a temporal panel's dates are the required dates.

The answer score is the mean over fields and figures (each counts one); the answer is correct when
every field and every figure is.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from gauntlet.mcp_servers.disaster.scoring import _calls, grade_answer
from gauntlet.tasks import NO_ANSWER

REPORT = "report"
FIGURES_KEY = "figures"
WORKSPACE_PREFIX = "ws/"
DATA_PREFIX = "data/"
MAX_FIGURE_DEPTH = 4  # map elements on map elements on ... a figure: how far a figure's base is followed
_HASHED = re.compile(r"^(?P<stem>.+)-(?P<digest>[0-9a-f]{16})(?P<suffix>\.[A-Za-z0-9.]+)$")
_MISSING = object()


# Fields -------------------------------------------------------------------------------------------
def field_value(report: Any, name: str) -> Any:
    """The value of field ``name`` (dotted for nested objects) in a report, or ``_MISSING``."""
    value = report
    for key in name.split("."):
        if not isinstance(value, dict) or key not in value:
            return _MISSING
        value = value[key]
    return value


def grade_field(spec: dict[str, Any], expected: Any, answer: Any) -> tuple[float, bool, str]:
    """One field of a report under its DORA type."""
    if answer is _MISSING:
        return 0.0, False, "missing"
    if expected is None:
        ok = answer is None
        return float(ok), ok, "null as expected" if ok else "expected null (none exists)"
    if answer is None:
        return 0.0, False, "null"
    return grade_answer(spec, expected, answer)


def grade_fields(spec: dict[str, Any], expected: Any, answer: Any) -> tuple[float, bool, str]:
    """(score, correct, reason) of a report's fields alone (no figures): the truth-vs-gold check."""
    report = _as_report(answer)
    if report is None:
        return 0.0, False, "expected a JSON object with the report's fields"
    return _combine(_field_items(spec, expected, report))


def _as_report(answer: Any) -> dict[str, Any] | None:
    """The report object of an answer (also when submitted as JSON text), or None."""
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except ValueError:
            return None
    return answer if isinstance(answer, dict) else None


def _field_items(spec: dict[str, Any], expected: Any, answer: Any) -> list[tuple[str, float, bool, str]]:
    items = []
    for name, field_spec in spec["fields"].items():
        want = field_value(expected, name)
        if want is _MISSING:
            raise ValueError(f"the expected report has no field {name!r}")
        got = field_value(answer, name) if isinstance(answer, dict) else _MISSING
        items.append((name, *grade_field(field_spec, want, got)))
    return items


def _combine(items: list[tuple[str, float, bool, str]]) -> tuple[float, bool, str]:
    if not items:
        raise ValueError("a report spec needs at least one field or figure")
    score = sum(item[1] for item in items) / len(items)
    correct = all(item[2] for item in items)
    wrong = [f"{name}: {reason}" for name, _, ok, reason in items if not ok]
    reason = f"{sum(item[2] for item in items)}/{len(items)} report items right"
    return score, correct, reason + ("; " + "; ".join(wrong) if wrong else "")


# Figures ------------------------------------------------------------------------------------------
class FigureProblem(Exception):
    """Why a figure does not count (the message is the scorer's reason)."""


def default_workspace_roots() -> list[Path]:
    """Where session workspaces live: the disaster server makes each under the data cache's
    ``disaster-workspaces`` folder (``server.build_server``)."""
    from gauntlet.datacache import cache_root

    return [cache_root() / "disaster-workspaces"]


def locate(path: str, roots: Iterable[Path]) -> Path | None:
    """The file behind the workspace path ``path`` in one of ``roots`` (a workspace, or a folder of
    session workspaces), checked against the digest in its name; None when there is none."""
    name = path[len(WORKSPACE_PREFIX):]
    match = _HASHED.match(name)
    if "/" in name or match is None:
        return None
    for root in roots:
        for candidate in [Path(root) / name, *sorted(Path(root).glob(f"*/{name}"))]:
            if candidate.is_file() and hashlib.sha256(candidate.read_bytes()).hexdigest()[:16] == match["digest"]:
                return candidate
    return None


def stem(path: str) -> str:
    """The stem of a content-hashed workspace name: ``ws/building-damage-<16 hex>.geojson`` -> ``building-damage``."""
    match = _HASHED.match(path.rsplit("/", 1)[-1])
    return match["stem"] if match else path


def read_provenance(real: Path) -> dict[str, Any]:
    """The provenance a figure tool embedded in the PNG (checked against its sidecar, if any)."""
    from PIL import Image, UnidentifiedImageError

    from gauntlet.mcp_servers.disaster.figures import read_png

    data = real.read_bytes()
    try:
        read_png(data)
        with Image.open(real) as image:
            text = image.info.get("Description")
    except (ValueError, OSError, UnidentifiedImageError):
        raise FigureProblem("not a readable PNG") from None
    try:
        provenance = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        provenance = None
    if not isinstance(provenance, dict) or "kind" not in provenance:
        raise FigureProblem("a PNG without a figure tool's provenance")
    sidecar = real.with_suffix(".json")
    if sidecar.is_file():
        try:
            described = json.loads(sidecar.read_text())
        except ValueError:
            raise FigureProblem("its provenance sidecar is not JSON") from None
        if not isinstance(described, dict) or {k: v for k, v in described.items() if k != "path"} != provenance:
            raise FigureProblem("its provenance sidecar does not match the PNG")
    return provenance


def _base_kind(provenance: dict[str, Any], roots: Sequence[Path], depth: int = 0) -> str:
    """The figure's kind; for map elements added to a saved figure, the kind of that figure."""
    layers = provenance.get("layers") or []
    if provenance["kind"] != "map_elements" or not layers or not str(layers[0]).endswith(".png"):
        return str(provenance["kind"])
    base = locate(str(layers[0]), roots)
    if base is None or depth >= MAX_FIGURE_DEPTH:
        raise FigureProblem("the figure its map elements were drawn on is not in the workspace")
    return _base_kind(read_provenance(base), roots, depth + 1)


def produced_paths(calls: Sequence[Any]) -> set[str]:
    """Workspace paths the session's successful tool calls returned (from the server's results)."""
    return {str(result["path"]) for _, _, result in _calls(calls)
            if isinstance(result, dict) and isinstance(result.get("path"), str)}


def check_figure(spec: dict[str, Any], path: Any, expected: Any, produced: set[str],
                 roots: Sequence[Path]) -> None:
    """Raise ``FigureProblem`` unless the figure at ``path`` meets ``spec`` (see the module docstring)."""
    if not isinstance(path, str) or not path.startswith(WORKSPACE_PREFIX) or not path.endswith(".png"):
        raise FigureProblem("no 'ws/...png' path given")
    if path not in produced:
        raise FigureProblem(f"{path[:80]!r} was not returned by a tool call of this session")
    real = locate(path, roots)
    if real is None:
        raise FigureProblem(f"{path[:80]!r} is not in the session workspace (or was changed after it was written)")
    provenance = read_provenance(real)
    kind = _base_kind(provenance, roots)
    if kind != spec["kind"]:
        raise FigureProblem(f"a {kind} figure, not a {spec['kind']}")
    sources = [str(s) for s in provenance.get("source_layers") or []]
    data = sorted(s for s in sources if s.startswith(DATA_PREFIX))
    if "data_layers" in spec and data != sorted(spec["data_layers"]):
        raise FigureProblem(f"made from data layers {data}, not {sorted(spec['data_layers'])}")
    made = sorted({stem(s) for s in sources if s.startswith(WORKSPACE_PREFIX)})
    if "workspace_layers" in spec and made != sorted(set(spec["workspace_layers"])):
        raise FigureProblem(f"made from workspace layers {made}, not {sorted(set(spec['workspace_layers']))}")
    details = provenance.get("details") or {}
    if "dates" in spec and list(details.get("dates") or []) != list(spec["dates"]):
        raise FigureProblem(f"shows dates {details.get('dates')}, not {spec['dates']}")
    if "values_of" in spec:
        values = _at(details, spec.get("values_key", "values"))
        values = list(values) if isinstance(values, list) else []
        want = [field_value(expected, name) for name in spec["values_of"]]
        if len(values) != len(want) or not all(grade_answer({"type": "numeric"}, w, v)[1]
                                               for w, v in zip(want, values)):
            raise FigureProblem(f"shows values {values}, not {want}")


def _at(details: Any, key: str) -> Any:
    """``details`` at a dotted key (``series.0.values``: list items by index), or None."""
    value = details
    for part in key.split("."):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return None
    return value


def _figure_items(spec: dict[str, Any], expected: Any, answer: Any, calls: Sequence[Any],
                  roots: Sequence[Path]) -> list[tuple[str, float, bool, str]]:
    given = answer.get(FIGURES_KEY) if isinstance(answer, dict) else None
    given = given if isinstance(given, dict) else {}
    produced = produced_paths(calls)
    items = []
    for name, figure_spec in spec.get("figures", {}).items():
        try:
            check_figure(figure_spec, given.get(name), expected, produced, roots)
        except FigureProblem as problem:
            items.append((f"figure {name}", 0.0, False, str(problem)))
        else:
            items.append((f"figure {name}", 1.0, True, "ok"))
    return items


def grade_report(spec: dict[str, Any], expected: Any, answer: Any, calls: Sequence[Any] = (),
                 workspace_roots: Sequence[Path] | None = None) -> tuple[float, bool, str]:
    """(score, correct, reason) of a report answer: its fields against ``expected`` and its figures read
    back from the session workspace (``workspace_roots``: the workspace or a folder of them; default
    ``default_workspace_roots()``), with ``calls`` the session's tool calls."""
    if answer is NO_ANSWER:
        return 0.0, False, "no answer"
    answer = _as_report(answer)
    if answer is None:
        return 0.0, False, "expected a JSON object with the report's fields and figures"
    roots = list(workspace_roots) if workspace_roots is not None else default_workspace_roots()
    items = _field_items(spec, expected, answer) + _figure_items(spec, expected, answer, calls, roots)
    return _combine(items)
