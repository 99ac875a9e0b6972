"""Terrain and hazard physics for the synthetic scenes (plain numpy/scipy; no I/O).

Every hazard is produced from physical reasoning on the scene's DEM, not from noise:

* flood / dam failure: a water surface above the river (sloping downstream; a dam-break wave decays
  with distance from the breach) fills every cell below it that is hydraulically connected to the river.
* tsunami / storm surge: a run-up height decaying inland fills cells connected to the sea.
* earthquake: macroseismic intensity falls with hypocentral distance (an attenuation law
  ``I = a - b ln R``) and is amplified on low-lying soft sediments.
* wildfire: a stochastic cellular automaton spreads with fuel, upslope (``exp(0.07 slope_deg)``)
  and with the wind.
* volcanic eruption: lava follows steepest descent from the vent, thickening as it flows so that
  it spreads (a DEM-driven flow-path model).
* landslide: an infinite-slope factor of safety after rain (wetness from flow accumulation);
  failed cells run out downslope.
* tornado: a damage swath along a track, wind speed falling off across it.
* industrial explosion: peak overpressure from the Kinney-Graham scaled-distance law.

Building damage comes from a fragility model: a damage index ``D = intensity x vulnerability x
lognormal noise``; partial above 0.5, destroyed above 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import ndimage

PIXEL_M = 10.0
VULNERABILITY = {"reinforced_concrete": 0.6, "masonry": 0.85, "timber": 1.0, "adobe": 1.25}
FLOOD_LIKE = ("flood", "dam_failure", "tsunami", "tropical_cyclone")
LAVA_PULSES = 60  # successive flows from the vent; the time series dates them
TERRAIN_OF = {"flood": "valley", "dam_failure": "valley", "tsunami": "coast", "tropical_cyclone": "coast",
              "volcanic_eruption": "volcano", "landslide": "mountain", "earthquake": "hills", "wildfire": "hills",
              "tornado": "plain", "industrial_explosion": "coast"}


@dataclass
class Terrain:
    """Elevation (m), permanent water and where settlements are, on the scene's 10 m grid."""

    dem: np.ndarray
    river: np.ndarray
    sea: np.ndarray
    settlement_weight: np.ndarray

    @property
    def permanent_water(self) -> np.ndarray:
        return self.river | self.sea


@dataclass
class Hazard:
    """A hazard's footprint (the truth mask), the intensity field that drives damage, and extras."""

    mask: np.ndarray
    intensity: np.ndarray
    water: np.ndarray
    blocking: np.ndarray
    temperature_k: np.ndarray | None = None
    info: dict = field(default_factory=dict)
    # What the time series (timeseries.py) needs of the model, never written as a layer: the water depth (m)
    # of flood-like hazards, and when each cell was reached (a spread step or a lava flow, -1 = never).
    depth_m: np.ndarray | None = None
    arrival: np.ndarray | None = None


def smooth_noise(rng: np.random.Generator, n: int, sigma: float) -> np.ndarray:
    """Gaussian-filtered white noise scaled to unit standard deviation."""
    field_ = ndimage.gaussian_filter(rng.standard_normal((n, n)), sigma, mode="reflect")
    return field_ / (field_.std() + 1e-12)


def slope_degrees(dem: np.ndarray, pixel_m: float = PIXEL_M) -> np.ndarray:
    """Slope in degrees (central differences), computed in float64: numpy's float32 arctan differs in the
    last bit between CPUs (AVX-512 or not), and a scene must be the same file on every machine."""
    gy, gx = np.gradient(np.asarray(dem, dtype=np.float64), pixel_m)
    return np.degrees(np.arctan(np.hypot(gx, gy)))


