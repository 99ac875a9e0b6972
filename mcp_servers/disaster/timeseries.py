"""The time series of an event: five acquisition dates, each with its own images and truth.

Every event is seen on five dates, in this order (index ``k``): ``pre``, ``onset``, ``peak``, ``recession``
and ``recovery``. The dates are real calendar dates derived from the catalogue date (``PHASE_DAYS``: ``pre``
before it, ``onset`` on it, the rest after it, spaced as the hazard type unfolds). The ``pre`` date *is*
the scene's pre-event state and the ``peak`` date *is* its single post-event state (hazard, damage, road
states): their images are the ``pre_*`` and ``post_*`` layers (hard links, not copies) and their truth the
scene's ``hazard_mask.tif`` and ``damage.json``. The other three dates evolve from the same hazard models
(``hazards.py``), so the evolution is physically consistent:

* **flood-like** (river flood, dam break, tsunami, storm surge): the water surface rises to its peak level
  and falls again (``STAGE``: the share of the peak rise above each cell's peak depth); a cell is wet where
  the lowered surface still covers it *and* it stays connected to the river or the sea. The extent at the
  peak is therefore at least the extent on every other date; debris-laden deep water blocks roads only
  while it is deep.
* **wildfire**: the cellular automaton's spread step at which each cell ignited dates the burn: burned
  area never shrinks; the active front (cells ignited in the last three steps, ``FRONT_STEPS``) is hot only
  at the onset. The burn scar stays warm (the land-surface temperature of the peak) afterwards.
* **volcanic eruption**: lava pulses from the vent are dated by the pulse that first reached a cell: the
  flow only advances; fresh lava is hotter and cools on later dates (``LAVA_COOLING``); lava blocks roads
  for good.
* **landslide**: the slope fails at the onset (the deposit is the peak's); the deposit is cleared off the
  primary roads by the recession and off every road by the recovery.
* **earthquake, tornado, industrial explosion**: the damage is done at the onset and is the peak's; debris
  is cleared off the primary roads by the recession and off every road by the recovery.

Buildings show their peak damage from the first date the hazard reaches their cell (no later than the
peak); a share of partly damaged buildings (``REPAIR_SHARE``) is repaired by the recovery date (never
before). Roads are cut (``flooded`` / ``blocked``) by the same rule as the scene's; a facility is *cut
off* on a date when no usable road leads from the hospital to it. Clouds cover part of the optical and
Sentinel-2 images on one or two of the onset, recession and recovery dates (never ``pre`` or ``peak``, so
never all dates): there, only SAR sees the ground.

Files, beside the scene's (static layers are shared, never repeated)::

    scenes/<event>/t{k}_optical.tif t{k}_s2.tif t{k}_sar.tif [t{k}_lst.tif]   grids, bands, dtypes of post_*
    scenes/<event>/timeline.json    dates, phases, cloud cover and the layers of each date (also in manifest.json)
    truth/<event>/t{k}_hazard_mask.tif   the hazard footprint on date k, 10 m
    truth/<event>/timeline.json     per date: affected area, building / road / facility states, cloud
                                    cover; per event: peak date, trend, when each road and facility was
                                    cut and reopened

Everything here draws from its own generator (``generator``), never from the scene's, so the scene's
layers and truth stay byte for byte what they are without the time series.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from scipy import ndimage

from gauntlet.mcp_servers.disaster import hazards, imaging, reporting, sensors, spectra, vectors
from gauntlet.mcp_servers.disaster.events import Event

PHASES = ("pre", "onset", "peak", "recession", "recovery")
PRE, ONSET, PEAK, RECESSION, RECOVERY = range(5)
TIME_SERIES_STREAM = 2  # the generator: SeedSequence([event seed, TIME_SERIES_STREAM])
# Days from the catalogue date to each phase's acquisition, by hazard type.
PHASE_DAYS = {"flood": (-12, 0, 3, 10, 45), "dam_failure": (-10, 0, 1, 6, 40), "tsunami": (-15, 0, 1, 5, 60),
              "tropical_cyclone": (-10, 0, 2, 8, 45), "wildfire": (-20, 0, 6, 20, 90),
              "volcanic_eruption": (-20, 0, 12, 40, 120), "landslide": (-14, 0, 2, 15, 60),
              "earthquake": (-12, 0, 4, 30, 180), "tornado": (-10, 0, 1, 14, 90),
              "industrial_explosion": (-10, 0, 2, 21, 120)}
STAGE = (0.0, 0.55, 1.0, 0.45, 0.1)       # flood-like: share of the peak rise reached on each date
FIRE_SHARE_AT_ONSET = 0.35                # wildfire: share of the spread steps run by the onset
FRONT_STEPS = 3                           # a cell burns (and is hot) for three spread steps
FRONT_EXTRA_K = 300.0                     # active flames above the scar's temperature
LAVA_SHARE_AT_ONSET = 0.25                # lava: share of the pulses erupted by the onset
LAVA_COOLING = (0.0, 1.25, 1.0, 0.95, 0.9)  # lava's excess temperature over 300 K, relative to the peak's
# (a thick flow's interior stays hot for months; its crust was already cool at the peak)
REPAIR_SHARE = 0.7                        # partly damaged buildings repaired by the recovery date
CLOUD_COVER = (0.2, 0.6)                  # share of a cloudy image under cloud
CLOUD_REFLECTANCE = 0.55
CLOUDY_CANDIDATES = (ONSET, RECESSION, RECOVERY)
SUDDEN = ("earthquake", "tornado", "industrial_explosion", "landslide")
FOOTPRINT_HAZARDS = ("earthquake", "tornado", "industrial_explosion", "tropical_cyclone")
SENSORS = ("optical", "s2", "sar")


def generator(event_seed: int, stream: int = 0) -> np.random.Generator:
    """The time series' own generators for an event (independent of the scene's and the hard level's):
    stream 0 evolves and renders, stream 1 draws the ``hard`` level's effects."""
    return np.random.default_rng(np.random.SeedSequence([event_seed, TIME_SERIES_STREAM, stream]))


