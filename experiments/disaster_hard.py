"""The disaster detectors on the ``clean`` and ``hard`` realism levels of the same scenes
(docs/results/disaster-hard.md).

    python experiments/disaster_hard.py --size smoke  --out /tmp/disaster-hard-smoke
    python experiments/disaster_hard.py --size medium --out experiments/results/disaster/hard
    python experiments/disaster_hard.py --size full   --out experiments/results/disaster/hard

For every event of the size's sample, the scene is built at both levels with the same seed (so the
layout, hazard, damage and truth agree; the hard level adds parking-lot cars to the truth), each build
timed, and then measured as ``gauntlet bench disaster --accuracy-only`` measures the clean scenes:

1. **objects**: ``accuracy.measure_objects`` per event (the classical detectors of ``detectors.py``,
   matched one-to-one within ``accuracy.OBJECT_MATCH_M``), counts summed over events: precision,
   recall and F1 per object class at each level;
2. **masks**: ``accuracy.measure`` per event (flood, burn, lava, landslide masks; optical building
   damage), mean over the events where each applies;
3. **vehicle recall on the hard level by what the truth says about each car**: parked in a lot or
   on the street, and for street cars (at least 7.5 m apart, so a detection cannot match a neighbour
   instead) colour, under canopy (``occluded_fraction >= 0.5``), in shadow (``shadowed_fraction >= 0.5``)
   or in the open: the detections of the pre-event image matched against that subset of the truth;
4. **build time** per event at each level (the two builds of an event run back to back, so they see
   the same machine load; an untimed small build first loads the libraries).

Scenes are built into a scratch folder and removed after each event. The figures go to
``<out>/disaster_hard.json`` and ``<out>/disaster_hard.md`` (the table docs/results/disaster-hard.md shows).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from gauntlet.fileio import write_atomically
from gauntlet.mcp_servers.disaster import accuracy, detectors
from gauntlet.mcp_servers.disaster.events import EVENTS, HAZARD_TYPES
from gauntlet.mcp_servers.disaster.realism import REALISM_LEVELS
from gauntlet.mcp_servers.disaster.scenes import build_scenes

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "disaster" / "hard"


def sample(per_hazard: int | None) -> list[str]:
    """The first ``per_hazard`` catalogue events of every hazard type (all events for ``None``)."""
    if per_hazard is None:
        return [event.id for event in EVENTS]
    return [event.id for hazard in HAZARD_TYPES for event in [e for e in EVENTS if e.hazard == hazard][:per_hazard]]


SIZES: dict[str, dict[str, Any]] = {
    "smoke": {"events": ["ahr-2021-flood"], "size_px": 128},
    # Two events of every hazard type at the published scene size: about 7 minutes on 2 shared cores.
    "medium": {"events": sample(2), "size_px": 256},
    # Every event (about 18 minutes on 2 shared cores).
    "full": {"events": sample(None), "size_px": 256},
}
OBJECT_ROWS = (("vehicles", "vehicles, bright blobs of 1-4 px, pre-event"),
               ("vehicles_post", "vehicles, post-event (still visible)"),
               ("ships", "ships, elongated holes in NDWI water"),
               ("tanks", "storage tanks, Hough circles"),
               ("pools", "pools, blue-water spectral rule"),
               ("bridges", "bridges, road over closed water"),
               ("sar_destroyed", "SAR damage, destroyed"),
               ("sar_damaged", "SAR damage, partial or destroyed"))


def vehicle_groups(record: dict[str, Any]) -> list[str]:
    """The groups of a hard-level truth vehicle the recall breakdown counts it in."""
    if record["parking_lot"]:
        return ["all", "parking lot"]
    groups = ["all", "street", f"street, {record['colour']}"]
    if record["occluded_fraction"] >= 0.5:
        groups.append("street, under canopy (>= 50 %)")
    if record["shadowed_fraction"] >= 0.5:
        groups.append("street, in shadow (>= 50 %)")
    if record["occluded_fraction"] < 0.5 and record["shadowed_fraction"] < 0.5:
        groups.append("street, open (< 50 % canopy, < 50 % shadow)")
    return groups


def vehicle_recall(scene_root: Path, event: str) -> dict[str, list[int]]:
    """Per group of the truth's vehicles: [found, total] on the pre-event image (hard level)."""
    truth = json.loads((scene_root.parent / "truth" / event / "objects.json").read_text())["vehicles"]
    found = [(d["x"], d["y"]) for d in detectors.vehicles(scene_root / event / "pre_optical.tif")]
    out: dict[str, list[int]] = {}
    groups: dict[str, list[tuple[float, float]]] = {}
    for record in truth:
        for group in vehicle_groups(record):
            groups.setdefault(group, []).append((record["x"], record["y"]))
    for group, points in groups.items():
        tp, _, fn = detectors.match_points(found, points, accuracy.OBJECT_MATCH_M["vehicles"])
        out[group] = [tp, tp + fn]
    return out


