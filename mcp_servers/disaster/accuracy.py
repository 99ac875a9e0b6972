"""Perception accuracy against the generator's truth (IoU / F1), per detector and event.

    measure(scene_root, event) -> {"flood_ndwi_iou": ..., "building_damage_accuracy": ..., ...}

Used by the tests (floors) and by ``bench/disaster.py`` (the figures in docs/disaster.md).
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