def acquisition_dates(event: Event) -> list[date]:
    """The five acquisition dates of ``event``, from its catalogue date and hazard type."""
    day = date.fromisoformat(event.date)
    return [day + timedelta(days=offset) for offset in PHASE_DAYS[event.hazard]]


@dataclass
class ClassMaps:
    """The scene's 2.5 m class maps before and after the event, and its roofs (building index + 1)."""

    pre: np.ndarray
    post: np.ndarray
    roofs: np.ndarray


@dataclass
class DateState:
    """The truth of one date: the hazard's footprint, water, road blocking, temperature, and per building
    its damage (``repaired``: damaged at the peak, intact again on this date), per road its state."""

    mask: np.ndarray
    water: np.ndarray
    blocking: np.ndarray
    temperature_k: np.ndarray | None
    damage: list[str]
    repaired: list[bool]
    roads: list[str]


# Evolution ---------------------------------------------------------------------------------------
def _hazard_fields(kind: str, terrain: hazards.Terrain, peak: hazards.Hazard, model_mask: np.ndarray,
                   roads: list[dict]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]]:
    """(footprint of the hazard model, water, blocking, temperature) on each date; the peak's are the scene's."""
    n = model_mask.shape[0]
    empty = np.zeros((n, n), bool)
    fields: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]] = []
    if peak.depth_m is not None:  # flood-like: the water surface rises and falls
        depth = peak.depth_m
        rise = float(np.percentile(depth[peak.water], 95)) if peak.water.any() else 0.0
        seeds = ndimage.binary_dilation(terrain.permanent_water)
        block_depth = float(depth[peak.blocking].min()) if peak.blocking.any() else np.inf
        for k, share in enumerate(STAGE):
            if k == PEAK:
                fields.append((model_mask, peak.water, peak.blocking, None))
                continue
            stage_depth = np.where(peak.water, depth - (1.0 - share) * rise, 0.0)
            wet = hazards.connected_to(stage_depth > 0, seeds) if share > 0 else empty
            fields.append((wet, wet, wet & peak.blocking & (stage_depth >= block_depth), None))
        return fields
    if kind == "wildfire" and peak.arrival is not None:
        last = int(peak.arrival.max())
        steps = (-1, int(round(FIRE_SHARE_AT_ONSET * last)), last, last, last)
        for k, step in enumerate(steps):
            burned = (peak.arrival >= 0) & (peak.arrival <= step)
            front = burned & (peak.arrival > step - FRONT_STEPS) if k == ONSET else empty
            lst = (305.0 + 12.0 * burned + FRONT_EXTRA_K * front).astype(np.float32)
            fields.append((peak.mask if k >= PEAK else burned, empty, empty, peak.temperature_k if k == PEAK else lst))
        return fields
    if kind == "volcanic_eruption" and peak.arrival is not None and peak.temperature_k is not None:
        last = int(peak.arrival.max())
        pulses = (-1, int(round(LAVA_SHARE_AT_ONSET * last)), last, last, last)
        background = np.where(peak.mask, 302.0, peak.temperature_k)
        for k, pulse in enumerate(pulses):
            flow = peak.mask if k >= PEAK else (peak.arrival >= 0) & (peak.arrival <= pulse)
            lst = np.where(flow, 300.0 + LAVA_COOLING[k] * (peak.temperature_k - 300.0), background)
            fields.append((flow, empty, flow, peak.temperature_k if k == PEAK else lst.astype(np.float32)))
        return fields
    if kind == "landslide":
        primary, every = _road_corridor(roads, n, "primary"), _road_corridor(roads, n)
        for k in range(5):
            deposit = empty if k == PRE else model_mask
            cleared = primary if k == RECESSION else every if k == RECOVERY else empty
            fields.append((deposit & ~cleared if k == RECOVERY else deposit, empty, deposit & ~cleared, None))
        return fields
    # Damage done at once (shaking, a tornado's swath, a blast): the peak's from the onset on.
    for k in range(5):
        fields.append((empty if k == PRE else model_mask, empty if k == PRE else peak.water,
                       empty if k == PRE else peak.blocking, None))
    return fields