def make_terrain(hazard: str, rng: np.random.Generator, n: int) -> Terrain:
    """The DEM and permanent water of a scene whose hazard is ``hazard``."""
    rows, cols = np.mgrid[0:n, 0:n].astype(float)
    kind = TERRAIN_OF[hazard]
    river = np.zeros((n, n), bool)
    sea = np.zeros((n, n), bool)
    relief = smooth_noise(rng, n, n / 10)
    detail = smooth_noise(rng, n, 2.0)
    if kind in ("valley", "mountain"):
        phase, wavelength = rng.uniform(0, 2 * np.pi), rng.uniform(0.8, 1.6) * n
        centre = n * (0.5 + 0.12 * np.sin(2 * np.pi * cols / wavelength + phase))
        dist_m = np.abs(rows - centre) * PIXEL_M
        if kind == "valley":
            rise = 0.02 * dist_m
        else:  # a gentle valley floor between steep walls
            rise = np.where(dist_m < 150.0, 0.03 * dist_m, 4.5 + 0.55 * (dist_m - 150.0))
        dem = 40.0 + rise - 0.004 * cols * PIXEL_M + (2.0 if kind == "valley" else 6.0) * relief
        dem += 0.3 * detail
        river = dist_m <= (15.0 if kind == "valley" else 8.0)
        dem[river] -= 3.0
        centre_m, width_m = (120.0, 250.0) if kind == "valley" else (80.0, 60.0)
        weight = np.exp(-((dist_m - centre_m) / width_m) ** 2)
    elif kind == "coast":
        coast = n * (0.18 + 0.05 * smooth_noise(rng, n, n / 8)[:, 0])
        inland_m = (cols - coast[:, None]) * PIXEL_M
        sea = inland_m < 0
        dem = np.where(sea, -6.0 + 0.5 * detail, 0.5 + 0.009 * inland_m + 1.5 * relief * np.clip(inland_m / 400, 0, 1))
        dem += np.where(sea, 0.0, 0.2 * detail)
        weight = np.exp(-((inland_m - 500.0) / 450.0) ** 2) * (~sea)
    elif kind == "volcano":
        vent = np.array([0.1, 0.1]) * n
        dist_m = np.hypot(rows - vent[0], cols - vent[1]) * PIXEL_M
        dem = 900.0 - 0.16 * dist_m + 6.0 * relief + 0.5 * detail
        weight = np.exp(-((dist_m - 0.75 * n * PIXEL_M) / (0.3 * n * PIXEL_M)) ** 2)
    else:  # hills, plain
        amplitude = 25.0 if kind == "hills" else 4.0
        dem = 120.0 + amplitude * relief + 0.6 * detail
        centre_dist = np.hypot(rows - n / 2, cols - n / 2) / n
        weight = np.exp(-(centre_dist / 0.35) ** 2)
    steep = slope_degrees(dem) > 20.0
    weight = np.where(river | sea | steep, 0.0, weight)
    return Terrain(dem=dem.astype(np.float32), river=river, sea=sea, settlement_weight=weight)


