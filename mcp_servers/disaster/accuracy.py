"""Perception accuracy against the generator's truth (IoU / F1), per detector and event.

    measure(scene_root, event) -> {"flood_ndwi_iou": ..., "building_damage_accuracy": ..., ...}

Used by the tests (floors) and by ``bench/disaster.py`` (the figures in docs/results/disaster.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from gauntlet.mcp_servers.disaster import perception, rasters, vectors
from gauntlet.mcp_servers.disaster.hazards import FLOOD_LIKE
from gauntlet.mcp_servers.disaster.scenes import OPTICAL_FACTOR


def _truth(scene_root: Path, event: str):
    truth_dir = scene_root.parent / "truth" / event
    mask = rasters.read(truth_dir / "hazard_mask.tif", [1], dtype="uint8").data[0] > 0
    return mask, json.loads((truth_dir / "damage.json").read_text())


def measure(scene_root: Path, event: str) -> dict[str, float]:
    """Every applicable detector's agreement with the truth for one event."""
    folder = scene_root / event
    hazard = json.loads((folder / "manifest.json").read_text())["event"]["hazard"]
    truth, damage = _truth(scene_root, event)
    out: dict[str, float] = {}

    def score(name: str, predicted: np.ndarray, reference: np.ndarray) -> None:
        out[f"{name}_iou"] = round(perception.iou(predicted, reference), 4)
        out[f"{name}_f1"] = round(perception.f1(predicted, reference), 4)

    if hazard in FLOOD_LIKE:
        fine_truth = np.kron(truth, np.ones((OPTICAL_FACTOR, OPTICAL_FACTOR), bool))
        score("flood_ndwi", perception.flood_extent(perception.water_ndwi(folder / "pre_optical.tif"),
                                                    perception.water_ndwi(folder / "post_optical.tif")).data[0] > 0,
              fine_truth)
        score("flood_mndwi", perception.flood_extent(perception.water_mndwi(folder / "pre_s2.tif"),
                                                     perception.water_mndwi(folder / "post_s2.tif")).data[0] > 0, truth)
        score("flood_sar", perception.flood_extent(perception.water_sar_otsu(folder / "pre_sar.tif")[0],
                                                   perception.water_sar_otsu(folder / "post_sar.tif")[0]).data[0] > 0,
              truth)
    if hazard == "wildfire":
        burned = perception.burn_severity(folder / "pre_s2.tif", folder / "post_s2.tif")[1]
        score("burn_dnbr", burned.data[0] > 0, truth)
    if hazard == "volcanic_eruption":
        score("lava_thermal", perception.thermal_anomaly(folder / "lst.tif").data[0] > 0, truth)
    if hazard == "landslide":
        scars = perception.landslide(folder / "pre_s2.tif", folder / "post_s2.tif", folder / "slope.tif", 2.0)
        score("landslide_ndvi", scars.data[0] > 0, truth)
    features, _ = vectors.read_features(folder / "buildings.geojson")
    predicted = {r["id"]: r["damage"] for r in perception.building_damage(folder / "pre_optical.tif",
                                                                          folder / "post_optical.tif", features)}
    ids = [i for i in damage["buildings"] if i in predicted]
    if ids:
        true_states = np.array([damage["buildings"][i] for i in ids])
        predicted_states = np.array([predicted[i] for i in ids])
        out["building_damage_accuracy"] = round(float(np.mean(true_states == predicted_states)), 4)
        out["building_destroyed_f1"] = round(perception.f1(predicted_states == "destroyed",
                                                           true_states == "destroyed"), 4)
        out["building_damaged_f1"] = round(perception.f1(predicted_states != "intact", true_states != "intact"), 4)
    return out