def _road_corridor(roads: list[dict], n: int, road_class: str | None = None) -> np.ndarray:
    """The cells along the roads (of ``road_class``, default all), one cell either side (what clearing frees)."""
    corridor = np.zeros((n, n), bool)
    for road in roads:
        if road_class is None or road["class"] == road_class:
            (r0, c0), (r1, c1) = road["from"], road["to"]
            corridor[np.linspace(r0, r1, 21).round().astype(int).clip(0, n - 1),
                     np.linspace(c0, c1, 21).round().astype(int).clip(0, n - 1)] = True
    return ndimage.binary_dilation(corridor, iterations=1)


def evolve(kind: str, terrain: hazards.Terrain, peak: hazards.Hazard, model_mask: np.ndarray,
           buildings: list[dict], roads: list[dict], rng: np.random.Generator) -> list[DateState]:
    """The truth of the five dates of an event whose scene (peak) hazard is ``peak`` (``model_mask``: its
    footprint before the destroyed buildings were added) and whose buildings carry their peak damage."""
    from gauntlet.mcp_servers.disaster.scenes import debris, footprint_mask, road_states

    n = model_mask.shape[0]
    fields = _hazard_fields(kind, terrain, peak, model_mask, roads)
    cells = [(min(int(b["row"]), n - 1), min(int(b["col"]), n - 1)) for b in buildings]
    latest = ONSET if kind in SUDDEN or kind == "tropical_cyclone" else PEAK
    reached = [np.asarray(ndimage.binary_dilation(f[0]) if f[0].any() else f[0]) for f in fields]
    arrival = [min([k for k in (ONSET, PEAK) if reached[k][cell]] + [latest]) for cell in cells]
    repaired_ids = {b["id"] for b in buildings if b["damage"] == "partial" and rng.random() < REPAIR_SHARE}
    states = []
    for k, (footprint, water, blocking, lst) in enumerate(fields):
        damage = ["intact" if k == PRE or k < arrival[i] or (k == RECOVERY and b["id"] in repaired_ids)
                  else b["damage"] for i, b in enumerate(buildings)]
        dated = [{**b, "damage": state} for b, state in zip(buildings, damage)]
        mask = footprint | footprint_mask(dated, n, states=("destroyed",)) if kind in FOOTPRINT_HAZARDS else footprint
        if k == PEAK:
            mask = peak.mask  # the scene's own truth, unchanged
        road_state = road_states(roads, blocking, water)
        if k in (ONSET, PEAK, RECESSION):  # collapsed buildings' debris, cleared off primary roads by the recession
            with_rubble = road_states(roads, blocking | debris(dated, n), water)
            road_state = [clear if k == RECESSION and road["class"] == "primary" else blocked
                          for road, clear, blocked in zip(roads, road_state, with_rubble)]
        if k == PEAK:
            road_state = [road["state"] for road in roads]
        states.append(DateState(mask, water, blocking, lst, damage,
                                [k == RECOVERY and b["id"] in repaired_ids for b in buildings], road_state))
    return states