def connected_to(flooded: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    labels, _ = ndimage.label(flooded)
    keep = np.unique(labels[seeds & flooded])
    return np.isin(labels, keep[keep > 0])


def flood(terrain: Terrain, rng: np.random.Generator, *, dam_break: bool = False) -> Hazard:
    """Fill the valley from a water surface above the river; only river-connected cells flood."""
    n = terrain.dem.shape[0]
    cols = np.arange(n, dtype=float)
    river_bed = np.array([terrain.dem[terrain.river[:, c], c].min() if terrain.river[:, c].any() else np.nan
                          for c in range(n)])
    river_bed = np.where(np.isnan(river_bed), np.nanmin(river_bed), river_bed)
    rise_m = rng.uniform(4.5, 6.5)
    if dam_break:
        rise_m = rise_m * (0.6 + 1.2 * np.exp(-cols / (0.6 * n)))
    surface = ndimage.uniform_filter1d(river_bed, size=max(3, n // 8)) + rise_m
    depth = surface[None, :] - terrain.dem
    water = connected_to(depth > 0, terrain.river) & ~terrain.river
    depth = np.where(water, depth, 0.0)
    blocking = water & (depth > 1.5) if dam_break else np.zeros_like(water)
    return Hazard(mask=water, intensity=depth.astype(np.float32) / 2.5, water=water, blocking=blocking,
                  info={"model": "river-connected fill", "water_rise_m": float(np.mean(rise_m))}, depth_m=depth)


def inundation(terrain: Terrain, rng: np.random.Generator, *, runup_m: float, decay_m: float) -> Hazard:
    """Sea water to a run-up height that decays inland, connected to the sea."""
    n = terrain.dem.shape[0]
    sea_dist_m = ndimage.distance_transform_edt(~terrain.sea) * PIXEL_M
    surface = runup_m * np.exp(-sea_dist_m / decay_m)
    depth = surface - terrain.dem
    water = connected_to((depth > 0) | terrain.sea, terrain.sea) & ~terrain.sea
    depth = np.where(water, depth, 0.0)
    return Hazard(mask=water, intensity=depth.astype(np.float32) / 2.0, water=water,
                  blocking=water & (depth > 2.0), info={"model": "sea-connected run-up", "runup_m": runup_m,
                                                        "grid": n}, depth_m=depth)


def earthquake(terrain: Terrain, rng: np.random.Generator) -> Hazard:
    """Macroseismic intensity from an attenuation law with soft-soil amplification."""
    n = terrain.dem.shape[0]
    rows, cols = np.mgrid[0:n, 0:n].astype(float)
    angle = rng.uniform(0, 2 * np.pi)
    epi = n / 2 + np.array([np.sin(angle), np.cos(angle)]) * n * rng.uniform(0.5, 0.9)
    depth_km = rng.uniform(8, 15)
    r_km = np.hypot(np.hypot(rows - epi[0], cols - epi[1]) * PIXEL_M / 1000.0, depth_km)
    magnitude = rng.uniform(6.8, 7.6)
    mmi = 1.5 * magnitude - 3.0 * np.log10(r_km) + 1.0  # attenuation, intensity at hypocentral distance R
    low = terrain.dem < np.percentile(terrain.dem, 35)
    mmi = mmi + 0.6 * low  # soft sediments amplify shaking
    intensity = np.clip((mmi - 6.5) / 2.5, 0, None)
    return Hazard(mask=np.zeros((n, n), bool), intensity=intensity.astype(np.float32), water=np.zeros((n, n), bool),
                  blocking=np.zeros((n, n), bool), info={"model": "attenuation + site amplification",
                                                         "magnitude": round(float(magnitude), 2),
                                                         "epicentre_px": [float(epi[0]), float(epi[1])]})


def wildfire(terrain: Terrain, rng: np.random.Generator, fuel: np.ndarray) -> Hazard:
    """A cellular-automaton fire: spread probability grows with fuel, upslope and downwind."""
    n = terrain.dem.shape[0]
    wind_dir = rng.uniform(0, 2 * np.pi)
    wind = np.array([np.sin(wind_dir), np.cos(wind_dir)])
    start = (n / 2 - wind * n * 0.42).astype(int).clip(1, n - 2)
    burning = np.zeros((n, n), bool)
    burning[start[0] - 1:start[0] + 2, start[1] - 1:start[1] + 2] = True
    burned = burning.copy()
    age = np.zeros((n, n), int)
    arrival = np.where(burned, 0, -1)
    steps = int(n * 1.1)
    offsets = [(-1, 0), (1, 0), (0, -1), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]
    for step in range(steps):
        ignite = np.zeros((n, n), bool)
        for dr, dc in offsets:
            source = np.roll(np.roll(burning, dr, 0), dc, 1)
            along = (dr * wind[0] + dc * wind[1]) / np.hypot(dr, dc)
            rise = terrain.dem - np.roll(np.roll(terrain.dem, dr, 0), dc, 1)
            slope_deg = np.degrees(np.arctan(rise / (PIXEL_M * np.hypot(dr, dc))))
            p = 0.3 * fuel * np.exp(along - 0.2) * np.exp(0.07 * slope_deg)
            ignite |= source & (rng.random((n, n)) < np.clip(p, 0, 1))
        ignite &= ~burned & ~terrain.permanent_water & (fuel > 0)
        burned |= ignite
        arrival = np.where(ignite, step + 1, arrival)
        age = np.where(ignite, 0, age + 1)
        burning = burned & (age < 3)  # a cell keeps burning (and spreading) for three steps
        if not burning.any():
            break
    intensity = np.where(burned, 0.8 + 0.8 * fuel, 0.0)
    lst = 305.0 + 12.0 * burned
    return Hazard(mask=burned, intensity=intensity.astype(np.float32), water=np.zeros((n, n), bool),
                  blocking=np.zeros((n, n), bool), temperature_k=lst.astype(np.float32),
                  info={"model": "fuel/slope/wind cellular automaton", "wind_from_deg": float(np.degrees(wind_dir))},
                  arrival=arrival)


def lava(terrain: Terrain, rng: np.random.Generator) -> Hazard:
    """Lava flow paths by steepest descent from the vent, thickening the surface as they go."""
    n = terrain.dem.shape[0]
    surface = terrain.dem.astype(float).copy()
    flow = np.zeros((n, n), bool)
    arrival = np.full((n, n), -1)
    vent = (int(0.1 * n), int(0.1 * n))
    offsets = [(-1, 0), (1, 0), (0, -1), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]
    for pulse in range(LAVA_PULSES):
        r, c = vent
        for _ in range(3 * n):
            if not flow[r, c]:
                arrival[r, c] = pulse
            flow[r, c] = True
            surface[r, c] += 0.4
            candidates = [(surface[r, c] - surface[r + dr, c + dc] + rng.normal(0, 0.6)) / np.hypot(dr, dc)
                          if 0 <= r + dr < n and 0 <= c + dc < n else -np.inf for dr, dc in offsets]
            best = int(np.argmax(candidates))
            if candidates[best] <= 0:
                break
            r, c = r + offsets[best][0], c + offsets[best][1]
    flow = ndimage.binary_dilation(flow, iterations=1)
    arrival = _spread_arrival(arrival, flow)
    # Crusted, cooling lava is far colder than the 1100 C melt: some flow cells fall below a 350 K test.
    lava_k = 520.0 + 150.0 * smooth_noise(rng, n, 3.0)
    lst = np.where(flow, np.maximum(lava_k, 310.0), 300.0 + 8.0 * smooth_noise(rng, n, 4.0))
    return Hazard(mask=flow, intensity=np.where(flow, 2.0, 0.0).astype(np.float32), water=np.zeros((n, n), bool),
                  blocking=flow, temperature_k=lst.astype(np.float32),
                  info={"model": "steepest-descent flow paths", "vent_px": list(vent)}, arrival=arrival)


def _spread_arrival(arrival: np.ndarray, footprint: np.ndarray) -> np.ndarray:
    """``arrival`` extended to the cells of ``footprint`` it leaves unset: the earliest arrival among the
    eight neighbours (the lava's margin is reached with the flow that made it)."""
    pending = np.where(arrival >= 0, arrival, np.iinfo(np.int64).max)
    nearest = ndimage.grey_erosion(pending, size=(3, 3), mode="nearest")
    out = np.where(footprint & (arrival < 0), nearest, arrival)
    return np.where(footprint, out, -1)


def landslide(terrain: Terrain, rng: np.random.Generator) -> Hazard:
    """Infinite-slope stability after rain; failed cells run out along steepest descent."""
    n = terrain.dem.shape[0]
    theta = np.radians(np.clip(slope_degrees(terrain.dem), 0.5, 60))
    accumulation = ndimage.gaussian_filter(np.clip(-ndimage.laplace(terrain.dem), 0, None), 3)
    wetness = np.clip(0.4 + accumulation / (accumulation.max() + 1e-9) * 2 + 0.15 * smooth_noise(rng, n, 6), 0, 1)
    z, gamma, gamma_w = 2.5, 19.0, 9.81
    cohesion_kpa = 9.0 + 3.0 * smooth_noise(rng, n, 5).clip(-1.5, 1.5)
    phi = np.radians(32.0)
    safety = (cohesion_kpa + (gamma - wetness * gamma_w) * z * np.cos(theta) ** 2 * np.tan(phi)) / (
        gamma * z * np.sin(theta) * np.cos(theta))
    source = (safety < 1.0) & ~terrain.permanent_water
    mask = source.copy()
    dem = terrain.dem
    for r, c in zip(*np.nonzero(source)):
        for _ in range(40):
            window = dem[max(r - 1, 0):r + 2, max(c - 1, 0):c + 2]
            dr, dc = np.unravel_index(np.argmin(window), window.shape)
            nr, nc = max(r - 1, 0) + dr, max(c - 1, 0) + dc
            if (nr, nc) == (r, c):
                break
            r, c = nr, nc
            mask[r, c] = True
    mask = ndimage.binary_closing(mask, iterations=1)
    return Hazard(mask=mask, intensity=np.where(mask, 2.0, 0.0).astype(np.float32), water=np.zeros((n, n), bool),
                  blocking=mask, info={"model": "infinite-slope factor of safety + runout",
                                       "failed_cells": int(source.sum())})


def tornado(terrain: Terrain, rng: np.random.Generator) -> Hazard:
    """A damage swath: wind falls off with distance from the track's centreline."""
    n = terrain.dem.shape[0]
    rows, cols = np.mgrid[0:n, 0:n].astype(float)
    angle = rng.uniform(np.radians(20), np.radians(50))
    offset = rng.uniform(-0.1, 0.1) * n
    distance_m = np.abs((rows - n / 2 - offset) * np.cos(angle) - (cols - n / 2) * np.sin(angle)) * PIXEL_M
    half_width_m = rng.uniform(150, 300)
    intensity = 1.6 * np.exp(-(distance_m / half_width_m) ** 2)
    mask = intensity > 0.5
    return Hazard(mask=mask, intensity=intensity.astype(np.float32), water=np.zeros((n, n), bool),
                  blocking=np.zeros((n, n), bool), info={"model": "track swath", "half_width_m": half_width_m})


def explosion(terrain: Terrain, rng: np.random.Generator) -> Hazard:
    """Peak overpressure by the Kinney-Graham law at scaled distance ``Z = R / W^(1/3)``."""
    n = terrain.dem.shape[0]
    rows, cols = np.mgrid[0:n, 0:n].astype(float)
    land = np.argwhere(~terrain.sea & (np.abs(np.arange(n)[:, None] - n / 2) < n / 4))
    centre = land[np.argmin(np.abs(land[:, 1] - (land[:, 1].min() + 8)) + np.abs(land[:, 0] - n / 2))]
    tnt_kg = rng.uniform(3e5, 1.1e6)
    r_m = np.hypot(rows - centre[0], cols - centre[1]) * PIXEL_M + 1.0
    z = r_m / tnt_kg ** (1 / 3)
    ratio = 808 * (1 + (z / 4.5) ** 2) / np.sqrt((1 + (z / 0.048) ** 2) * (1 + (z / 0.32) ** 2) * (1 + (z / 1.35) ** 2))
    overpressure_kpa = ratio * 101.325
    crater = r_m < 6.0 * tnt_kg ** (1 / 3) / 10
    return Hazard(mask=crater | (overpressure_kpa > 70), intensity=(overpressure_kpa / 35.0).astype(np.float32),
                  water=np.zeros((n, n), bool), blocking=crater,
                  info={"model": "Kinney-Graham overpressure", "tnt_kg": tnt_kg, "centre_px": centre.tolist()})


def cyclone(terrain: Terrain, rng: np.random.Generator) -> Hazard:
    """Storm surge (sea-connected run-up) plus wind damage decaying away from the eyewall track."""
    surge = inundation(terrain, rng, runup_m=rng.uniform(3.0, 4.5), decay_m=700.0)
    n = terrain.dem.shape[0]
    rows = np.mgrid[0:n, 0:n][0].astype(float)
    track = rng.uniform(0.2, 0.8) * n
    wind = 1.1 * np.exp(-(np.abs(rows - track) * PIXEL_M / 900.0) ** 2)
    surge.intensity = np.maximum(surge.intensity, wind).astype(np.float32)
    surge.info = {"model": "surge + wind", "track_row_px": track}
    return surge


def simulate(hazard: str, terrain: Terrain, rng: np.random.Generator, fuel: np.ndarray) -> Hazard:
    """Run the physical model of ``hazard`` on ``terrain``."""
    if hazard == "flood":
        return flood(terrain, rng)
    if hazard == "dam_failure":
        return flood(terrain, rng, dam_break=True)
    if hazard == "tsunami":
        return inundation(terrain, rng, runup_m=rng.uniform(7.0, 12.0), decay_m=1200.0)
    if hazard == "tropical_cyclone":
        return cyclone(terrain, rng)
    if hazard == "earthquake":
        return earthquake(terrain, rng)
    if hazard == "wildfire":
        return wildfire(terrain, rng, fuel)
    if hazard == "volcanic_eruption":
        return lava(terrain, rng)
    if hazard == "landslide":
        return landslide(terrain, rng)
    if hazard == "tornado":
        return tornado(terrain, rng)
    if hazard == "industrial_explosion":
        return explosion(terrain, rng)
    raise ValueError(f"unknown hazard {hazard!r}")


def damage_state(intensity: float, vulnerability: float, noise: float) -> str:
    """Fragility: ``D = intensity x vulnerability x noise``; partial above 0.5, destroyed above 1."""
    index = intensity * vulnerability * noise
    return "destroyed" if index > 1.0 else "partial" if index > 0.5 else "intact"
