"""The ``hard`` realism level of the scenes: what real imagery does that the clean scenes leave out.

``build_scenes(..., realism="hard")`` builds the same events with the same layout, hazard, damage
and objects as the default ``clean`` level (same seed), and renders them as real sensors see them:

* **sun and shadows**: the sun of the event's date and latitude at 10:00-11:30 local solar time (a
  sun-synchronous satellite's pass), at least 15 degrees high; buildings (3 m a storey plus 1 m),
  trees, forest, tanks, ships and cars cast shadows away from it, all in one direction. A shadowed
  pixel keeps only the diffuse skylight (34 % of the light at 443 nm down to 8 % at 2190 nm).
* **tree canopy**: street trees along half of the street sides (every 10-15 m, trunks 6.25 m from the
  centreline) and a tree beside half of the houses; crowns of 3.75-8.75 m radius, 6-15 m tall,
  drawn over whatever is under them -- cars, pools and roads stay in the truth, with the share of
  each object under canopy (``occluded_fraction``) and in shadow (``shadowed_fraction``). Trees on
  ground that burned or lies under lava or mud are gone after the event.
* **colours**: cars in the world's paint mix (white 35 %, black 19 %, grey 15 %, silver 10 %, blue
  8 %, red 7 %, beige 3 %, green 3 %; +-15 % brightness), roofs by material (concrete, dirty
  concrete, bitumen, white membrane, terracotta, slate, brown shingle, bare, rusted, blue and green
  metal, mud), many of them as dark as the street or as brown as the soil.
* **parking lots**: asphalt lots by the streets with densely packed cars (``scene_objects.parking_lots``),
  added to the truth's vehicles after the clean ones.
* **haze**: a residual aerosol layer of mean optical depth 0.02-0.3 at 550 nm per acquisition,
  varying smoothly over hundreds of metres (``imaging.add_haze``), on the optical and Sentinel-2 images.
* **sensor noise**: read noise, shot noise and column striping (``imaging.add_sensor_noise``).
* **misregistration**: the post-event optical and Sentinel-2 images are shifted against the pre-event
  ones by 0.3-3 optical pixels (0.75-7.5 m) in a random direction.
* **SAR layover**: the facades of buildings facing the sensor (an ascending or descending pass,
  incidence 30-45 degrees) are laid over the ground in front of them (-6 dB VV, -13 dB VH); a
  building that collapsed has none after the event.

Everything here draws from its own generator (``generator``), never from the scene's: the clean draws
happen in the same order at both levels, so the layout, hazard, damage and clean objects are identical.
Each event's draws are in ``truth/<event>/realism.json``; the sun and the SAR geometry, which real image
metadata carry, also in the manifest (``acquisition``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date
from typing import Any

import numpy as np

from gauntlet.mcp_servers.disaster import hazards, imaging, scene_objects, sensors, spectra
from gauntlet.mcp_servers.disaster.events import Event

REALISM_LEVELS = ("clean", "hard")
# The hard level's own cache version (``data.HARD_DATA_NAME``'s entries are keyed by the scene builder's
# version and this one): bump it when the hard rendering changes, so hard scenes, and only they, rebuild.
RENDER_VERSION = "1"
HARD_STREAM = 1                    # the hard level's generator: SeedSequence([event seed, HARD_STREAM])
OPTICAL_PIXEL_M = hazards.PIXEL_M / sensors.OPTICAL_FACTOR

SOLAR_HOUR = (10.0, 11.5)
MIN_SUN_ELEVATION_DEG = 15.0
SKYLIGHT_BY_NM = ((443, 0.34), (490, 0.30), (560, 0.22), (665, 0.17), (842, 0.13), (2190, 0.08))
STOREY_M, ROOF_M = 3.0, 1.0
HEIGHT_AFTER = {"intact": 1.0, "partial": 0.6, "destroyed": 0.1}  # of a building's height, after the event
OBJECT_HEIGHT_M = {"vehicle": 1.5, "ship": 4.0}
TANK_HEIGHT_PER_RADIUS = 1.2
FOREST_HEIGHT_M = (15.0, 3.0)      # mean and spread, smooth over ~100 m

STREET_TREE_SHARE = 0.5            # street sides planted
STREET_TREE_SPACING_PX = (4.0, 6.0)
STREET_TREE_OFFSET_PX = 2.5        # trunk from the street's centreline
YARD_TREE_SHARE = 0.5              # houses with a tree beside them
YARD_TREE_GAP_PX = (1.0, 4.0)      # trunk from the wall
CROWN_RADIUS_PX = (1.5, 3.5)
TREE_HEIGHT_M = (6.0, 15.0)
TREES_LOST_ON = ("burned", "lava", "mud")

HAZE_TAU_550 = (0.02, 0.3)
HAZE_SPREAD = 0.5                  # log-normal spread of the optical depth over the scene
HAZE_SCALE_CELLS = 30              # smoothness of the haze (10 m cells)
MISREGISTRATION_PX = (0.3, 3.0)
SAR_INCIDENCE_DEG = (30.0, 45.0)
FACADE_DB = (-6.0, -13.0)          # VV, VH per unit of ground the facade is laid over


def _optical_of(name: str) -> tuple[float, ...]:
    return tuple(float(v) for v in spectra.REFLECTANCE[spectra.CLASS[name], list(spectra.OPTICAL_FROM_S2)])


# Red, green, blue, NIR reflectance. Shares of car colours: paint makers' yearly world popularity reports.
VEHICLE_COLOURS: dict[str, tuple[float, tuple[float, ...]]] = {
    "white": (0.35, _optical_of("vehicle")), "black": (0.19, (0.04, 0.04, 0.045, 0.06)),
    "grey": (0.15, (0.13, 0.13, 0.14, 0.16)), "silver": (0.10, (0.28, 0.28, 0.29, 0.30)),
    "blue": (0.08, (0.05, 0.08, 0.18, 0.22)), "red": (0.07, (0.30, 0.06, 0.05, 0.35)),
    "beige": (0.03, (0.25, 0.20, 0.14, 0.30)), "green": (0.03, (0.06, 0.14, 0.08, 0.25))}
VEHICLE_BRIGHTNESS = (0.85, 1.15)
ROOF_COLOURS: dict[str, tuple[float, ...]] = {
    "concrete": _optical_of("roof_concrete"), "dirty concrete": (0.16, 0.16, 0.15, 0.19),
    "bitumen": (0.07, 0.07, 0.07, 0.08), "white membrane": (0.60, 0.61, 0.61, 0.60),
    "terracotta": _optical_of("roof_tile"), "slate": (0.08, 0.08, 0.09, 0.10),
    "brown shingle": (0.14, 0.11, 0.09, 0.20), "metal": (0.30, 0.31, 0.32, 0.30),
    "rusted metal": (0.20, 0.12, 0.08, 0.25), "blue metal": (0.10, 0.14, 0.22, 0.25),
    "green metal": (0.08, 0.16, 0.10, 0.22), "mud": _optical_of("bare_soil")}
ROOF_MIX: dict[str, dict[str, float]] = {
    "reinforced_concrete": {"concrete": 0.35, "dirty concrete": 0.3, "bitumen": 0.2, "white membrane": 0.05,
                            "metal": 0.1},
    "masonry": {"terracotta": 0.35, "slate": 0.15, "brown shingle": 0.1, "metal": 0.15, "rusted metal": 0.1,
                "concrete": 0.15},
    "timber": {"brown shingle": 0.25, "slate": 0.2, "metal": 0.2, "rusted metal": 0.1, "blue metal": 0.1,
               "green metal": 0.1, "terracotta": 0.05},
    "adobe": {"mud": 0.5, "rusted metal": 0.2, "metal": 0.2, "terracotta": 0.1}}
CROWN_TINT = (0.8, 1.2)


def generator(event_seed: int) -> np.random.Generator:
    """The hard level's own generator for one event (independent of the scene's)."""
    return np.random.default_rng([event_seed, HARD_STREAM])


@dataclass(frozen=True)
class Acquisition:
    """The per-event draws of the hard level."""

    sun_azimuth_deg: float
    sun_elevation_deg: float
    haze_tau_550: tuple[float, float]          # mean optical depth, pre and post
    misregistration_px: tuple[float, float]    # post against pre (rows, cols), optical pixels
    sar_sensor_side: str                       # "west" (ascending pass, looking east) or "east"
    sar_incidence_deg: float

    def metadata(self) -> dict[str, Any]:
        """What real image metadata would tell the analyst (the manifest's ``acquisition``)."""
        return {"sun_azimuth_deg": round(self.sun_azimuth_deg, 2),
                "sun_elevation_deg": round(self.sun_elevation_deg, 2),
                "sar_pass": "ascending" if self.sar_sensor_side == "west" else "descending",
                "sar_look_direction": "east" if self.sar_sensor_side == "west" else "west",
                "sar_incidence_deg": round(self.sar_incidence_deg, 2)}


def draw_acquisition(event: Event, rng: np.random.Generator) -> Acquisition:
    day = date.fromisoformat(event.date).timetuple().tm_yday
    azimuth, elevation = imaging.sun_position(event.lat, day, rng.uniform(*SOLAR_HOUR))
    tau = (float(rng.uniform(*HAZE_TAU_550)), float(rng.uniform(*HAZE_TAU_550)))
    magnitude, angle = rng.uniform(*MISREGISTRATION_PX), rng.uniform(0, 2 * math.pi)
    shift = (round(float(magnitude * math.sin(angle)), 4), round(float(magnitude * math.cos(angle)), 4))
    side = "west" if rng.random() < 0.5 else "east"
    return Acquisition(azimuth, max(elevation, MIN_SUN_ELEVATION_DEG), tau, shift, side,
                       float(rng.uniform(*SAR_INCIDENCE_DEG)))


@dataclass
class HardScene:
    """The hard level's images and what it adds to the truth and the manifest."""

    images: dict[str, np.ndarray]
    object_attributes: dict[str, list[dict[str, Any]]]   # per kind, aligned with the truth's lists
    truth: dict[str, Any]
    acquisition: dict[str, Any]


# Layout: parking lots, trees, colours ---------------------------------------------------------------
def _occupied(pre_map, objects, roofs, roads_px) -> np.ndarray:
    C = spectra.CLASS
    return ((roofs > 0) | roads_px | (pre_map == C["water"]) | scene_objects.footprints(objects, roofs.shape)
            | _lots_mask(objects, roofs.shape))


def _lots_mask(objects, shape) -> np.ndarray:
    mask = np.zeros(shape, bool)
    for lot in objects.get("parking_lots", []):
        mask[lot["r0"]:lot["r0"] + lot["h"], lot["c0"]:lot["c0"] + lot["w"]] = True
    return mask


def add_parking_lots(pre_map: np.ndarray, objects: dict[str, list[dict[str, Any]]], roofs: np.ndarray,
                     roads_px: np.ndarray, buildings: int, rng: np.random.Generator) -> None:
    """Parking lots on ground the clean objects left free, their cars appended to the vehicles (in place)."""
    from scipy import ndimage

    free = ~ndimage.binary_dilation(_occupied(pre_map, objects, roofs, roads_px), iterations=2)
    lots, cars = scene_objects.parking_lots(pre_map, free, roads_px, buildings, rng)
    objects["vehicles"].extend(cars)
    objects["parking_lots"] = lots


@dataclass
class Trees:
    """Tree crowns (optical pixels): centre, radius, height and a brightness tint each."""

    row: np.ndarray
    col: np.ndarray
    radius_px: np.ndarray
    height_m: np.ndarray
    tint: np.ndarray

    def subset(self, keep: np.ndarray) -> Trees:
        return Trees(self.row[keep], self.col[keep], self.radius_px[keep], self.height_m[keep], self.tint[keep])


def place_trees(roads: list[dict], buildings: list[dict], occupied: np.ndarray, rng: np.random.Generator) -> Trees:
    """Street trees along planted street sides and a tree beside some houses, trunks on free ground."""
    f = sensors.OPTICAL_FACTOR
    trunks: list[tuple[float, float]] = []
    for road in roads:
        (r0, c0), (r1, c1) = road["from"], road["to"]
        length = math.dist((r0, c0), (r1, c1)) * f
        if length == 0:
            continue
        along = (np.array([r1 - r0, c1 - c0]) * f) / length
        normal = np.array([along[1], -along[0]])
        for side in (1, -1):
            if rng.random() >= STREET_TREE_SHARE:
                continue
            spacing = rng.uniform(*STREET_TREE_SPACING_PX)
            for distance in np.arange(spacing / 2, length, spacing):
                r, c = np.array([r0 * f, c0 * f]) + along * distance + normal * side * STREET_TREE_OFFSET_PX
                trunks.append((float(r), float(c)))
    for b in buildings:
        if rng.random() >= YARD_TREE_SHARE:
            continue
        half_h, half_w = b["h"] * f / 2, b["w"] * f / 2
        gap, side, slide = rng.uniform(*YARD_TREE_GAP_PX), int(rng.integers(4)), rng.uniform(-1, 1)
        dr, dc = [(-(half_h + gap), slide * half_w), (half_h + gap, slide * half_w),
                  (slide * half_h, -(half_w + gap)), (slide * half_h, half_w + gap)][side]
        trunks.append((b["row"] * f + dr, b["col"] * f + dc))
    rows_px, cols_px = occupied.shape
    kept = [(r, c) for r, c in trunks if 0 <= r < rows_px and 0 <= c < cols_px and not occupied[int(r), int(c)]]
    count = len(kept)
    position = np.array(kept, float).reshape(count, 2)
    return Trees(position[:, 0], position[:, 1], rng.uniform(*CROWN_RADIUS_PX, count),
                 rng.uniform(*TREE_HEIGHT_M, count), rng.uniform(*CROWN_TINT, count))


def canopy(trees: Trees, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Which crown covers each pixel (tree index + 1) and the canopy's height (m): each crown a dome 70 %
    of its tree's height at the rim, and where crowns overlap the highest surface shows."""
    crown = np.zeros(shape, np.int32)
    height = np.zeros(shape, np.float32)
    if not len(trees.row):
        return crown, height
    reach = int(math.ceil(trees.radius_px.max())) + 1
    offsets = np.arange(-reach, reach + 1)
    # every (tree, pixel near its centre) pair at once
    rows = (np.floor(trees.row).astype(int)[:, None, None] + offsets[None, :, None])
    cols = (np.floor(trees.col).astype(int)[:, None, None] + offsets[None, None, :])
    distance = np.hypot(rows + 0.5 - trees.row[:, None, None], cols + 0.5 - trees.col[:, None, None])
    distance = distance / trees.radius_px[:, None, None]
    inside = (distance <= 1.0) & (rows >= 0) & (rows < shape[0]) & (cols >= 0) & (cols < shape[1])
    tree = np.broadcast_to(np.arange(len(trees.row))[:, None, None], inside.shape)[inside]
    pixel = (np.broadcast_to(rows, inside.shape)[inside] * shape[1] + np.broadcast_to(cols, inside.shape)[inside])
    dome = (trees.height_m[tree] * (0.7 + 0.3 * np.sqrt(np.clip(1 - distance[inside] ** 2, 0, 1)))).astype(np.float32)
    order = np.lexsort((tree, dome, pixel))  # by pixel, then height: the last of each pixel is the highest
    last = np.append(pixel[order][1:] != pixel[order][:-1], True)
    top = order[last]
    crown.flat[pixel[top]] = tree[top] + 1
    height.flat[pixel[top]] = dome[top]
    return crown, height


@dataclass
class Colours:
    """Every roof, car and crown in its own colour (red, green, blue, NIR reflectance; row 0 unused)."""

    roof_names: list[str]
    roofs: np.ndarray
    vehicle_names: list[str]
    vehicles: np.ndarray
    vehicle_ids: np.ndarray     # optical pixels: index of the car drawn there + 1
    crowns: np.ndarray


def _weighted_choice(mix: dict[str, float], rng: np.random.Generator) -> str:
    names = list(mix)
    weights = np.array([mix[name] for name in names])
    return names[int(rng.choice(len(names), p=weights / weights.sum()))]


def draw_colours(objects: dict[str, list[dict[str, Any]]], buildings: list[dict], trees: Trees,
                 shape: tuple[int, int], rng: np.random.Generator) -> Colours:
    """Paint for every car (the world's colour shares, +-15 % brightness), roof (by material) and crown."""
    vehicles = objects["vehicles"]
    names = list(VEHICLE_COLOURS)
    shares = np.array([VEHICLE_COLOURS[name][0] for name in names])
    choice = rng.choice(len(names), size=len(vehicles), p=shares / shares.sum())
    brightness = rng.uniform(*VEHICLE_BRIGHTNESS, len(vehicles))
    vehicle_ids = np.zeros(shape, np.int32)
    for index, o in enumerate(vehicles, start=1):
        vehicle_ids[o["r0"]:o["r0"] + o["h"], o["c0"]:o["c0"] + o["w"]] = index
    roof_names = [_weighted_choice(ROOF_MIX[b["material"]], rng) for b in buildings]
    return Colours(roof_names, np.array([(0.0,) * 4] + [ROOF_COLOURS[name] for name in roof_names]),
                   [names[int(k)] for k in choice],
                   np.array([(0.0,) * 4] + [np.array(VEHICLE_COLOURS[names[int(k)]][1]) * b
                                            for k, b in zip(choice, brightness)]).reshape(-1, 4),
                   vehicle_ids,
                   np.vstack([np.zeros(4), trees.tint[:, None] * np.array(_optical_of("dense_vegetation"))]))


# Rendering ------------------------------------------------------------------------------------------
def _skylight(wavelengths_nm) -> np.ndarray:
    nm, share = zip(*SKYLIGHT_BY_NM)
    return np.interp(np.asarray(wavelengths_nm, float), nm, share)


OPTICAL_NM = tuple(spectra.S2_WAVELENGTH_NM[i] for i in spectra.OPTICAL_FROM_S2)


def _building_boxes(buildings: list[dict], shape: tuple[int, int]) -> list[tuple[int, int, int, int]]:
    """Footprints in optical pixels (rows and columns), as the class maps draw them."""
    f = sensors.OPTICAL_FACTOR
    return [(max(int((b["row"] - b["h"] / 2) * f), 0), min(int((b["row"] + b["h"] / 2) * f), shape[0]),
             max(int((b["col"] - b["w"] / 2) * f), 0), min(int((b["col"] + b["w"] / 2) * f), shape[1]))
            for b in buildings]


def _building_heights(buildings: list[dict], after: bool) -> np.ndarray:
    return np.array([(b["storeys"] * STOREY_M + ROOF_M) * (HEIGHT_AFTER[b["damage"]] if after else 1.0)
                     for b in buildings], np.float32)


def _tank_disk(t: dict[str, Any], shape: tuple[int, int]) -> tuple[tuple[slice, slice], np.ndarray]:
    """A tank's roof as its bounding box and the disk inside it (as ``scene_objects`` draws it)."""
    r0, c0 = max(t["row"] - t["radius"], 0), max(t["col"] - t["radius"], 0)
    r1, c1 = min(t["row"] + t["radius"] + 1, shape[0]), min(t["col"] + t["radius"] + 1, shape[1])
    rows, cols = np.ogrid[r0:r1, c0:c1]
    return (slice(r0, r1), slice(c0, c1)), (rows - t["row"]) ** 2 + (cols - t["col"]) ** 2 <= t["radius"] ** 2


@dataclass
class Look:
    """One acquisition's surface in the sun: reflectance ``(h, w, 4)`` with shadows, where the shadows
    and crowns are, and the class map the 10 m sensors mix (crowns counted as dense vegetation)."""

    reflectance: np.ndarray
    shadow: np.ndarray
    crown: np.ndarray
    classes: np.ndarray


def look(class_map: np.ndarray, pre_map: np.ndarray, roofs: np.ndarray, building_m: np.ndarray,
         objects: dict[str, list[dict[str, Any]]], trees: Trees, colours: Colours, forest_m: np.ndarray,
         acquisition: Acquisition) -> Look:
    """The surface of one acquisition (``class_map``; ``trees``: those standing then)."""
    C = spectra.CLASS
    crown, canopy_m = canopy(trees, class_map.shape)
    height = np.concatenate([[0.0], building_m]).astype(np.float32)[roofs]
    height = np.where(class_map == C["dense_vegetation"], forest_m, height)
    for name, metres in OBJECT_HEIGHT_M.items():
        height = np.where(class_map == C[name], np.maximum(height, metres), height)
    for t in objects["tanks"]:
        box, disk = _tank_disk(t, class_map.shape)
        height[box][disk & (class_map[box] == C["tank_roof"])] = t["radius"] * OPTICAL_PIXEL_M * TANK_HEIGHT_PER_RADIUS
    shadow = imaging.cast_shadows(np.maximum(height, canopy_m), OPTICAL_PIXEL_M, acquisition.sun_azimuth_deg,
                                  acquisition.sun_elevation_deg)

    albedo = sensors.optical_reflectance(class_map).copy()
    roof_class = (class_map == C["roof_concrete"]) | (class_map == C["roof_tile"])
    roof = (roofs > 0) & roof_class & (class_map == pre_map)  # a roof patch changed by the event keeps its class
    albedo[roof] = colours.roofs[roofs[roof]]
    car = (colours.vehicle_ids > 0) & (class_map == C["vehicle"])
    albedo[car] = colours.vehicles[colours.vehicle_ids[car]]
    albedo[crown > 0] = colours.crowns[crown[crown > 0]]
    reflectance = albedo * np.where(shadow[..., None], _skylight(OPTICAL_NM), 1.0)
    classes = np.where(crown > 0, C["dense_vegetation"], class_map).astype(class_map.dtype)
    return Look(reflectance, shadow, crown, classes)


def _optical_images(looks: dict[str, Look], tau_cells: dict[str, np.ndarray], acquisition: Acquisition,
                    air_mass: float, rng: np.random.Generator, hard_rng: np.random.Generator) -> dict[str, np.ndarray]:
    from scipy import ndimage

    images = {}
    for when, gain in (("pre", 1.0), ("post", 1.03)):
        # single precision from here: the effects after the clean draws need no more, and run twice as fast
        tau = ndimage.zoom(tau_cells[when], sensors.OPTICAL_FACTOR, order=1)
        image = imaging.add_haze(sensors.optical(looks[when].reflectance, rng, gain).astype(np.float32),
                                 imaging.haze_transmittance(tau, OPTICAL_NM, air_mass))
        if when == "post":
            image = imaging.shift_image(image, acquisition.misregistration_px)
        images[f"{when}_optical"] = sensors.to_dn(imaging.add_sensor_noise(image, hard_rng))
    return images


def _s2_images(looks: dict[str, Look], tau_cells: dict[str, np.ndarray], acquisition: Acquisition, air_mass: float,
               rng: np.random.Generator, hard_rng: np.random.Generator) -> dict[str, np.ndarray]:
    skylight = _skylight(spectra.S2_WAVELENGTH_NM)[:, None, None]
    shift_cells = tuple(v / sensors.OPTICAL_FACTOR for v in acquisition.misregistration_px)
    images = {}
    for when in ("pre", "post"):
        shade = 1.0 - sensors.cell_mean(looks[when].shadow.astype(np.float32))[None] * (1.0 - skylight)
        signal = sensors.s2(sensors.s2_reflectance(looks[when].classes) * shade, rng).astype(np.float32)
        transmittance = imaging.haze_transmittance(tau_cells[when], spectra.S2_WAVELENGTH_NM, air_mass)
        image = imaging.add_haze(signal, transmittance)
        if when == "post":
            image = imaging.shift_image(image, (shift_cells[0], shift_cells[1]))
        images[f"{when}_s2"] = sensors.to_dn(imaging.add_sensor_noise(image, hard_rng))
    return images


def _sar_images(looks: dict[str, Look], buildings: list[dict], acquisition: Acquisition,
                rng: np.random.Generator) -> dict[str, np.ndarray]:
    facade = 10 ** (np.array(FACADE_DB) / 10)
    shape = looks["pre"].classes.shape
    boxes = _building_boxes(buildings, shape)
    images = {}
    for when in ("pre", "post"):
        cover = imaging.layover(boxes, _building_heights(buildings, after=when == "post"), shape, OPTICAL_PIXEL_M,
                                acquisition.sar_incidence_deg, acquisition.sar_sensor_side)
        power = sensors.sar_power(looks[when].classes) + facade[:, None, None] * sensors.cell_mean(cover)[None]
        images[f"{when}_sar"] = sensors.sar_db(power, rng)
    return images


def _share(mask: np.ndarray, o: dict[str, Any]) -> float:
    """The share of an object's pixels that ``mask`` covers."""
    if "radius" in o:
        box, disk = _tank_disk(o, mask.shape)
        region = mask[box][disk]
    else:
        region = mask[o["r0"]:o["r0"] + o["h"], o["c0"]:o["c0"] + o["w"]]
    return round(float(region.mean()), 3) if region.size else 0.0


def _object_attributes(objects: dict[str, list[dict[str, Any]]], pre: Look,
                       colours: Colours) -> dict[str, list[dict[str, Any]]]:
    """Per object, aligned with the truth's lists: the share under canopy and in shadow in the pre-event
    image; per car also its colour and whether it is parked in a lot."""
    under_canopy, in_shadow = pre.crown > 0, pre.shadow & (pre.crown == 0)
    attributes: dict[str, list[dict[str, Any]]] = {
        kind: [{"occluded_fraction": _share(under_canopy, o), "shadowed_fraction": _share(in_shadow, o)}
               for o in objects[kind]] for kind in ("vehicles", "ships", "tanks", "pools")}
    for record, o, colour in zip(attributes["vehicles"], objects["vehicles"], colours.vehicle_names):
        record.update(colour=colour, parking_lot=bool(o.get("parking_lot", False)))
    return attributes


def render(event: Event, pre_map: np.ndarray, post_map: np.ndarray, objects: dict[str, list[dict[str, Any]]],
           roofs: np.ndarray, roads_px: np.ndarray, buildings: list[dict], roads: list[dict],
           rng: np.random.Generator, hard_rng: np.random.Generator) -> HardScene:
    """The six images of a hard scene (see module doc), drawing the clean sensor draws from ``rng`` in the
    clean order (optical, Sentinel-2, SAR; pre before post) and everything else from ``hard_rng``."""
    C = spectra.CLASS
    shape = pre_map.shape
    n = shape[0] // sensors.OPTICAL_FACTOR
    acquisition = draw_acquisition(event, hard_rng)
    trees = place_trees(roads, buildings, _occupied(pre_map, objects, roofs, roads_px), hard_rng)
    standing = ~np.isin(post_map[trees.row.astype(int), trees.col.astype(int)], [C[name] for name in TREES_LOST_ON])
    colours = draw_colours(objects, buildings, trees, shape, hard_rng)
    forest_m = np.kron(FOREST_HEIGHT_M[0] + FOREST_HEIGHT_M[1] * hazards.smooth_noise(hard_rng, n, 10),
                       np.ones((sensors.OPTICAL_FACTOR,) * 2)).astype(np.float32)
    tau_cells = {when: (tau * np.exp(HAZE_SPREAD * hazards.smooth_noise(hard_rng, n, HAZE_SCALE_CELLS)
                                     - HAZE_SPREAD ** 2 / 2)).astype(np.float32)
                 for when, tau in zip(("pre", "post"), acquisition.haze_tau_550)}
    air_mass = 1.0 + 1.0 / math.sin(math.radians(acquisition.sun_elevation_deg))  # sun to ground, ground to nadir

    post_colours = Colours(colours.roof_names, colours.roofs, colours.vehicle_names, colours.vehicles,
                           colours.vehicle_ids, colours.crowns[np.concatenate([[0], np.nonzero(standing)[0] + 1])])
    looks = {"pre": look(pre_map, pre_map, roofs, _building_heights(buildings, after=False), objects, trees, colours,
                         forest_m, acquisition),
             "post": look(post_map, pre_map, roofs, _building_heights(buildings, after=True), objects,
                          trees.subset(standing), post_colours, forest_m, acquisition)}
    images = {**_optical_images(looks, tau_cells, acquisition, air_mass, rng, hard_rng),
              **_s2_images(looks, tau_cells, acquisition, air_mass, rng, hard_rng),
              **_sar_images(looks, buildings, acquisition, rng)}
    truth = {"realism": "hard", **acquisition.metadata(),
             "misregistration_px": list(acquisition.misregistration_px),
             "misregistration_m": [round(v * OPTICAL_PIXEL_M, 4) for v in acquisition.misregistration_px],
             "haze_tau_550": {when: round(tau, 4) for when, tau in zip(("pre", "post"), acquisition.haze_tau_550)},
             "trees": {"count": int(len(trees.row)), "standing_after": int(standing.sum())},
             "parking_lots": objects.get("parking_lots", []),
             "shadow_share": {when: round(float(seen.shadow.mean()), 4) for when, seen in looks.items()},
             "roof_colours": {b["id"]: name for b, name in zip(buildings, colours.roof_names)}}
    return HardScene(images, _object_attributes(objects, looks["pre"], colours), truth, acquisition.metadata())