# Clouds and images -------------------------------------------------------------------------------
def cloud_cover(rng: np.random.Generator, n: int) -> tuple[list[np.ndarray | None], list[float]]:
    """Per date, the cloud opacity (0..1, 10 m cells) or None for a clear image, and the cloud fraction
    (share of cells more than half opaque). One or two of ``CLOUDY_CANDIDATES`` are cloudy."""
    count = int(rng.integers(1, 3))
    cloudy = set(rng.choice(CLOUDY_CANDIDATES, size=count, replace=False).tolist())
    opacity: list[np.ndarray | None] = []
    fractions = []
    for k in range(len(PHASES)):
        if k not in cloudy:
            opacity.append(None)
            fractions.append(0.0)
            continue
        field = hazards.smooth_noise(rng, n, n / 12)
        threshold = np.quantile(field, 1.0 - rng.uniform(*CLOUD_COVER))
        alpha = np.clip((field - threshold) / 0.4 + 0.5, 0.0, 1.0).astype(np.float32)
        opacity.append(alpha)
        fractions.append(round(float((alpha > 0.5).mean()), 4))
    return opacity, fractions


def _clouded(reflectance: np.ndarray, alpha: np.ndarray | None) -> np.ndarray:
    """``reflectance`` (``(bands, h, w)``) under clouds of opacity ``alpha`` (10 m cells, upsampled as needed)."""
    if alpha is None:
        return reflectance
    factor = reflectance.shape[-1] // alpha.shape[-1]
    a = np.kron(alpha, np.ones((factor, factor), np.float32)) if factor > 1 else alpha
    return reflectance * (1.0 - a) + CLOUD_REFLECTANCE * a


def render_date(class_map: np.ndarray, alpha: np.ndarray | None, rng: np.random.Generator,
                hard_rng: np.random.Generator | None) -> dict[str, np.ndarray]:
    """The optical, Sentinel-2 and SAR images of one date's class map (clouds on the optical sensors; the
    ``hard`` level adds haze, sensor noise and misregistration as on the scene's post-event images)."""
    optical = _clouded(sensors.optical(sensors.optical_reflectance(class_map), rng, 1.0 + rng.uniform(-0.03, 0.03)),
                       alpha)
    s2 = _clouded(sensors.s2(sensors.s2_reflectance(class_map), rng), alpha)
    if hard_rng is not None:
        from gauntlet.mcp_servers.disaster.realism import HAZE_TAU_550, MISREGISTRATION_PX, OPTICAL_NM

        tau = np.float32(hard_rng.uniform(*HAZE_TAU_550))
        angle = hard_rng.uniform(0, 2 * np.pi)
        shift = hard_rng.uniform(*MISREGISTRATION_PX) * np.array([np.sin(angle), np.cos(angle)])
        images = []
        for image, nm, px in ((optical, OPTICAL_NM, shift), (s2, spectra.S2_WAVELENGTH_NM,
                                                             shift / sensors.OPTICAL_FACTOR)):
            hazy = imaging.add_haze(image.astype(np.float32), imaging.haze_transmittance(
                np.full(image.shape[1:], tau, np.float32), nm, 2.0))
            images.append(imaging.add_sensor_noise(imaging.shift_image(hazy, (float(px[0]), float(px[1]))), hard_rng))
        optical, s2 = images
    return {"optical": sensors.to_dn(optical), "s2": sensors.to_dn(s2),
            "sar": sensors.sar_db(sensors.sar_power(class_map), rng)}


