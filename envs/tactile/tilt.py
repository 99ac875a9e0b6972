"""A tilted sensor's contact depth (its orientation is ``orientation``).

The sensing surface is a plane through the pixel grid ``(u, v, 0)`` of the sensor
frame; the gel presses along ``-z``. Pixel (u, v) meets the scene along the ray
``b + s n`` (``b`` = the pixel on the plane through the sensor's point on the platform, ``n`` = the
sensor's z axis): ``s(u, v)`` is the coordinate along the axis of the first point of the scene the ray
meets coming down from above (the highest ``s`` with the ray point on or below the triangulated height
field, the platform at z = 0 being part of it). The gel rests on the highest such point and sinks
``press`` further along its axis, so depth = max(s - (max s - press), 0): the untilted rule, with the
height replaced by the height along the tilted axis. An untilted sensor gives the height field itself.

Each ray visits the heights z_top - k step (k = 0, 1, ...; at least 0), down from the highest point
of the scene any ray of the sensor can reach (z_top, a conservative bound from per-block maxima of the
height field, ``block_maxima``), in steps that move it at most half a field cell sideways; the first
visit at or below the surface brackets the crossing, which regula falsi then refines (exact on a
plane). A crest of the triangulated surface narrower than half a cell can fall between two visits and
be missed; a ray's error is then at most the crest's rise over half a cell.

What the compiled kernel (``tilted_depth_kernel``, numba) skips never changes a ray's crossing, only
how many samples it costs:
- every ray's first visit is taken in one sweep over the image, a tile at a time (a ray on the field
  at z_top meets it there: nothing is higher), except in the tiles whose first visits all lie above the
  field (a block bound at z_top); when nothing in reach rises above the platform, no sample at all;
- a ray's depth is 0 when it meets the scene more than ``press`` below the highest contact found so
  far, whatever the rest of the image holds, so it stops there (and its depth is never computed); the
  centre ray of every tile (below) is marched first to find a high contact early;
- ``CHUNK`` visits move a ray one block sideways: the block maxima under them bound the field there
  by M, so the visits above M are skipped unsampled, and a ray whose M is below its stopping height
  stops at once (regula falsi between two visits of that run stays at or below M, as f(z) >= z - M
  there). Rays are taken a tile of 16 x 16 pixels (then 8 x 8) at a time, so that one bound over the
  tile's rays skips their empty runs, or stops them all, at once; an 8 x 8 part's rays then march in
  lockstep (``_march_lanes``), a visit for all of them at a time. Visit k is at max(z_top - k step, 0)
  however a ray came to it, so no skip changes the heights a ray visits.
A ray's field coordinates are affine in its pixel and height (``field_map``), so a sample costs two
multiply-adds before the look-up, and a bounding box of many rays is found from the map's coefficients.
``tilted_depth_numpy`` is the fallback: the same rays in array passes, every visit from z_top down to
the floor sampled, no early stop; it agrees with the kernel to ~1e-9 m (tested on random poses over
walled solids, where a skipped visit that mattered would show).
"""

from __future__ import annotations

import numpy as np

from gauntlet.envs.tactile import kernels

REFINEMENTS = 2  # regula falsi steps after the bracket is found
STEP_CELLS = 0.5  # a march step moves the ray at most this many field cells sideways
EXACT_M = 1e-10  # a crossing this close (m) is taken as found
BLOCK = 4  # field cells per side of a block of ``block_maxima``
CHUNK = int(BLOCK / STEP_CELLS)  # march steps that move a ray one block sideways
TILE = 16  # pixels per side of the tiles whose rays skip empty runs together
PART = TILE // 2  # pixels per side of the quarters of a tile whose rays march in lockstep
SPAN_PAD = 1e-9  # field cells a bounding box is widened by (_span)
UNPRESSED = -np.inf  # the coordinate along the axis of a ray known to meet the scene below its z_stop