def run(size: str, seed: int, scratch: Path) -> dict[str, Any]:
    plan = SIZES[size]
    per_level: dict[str, dict[str, list[Any]]] = {level: {"objects": [], "masks": []} for level in REALISM_LEVELS}
    recall: dict[str, list[int]] = {}
    seconds: dict[str, dict[str, float]] = {}
    for level in REALISM_LEVELS:  # untimed: imports and first-use caches
        build_scenes(scratch / f"warm-up-{level}", events=plan["events"][:1], size_px=64, seed=seed, realism=level)
        _remove(scratch / f"warm-up-{level}")
    for index, event in enumerate(plan["events"], start=1):
        seconds[event] = {}
        for level in REALISM_LEVELS:
            folder = scratch / f"{event}-{level}"
            started = time.perf_counter()
            build_scenes(folder, events=[event], size_px=plan["size_px"], seed=seed, realism=level)
            seconds[event][level] = round(time.perf_counter() - started, 3)
            scene_root = folder / "scenes"
            per_level[level]["objects"].append(accuracy.measure_objects(scene_root, event))
            per_level[level]["masks"].append(accuracy.measure(scene_root, event))
            if level == "hard":
                for group, (tp, total) in vehicle_recall(scene_root, event).items():
                    counts = recall.setdefault(group, [0, 0])
                    counts[0] += tp
                    counts[1] += total
            _remove(folder)
        print(f"[{index}/{len(plan['events'])}] {event}: clean {seconds[event]['clean']:.1f} s, "
              f"hard {seconds[event]['hard']:.1f} s", file=sys.stderr, flush=True)
    clean_s = [s["clean"] for s in seconds.values()]
    hard_s = [s["hard"] for s in seconds.values()]
    return {
        "size": size, "seed": seed, "size_px": plan["size_px"], "events": plan["events"],
        "levels": {level: {"objects": accuracy.summarise_objects(rows["objects"]),
                           "masks": accuracy.summarise(rows["masks"])} for level, rows in per_level.items()},
        "vehicle_recall_hard": {group: {"found": tp, "truth": total, "recall": round(tp / total, 4) if total else None}
                                for group, (tp, total) in sorted(recall.items())},
        "build_seconds": {"per_event": seconds, "clean_mean": round(float(np.mean(clean_s)), 3),
                          "hard_mean": round(float(np.mean(hard_s)), 3),
                          "hard_over_clean": {"mean_of_ratios": round(float(np.mean(np.array(hard_s) / clean_s)), 3),
                                              "max": round(float(np.max(np.array(hard_s) / clean_s)), 3)}},
        "load_average": [round(v, 2) for v in os.getloadavg()],
    }


def _remove(folder: Path) -> None:
    import shutil

    shutil.rmtree(folder, ignore_errors=True)


def markdown(results: dict[str, Any]) -> str:
    """The tables of docs/results/disaster-hard.md."""
    events = results["events"]
    lines = [f"# Disaster detectors: clean vs hard ({results['size']}: {len(events)} events at "
             f"{results['size_px']} x {results['size_px']} cells, seed {results['seed']})", "",
             "Object detectors (`accuracy.measure_objects`, counts summed over events):", "",
             "| detector | clean P | clean R | clean F1 | hard P | hard R | hard F1 | clean TP / FP / FN | "
             "hard TP / FP / FN |", "|---|---|---|---|---|---|---|---|---|"]
    clean, hard = results["levels"]["clean"]["objects"], results["levels"]["hard"]["objects"]
    for key, label in OBJECT_ROWS:
        if key not in clean:
            continue
        c, h = clean[key], hard[key]
        lines.append(f"| {label} | {c['precision']:.3f} | {c['recall']:.3f} | **{c['f1']:.3f}** | "
                     f"{h['precision']:.3f} | {h['recall']:.3f} | **{h['f1']:.3f}** | "
                     f"{c['tp']} / {c['fp']} / {c['fn']} | {h['tp']} / {h['fp']} / {h['fn']} |")
    lines += ["", f"SAR 3-class accuracy: clean {clean['sar_states']['accuracy']:.3f}, hard "
              f"{hard['sar_states']['accuracy']:.3f} ({clean['sar_states']['buildings']} buildings).", "",
              "Masks and optical building damage (`accuracy.measure`, mean over the events where each applies):", "",
              "| metric | clean | hard | events |", "|---|---|---|---|"]
    clean_masks, hard_masks = results["levels"]["clean"]["masks"], results["levels"]["hard"]["masks"]
    for key in sorted(clean_masks):
        if key.endswith("_f1") or key == "building_damage_accuracy":
            lines.append(f"| {key} | {clean_masks[key]['mean']:.3f} | {hard_masks[key]['mean']:.3f} | "
                         f"{clean_masks[key]['events']} |")
    lines += ["", "Vehicle recall on the hard level by truth attribute (pre-event image; street cars by colour, "
              "canopy and shadow):", "",
              "| vehicles | found / truth | recall |", "|---|---|---|"]
    for group, row in results["vehicle_recall_hard"].items():
        recall = "" if row["recall"] is None else f"{row['recall']:.3f}"
        lines.append(f"| {group} | {row['found']} / {row['truth']} | {recall} |")
    build = results["build_seconds"]
    lines += ["", f"Build time per event (scene and truth written): clean {build['clean_mean']:.2f} s, hard "
              f"{build['hard_mean']:.2f} s; hard / clean mean {build['hard_over_clean']['mean_of_ratios']:.2f}x, "
              f"max {build['hard_over_clean']['max']:.2f}x (load average {results['load_average'][0]:.1f} at the end "
              "of the run).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="smoke")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="disaster-hard-") as scratch:
        results = run(args.size, args.seed, Path(scratch))
    write_atomically(args.out / "disaster_hard.json", json.dumps(results, indent=1, sort_keys=True))
    write_atomically(args.out / "disaster_hard.md", markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