# Truth summaries ---------------------------------------------------------------------------------
def _cut_off(roads_fc: list[dict], pois_fc: list[dict], bad: set[str]) -> list[str]:
    """Ids of the facilities (not the hospital) that no usable road connects to the hospital."""
    import networkx as nx

    hospital = next((f for f in pois_fc if f["properties"]["type"] == "hospital"), None)
    if hospital is None or not roads_fc:
        return []
    graph = vectors.road_graph(roads_fc, bad)
    source = vectors.nearest_node(graph, *hospital["geometry"]["coordinates"])
    reach = nx.single_source_dijkstra_path_length(graph, source, weight="length_m")
    return [f["properties"]["id"] for f in pois_fc if f is not hospital
            and vectors.nearest_node(graph, *f["geometry"]["coordinates"]) not in reach]


def _spans(days: list[str], cut: list[set[str]], ids: list[str]) -> dict[str, dict[str, str | None]]:
    """For every id cut on some date: the first date it was cut and the first later date it was usable
    again (None if never)."""
    out: dict[str, dict[str, str | None]] = {}
    for item in ids:
        first = next((k for k, dated in enumerate(cut) if item in dated), None)
        if first is None:
            continue
        reopened = next((days[k] for k in range(first + 1, len(days)) if item not in cut[k]), None)
        out[item] = {"cut": days[first], "reopened": reopened}
    return out


def timeline_truth(event: Event, days: list[date], states: list[DateState], buildings: list[dict],
                   roads: list[dict], pois: list[dict], roads_fc: list[dict], pois_fc: list[dict],
                   cloud_fractions: list[float]) -> dict[str, Any]:
    """The truth timeline (see module doc)."""
    from gauntlet.mcp_servers.disaster.scenes import footprint_mask

    n = states[0].mask.shape[0]
    cells = [(min(int(b["row"]), n - 1), min(int(b["col"]), n - 1)) for b in buildings]
    building_of = {p["id"]: p["building_id"] for p in pois}
    iso = [day.isoformat() for day in days]
    records: list[dict[str, Any]] = []
    cut_roads: list[set[str]] = []
    cut_pois: list[set[str]] = []
    areas: list[float] = []
    for k, state in enumerate(states):
        affected = [b["id"] for b, cell, dmg in zip(buildings, cells, state.damage)
                    if state.mask[cell] or dmg != "intact"]
        bad = {road["id"] for road, s in zip(roads, state.roads) if s != "intact"}
        cut = _cut_off(roads_fc, pois_fc, bad)
        affected_set = set(affected)
        cut_roads.append(bad)
        cut_pois.append(set(cut))
        areas.append(float(state.mask.sum() * hazards.PIXEL_M ** 2))
        records.append({
            "index": k, "phase": PHASES[k], "date": iso[k], "cloud_fraction": cloud_fractions[k],
            "affected_area_m2": areas[-1],
            "destroyed_area_m2": float(footprint_mask([{**b, "damage": dmg} for b, dmg in zip(buildings, state.damage)],
                                                      n, states=("destroyed",)).sum() * hazards.PIXEL_M ** 2),
            "buildings_affected": affected,
            "buildings_damaged": {b["id"]: dmg for b, dmg in zip(buildings, state.damage) if dmg != "intact"},
            "buildings_repaired": [b["id"] for b, fixed in zip(buildings, state.repaired) if fixed],
            "roads": {road["id"]: s for road, s in zip(roads, state.roads)},
            "pois_cut_off": cut, "pois_affected": [pid for pid, bid in building_of.items() if bid in affected_set]})
    evidence = reporting.area_evidence(days, areas)
    return {"event": event.id, "hazard": event.hazard, "dates": records,
            "peak_date": evidence.dates[evidence.peak_index].isoformat(),
            "peak_area_m2": evidence.areas_m2[evidence.peak_index], "trend": evidence.trend,
            "growth_rate_m2_per_day": evidence.growth_rate_m2_per_day,
            "recession_rate_m2_per_day": evidence.recession_rate_m2_per_day,
            "roads_cut": _spans(iso, cut_roads, [road["id"] for road in roads]),
            "pois_cut": _spans(iso, cut_pois, [p["id"] for p in pois])}