# -- contact depth -------------------------------------------------------------------------------
def block_maxima(field: np.ndarray, block: int = BLOCK) -> np.ndarray:
    """The highest vertex ``(B, B)`` float32 of each ``block`` x ``block`` run of cells of a square
    height field (both bounding vertices included, so a block bounds every point of its cells)."""
    cells = field.shape[0] - 1
    count = -(-cells // block)
    padded = np.zeros((count * block + 1,) * 2, np.float32)  # heights are >= 0: padding never raises a maximum
    padded[:field.shape[0], :field.shape[1]] = field
    rows = np.maximum(padded[:-1].reshape(count, block, -1).max(axis=1), padded[block::block])
    return np.maximum(rows[:, :-1].reshape(count, count, block).max(axis=2), rows[:, block::block])


def field_map(rotation, object_xy, object_yaw, sensor_xy, scale, half):
    """Field coordinates (in cells, before the clamp) of the point at height z on the ray of pixel (u, v),
    affine in all three: ``(x0, x_u, x_v, x_z, y0, y_u, y_v, y_z)`` with fx = x0 + x_u u + x_v v + x_z z
    (and fy alike), for a sensor at ``rotation`` (sensor to world) over an object at ``object_xy``,
    ``object_yaw`` (heightfield.sample's rule, field cells ``scale`` per metre, centre at ``half``)."""
    gx = rotation[0, 2] / rotation[2, 2]  # sideways travel per unit of height along the ray
    gy = rotation[1, 2] / rotation[2, 2]
    cos_o = np.cos(object_yaw)
    sin_o = np.sin(object_yaw)
    # the ray's world point at height z: x = sensor x + (R00 - R20 gx) u + (R01 - R21 gx) v + gx z, y alike
    x_u, x_v = rotation[0, 0] - rotation[2, 0] * gx, rotation[0, 1] - rotation[2, 1] * gx
    y_u, y_v = rotation[1, 0] - rotation[2, 0] * gy, rotation[1, 1] - rotation[2, 1] * gy
    dx, dy = sensor_xy[0] - object_xy[0], sensor_xy[1] - object_xy[1]
    return ((cos_o * dx + sin_o * dy) * scale + half, (cos_o * x_u + sin_o * y_u) * scale,
            (cos_o * x_v + sin_o * y_v) * scale, (cos_o * gx + sin_o * gy) * scale,
            (cos_o * dy - sin_o * dx) * scale + half, (cos_o * y_u - sin_o * x_u) * scale,
            (cos_o * y_v - sin_o * x_v) * scale, (cos_o * gy - sin_o * gx) * scale)


def _span(origin, per_u, per_v, per_z, u_first, u_last, v_first, v_last, z_low, z_high, limit):
    """The range of one field coordinate (``field_map``) over a box of (u, v, z), clamped to the field
    and widened by ``SPAN_PAD`` cells, so that no rounding puts a ray's own sample outside it."""
    low = (origin + min(per_u * u_first, per_u * u_last) + min(per_v * v_first, per_v * v_last)
           + min(per_z * z_low, per_z * z_high) - SPAN_PAD)
    high = (origin + max(per_u * u_first, per_u * u_last) + max(per_v * v_first, per_v * v_last)
            + max(per_z * z_low, per_z * z_high) + SPAN_PAD)
    return min(max(low, 0.0), limit), min(max(high, 0.0), limit)


def reach_bound(block_max, mapping, limit, u_first, u_last, v_first, v_last, z_low, z_high):
    """The highest point of the field under the rays through the pixels of a rectangle of the image,
    (u_first..u_last) x (v_first..v_last), between heights z_low and z_high (at least 0): the highest
    ``block_maxima`` entry of the blocks their bounding box (``field_map`` ``mapping``) touches."""
    x0, x_u, x_v, x_z, y0, y_u, y_v, y_z = mapping
    low_x, high_x = _span(x0, x_u, x_v, x_z, u_first, u_last, v_first, v_last, z_low, z_high, limit)
    low_y, high_y = _span(y0, y_u, y_v, y_z, u_first, u_last, v_first, v_last, z_low, z_high, limit)
    last_block = block_max.shape[0] - 1
    bound = 0.0
    for block_y in range(int(low_y) // BLOCK, min(int(high_y) // BLOCK, last_block) + 1):
        for block_x in range(int(low_x) // BLOCK, min(int(high_x) // BLOCK, last_block) + 1):
            bound = max(bound, float(block_max[block_y, block_x]))
    return bound


def _cell_point(base, resolution, limit, fx, fy):
    """Where field point (fx, fy) (cells, clamped here to the field) falls on one env's height field
    (heightfield.sample's rule): the flat index of its cell's corner 00, that of the corner its triangle
    takes beside 00 and 11, and the two weights, of (side - 00) and (11 - side). Selects, not a branch:
    the triangle changes from ray to ray unpredictably."""
    fx = min(max(fx, 0.0), limit)
    fy = min(max(fy, 0.0), limit)
    x0 = np.int32(fx)  # fx >= 0: truncation is floor
    y0 = np.int32(fy)
    tx = fx - x0
    ty = fy - y0
    index = np.int32(base) + y0 * np.int32(resolution) + x0
    upper = tx >= ty  # triangle (00, 10, 11), else (00, 11, 01)
    return (index, index + (np.int32(1) if upper else np.int32(resolution)), tx if upper else ty,
            ty if upper else tx)


def _surface(fields_flat, resolution, index, side, weight_side, weight_diagonal):
    """The height of the triangulated field at a ``_cell_point``."""
    h00 = fields_flat[index]
    h_side = fields_flat[side]
    return h00 + (h_side - h00) * weight_side + (fields_flat[index + resolution + 1] - h_side) * weight_diagonal


def _visit(z_top, k, step):
    """The height of a ray's visit k: z_top - k step, at least 0 (computed so, whichever way the ray came
    to it, so that skipping visits never changes one; step is inf for an untilted sensor)."""
    return z_top if k == 0 else max(z_top - k * step, 0.0)


def _skip_runs(block_max, mapping, limit, u_first, u_last, v_first, v_last, z_top, step, k, z_high):
    """Skip the runs of ``CHUNK`` visits, from visit k at z_high, that leave every ray of a rectangle of
    pixels above the field: ``(k, z_high, bound)`` at the first run that may not, with its bound."""
    while True:
        z_end = max(z_top - (k + CHUNK) * step, 0.0)
        bound = reach_bound(block_max, mapping, limit, u_first, u_last, v_first, v_last, z_end, z_high)
        if bound >= z_end:
            return k, z_high, bound
        k += CHUNK
        z_high = z_end


def _lowest_stop(frame, u_first, u_last, v_first, v_last, running_top, press):
    """The lowest z_stop of the rays of a rectangle of pixels (affine in u, v: at a corner)."""
    r20, r21, nz = frame
    lowest = np.inf
    for corner_v in (v_first, v_last):
        for corner_u in (u_first, u_last):
            lowest = min(lowest, r20 * corner_u + r21 * corner_v + (running_top - press) * nz)
    return lowest


def _any_left(first_f, first_i, last_i, first_j, last_j):
    """Whether a ray of a rectangle of pixels is still to march."""
    for i in range(first_i, last_i + 1):
        for j in range(first_j, last_j + 1):
            if first_f[i, j] > 0.0:
                return True
    return False


# rows of the lockstep scratch of ``_march_lanes`` (rays still marching) and of ``_refine_lanes``
# (bracketed rays): a ray's field point at height 0 (``field_map``), its height on the sensing plane
# and flat pixel index; then f at its latest visit and its z_stop, or its bracket; then a visit's
# height, f there and field point
ORIGIN_X, ORIGIN_Y, BZ, PIXEL = 0, 1, 2, 3
LAST_F, Z_STOP = 4, 5
LOW_Z, LOW_F, HIGH_Z, HIGH_F = 4, 5, 6, 7
Z, F, INDEX, SIDE, WEIGHT_SIDE, WEIGHT_DIAGONAL = 8, 9, 10, 11, 12, 13
LANE_ROWS = 14


def _sample_lanes(fields_flat, base, resolution, limit, x_z, y_z, lanes, count):
    """f = z - field height of the first ``count`` rays of ``lanes`` at their heights ``lanes[Z]``, into
    ``lanes[F]``: a loop without look-ups (the field points), then the look-ups."""
    for m in range(count):
        z = lanes[Z, m]
        index, side, weight_side, weight_diagonal = _cell_point(base, resolution, limit, lanes[ORIGIN_X, m] + x_z * z,
                                                                lanes[ORIGIN_Y, m] + y_z * z)
        lanes[INDEX, m] = index
        lanes[SIDE, m] = side
        lanes[WEIGHT_SIDE, m] = weight_side
        lanes[WEIGHT_DIAGONAL, m] = weight_diagonal
    for m in range(count):
        lanes[F, m] = lanes[Z, m] - _surface(fields_flat, resolution, np.int32(lanes[INDEX, m]),
                                             np.int32(lanes[SIDE, m]), lanes[WEIGHT_SIDE, m],
                                             lanes[WEIGHT_DIAGONAL, m])


def _refine_lanes(fields_flat, base, resolution, limit, x_z, y_z, nz, brackets, count, flat_depth, running_top):
    """Regula falsi for the first ``count`` bracketed rays of ``brackets`` together: stores each ray's
    coordinate along the axis, returns the highest contact so far."""
    for _ in range(REFINEMENTS):
        for m in range(count):
            z_low, f_low = brackets[LOW_Z, m], brackets[LOW_F, m]
            brackets[Z, m] = z_low + (brackets[HIGH_Z, m] - z_low) * (-f_low) / (brackets[HIGH_F, m] - f_low)
        _sample_lanes(fields_flat, base, resolution, limit, x_z, y_z, brackets, count)
        kept = 0
        for m in range(count):
            z_mid, f_mid = brackets[Z, m], brackets[F, m]
            if abs(f_mid) < EXACT_M:  # on a plane the first interpolation is the crossing
                s = (z_mid - brackets[BZ, m]) / nz
                flat_depth[np.int64(brackets[PIXEL, m])] = s
                running_top = max(running_top, s)
                continue
            for row in range(HIGH_F + 1):
                brackets[row, kept] = brackets[row, m]
            if f_mid > 0.0:
                brackets[HIGH_Z, kept], brackets[HIGH_F, kept] = z_mid, f_mid
            else:
                brackets[LOW_Z, kept], brackets[LOW_F, kept] = z_mid, f_mid
            kept += 1
        count = kept
    for m in range(count):
        z_low, f_low = brackets[LOW_Z, m], brackets[LOW_F, m]
        hit = z_low + (brackets[HIGH_Z, m] - z_low) * (-f_low) / (brackets[HIGH_F, m] - f_low)
        s = (hit - brackets[BZ, m]) / nz
        flat_depth[np.int64(brackets[PIXEL, m])] = s
        running_top = max(running_top, s)
    return running_top


def _march_lanes(fields_flat, base, resolution, limit, block_max, mapping, frame, u, v, z_top, step, start, press,
                 running_top, flat_depth, first_f, first_i, last_i, first_j, last_j, lanes, brackets):
    """March the rays of a rectangle of pixels still to march, in lockstep from visit ``start`` (which
    leaves them all above the field), and store each one's coordinate along the axis in ``depth`` (left
    at ``UNPRESSED`` for a ray that passes below its z_stop first; ``flat_depth``: the depth map flattened).
    Returns the highest contact so far.

    Each visit is taken for all the rays at once, so that their samples do not wait on one another and
    no branch decides between one ray's samples. ``CHUNK`` visits move the rays one block sideways; the
    ``block_maxima`` under them bound the field there by M, so the visits above M find every ray above
    the field and are skipped unsampled: the same crossings, fewer samples. When M is below the lowest
    z_stop the crossings are too (regula falsi between two visits of the run stays at or below M, as
    f(z) >= z - M there), and the rays' depths are 0 whatever the rest of the image holds. A ray leaves
    the lanes when it brackets its crossing (then refined, by regula falsi, with the others) or passes
    below its z_stop. Visit k is at max(z_top - k step, 0) whichever way a ray reached it."""
    r20, r21, nz = frame
    x0, x_u, x_v, x_z, y0, y_u, y_v, y_z = mapping
    width = first_f.shape[1]
    count = 0
    unsampled = False  # a ray's first visit was not sampled (first_f inf: above the field)
    for i in range(first_i, last_i + 1):
        for j in range(first_j, last_j + 1):
            if first_f[i, j] > 0.0:
                unsampled |= first_f[i, j] == np.inf
                bz = r20 * u[j] + r21 * v[i]
                lanes[ORIGIN_X, count] = x0 + x_u * u[j] + x_v * v[i]
                lanes[ORIGIN_Y, count] = y0 + y_u * u[j] + y_v * v[i]
                lanes[BZ, count] = bz
                lanes[PIXEL, count] = i * width + j
                lanes[LAST_F, count] = first_f[i, j]
                lanes[Z_STOP, count] = bz + (running_top - press) * nz
                count += 1
    lowest = _lowest_stop(frame, u[first_j], u[last_j], v[first_i], v[last_i], running_top, press)
    bracketed = 0
    k = start
    sampled = k == 0 and not unsampled  # lanes[LAST_F] holds f at visit k
    while count > 0:
        z_high = _visit(z_top, k, step)
        end = k + CHUNK
        z_end = max(z_top - end * step, 0.0)
        bound = reach_bound(block_max, mapping, limit, u[first_j], u[last_j], v[first_i], v[last_i], z_end, z_high)
        if bound < z_end:  # every visit of this run leaves every ray above the field
            k = end
            sampled = False
            continue
        if bound < lowest:  # a crossing on this run is at most bound, below every ray's z_stop: depth 0
            break
        above = min(int((z_top - bound) / step), end)  # the last visit above the bound: the ones before it
        while above > k and z_top - above * step <= bound:  # are above the field
            above -= 1
        if above > k:
            k = above
            sampled = False
        if not sampled:
            z_high = _visit(z_top, k, step)
            for m in range(count):
                lanes[Z, m] = z_high
            _sample_lanes(fields_flat, base, resolution, limit, x_z, y_z, lanes, count)
            for m in range(count):
                lanes[LAST_F, m] = lanes[F, m]
            sampled = True
        while k < end and count > 0:
            k += 1
            z_high = _visit(z_top, k - 1, step)
            z_low = _visit(z_top, k, step)
            for m in range(count):
                lanes[Z, m] = z_low
            _sample_lanes(fields_flat, base, resolution, limit, x_z, y_z, lanes, count)
            kept = 0
            for m in range(count):
                f_low = lanes[F, m]
                if f_low <= 0.0:  # bracketed: refined below, with the others
                    for row in range(PIXEL + 1):
                        brackets[row, bracketed] = lanes[row, m]
                    brackets[LOW_Z, bracketed] = z_low
                    brackets[LOW_F, bracketed] = f_low
                    brackets[HIGH_Z, bracketed] = z_high
                    brackets[HIGH_F, bracketed] = lanes[LAST_F, m]
                    bracketed += 1
                elif z_low >= lanes[Z_STOP, m]:  # else the crossing is lower still: depth 0
                    for row in range(Z_STOP + 1):
                        lanes[row, kept] = lanes[row, m]
                    lanes[LAST_F, kept] = f_low
                    kept += 1
            count = kept
    return _refine_lanes(fields_flat, base, resolution, limit, x_z, y_z, nz, brackets, bracketed,
                         flat_depth, running_top)


def _tilted_depth(fields_flat, offsets, rotations, object_xy, object_yaw, sensor_xy, blocks, tops, press_m, u, v,
                  resolution, border, scale, half, spacing, depth_out, contact_out):  # pragma: no cover - compiled
    """Depth maps ``depth_out (n, H, W)`` and contact coordinates ``contact_out (n,)`` of tilted sensors.

    ``rotations`` (n, 3, 3) sensor to world; ``blocks`` (n, B, B) each env's ``block_maxima`` and
    ``tops`` (n,) their highest entries; the rest as in ``kernels.render_batch``. Every ray's first
    sample (at the highest point any ray can meet) is taken in one sweep over the image, a tile at a
    time; the rays it leaves above the field are then marched, the centre ray of every ``TILE`` x ``TILE``
    tile first, so that the highest contact found stops the other rays early.
    """
    n = rotations.shape[0]
    height = v.shape[0]
    width = u.shape[0]
    limit = float(resolution - border)
    first_f = np.empty((height, width))  # each ray's height above the field at z_top (> 0: still to march)
    row_index = np.empty(TILE, np.int32)  # a tile row's _cell_point at z_top
    row_side = np.empty(TILE, np.int32)
    row_weight_side = np.empty(TILE)
    row_weight_diagonal = np.empty(TILE)
    row_s = np.empty(TILE)  # a tile row's coordinate along the axis at z_top
    lanes = np.empty((LANE_ROWS, PART * PART))  # the rays a part marches in lockstep (_march_lanes)
    brackets = np.empty((LANE_ROWS, PART * PART))
    for b in range(n):
        rotation = rotations[b]
        r20, r21, nz = rotation[2, 0], rotation[2, 1], rotation[2, 2]
        frame = (r20, r21, nz)
        gx = rotation[0, 2] / nz  # sideways travel per unit of height along the ray
        gy = rotation[1, 2] / nz
        sideways = np.sqrt(gx * gx + gy * gy)
        step = STEP_CELLS * spacing / sideways if sideways > 1e-9 else np.inf
        mapping = field_map(rotation, object_xy[b], object_yaw[b], sensor_xy[b], scale, half)
        x0, x_u, x_v, x_z, y0, y_u, y_v, y_z = mapping
        base = int(offsets[b])
        press = float(press_m[b])
        # the highest point any ray can meet: the blocks under the rays' reach between the object's top and 0
        block_max = blocks[b]
        z_top = reach_bound(block_max, mapping, limit, u[0], u[width - 1], v[0], v[height - 1], 0.0,
                            max(float(tops[b]), 0.0))
        depth = depth_out[b]
        flat_depth = depth.reshape(-1)
        running_top = -np.inf
        if z_top == 0.0:  # nothing in reach: every ray meets the platform, at z = 0, at its first sample
            # s = (0 - bz) / nz is monotonic along rows and columns, rounded or not: highest at a corner
            for corner_v in (v[0], v[height - 1]):
                for corner_u in (u[0], u[width - 1]):
                    running_top = max(running_top, (z_top - (r20 * corner_u + r21 * corner_v)) / nz)
            gel = running_top - press
            high_j = 0 if r20 >= 0.0 else width - 1  # each row's highest end
            for i in range(height):
                if np.float32((z_top - (r20 * u[high_j] + r21 * v[i])) / nz) - gel <= 0.0:  # the row is all 0
                    for j in range(width):
                        depth[i, j] = 0.0
                    continue
                for j in range(width):
                    depth[i, j] = max(np.float32((z_top - (r20 * u[j] + r21 * v[i])) / nz) - gel, 0.0)
            contact_out[b] = running_top
            continue
        for i in range(height):
            for j in range(width):
                depth[i, j] = UNPRESSED  # a ray shown to meet the scene below its z_stop keeps this
                first_f[i, j] = np.inf  # above the field, not sampled
        # sweep 0: every ray's first sample, except in the tiles whose first visits all lie above the
        # field; a tile row at a time: a loop without look-ups (SIMD code), then the look-ups. A ray on
        # the field at z_top meets it there.
        for tile_i in range(0, height, TILE):
            last_i = min(tile_i + TILE, height) - 1
            for tile_j in range(0, width, TILE):
                last_j = min(tile_j + TILE, width) - 1
                if reach_bound(block_max, mapping, limit, u[tile_j], u[last_j], v[tile_i], v[last_i], z_top,
                               z_top) < z_top:
                    continue
                for i in range(tile_i, last_i + 1):
                    for j in range(tile_j, last_j + 1):
                        lane = j - tile_j
                        row_index[lane], row_side[lane], row_weight_side[lane], row_weight_diagonal[lane] = (
                            _cell_point(base, resolution, limit, x0 + x_u * u[j] + x_v * v[i] + x_z * z_top,
                                        y0 + y_u * u[j] + y_v * v[i] + y_z * z_top))
                        row_s[lane] = (z_top - (r20 * u[j] + r21 * v[i])) / nz
                    for j in range(tile_j, last_j + 1):
                        lane = j - tile_j
                        f = z_top - _surface(fields_flat, resolution, row_index[lane], row_side[lane],
                                             row_weight_side[lane], row_weight_diagonal[lane])
                        first_f[i, j] = f
                        if f <= 0.0:
                            depth[i, j] = row_s[lane]
                            running_top = max(running_top, row_s[lane])
        # sweeps 1 and 2: the rays still to march, a tile of TILE x TILE pixels at a time; first each
        # tile's centre ray alone, so that the highest contact found early stops the other rays, then the
        # tile's quarters (PART x PART). The runs of visits that leave every ray of a tile, or quarter,
        # above the field are skipped for all of them at once; if its rays cannot meet the field above the
        # lowest of their z_stop, their depths are all 0 and none is marched. (One loop for both sweeps:
        # the march is compiled once.)
        for sweep in range(2):
            for tile_i in range(0, height, TILE):
                last_i = min(tile_i + TILE, height) - 1
                centre_i = min(tile_i + TILE // 2, last_i)
                for tile_j in range(0, width, TILE):
                    last_j = min(tile_j + TILE, width) - 1
                    centre_j = min(tile_j + TILE // 2, last_j)
                    if sweep == 0 and first_f[centre_i, centre_j] <= 0.0:  # met at its first visit
                        continue
                    if not _any_left(first_f, tile_i, last_i, tile_j, last_j):
                        continue
                    k, z_high, bound = _skip_runs(block_max, mapping, limit, u[tile_j], u[last_j], v[tile_i],
                                                  v[last_i], z_top, step, 0, z_top)
                    if bound < _lowest_stop(frame, u[tile_j], u[last_j], v[tile_i], v[last_i], running_top, press):
                        continue
                    for part in range(1 if sweep == 0 else 4):
                        if sweep == 0:
                            part_i = part_last_i = centre_i
                            part_j = part_last_j = centre_j
                        else:
                            part_i = tile_i + part // 2 * PART
                            part_j = tile_j + part % 2 * PART
                            if part_i > last_i or part_j > last_j:
                                continue
                            part_last_i = min(part_i + PART - 1, last_i)
                            part_last_j = min(part_j + PART - 1, last_j)
                        part_k, _, part_bound = _skip_runs(block_max, mapping, limit, u[part_j], u[part_last_j],
                                                           v[part_i], v[part_last_i], z_top, step, k, z_high)
                        if part_bound < _lowest_stop(frame, u[part_j], u[part_last_j], v[part_i], v[part_last_i],
                                                     running_top, press):
                            continue
                        running_top = _march_lanes(fields_flat, base, resolution, limit, block_max, mapping, frame,
                                                   u, v, z_top, step, part_k, press, running_top, flat_depth,
                                                   first_f, part_i, part_last_i, part_j, part_last_j, lanes,
                                                   brackets)
                    if sweep == 0:  # its depth is known (or known to be 0)
                        first_f[centre_i, centre_j] = 0.0
        # the gel rests on the highest contact and sinks ``press``: coordinates along the axis -> depths
        gel = running_top - press
        for i in range(height):
            for j in range(width):
                depth[i, j] = max(depth[i, j] - gel, 0.0)
        contact_out[b] = running_top


if kernels.AVAILABLE:
    # the kernel finds the compiled helpers among its globals when numba compiles it
    _inline = kernels.numba.njit(cache=True, inline="always")
    field_map = _inline(field_map)
    _span = _inline(_span)
    reach_bound = _inline(reach_bound)
    _cell_point = _inline(_cell_point)
    _surface = _inline(_surface)
    _visit = _inline(_visit)
    _skip_runs = _inline(_skip_runs)
    _lowest_stop = _inline(_lowest_stop)
    _any_left = _inline(_any_left)
    _sample_lanes = _inline(_sample_lanes)
    _refine_lanes = _inline(_refine_lanes)
    _march_lanes = _inline(_march_lanes)
    tilted_depth_kernel = kernels.numba.njit(cache=True, nogil=True, error_model="numpy")(_tilted_depth)


def tilted_depth_numpy(fields_flat: np.ndarray, offsets: np.ndarray, rotations: np.ndarray, object_xy: np.ndarray,
                       object_yaw: np.ndarray, sensor_xy: np.ndarray, blocks: np.ndarray, tops: np.ndarray,
                       press_m: np.ndarray, u: np.ndarray, v: np.ndarray, resolution: int, border: int, scale: float,
                       half: float, spacing: float) -> tuple[np.ndarray, np.ndarray]:
    """``_tilted_depth`` in array passes (every ray visits the same heights down to the floor, nothing
    skipped, no early stop; the same crossings): ``(depth, contact)``."""
    n = len(rotations)
    uu = np.asarray(u, np.float64)[None, None, :]
    vv = np.asarray(v, np.float64)[None, :, None]
    mappings = [field_map(rotations[b], object_xy[b], object_yaw[b], sensor_xy[b], scale, half) for b in range(n)]
    x0, x_u, x_v, x_z, y0, y_u, y_v, y_z = np.array(mappings).T[:, :, None, None]
    origin_x = x0 + x_u * uu + x_v * vv  # each ray's field point at height 0 (field_map)
    origin_y = y0 + y_u * uu + y_v * vv
    bz = rotations[:, 2, 0, None, None] * uu + rotations[:, 2, 1, None, None] * vv
    nz = rotations[:, 2, 2][:, None, None]
    gx = (rotations[:, 0, 2] / rotations[:, 2, 2])[:, None, None]
    gy = (rotations[:, 1, 2] / rotations[:, 2, 2])[:, None, None]
    sideways = np.sqrt(gx * gx + gy * gy)
    limit = float(resolution - border)
    base = np.asarray(offsets, np.int64).reshape(n, 1, 1)

    def height_at(z: np.ndarray) -> np.ndarray:
        fx = np.clip(origin_x + x_z * z, 0.0, limit)
        fy = np.clip(origin_y + y_z * z, 0.0, limit)
        x_cell, y_cell = fx.astype(np.int64), fy.astype(np.int64)
        tx, ty = fx - x_cell, fy - y_cell
        index = base + y_cell * resolution + x_cell
        upper = tx >= ty
        h00 = fields_flat[index].astype(np.float64)
        h11 = fields_flat[index + resolution + 1].astype(np.float64)
        h_side = fields_flat[np.where(upper, index + 1, index + resolution)].astype(np.float64)
        return h00 + (h_side - h00) * np.where(upper, tx, ty) + (h11 - h_side) * np.where(upper, ty, tx)

    # the kernel's start: the highest point any ray of the sensor can reach, so both visit the same heights
    z_top = np.array([reach_bound(blocks[b], mappings[b], limit, u[0], u[-1], v[0], v[-1], 0.0,
                                  max(float(tops[b]), 0.0)) for b in range(n)]).reshape(n, 1, 1)
    steps = np.where(sideways > 1e-9, STEP_CELLS * spacing / np.maximum(sideways, 1e-300), np.inf)
    count = int(np.ceil(np.max(z_top / steps))) if np.isfinite(steps).any() else 1
    z_high = np.broadcast_to(z_top, bz.shape).copy()
    f_high = z_high - height_at(z_high)
    found = f_high <= 0.0
    z_low, f_low = z_high.copy(), f_high.copy()
    for k in range(1, max(count, 1) + 1):
        z_next = np.maximum(z_top - k * steps, 0.0)  # the kernel's visit k
        f_next = z_next - height_at(z_next)
        crossing = ~found & (f_next <= 0.0)
        z_low = np.where(crossing, z_next, z_low)
        f_low = np.where(crossing, f_next, f_low)
        found |= crossing
        z_high = np.where(found, z_high, z_next)
        f_high = np.where(found, f_high, f_next)
    bracketed = f_high > 0.0  # else the hit is the starting point itself
    for _ in range(REFINEMENTS):
        z_mid = np.where(bracketed, z_low + (z_high - z_low) * (-f_low) / np.where(bracketed, f_high - f_low, 1.0),
                         z_high)
        f_mid = z_mid - height_at(z_mid)
        above = bracketed & (f_mid > 0.0)
        below = bracketed & ~above
        z_high, f_high = np.where(above, z_mid, z_high), np.where(above, f_mid, f_high)
        z_low, f_low = np.where(below, z_mid, z_low), np.where(below, f_mid, f_low)
    hit = np.where(bracketed, z_low + (z_high - z_low) * (-f_low) / np.where(bracketed, f_high - f_low, 1.0), z_high)
    s = (hit - bz) / nz
    top = s.max(axis=(1, 2))
    depth = np.maximum(s - (top - np.asarray(press_m, np.float64))[:, None, None], 0.0)
    return depth.astype(np.float32), top.astype(np.float32)
