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
- every ray's first visit is taken in one sweep over the image, row by row (a ray on the field at z_top
  meets it there: nothing is higher), except in the tiles whose first visits all lie above the field
  (a block bound at z_top); when nothing in reach rises above the platform, no sample at all;
- a ray's depth is 0 when it meets the scene more than ``press`` below the highest contact found so
  far, whatever the rest of the image holds, so it stops there; every 8th pixel of every 8th row is
  marched first to find a high contact early;
- ``CHUNK`` visits move a ray one block sideways: the block maxima under them bound the field there
  by M, so the visits above M are skipped unsampled, and a ray whose M is below its stopping height
  stops at once (regula falsi between two visits of that run stays at or below M, as f(z) >= z - M
  there). Rays are taken a tile of 8 x 8 pixels (then 4 x 4) at a time, so that one bound over the
  tile's rays skips their empty runs, or stops them all, at once; a 4 x 4 part's rays then march in
  lockstep (``_march_lanes``), a visit for all of them at a time. Visit k is at max(z_top - k step, 0)
  however a ray came to it, so no skip changes the heights a ray visits.
``tilted_depth_numpy`` is the fallback: the same rays in array passes, every visit from z_top down to
the floor sampled, no early stop; it agrees with the kernel to ~1e-9 m (tested on random poses over
walled solids, where a skipped visit that mattered would show).
"""

from __future__ import annotations

import numpy as np

from gauntlet.envs.tactile import kernels

REFINEMENTS = 2  # regula falsi steps after the bracket is found
COARSE = 8  # the kernel traces every COARSE-th pixel first (see _tilted_depth)
STEP_CELLS = 0.5  # a march step moves the ray at most this many field cells sideways
EXACT_M = 1e-10  # a crossing this close (m) is taken as found
BLOCK = 4  # field cells per side of a block of ``block_maxima``
CHUNK = int(BLOCK / STEP_CELLS)  # march steps that move a ray one block sideways
TILE = 8  # pixels per side of the tiles whose rays skip empty runs together


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


def _field_xy(scale, half, limit, object_pose, x, y):
    """World point (x, y) in field coordinates of an object at ``object_pose`` (x, y, cos yaw, sin yaw),
    clamped to the field (heightfield.sample's rule)."""
    object_x, object_y, cos_o, sin_o = object_pose
    dx = x - object_x
    dy = y - object_y
    return (min(max((cos_o * dx + sin_o * dy) * scale + half, 0.0), limit),
            min(max((cos_o * dy - sin_o * dx) * scale + half, 0.0), limit))


def _blocks_bound(block_max, low_x, high_x, low_y, high_y):
    """The highest ``block_maxima`` entry over the blocks a box of field coordinates touches (at least 0)."""
    last_block = block_max.shape[0] - 1
    bound = 0.0
    for block_y in range(int(low_y) // BLOCK, min(int(high_y) // BLOCK, last_block) + 1):
        for block_x in range(int(low_x) // BLOCK, min(int(high_x) // BLOCK, last_block) + 1):
            bound = max(bound, float(block_max[block_y, block_x]))
    return bound


def _field_point(base, resolution, limit, scale, half, object_x, object_y, cos_o, sin_o, x, y):
    """Where world point (x, y) falls on one env's height field (heightfield.sample's rule): the flat
    index of its cell's corner 00, that of the corner its triangle takes beside 00 and 11, and the two
    weights, of (side - 00) and (11 - side). Selects, not a branch: the triangle changes from ray to
    ray unpredictably."""
    fx, fy = _field_xy(scale, half, limit, (object_x, object_y, cos_o, sin_o), x, y)
    x0 = np.int32(fx)  # fx >= 0: truncation is floor
    y0 = np.int32(fy)
    tx = fx - x0
    ty = fy - y0
    index = np.int32(base) + y0 * np.int32(resolution) + x0
    upper = tx >= ty  # triangle (00, 10, 11), else (00, 11, 01)
    return (index, index + (np.int32(1) if upper else np.int32(resolution)), tx if upper else ty,
            ty if upper else tx)


def _surface(fields_flat, resolution, index, side, weight_side, weight_diagonal):
    """The height of the triangulated field at a ``_field_point``."""
    h00 = fields_flat[index]
    h_side = fields_flat[side]
    return h00 + (h_side - h00) * weight_side + (fields_flat[index + resolution + 1] - h_side) * weight_diagonal


def _height(fields_flat, base, resolution, limit, scale, half, object_x, object_y, cos_o, sin_o, x, y):
    """The triangulated height field of one env at world point (x, y) (heightfield.sample's rule)."""
    index, side, weight_side, weight_diagonal = _field_point(base, resolution, limit, scale, half, object_x,
                                                             object_y, cos_o, sin_o, x, y)
    return _surface(fields_flat, resolution, index, side, weight_side, weight_diagonal)


def _reach_bound(block_max, frame, object_pose, scale, half, limit, u_first, u_last, v_first, v_last, z_low,
                 z_high):
    """The highest point of the field under the rays through the pixels of a rectangle of the image,
    (u_first..u_last) x (v_first..v_last), between heights z_low and z_high (at least 0): a bound from the
    ``block_maxima`` of the blocks their bounding box touches. ``frame``: (sensor x, sensor y, R00, R01,
    R10, R11, R20, R21, gx, gy); ``object_pose``: (x, y, cos yaw, sin yaw)."""
    sensor_x, sensor_y, r00, r01, r10, r11, r20, r21, gx, gy = frame
    low_x = low_y = np.inf
    high_x = high_y = -np.inf
    for corner_v in (v_first, v_last):
        for corner_u in (u_first, u_last):
            corner_x = sensor_x + r00 * corner_u + r01 * corner_v
            corner_y = sensor_y + r10 * corner_u + r11 * corner_v
            corner_z = r20 * corner_u + r21 * corner_v
            for z in (z_low, z_high):
                fx, fy = _field_xy(scale, half, limit, object_pose, corner_x + (z - corner_z) * gx,
                                   corner_y + (z - corner_z) * gy)
                low_x, high_x = min(low_x, fx), max(high_x, fx)
                low_y, high_y = min(low_y, fy), max(high_y, fy)
    return _blocks_bound(block_max, low_x, high_x, low_y, high_y)


def _chunk_bound(block_max, last_block, scale, half, limit, object_x, object_y, cos_o, sin_o, x_high, y_high, x_low,
                 y_low):
    """The highest point of the field under the segment from world point (x_high, y_high) to (x_low, y_low),
    a bound from the ``block_maxima`` of the blocks the segment's bounding box touches."""
    object_pose = (object_x, object_y, cos_o, sin_o)
    fx_high, fy_high = _field_xy(scale, half, limit, object_pose, x_high, y_high)
    fx_low, fy_low = _field_xy(scale, half, limit, object_pose, x_low, y_low)
    low_x, high_x = min(fx_high, fx_low), max(fx_high, fx_low)
    low_y, high_y = min(fy_high, fy_low), max(fy_high, fy_low)
    first_x = int(low_x) // BLOCK
    first_y = int(low_y) // BLOCK
    last_x = min(int(high_x) // BLOCK, last_block)
    last_y = min(int(high_y) // BLOCK, last_block)
    if last_x <= first_x + 1 and last_y <= first_y + 1:  # a run of CHUNK visits: at most 2 x 2 blocks
        return float(max(max(block_max[first_y, first_x], block_max[first_y, last_x]),
                         max(block_max[last_y, first_x], block_max[last_y, last_x])))
    return _blocks_bound(block_max, low_x, high_x, low_y, high_y)


def _visit(z_top, k, step):
    """The height of a ray's visit k: z_top - k step, at least 0 (computed so, whichever way the ray came
    to it, so that skipping visits never changes one; step is inf for an untilted sensor)."""
    return z_top if k == 0 else max(z_top - k * step, 0.0)


def _march(fields_flat, base, resolution, limit, scale, half, object_x, object_y, cos_o, sin_o, block_max, bx, by,
           bz, gx, gy, z_top, f_top, step, start, z_stop):
    """The height (m) where the ray through (bx, by, bz) with sideways travel (gx, gy) per unit height
    first meets the scene coming down from ``z_top`` (where it is ``f_top`` > 0 above the field); below
    ``z_stop`` if it passes below ``z_stop`` first. ``start``: the first visit that may meet the field
    (the ones before it are known to be above it).

    The ray visits the heights z_k = z_top - k step (k = 0, 1, ...; at least 0) until the first one at
    or below the surface, then refines the crossing by regula falsi. ``CHUNK`` visits move the ray one
    block sideways; the ``block_maxima`` under them bound the field there by M, so every visit above M
    finds the ray above the field and is skipped unvisited: the same crossing, fewer samples. When M is
    below ``z_stop`` the crossing is too (regula falsi between two visits on this run stays at or below
    M, as f(z) >= z - M there), and the ray's depth is 0 whatever the rest of the image holds."""
    last_block = block_max.shape[0] - 1
    k = start
    z_high = _visit(z_top, k, step)
    f_high = f_top
    sampled = k == 0 and f_top < np.inf  # f_high is the field's value at z_high (inf: above it, not sampled)
    while True:
        if z_high < z_stop:  # the crossing is lower still: depth 0
            return z_high
        end = k + CHUNK
        z_end = max(z_top - end * step, 0.0)
        bound = _chunk_bound(block_max, last_block, scale, half, limit, object_x, object_y, cos_o, sin_o,
                             bx + (z_high - bz) * gx, by + (z_high - bz) * gy, bx + (z_end - bz) * gx,
                             by + (z_end - bz) * gy)
        if bound < z_end:  # every visit of this run is above the field
            k = end
            z_high = z_end
            sampled = False
            continue
        if bound < z_stop:  # a crossing on this run is at most bound, one below it lower still
            return bound
        # the last visit above the bound: the ones before it are above the field
        above = min(int((z_top - bound) / step), end)
        while above > k and z_top - above * step <= bound:
            above -= 1
        if above > k:
            k = above
            z_high = z_top - above * step
            sampled = False
        if not sampled:
            f_high = z_high - _height(fields_flat, base, resolution, limit, scale, half, object_x, object_y, cos_o,
                                      sin_o, bx + (z_high - bz) * gx, by + (z_high - bz) * gy)
        while k < end:
            k += 1
            z_low = _visit(z_top, k, step)
            f_low = z_low - _height(fields_flat, base, resolution, limit, scale, half, object_x, object_y, cos_o,
                                    sin_o, bx + (z_low - bz) * gx, by + (z_low - bz) * gy)
            if f_low <= 0.0:
                for _ in range(REFINEMENTS):  # regula falsi on [z_low, z_high]
                    z_mid = z_low + (z_high - z_low) * (-f_low) / (f_high - f_low)
                    f_mid = z_mid - _height(fields_flat, base, resolution, limit, scale, half, object_x, object_y,
                                            cos_o, sin_o, bx + (z_mid - bz) * gx, by + (z_mid - bz) * gy)
                    if abs(f_mid) < EXACT_M:  # on a plane the first interpolation is the crossing
                        return z_mid
                    if f_mid > 0.0:
                        z_high, f_high = z_mid, f_mid
                    else:
                        z_low, f_low = z_mid, f_mid
                return z_low + (z_high - z_low) * (-f_low) / (f_high - f_low)
            z_high, f_high = z_low, f_low
            if z_high < z_stop:
                return z_high
        sampled = True


def _skip_runs(block_max, frame, object_pose, scale, half, limit, u_first, u_last, v_first, v_last, z_top, step,
               k, z_high):
    """Skip the runs of ``CHUNK`` visits, from visit k at z_high, that leave every ray of a rectangle of
    pixels above the field: ``(k, z_high, bound)`` at the first run that may not, with its bound."""
    while True:
        z_end = max(z_top - (k + CHUNK) * step, 0.0)
        bound = _reach_bound(block_max, frame, object_pose, scale, half, limit, u_first, u_last, v_first, v_last,
                             z_end, z_high)
        if bound >= z_end:
            return k, z_high, bound
        k += CHUNK
        z_high = z_end


def _lowest_stop(frame, u_first, u_last, v_first, v_last, running_top, press, nz):
    """The lowest z_stop of the rays of a rectangle of pixels (affine in u, v: at a corner)."""
    r20, r21 = frame[6], frame[7]
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


def _cull(depth, first_f, frame, u, v, nz, bound, first_i, last_i, first_j, last_j):
    """The rays of a rectangle of pixels that cannot meet the field above ``bound``, below their z_stop:
    depth 0 (as in ``_march``, their coordinate along the axis is taken at ``bound``)."""
    r20, r21 = frame[6], frame[7]
    for i in range(first_i, last_i + 1):
        for j in range(first_j, last_j + 1):
            if first_f[i, j] > 0.0:
                depth[i, j] = (bound - (r20 * u[j] + r21 * v[i])) / nz


def _march_pixel(fields_flat, base, resolution, limit, scale, half, object_pose, block_max, frame, pixel_u, pixel_v,
                 nz, z_top, f_top, step, start, press, running_top, depth, i, j):
    """March the ray of pixel (i, j) (``_march``), store its coordinate along the axis in ``depth[i, j]``,
    and return the highest contact found so far."""
    sensor_x, sensor_y, r00, r01, r10, r11, r20, r21, gx, gy = frame
    object_x, object_y, cos_o, sin_o = object_pose
    bx = sensor_x + r00 * pixel_u + r01 * pixel_v
    by = sensor_y + r10 * pixel_u + r11 * pixel_v
    bz = r20 * pixel_u + r21 * pixel_v
    hit = _march(fields_flat, base, resolution, limit, scale, half, object_x, object_y, cos_o, sin_o, block_max, bx,
                 by, bz, gx, gy, z_top, f_top, step, start, bz + (running_top - press) * nz)
    s = (hit - bz) / nz
    depth[i, j] = s
    return max(running_top, s)


# rows of the lockstep scratch of ``_march_lanes`` (rays still marching) and of ``_refine_lanes``
# (bracketed rays): a ray's point on the sensing plane (bx, by, bz) and flat pixel index; then f at its
# latest visit and its z_stop, or its bracket; then a visit's height, f there and field point
BX, BY, BZ, PIXEL = 0, 1, 2, 3
LAST_F, Z_STOP = 4, 5
LOW_Z, LOW_F, HIGH_Z, HIGH_F = 4, 5, 6, 7
Z, F, INDEX, SIDE, WEIGHT_SIDE, WEIGHT_DIAGONAL = 8, 9, 10, 11, 12, 13
LANE_ROWS = 14


def _sample_lanes(fields_flat, base, resolution, limit, scale, half, object_pose, gx, gy, lanes, count):
    """f = z - field height of the first ``count`` rays of ``lanes`` at their heights ``lanes[Z]``, into
    ``lanes[F]``: a loop without look-ups (the field points), then the look-ups."""
    object_x, object_y, cos_o, sin_o = object_pose
    for m in range(count):
        z = lanes[Z, m]
        index, side, weight_side, weight_diagonal = _field_point(base, resolution, limit, scale, half, object_x,
                                                                 object_y, cos_o, sin_o,
                                                                 lanes[BX, m] + (z - lanes[BZ, m]) * gx,
                                                                 lanes[BY, m] + (z - lanes[BZ, m]) * gy)
        lanes[INDEX, m] = index
        lanes[SIDE, m] = side
        lanes[WEIGHT_SIDE, m] = weight_side
        lanes[WEIGHT_DIAGONAL, m] = weight_diagonal
    for m in range(count):
        lanes[F, m] = lanes[Z, m] - _surface(fields_flat, resolution, np.int32(lanes[INDEX, m]),
                                             np.int32(lanes[SIDE, m]), lanes[WEIGHT_SIDE, m],
                                             lanes[WEIGHT_DIAGONAL, m])


def _refine_lanes(fields_flat, base, resolution, limit, scale, half, object_pose, gx, gy, nz, brackets, count,
                  flat_depth, running_top):
    """``_march``'s regula falsi for the first ``count`` bracketed rays of ``brackets`` together: stores each
    ray's coordinate along the axis, returns the highest contact so far."""
    for _ in range(REFINEMENTS):
        for m in range(count):
            z_low, f_low = brackets[LOW_Z, m], brackets[LOW_F, m]
            brackets[Z, m] = z_low + (brackets[HIGH_Z, m] - z_low) * (-f_low) / (brackets[HIGH_F, m] - f_low)
        _sample_lanes(fields_flat, base, resolution, limit, scale, half, object_pose, gx, gy, brackets, count)
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


def _march_lanes(fields_flat, base, resolution, limit, scale, half, object_pose, block_max, frame, u, v, nz, z_top,
                 step, start, press, running_top, depth, first_f, first_i, last_i, first_j, last_j, lanes, brackets):
    """``_march`` for the rays of a rectangle of pixels still to march, in lockstep from visit ``start``
    (which leaves them all above the field): each visit is taken for all of them at once, so that their
    samples do not wait on one another and no branch decides between one ray's samples. The runs of
    visits under low blocks are skipped by one bound over the rectangle's rays; a ray leaves the lanes
    when it brackets its crossing (then refined as in ``_march``) or passes below its z_stop (depth 0).
    Visit k is at max(z_top - k step, 0) whichever way a ray reached it, so the crossings are those of
    ``_march``. Returns the highest contact found so far."""
    sensor_x, sensor_y, r00, r01, r10, r11, r20, r21, gx, gy = frame
    width = depth.shape[1]
    flat_depth = depth.reshape(-1)
    count = 0
    unsampled = False  # a ray's first visit was not sampled (first_f inf: above the field)
    for i in range(first_i, last_i + 1):
        for j in range(first_j, last_j + 1):
            if first_f[i, j] > 0.0:
                unsampled |= first_f[i, j] == np.inf
                bz = r20 * u[j] + r21 * v[i]
                lanes[BX, count] = sensor_x + r00 * u[j] + r01 * v[i]
                lanes[BY, count] = sensor_y + r10 * u[j] + r11 * v[i]
                lanes[BZ, count] = bz
                lanes[PIXEL, count] = i * width + j
                lanes[LAST_F, count] = first_f[i, j]
                lanes[Z_STOP, count] = bz + (running_top - press) * nz
                count += 1
    lowest = _lowest_stop(frame, u[first_j], u[last_j], v[first_i], v[last_i], running_top, press, nz)
    bracketed = 0
    k = start
    sampled = k == 0 and not unsampled  # lanes[LAST_F] holds f at visit k
    while count > 0:
        z_high = _visit(z_top, k, step)
        end = k + CHUNK
        z_end = max(z_top - end * step, 0.0)
        bound = _reach_bound(block_max, frame, object_pose, scale, half, limit, u[first_j], u[last_j], v[first_i],
                             v[last_i], z_end, z_high)
        if bound < z_end:  # every visit of this run leaves every ray above the field
            k = end
            sampled = False
            continue
        if bound < lowest:  # a crossing on this run is at most bound, below every ray's z_stop: depth 0
            for m in range(count):
                flat_depth[np.int64(lanes[PIXEL, m])] = (bound - lanes[BZ, m]) / nz
            break
        above = min(int((z_top - bound) / step), end)  # the last visit above the bound (as in _march)
        while above > k and z_top - above * step <= bound:
            above -= 1
        if above > k:
            k = above
            sampled = False
        if not sampled:
            z_high = _visit(z_top, k, step)
            for m in range(count):
                lanes[Z, m] = z_high
            _sample_lanes(fields_flat, base, resolution, limit, scale, half, object_pose, gx, gy, lanes, count)
            for m in range(count):
                lanes[LAST_F, m] = lanes[F, m]
            sampled = True
        while k < end and count > 0:
            k += 1
            z_high = _visit(z_top, k - 1, step)
            z_low = _visit(z_top, k, step)
            for m in range(count):
                lanes[Z, m] = z_low
            _sample_lanes(fields_flat, base, resolution, limit, scale, half, object_pose, gx, gy, lanes, count)
            kept = 0
            for m in range(count):
                f_low = lanes[F, m]
                if f_low <= 0.0:  # bracketed: refined below, with the others
                    brackets[BX, bracketed] = lanes[BX, m]
                    brackets[BY, bracketed] = lanes[BY, m]
                    brackets[BZ, bracketed] = lanes[BZ, m]
                    brackets[PIXEL, bracketed] = lanes[PIXEL, m]
                    brackets[LOW_Z, bracketed] = z_low
                    brackets[LOW_F, bracketed] = f_low
                    brackets[HIGH_Z, bracketed] = z_high
                    brackets[HIGH_F, bracketed] = lanes[LAST_F, m]
                    bracketed += 1
                elif z_low < lanes[Z_STOP, m]:  # the crossing is lower still: depth 0
                    flat_depth[np.int64(lanes[PIXEL, m])] = (z_low - lanes[BZ, m]) / nz
                else:
                    for row in range(Z_STOP + 1):
                        lanes[row, kept] = lanes[row, m]
                    lanes[LAST_F, kept] = f_low
                    kept += 1
            count = kept
    return _refine_lanes(fields_flat, base, resolution, limit, scale, half, object_pose, gx, gy, nz, brackets,
                         bracketed, flat_depth, running_top)


def _tilted_depth(fields_flat, offsets, rotations, object_xy, object_yaw, sensor_xy, blocks, press_m, u, v,
                  resolution, border, scale, half, spacing, depth_out, contact_out):  # pragma: no cover - compiled
    """Depth maps ``depth_out (n, H, W)`` and contact coordinates ``contact_out (n,)`` of tilted sensors.

    ``rotations`` (n, 3, 3) sensor to world; ``blocks`` (n, B, B) each env's ``block_maxima``;
    the rest as in ``kernels.render_batch``. Every ray's first sample (at the highest point any ray can
    meet) is taken in one sweep over the image, row by row; the rays it leaves above the field are then
    marched, every ``COARSE``-th pixel of every ``COARSE``-th row first, so that the highest contact found
    stops the other rays early.
    """
    n = rotations.shape[0]
    height = v.shape[0]
    width = u.shape[0]
    limit = float(resolution - border)
    first_f = np.empty((height, width))  # each ray's height above the field at z_top (> 0: still to march)
    row_index = np.empty(width, np.int32)  # a row's _field_point at z_top
    row_side = np.empty(width, np.int32)
    row_weight_side = np.empty(width)
    row_weight_diagonal = np.empty(width)
    row_s = np.empty(width)  # a row's coordinate along the axis at z_top
    tiles_across = -(-width // TILE)
    high_tile = np.empty(tiles_across, np.bool_)  # a band's tiles where a first visit may meet the field
    lanes = np.empty((LANE_ROWS, TILE * TILE))  # the rays a part marches in lockstep (_march_lanes)
    brackets = np.empty((LANE_ROWS, TILE * TILE))
    for b in range(n):
        r = rotations[b]
        r00, r01, r10, r11, r20, r21 = r[0, 0], r[0, 1], r[1, 0], r[1, 1], r[2, 0], r[2, 1]
        nz = r[2, 2]
        gx = r[0, 2] / nz  # sideways travel per unit of height along the ray
        gy = r[1, 2] / nz
        sideways = np.sqrt(gx * gx + gy * gy)
        step = STEP_CELLS * spacing / sideways if sideways > 1e-9 else np.inf
        object_x = object_xy[b, 0]
        object_y = object_xy[b, 1]
        sensor_x = sensor_xy[b, 0]
        sensor_y = sensor_xy[b, 1]
        cos_o = np.cos(object_yaw[b])
        sin_o = np.sin(object_yaw[b])
        base = int(offsets[b])
        press = float(press_m[b])
        # the highest point any ray can meet: the blocks under the rays' reach between the object's top and 0
        block_max = blocks[b]
        frame = (sensor_x, sensor_y, r00, r01, r10, r11, r20, r21, gx, gy)
        object_pose = (object_x, object_y, cos_o, sin_o)
        z_top = _reach_bound(block_max, frame, object_pose, scale, half, limit, u[0], u[width - 1], v[0],
                             v[height - 1], 0.0, max(float(block_max.max()), 0.0))
        depth = depth_out[b]
        running_top = -np.inf
        if z_top == 0.0:  # nothing in reach: every ray meets the platform, at z = 0, at its first sample
            # s = (0 - bz) / nz is monotonic along rows and columns, rounded or not: highest at a corner
            for corner_v in (v[0], v[height - 1]):
                for corner_u in (u[0], u[width - 1]):
                    running_top = max(running_top, (z_top - (r20 * corner_u + r21 * corner_v)) / nz)
            gel = running_top - press
            for i in range(height):
                for j in range(width):
                    depth[i, j] = max(np.float32((z_top - (r20 * u[j] + r21 * v[i])) / nz) - gel, 0.0)
            contact_out[b] = running_top
            continue
        # sweep 0: every ray's first sample, a row at a time: a loop without look-ups (which the
        # compiler turns into SIMD code), then the look-ups. A ray on the field at z_top meets it there.
        for i in range(height):
            if i % TILE == 0:  # the tiles of this band whose first visits all lie above the field
                last_i = min(i + TILE, height) - 1
                for tile in range(tiles_across):
                    tile_j = tile * TILE
                    last_j = min(tile_j + TILE, width) - 1
                    high_tile[tile] = _reach_bound(block_max, frame, object_pose, scale, half, limit, u[tile_j],
                                                   u[last_j], v[i], v[last_i], z_top, z_top) >= z_top
            for j in range(width):
                bx = sensor_x + r00 * u[j] + r01 * v[i]
                by = sensor_y + r10 * u[j] + r11 * v[i]
                bz = r20 * u[j] + r21 * v[i]
                row_index[j], row_side[j], row_weight_side[j], row_weight_diagonal[j] = _field_point(
                    base, resolution, limit, scale, half, object_x, object_y, cos_o, sin_o,
                    bx + (z_top - bz) * gx, by + (z_top - bz) * gy)
                row_s[j] = (z_top - bz) / nz
            for j in range(width):
                depth[i, j] = row_s[j]
                if not high_tile[j // TILE]:  # above the field, not sampled
                    first_f[i, j] = np.inf
                    continue
                f = z_top - _surface(fields_flat, resolution, row_index[j], row_side[j], row_weight_side[j],
                                     row_weight_diagonal[j])
                first_f[i, j] = f
                if f <= 0.0:
                    running_top = max(running_top, row_s[j])
        # sweep 1: march the coarse grid's rays, so that the highest contact found stops the others early
        for i in range(0, height, COARSE):
            for j in range(0, width, COARSE):
                if first_f[i, j] > 0.0:
                    running_top = _march_pixel(fields_flat, base, resolution, limit, scale, half, object_pose,
                                               block_max, frame, u[j], v[i], nz, z_top, first_f[i, j], step, 0,
                                               press, running_top, depth, i, j)
                    first_f[i, j] = 0.0
        # sweep 2: the other rays, a tile of TILE x TILE pixels at a time, then its quarters. The runs of
        # visits that leave every ray of a tile above the field are skipped for all of them at once; if
        # its rays cannot meet the field above the lowest of their z_stop, their depths are all 0.
        half_tile = TILE // 2
        for tile_i in range(0, height, TILE):
            last_i = min(tile_i + TILE, height) - 1
            for tile_j in range(0, width, TILE):
                last_j = min(tile_j + TILE, width) - 1
                if not _any_left(first_f, tile_i, last_i, tile_j, last_j):
                    continue
                k, z_high, bound = _skip_runs(block_max, frame, object_pose, scale, half, limit, u[tile_j],
                                              u[last_j], v[tile_i], v[last_i], z_top, step, 0, z_top)
                if bound < _lowest_stop(frame, u[tile_j], u[last_j], v[tile_i], v[last_i], running_top, press, nz):
                    _cull(depth, first_f, frame, u, v, nz, bound, tile_i, last_i, tile_j, last_j)
                    continue
                for part_i in range(tile_i, last_i + 1, half_tile):
                    part_last_i = min(part_i + half_tile - 1, last_i)
                    for part_j in range(tile_j, last_j + 1, half_tile):
                        part_last_j = min(part_j + half_tile - 1, last_j)
                        part_k, _, part_bound = _skip_runs(block_max, frame, object_pose, scale, half, limit,
                                                           u[part_j], u[part_last_j], v[part_i], v[part_last_i],
                                                           z_top, step, k, z_high)
                        if part_bound < _lowest_stop(frame, u[part_j], u[part_last_j], v[part_i], v[part_last_i],
                                                     running_top, press, nz):
                            _cull(depth, first_f, frame, u, v, nz, part_bound, part_i, part_last_i, part_j,
                                  part_last_j)
                            continue
                        running_top = _march_lanes(fields_flat, base, resolution, limit, scale, half,
                                                   object_pose, block_max, frame, u, v, nz, z_top, step, part_k,
                                                   press, running_top, depth, first_f, part_i, part_last_i, part_j,
                                                   part_last_j, lanes, brackets)
        _settle(depth, running_top, press)
        contact_out[b] = running_top


def _settle(depth, running_top, press):
    """The gel rests on the highest contact and sinks ``press``: coordinates along the axis -> depths."""
    gel = running_top - press
    for i in range(depth.shape[0]):
        for j in range(depth.shape[1]):
            depth[i, j] = max(depth[i, j] - gel, 0.0)



if kernels.AVAILABLE:
    # the kernel finds the compiled helpers among its globals when numba compiles it
    _field_xy = kernels.numba.njit(cache=True, inline="always")(_field_xy)
    _blocks_bound = kernels.numba.njit(cache=True, inline="always")(_blocks_bound)
    _field_point = kernels.numba.njit(cache=True, inline="always")(_field_point)
    _surface = kernels.numba.njit(cache=True, inline="always")(_surface)
    _height = kernels.numba.njit(cache=True, inline="always")(_height)
    _chunk_bound = kernels.numba.njit(cache=True, inline="always")(_chunk_bound)
    _reach_bound = kernels.numba.njit(cache=True, inline="always")(_reach_bound)
    _visit = kernels.numba.njit(cache=True, inline="always")(_visit)
    _march = kernels.numba.njit(cache=True, inline="always")(_march)
    _march_pixel = kernels.numba.njit(cache=True, inline="always")(_march_pixel)
    _settle = kernels.numba.njit(cache=True, inline="always")(_settle)
    _skip_runs = kernels.numba.njit(cache=True, inline="always")(_skip_runs)
    _lowest_stop = kernels.numba.njit(cache=True, inline="always")(_lowest_stop)
    _cull = kernels.numba.njit(cache=True, inline="always")(_cull)
    _any_left = kernels.numba.njit(cache=True, inline="always")(_any_left)
    _sample_lanes = kernels.numba.njit(cache=True, inline="always")(_sample_lanes)
    _refine_lanes = kernels.numba.njit(cache=True, inline="always")(_refine_lanes)
    _march_lanes = kernels.numba.njit(cache=True, inline="always")(_march_lanes)
    tilted_depth_kernel = kernels.numba.njit(cache=True, nogil=True, error_model="numpy")(_tilted_depth)


def tilted_depth_numpy(fields_flat: np.ndarray, offsets: np.ndarray, rotations: np.ndarray, object_xy: np.ndarray,
                       object_yaw: np.ndarray, sensor_xy: np.ndarray, blocks: np.ndarray, press_m: np.ndarray,
                       u: np.ndarray, v: np.ndarray, resolution: int, border: int, scale: float, half: float,
                       spacing: float) -> tuple[np.ndarray, np.ndarray]:
    """``_tilted_depth`` in array passes (every ray visits the same heights down to the floor, nothing
    skipped, no early stop; the same crossings): ``(depth, contact)``."""
    n = len(rotations)
    uu = np.asarray(u, np.float64)[None, None, :]
    vv = np.asarray(v, np.float64)[None, :, None]
    r = rotations[:, :, :, None, None]
    bx = sensor_xy[:, 0, None, None] + r[:, 0, 0] * uu + r[:, 0, 1] * vv
    by = sensor_xy[:, 1, None, None] + r[:, 1, 0] * uu + r[:, 1, 1] * vv
    bz = r[:, 2, 0] * uu + r[:, 2, 1] * vv
    nz = rotations[:, 2, 2][:, None, None]
    gx = (rotations[:, 0, 2] / rotations[:, 2, 2])[:, None, None]
    gy = (rotations[:, 1, 2] / rotations[:, 2, 2])[:, None, None]
    sideways = np.sqrt(gx ** 2 + gy ** 2)
    cos_o, sin_o = np.cos(object_yaw)[:, None, None], np.sin(object_yaw)[:, None, None]
    limit = float(resolution - border)
    base = np.asarray(offsets, np.int64).reshape(n, 1, 1)

    def height_at(z: np.ndarray) -> np.ndarray:
        dx = bx + (z - bz) * gx - object_xy[:, 0, None, None]
        dy = by + (z - bz) * gy - object_xy[:, 1, None, None]
        fx = np.clip((cos_o * dx + sin_o * dy) * scale + half, 0.0, limit)
        fy = np.clip((cos_o * dy - sin_o * dx) * scale + half, 0.0, limit)
        x0, y0 = fx.astype(np.int64), fy.astype(np.int64)
        tx, ty = fx - x0, fy - y0
        index = base + y0 * resolution + x0
        upper = tx >= ty
        h00 = fields_flat[index].astype(np.float64)
        h11 = fields_flat[index + resolution + 1].astype(np.float64)
        h_side = fields_flat[np.where(upper, index + 1, index + resolution)].astype(np.float64)
        return h00 + (h_side - h00) * np.where(upper, tx, ty) + (h11 - h_side) * np.where(upper, ty, tx)

    # the kernel's start: the highest point any ray of the sensor can reach, so both visit the same heights
    z_top = np.array([_reach_bound(blocks[b], (sensor_xy[b, 0], sensor_xy[b, 1], *rotations[b, :, :2].reshape(-1),
                                               gx[b, 0, 0], gy[b, 0, 0]),
                                   (object_xy[b, 0], object_xy[b, 1], cos_o[b, 0, 0], sin_o[b, 0, 0]), scale, half,
                                   limit, u[0], u[-1], v[0], v[-1], 0.0, max(float(blocks[b].max()), 0.0))
                      for b in range(n)]).reshape(n, 1, 1)
    steps = np.where(sideways > 1e-9, STEP_CELLS * spacing / np.maximum(sideways, 1e-300), np.inf)
    count = int(np.ceil(np.max(z_top / steps))) if np.isfinite(steps).any() else 1
    z_high = np.broadcast_to(z_top, bx.shape).copy()
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