# Writing ------------------------------------------------------------------------------------------
def _link(source: Path, target: Path) -> None:
    """``target`` as a hard link to ``source`` (a copy where the file system has no hard links)."""
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def write_time_series(scene_dir: Path, truth_dir: Path, event: Event, terrain: hazards.Terrain,
                      peak: hazards.Hazard, model_mask: np.ndarray, buildings: list[dict], roads: list[dict],
                      pois: list[dict], maps: ClassMaps, seed: int, hard: bool, transform, crs) -> None:
    """Evolve, render and write the time series of one event beside its scene (see module doc)."""
    from affine import Affine

    from gauntlet.mcp_servers.disaster.scenes import _write_json, event_seed, hazard_class_map, write_geotiff

    rng = generator(event_seed(event.id, seed))
    hard_rng = generator(event_seed(event.id, seed), stream=1) if hard else None
    n = model_mask.shape[0]
    days = acquisition_dates(event)
    states = evolve(event.hazard, terrain, peak, model_mask, buildings, roads, rng)
    opacity, cloud_fractions = cloud_cover(rng, n)
    manifest = json.loads((scene_dir / "manifest.json").read_text())
    layers = manifest["layers"]
    thermal = peak.temperature_k is not None
    dated = []
    for k, state in enumerate(states):
        names = {sensor: f"t{k}_{sensor}" for sensor in SENSORS} | ({"lst": f"t{k}_lst"} if thermal else {})
        if k in (PRE, PEAK):  # the scene's own images
            when = "pre" if k == PRE else "post"
            for sensor in SENSORS:
                _link(scene_dir / f"{when}_{sensor}.tif", scene_dir / f"{names[sensor]}.tif")
        else:
            hazard = hazards.Hazard(mask=state.mask, intensity=peak.intensity, water=state.water,
                                    blocking=state.blocking, info=peak.info)
            class_map = hazard_class_map(maps.pre, maps.roofs, hazard, [{**b, "damage": d} for b, d in
                                                                        zip(buildings, state.damage)], rng)
            # A roof in its peak state looks as it does at the peak (the same rubble, the same tarps).
            as_at_peak = np.array([False] + [d == b["damage"] for b, d in zip(buildings, state.damage)])
            class_map = np.where(as_at_peak[maps.roofs], maps.post, class_map)
            images = render_date(class_map, opacity[k], rng, hard_rng)
            for sensor in SENSORS:
                like = layers[f"post_{sensor}"]
                tf = transform if sensor != "optical" else transform @ Affine.scale(1 / sensors.OPTICAL_FACTOR)
                write_geotiff(scene_dir / f"{names[sensor]}.tif", images[sensor], tf, crs, band_names=like["bands"])
        if thermal:
            if k == PEAK:
                _link(scene_dir / "lst.tif", scene_dir / "t2_lst.tif")
            else:
                lst = state.temperature_k if state.temperature_k is not None else np.full((n, n), 302.0, np.float32)
                write_geotiff(scene_dir / f"{names['lst']}.tif", lst[None].astype(np.float32), transform, crs,
                              band_names=["lst"])
        for sensor, name in names.items():
            like = layers["lst" if sensor == "lst" else f"post_{sensor}"]
            layers[name] = {**like, "path": f"data/{event.id}/{name}.tif", "date": days[k].isoformat(),
                            "phase": PHASES[k], "cloud_fraction": cloud_fractions[k]}
        if k == PEAK:
            _link(truth_dir / "hazard_mask.tif", truth_dir / "t2_hazard_mask.tif")
        else:
            write_geotiff(truth_dir / f"t{k}_hazard_mask.tif", state.mask[None].astype(np.uint8), transform, crs,
                          band_names=["hazard"], overview_resampling="nearest")
        dated.append({"index": k, "phase": PHASES[k], "date": days[k].isoformat(),
                      "cloud_fraction": cloud_fractions[k], "layers": {s: f"{name}.tif" for s, name in names.items()}})
    timeline = {"event": event.id, "dates": dated}
    _write_json(scene_dir / "timeline.json", timeline)
    manifest["timeline"] = timeline
    _write_json(scene_dir / "manifest.json", manifest)
    roads_fc, _ = vectors.read_features(scene_dir / "roads.geojson")
    pois_fc, _ = vectors.read_features(scene_dir / "pois.geojson")
    _write_json(truth_dir / "timeline.json", timeline_truth(event, days, states, buildings, roads, pois, roads_fc,
                                                            pois_fc, cloud_fractions))