def summarise(rows: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Mean, min and number of events of every metric over events."""
    keys = sorted({k for row in rows for k in row})
    return {k: {"mean": round(float(np.mean([r[k] for r in rows if k in r])), 4),
                "min": round(float(np.min([r[k] for r in rows if k in r])), 4),
                "events": sum(k in r for r in rows)} for k in keys}


OBJECT_MATCH_M = {"vehicles": 5.0, "ships": 15.0, "tanks": 7.5, "pools": 5.0}


def measure_objects(scene_root: Path, event: str) -> dict[str, dict[str, int]]:
    """True/false positives and misses of every object detector for one event (micro-averaged by callers).

    Vehicles, ships, tanks and pools are matched one-to-one within ``OBJECT_MATCH_M`` on the pre-event
    image against every object, and vehicles also on the post-event image against the still-visible
    ones; bridges are compared by road segment id; SAR damage by building id (destroyed class)."""
    from gauntlet.mcp_servers.disaster import detectors

    folder = scene_root / event
    truth = json.loads((scene_root.parent / "truth" / event / "objects.json").read_text())
    detect = {"vehicles": detectors.vehicles, "ships": detectors.ships, "tanks": detectors.storage_tanks,
              "pools": detectors.pools}
    out: dict[str, dict[str, int]] = {}

    def record(name: str, counts: tuple[int, int, int]) -> None:
        out[name] = dict(zip(("tp", "fp", "fn"), counts))

    for kind, fn in detect.items():
        found = [(d["x"], d["y"]) for d in fn(folder / "pre_optical.tif")]
        record(kind, detectors.match_points(found, [(t["x"], t["y"]) for t in truth[kind]], OBJECT_MATCH_M[kind]))
    found = [(d["x"], d["y"]) for d in detectors.vehicles(folder / "post_optical.tif")]
    record("vehicles_post", detectors.match_points(
        found, [(t["x"], t["y"]) for t in truth["vehicles"] if t["visible_post"]], OBJECT_MATCH_M["vehicles"]))
    roads, _ = vectors.read_features(folder / "roads.geojson")
    predicted = {r["id"] for r in detectors.bridges(folder / "pre_optical.tif", roads) if r["bridge"]}
    true = set(truth["bridges"])
    record("bridges", (len(predicted & true), len(predicted - true), len(true - predicted)))
    damage = json.loads((scene_root.parent / "truth" / event / "damage.json").read_text())["buildings"]
    buildings, _ = vectors.read_features(folder / "buildings.geojson")
    sar = {r["id"]: r["damage"] for r in detectors.building_damage_sar(folder / "pre_sar.tif",
                                                                       folder / "post_sar.tif", buildings)}
    ids = [i for i in damage if i in sar]
    record("sar_destroyed", (sum(sar[i] == "destroyed" and damage[i] == "destroyed" for i in ids),
                             sum(sar[i] == "destroyed" and damage[i] != "destroyed" for i in ids),
                             sum(sar[i] != "destroyed" and damage[i] == "destroyed" for i in ids)))
    record("sar_damaged", (sum(sar[i] != "intact" and damage[i] != "intact" for i in ids),
                           sum(sar[i] != "intact" and damage[i] == "intact" for i in ids),
                           sum(sar[i] == "intact" and damage[i] != "intact" for i in ids)))
    out["sar_states"] = {"correct": sum(sar[i] == damage[i] for i in ids), "total": len(ids)}
    return out


def summarise_objects(rows: list[dict[str, dict[str, int]]]) -> dict[str, dict[str, float]]:
    """Precision / recall / F1 of every detector over all events (counts summed), plus the SAR 3-class accuracy."""
    from gauntlet.mcp_servers.disaster import detectors

    out: dict[str, dict[str, float]] = {}
    for key in sorted({k for row in rows for k in row if k != "sar_states"}):
        tp, fp, fn = (sum(row[key][c] for row in rows if key in row) for c in ("tp", "fp", "fn"))
        out[key] = {**detectors.prf(tp, fp, fn), "tp": tp, "fp": fp, "fn": fn, "truth": tp + fn,
                    "events": sum(key in row for row in rows)}
    correct = sum(row["sar_states"]["correct"] for row in rows if "sar_states" in row)
    total = sum(row["sar_states"]["total"] for row in rows if "sar_states" in row)
    out["sar_states"] = {"accuracy": round(correct / total, 4) if total else 1.0, "buildings": total}
    return out
