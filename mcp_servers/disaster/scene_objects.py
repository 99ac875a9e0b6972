"""Small objects in the scenes, with their truth: vehicles, ships, storage tanks, pools and bridges.

The generator places them on the 2.5 m land-cover map before the event (``place``), paints them
(``paint``), and after the hazard has been drawn records where each one is and whether it can still
be seen after the event (``truth``): a car under flood water or lava is no longer visible.

* vehicles: 5 x 2.5 m cars (2 x 1 pixels, along the road) on road pixels, at least 2 pixels apart;
* ships: 20-40 m by 5-7.5 m hulls in permanent water (river or sea), clear of the banks by 3 pixels;
* storage tanks: white circular roofs of 7.5-15 m radius on a concrete pad at one industrial site
  (a larger tank farm for industrial explosions) in open ground away from houses and streets;
* pools: 5-10 m pools beside some houses, in the yard (never on a roof, road or water);
* bridges: road segments that cross permanent water (the road is drawn over the river);
* parking lots (``hard`` realism level only, ``parking_lots``): asphalt lots by a street, rows of
  2.5 m bays facing each other across 7.5 m aisles, most bays taken by a car.

Coordinates here are optical pixels (row, col) of the 2.5 m grid; ``truth`` converts to the scene CRS.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gauntlet.mcp_servers.disaster import spectra

MAX_VEHICLES = 60
MAX_POOLS = 40
POOL_SHARE = 0.12          # houses with a pool
TANK_PITCH_PX = 16         # centre spacing of tanks on the pad (40 m)
TANK_FARM_HAZARDS = ("industrial_explosion",)
BUILDINGS_PER_LOT = 80     # one parking lot per this many buildings (and at least one) ...
MAX_LOTS = 6               # ... up to this many
LOT_BAYS = (8, 20)         # bays along one row of a lot (2.5 m each)
LOT_AISLE_PX = 3           # 7.5 m aisles between facing rows of bays
LOT_OCCUPANCY = (0.5, 1.0)  # share of a lot's bays taken, per lot


def place(terrain, roads: list[dict], roofs: np.ndarray, roads_px: np.ndarray, rng: np.random.Generator,
          factor: int, hazard: str) -> dict[str, list[dict[str, Any]]]:
    """Choose where every object goes (optical pixels); deterministic given ``rng``."""
    water = np.kron(terrain.permanent_water, np.ones((factor, factor), bool))
    taken = (roofs > 0) | water | roads_px
    vehicles = _vehicles(roads, roads_px, roofs, rng, factor)
    for v in vehicles:
        _mark(taken, v, 0)
    ships = _ships(water, roads_px, rng)
    tanks = _tanks(taken, rng, large=hazard in TANK_FARM_HAZARDS)
    for t in tanks:
        _mark(taken, t, 2)
    pools = _pools(roofs, taken, rng)
    return {"vehicles": vehicles, "ships": ships, "tanks": tanks, "pools": pools, "sites": sites(tanks)}


def paint(class_map: np.ndarray, objects: dict[str, list[dict[str, Any]]]) -> None:
    """Draw the objects into a 2.5 m class map (in place)."""
    C = spectra.CLASS
    for site in objects.get("sites", []):
        class_map[site["r0"]:site["r0"] + site["h"], site["c0"]:site["c0"] + site["w"]] = C["urban_ground"]
    for kind, cls in (("vehicles", "vehicle"), ("ships", "ship"), ("pools", "pool_water")):
        for o in objects[kind]:
            class_map[o["r0"]:o["r0"] + o["h"], o["c0"]:o["c0"] + o["w"]] = C[cls]
    for t in objects["tanks"]:
        class_map[_disk(t, class_map.shape)] = C["tank_roof"]


def bridges(roads: list[dict], permanent_water: np.ndarray) -> list[str]:
    """Ids of road segments that cross permanent water: at some point of the centreline (sampled every
    ~2.5 m) the 10 m cells 5 m to either side of it are both water. A street along a bank is no bridge."""
    n = permanent_water.shape[0]
    out = []
    for road in roads:
        (r0, c0), (r1, c1) = road["from"], road["to"]
        length = math.dist((r0, c0), (r1, c1))
        if length == 0:
            continue
        normal = np.array([c1 - c0, -(r1 - r0)]) / length * 0.5
        t = np.linspace(0, 1, max(2, int(length * 4) + 1))
        line = np.stack([r0 + t * (r1 - r0), c0 + t * (c1 - c0)], axis=1)
        sides = [np.floor(line + sign * normal).astype(int).clip(0, n - 1) for sign in (1, -1)]
        wet = [permanent_water[s[:, 0], s[:, 1]] for s in sides]
        if (wet[0] & wet[1]).any():
            out.append(road["id"])
    return out


def truth(objects: dict[str, list[dict[str, Any]]], post_map: np.ndarray, optical_transform) -> dict[str, Any]:
    """World positions (scene CRS, metres) of every object and whether it is still visible after the event."""
    pixel = abs(optical_transform.a)
    out: dict[str, Any] = {}
    for kind, cls in (("vehicles", "vehicle"), ("ships", "ship"), ("tanks", "tank_roof"), ("pools", "pool_water")):
        records = []
        for index, o in enumerate(objects[kind]):
            if kind == "tanks":
                region = _disk(o, post_map.shape)
                row, col = o["row"] + 0.5, o["col"] + 0.5
            else:
                region = (slice(o["r0"], o["r0"] + o["h"]), slice(o["c0"], o["c0"] + o["w"]))
                row, col = o["r0"] + o["h"] / 2, o["c0"] + o["w"] / 2
            visible = float(np.mean(post_map[region] == spectra.CLASS[cls])) >= 0.5
            x, y = optical_transform @ (col, row)
            record = {"id": f"{kind[0]}{index:03d}", "x": round(x, 3), "y": round(y, 3), "visible_post": visible}
            if kind == "tanks":
                record["radius_m"] = o["radius"] * pixel
            else:
                record.update(length_m=max(o["h"], o["w"]) * pixel, width_m=min(o["h"], o["w"]) * pixel)
            records.append(record)
        out[kind] = records
    return out


def footprints(objects: dict[str, list[dict[str, Any]]], shape: tuple[int, int]) -> np.ndarray:
    """Where the objects and the tank pads are (optical pixels)."""
    covered = np.zeros(shape, bool)
    for site in objects.get("sites", []):
        covered[site["r0"]:site["r0"] + site["h"], site["c0"]:site["c0"] + site["w"]] = True
    for kind in ("vehicles", "ships", "tanks", "pools"):
        for o in objects[kind]:
            _mark(covered, o, 0)
    return covered


def parking_lots(class_map: np.ndarray, free: np.ndarray, roads_px: np.ndarray, buildings: int,
                 rng: np.random.Generator) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Parking lots by the streets of the town, drawn into ``class_map`` (in place): the lots and their cars.

    A lot is one or two modules -- a row of bays (2 x 1 pixels, the car's length across the row), a
    3-pixel aisle, another row -- inside a 1-pixel asphalt border (stacked modules put two rows back
    to back); its centre is on
    built-up ground in ``free`` space within reach of a street. Cars fill each lot's bays at the lot's
    occupancy, side by side with no pixel between them: at 2.5 m a parked row is one bright or dark band.
    """
    from scipy import ndimage

    C = spectra.CLASS
    lots: list[dict[str, Any]] = []
    cars: list[dict[str, Any]] = []
    if not buildings:
        return lots, cars
    free = free.copy()
    to_street = ndimage.distance_transform_edt(~roads_px)
    for _ in range(min(MAX_LOTS, 1 + buildings // BUILDINGS_PER_LOT)):
        modules, bays = int(rng.integers(1, 3)), int(rng.integers(LOT_BAYS[0], LOT_BAYS[1] + 1))
        depth = modules * (4 + LOT_AISLE_PX) + 2  # rows of bays and aisles, inside the border
        across = rng.random() < 0.5               # cars across the image's rows (vertical) or along them
        h, w = (depth, bays + 2) if across else (bays + 2, depth)
        window = ndimage.uniform_filter(free.astype(np.float32), size=(h, w), mode="constant") > 0.9999
        ok = np.argwhere(window & (class_map == C["urban_ground"]) & (to_street <= max(h, w) / 2 + 4))
        if not len(ok):
            break
        centre_r, centre_c = ok[int(rng.integers(len(ok)))]
        r0, c0 = int(centre_r - h // 2), int(centre_c - w // 2)
        class_map[r0:r0 + h, c0:c0 + w] = C["road"]
        free[max(r0 - 2, 0):r0 + h + 2, max(c0 - 2, 0):c0 + w + 2] = False
        occupancy = rng.uniform(*LOT_OCCUPANCY)
        lots.append({"r0": r0, "c0": c0, "h": h, "w": w, "occupancy": round(float(occupancy), 3)})
        # A module is a row of bays, an aisle and a row of bays; stacked modules put two rows back to back.
        for along in (m * (4 + LOT_AISLE_PX) + offset for m in range(modules) for offset in (0, 2 + LOT_AISLE_PX)):
            for bay in range(bays):
                if rng.random() >= occupancy:
                    continue
                car = ({"r0": r0 + 1 + along, "c0": c0 + 1 + bay, "h": 2, "w": 1} if across else
                       {"r0": r0 + 1 + bay, "c0": c0 + 1 + along, "h": 1, "w": 2})
                class_map[car["r0"]:car["r0"] + car["h"], car["c0"]:car["c0"] + car["w"]] = C["vehicle"]
                cars.append({**car, "parking_lot": True})
    return lots, cars


# Placement ---------------------------------------------------------------------------------------
def _mark(taken: np.ndarray, o: dict[str, Any], margin: int) -> None:
    if "radius" in o:
        r, c, rad = o["row"], o["col"], o["radius"] + margin
        taken[max(r - rad, 0):r + rad + 1, max(c - rad, 0):c + rad + 1] = True
    else:
        r0, c0 = max(o["r0"] - margin, 0), max(o["c0"] - margin, 0)
        taken[r0:o["r0"] + o["h"] + margin, c0:o["c0"] + o["w"] + margin] = True


def _free(taken: np.ndarray, r0: int, c0: int, h: int, w: int, margin: int) -> bool:
    rows, cols = taken.shape
    if r0 - margin < 0 or c0 - margin < 0 or r0 + h + margin > rows or c0 + w + margin > cols:
        return False
    return not taken[r0 - margin:r0 + h + margin, c0 - margin:c0 + w + margin].any()


def _disk(t: dict[str, Any], shape: tuple[int, int]):
    rows, cols = np.ogrid[:shape[0], :shape[1]]
    return (rows - t["row"]) ** 2 + (cols - t["col"]) ** 2 <= t["radius"] ** 2


def _vehicles(roads, roads_px, roofs, rng, f) -> list[dict[str, Any]]:
    """Cars parked or driving along road centrelines, 2 x 1 pixels in the road's direction."""
    cars: list[dict[str, Any]] = []
    occupied = np.zeros_like(roads_px)
    rows, cols = roads_px.shape
    for index in rng.permutation(len(roads)):
        (r0, c0), (r1, c1) = roads[int(index)]["from"], roads[int(index)]["to"]
        horizontal = abs(c1 - c0) >= abs(r1 - r0)
        h, w = (1, 2) if horizontal else (2, 1)
        for _ in range(int(rng.poisson(0.6))):
            t = rng.uniform(0.15, 0.85)
            r, c = (r0 + t * (r1 - r0)) * f, (c0 + t * (c1 - c0)) * f
            top, left = int(round(r - (h - 1) / 2)), int(round(c - (w - 1) / 2))
            if top < 2 or left < 2 or top + h > rows - 2 or left + w > cols - 2:
                continue
            box = (slice(top, top + h), slice(left, left + w))
            if not roads_px[box].all() or (roofs[box] > 0).any() or \
                    occupied[top - 2:top + h + 2, left - 2:left + w + 2].any():
                continue
            occupied[box] = True
            cars.append({"r0": top, "c0": left, "h": h, "w": w})
            if len(cars) >= MAX_VEHICLES:
                return cars
    return cars


def _ships(water: np.ndarray, roads_px: np.ndarray, rng) -> list[dict[str, Any]]:
    """Hulls in open water, clear of banks and bridges by 3 pixels."""
    ships: list[dict[str, Any]] = []
    if water.sum() < 2000:
        return ships
    blocked = ~water | roads_px
    wanted = int(rng.integers(2, 7))
    candidates = np.argwhere(water)
    for _ in range(300):
        r, c = candidates[int(rng.integers(len(candidates)))]
        length, width = int(rng.integers(8, 17)), int(rng.integers(2, 4))
        h, w = (width, length) if rng.random() < 0.5 else (length, width)
        if _free(blocked, int(r), int(c), h, w, 3):
            ships.append({"r0": int(r), "c0": int(c), "h": h, "w": w})
            blocked[r - 3:r + h + 3, c - 3:c + w + 3] = True
            if len(ships) >= wanted:
                break
    return ships


def _tanks(taken: np.ndarray, rng, large: bool) -> list[dict[str, Any]]:
    """A pad of tanks on a grid (2 x 2 or 2 x 3; 3 x 4 at a tank farm) in the emptiest open ground."""
    from scipy import ndimage

    grid_rows, grid_cols = (3, 4) if large else (2, int(rng.integers(2, 4)))
    h, w = grid_rows * TANK_PITCH_PX + 4, grid_cols * TANK_PITCH_PX + 4
    clear = ~ndimage.binary_dilation(taken, iterations=4)
    # windows whose every pixel is clear: a box filter of the clear mask equal to one
    box = ndimage.uniform_filter(clear.astype(np.float32), size=(h, w), mode="constant")
    ok = np.argwhere(box > 0.9999)
    if not len(ok):
        return []
    centre_r, centre_c = ok[int(rng.integers(len(ok)))]
    r0, c0 = int(centre_r - h // 2), int(centre_c - w // 2)
    tanks = []
    for i in range(grid_rows):
        for j in range(grid_cols):
            if rng.random() < 0.15:
                continue  # an empty plot on the pad
            radius = int(rng.integers(3, 7))
            row = r0 + 2 + i * TANK_PITCH_PX + TANK_PITCH_PX // 2 + int(rng.integers(-1, 2))
            col = c0 + 2 + j * TANK_PITCH_PX + TANK_PITCH_PX // 2 + int(rng.integers(-1, 2))
            tanks.append({"row": row, "col": col, "radius": radius, "site": [r0, c0, h, w]})
    return tanks


def _pools(roofs: np.ndarray, taken: np.ndarray, rng) -> list[dict[str, Any]]:
    """Pools in the yard beside some houses, two pixels from the wall."""
    from scipy import ndimage

    pools: list[dict[str, Any]] = []
    boxes = ndimage.find_objects(roofs)
    for index in rng.permutation(len(boxes)):
        box = boxes[int(index)]
        if box is None or rng.random() > POOL_SHARE:
            continue
        h, w = [(2, 3), (3, 2), (3, 4), (4, 3)][int(rng.integers(4))]
        side = int(rng.integers(4))
        (rs, cs) = box
        mid_r, mid_c = (rs.start + rs.stop) // 2 - h // 2, (cs.start + cs.stop) // 2 - w // 2
        beside = [(rs.start - 2 - h, mid_c), (rs.stop + 2, mid_c), (mid_r, cs.start - 2 - w), (mid_r, cs.stop + 2)]
        r0, c0 = beside[side]
        if _free(taken, r0, c0, h, w, 1):
            pools.append({"r0": r0, "c0": c0, "h": h, "w": w})
            taken[r0 - 1:r0 + h + 1, c0 - 1:c0 + w + 1] = True
            if len(pools) >= MAX_POOLS:
                break
    return pools


def sites(tanks: list[dict[str, Any]]) -> list[dict[str, int]]:
    """The concrete pads the tanks stand on (one per scene at most)."""
    seen = {tuple(t["site"]) for t in tanks}
    return [{"r0": r0, "c0": c0, "h": h, "w": w} for r0, c0, h, w in sorted(seen)]
