"""The exploration policy: a coverage scan of the region where the object can lie.

The object is placed within +-1 cm of the platform centre and turned by up to +-22.5 degrees
(MNIST families), so its ink lies in a known region, and each touch senses 18.88 x 14.16 mm of
it. With T touches the most the agent can sense is T sensor footprints that do not overlap, so
the policy lays a lattice of ``cols x rows <= T`` scan points whose footprints tile the region
(touching in x, evenly spread in y), and visits them in a tour that wastes the fewest moves:

1. candidate tours: the eight boustrophedons (start at any corner, sweep rows or columns first)
   and the nearest-neighbour tour from the start;
2. each is simulated under the motion limit (a move covers at most 3 cm; a scan point counts when
   reached), and the tour that reaches the most scan points within the step budget wins (ties: the
   fewer metres), since every scan point reached adds a footprint of new area;
3. the policy then moves towards the next scan point of its tour, one capped move per step.

The tour depends only on where the episode starts, so it is planned once at reset. Moves are in
the env's action units (relative, projected into the unit disc, scaled by the longest move).
"""

from __future__ import annotations

import itertools

import numpy as np

from gauntlet.envs.tactile.sensor import SENSOR_HEIGHT_M, SENSOR_WIDTH_M
from gauntlet.envs.tactile.simulation import MAX_STEP_M, WORKSPACE_HALF_M

REACHED_M = 1e-4  # a scan point is reached when the sensor is this close (moves are exact up to float32)


def scan_lattice(touches: int, region_half_m: tuple[float, float]) -> np.ndarray:
    """Scan points ``(cols * rows, 2)`` (m) that tile ``+-region_half_m`` with at most ``touches`` footprints.

    Columns are spaced by the sensor width (no gap along x) or closer; rows share what is left.
    """
    half_x, half_y = region_half_m
    cols = max(1, int(np.ceil(2 * half_x / SENSOR_WIDTH_M)))
    rows = max(1, touches // cols)
    centre_x = min(half_x - SENSOR_WIDTH_M / 2, WORKSPACE_HALF_M[0])
    centre_y = min(max(half_y - SENSOR_HEIGHT_M / 2, 0.0), WORKSPACE_HALF_M[1])
    xs = np.linspace(-centre_x, centre_x, cols) if cols > 1 else np.zeros(1)
    ys = np.linspace(centre_y, -centre_y, rows) if rows > 1 else np.zeros(1)
    return np.array([(x, y) for y in ys for x in xs])


def _boustrophedons(points: np.ndarray) -> list[np.ndarray]:
    """The eight serpentine orders of a lattice (index arrays)."""
    xs, ys = np.unique(points[:, 0]), np.unique(points[:, 1])
    index = {(x, y): i for i, (x, y) in enumerate(points)}
    tours = []
    for flip_x, flip_y, columns_first in itertools.product((False, True), repeat=3):
        outer, inner = (xs, ys) if columns_first else (ys, xs)
        outer = outer[::-1] if (flip_x if columns_first else flip_y) else outer
        inner = inner[::-1] if (flip_y if columns_first else flip_x) else inner
        order = []
        for k, a in enumerate(outer):
            for b in (inner if k % 2 == 0 else inner[::-1]):
                order.append(index[(a, b) if columns_first else (b, a)])
        tours.append(np.array(order))
    return tours


def _nearest_neighbour(points: np.ndarray, start: np.ndarray) -> np.ndarray:
    left, here, order = list(range(len(points))), start, []
    while left:
        nearest = min(left, key=lambda i: float(np.sum((points[i] - here) ** 2)))
        order.append(nearest)
        left.remove(nearest)
        here = points[nearest]
    return np.array(order)


def _simulate(points: np.ndarray, order: np.ndarray, start: np.ndarray, moves: int) -> tuple[int, float]:
    """Scan points reached and metres travelled following ``order`` for ``moves`` capped moves."""
    here, reached, travelled, k = start.copy(), 0, 0.0, 0
    for _ in range(moves):
        if k == len(order):
            break
        offset = points[order[k]] - here
        distance = float(np.hypot(*offset))
        step = offset if distance <= MAX_STEP_M else offset * (MAX_STEP_M / distance)
        here = here + step
        travelled += min(distance, MAX_STEP_M)
        if distance <= MAX_STEP_M:
            reached, k = reached + 1, k + 1
    return reached, travelled


class CoverageScan:
    """Batched scan policy: ``reset(start positions)`` plans tours, ``act(positions)`` gives the moves."""

    def __init__(self, touches: int, region_half_m: tuple[float, float] = (0.038, 0.040), move_dims: int = 2):
        self.points = scan_lattice(touches, region_half_m)
        self.moves = touches - 1  # the first touch is at the start; every later one follows a move
        self.move_dims = move_dims
        self._tours = _boustrophedons(self.points)

    def reset(self, positions: np.ndarray) -> None:
        """Plan a tour per episode from its first observed ``sensor_pos`` ``(B, 3)``."""
        starts = np.asarray(positions, np.float64)[:, :2] * WORKSPACE_HALF_M
        self.plans, self.next = [], np.zeros(len(starts), np.int64)
        for start in starts:
            candidates = self._tours + [_nearest_neighbour(self.points, start)]
            scores = [_simulate(self.points, tour, start, self.moves) for tour in candidates]
            best = min(range(len(candidates)), key=lambda i: (-scores[i][0], scores[i][1]))
            self.plans.append(candidates[best])

    def act(self, positions: np.ndarray) -> np.ndarray:
        """Moves ``(B, move_dims)`` in [-1, 1] towards each episode's next scan point (no turn)."""
        here = np.asarray(positions, np.float64)[:, :2] * WORKSPACE_HALF_M
        moves = np.zeros((len(here), self.move_dims), np.float32)
        for i, plan in enumerate(self.plans):
            while self.next[i] < len(plan) and np.hypot(*(self.points[plan[self.next[i]]] - here[i])) <= REACHED_M:
                self.next[i] += 1
            if self.next[i] == len(plan):
                continue  # tour done: stay (a zero move also costs no action penalty)
            offset = (self.points[plan[self.next[i]]] - here[i]) / MAX_STEP_M
            moves[i, :2] = offset / max(1.0, float(np.hypot(*offset)))
        return moves
