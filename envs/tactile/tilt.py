"""A tilted sensor: its orientation (6-D representation, motion, tilt limit) and its contact depth.

**Orientation.** ``R`` (3 x 3, sensor frame to world) has the sensor's x, y axes along its image
(x across the 18.88 mm side) and its z axis along the sensor's axis, pointing away from the scene;
``R = I`` is the untilted sensor pressing straight down. The tilt is the angle between the sensor's z
axis and the world's, at most ``MAX_TILT_RAD`` (45 degrees, the reference's ``max_tilt_angle``).
Observations carry the reference's 6-D representation (Zhou et al., 2019, with the second and third
columns of ``R`` instead of the first and second, as the reference does): ``(R[:, 1], R[:, 2])``.
A move turns the sensor by a rotation vector in the unit ball times the longest turn of one transfer,
applied in the world frame (``R' = Rot(w) R``), then projects the z axis back into the tilt cone
(the reference's projection: its x, y part into the disc of radius sin(45 degrees)).

**Contact depth.** The sensing surface is a plane through the pixel grid ``(u, v, 0)`` of the sensor
frame; the gel presses along ``-z``. Pixel (u, v) meets the scene along the ray
``b + s n`` (``b`` = the pixel on the plane through the sensor's point on the platform, ``n`` = the
sensor's z axis): ``s(u, v)`` is the coordinate along the axis of the first point of the scene the ray
meets coming down from above (the highest ``s`` with the ray point on or below the triangulated height
field, the platform at z = 0 being part of it). The gel rests on the highest such point and sinks
``press`` further along its axis, so depth = max(s - (max s - press), 0): the untilted rule, with the
height replaced by the height along the tilted axis. An untilted sensor gives the height field itself.

Each ray is marched down from the highest point of the scene any ray of the sensor can reach (a
conservative bound from per-block maxima of the height field, ``block_maxima``), in height steps that
move it at most half a field cell sideways; the first step that ends below the surface brackets the
crossing, which regula falsi then refines (exact on a plane). A crest of the triangulated surface
narrower than half a cell can fall between two steps and be missed; a ray's error is then at most the
crest's rise over half a cell. Every 8th pixel of every 8th row is traced first; then rays that
fall more than ``press`` below the highest contact found so far stop early, as their depth is 0
whatever the rest of the image holds. ``tilted_depth_kernel`` is the compiled kernel (numba);
``tilted_depth_numpy`` the same rays in array passes (the fallback: no early stop, marched from the
object's top; it agrees with the kernel to ~1e-9 m on the tests' scenes).
"""

from __future__ import annotations

import numpy as np

from gauntlet.envs.tactile import kernels

MAX_TILT_RAD = np.pi / 4
REFINEMENTS = 2  # regula falsi steps after the bracket is found
COARSE = 8  # the kernel traces every COARSE-th pixel first (see _tilted_depth)
STEP_CELLS = 0.5  # a march step moves the ray at most this many field cells sideways
EXACT_M = 1e-10  # a crossing this close (m) is taken as found
BLOCK = 4  # field cells per side of a block of ``block_maxima``


# -- orientation ---------------------------------------------------------------------------------
def rotation_to_feature(rotation: np.ndarray, dtype: type = np.float32) -> np.ndarray:
    """The 6-D representation ``(..., 6)`` of rotations ``(..., 3, 3)``: (R[:, 1], R[:, 2])."""
    return np.concatenate([rotation[..., :, 1], rotation[..., :, 2]], axis=-1).astype(dtype)


def feature_to_rotation(feature: np.ndarray) -> np.ndarray:
    """Rotations ``(..., 3, 3)`` from 6-D features: z = normalised second half, y = first half made
    orthogonal to z and normalised, x = y x z (Gram-Schmidt, as the reference)."""
    feature = np.asarray(feature, np.float64)
    z = feature[..., 3:] / np.linalg.norm(feature[..., 3:], axis=-1, keepdims=True)
    y = feature[..., :3] - (feature[..., :3] * z).sum(-1, keepdims=True) * z
    y /= np.linalg.norm(y, axis=-1, keepdims=True)
    return np.stack([np.cross(y, z), y, z], axis=-1)


def rotation_from_vector(rotation_vector: np.ndarray) -> np.ndarray:
    """Rotations ``(n, 3, 3)`` of rotation vectors ``(n, 3)`` (Rodrigues' formula)."""
    angle = np.linalg.norm(rotation_vector, axis=-1)
    axis = rotation_vector / np.maximum(angle, 1e-12)[:, None]
    k = np.zeros((len(angle), 3, 3))
    k[:, 0, 1], k[:, 0, 2], k[:, 1, 2] = -axis[:, 2], axis[:, 1], -axis[:, 0]
    k[:, 1, 0], k[:, 2, 0], k[:, 2, 1] = axis[:, 2], -axis[:, 1], axis[:, 0]
    sin, cos = np.sin(angle)[:, None, None], np.cos(angle)[:, None, None]
    return np.eye(3) + sin * k + (1 - cos) * (k @ k)


def rotation_zyz(first_z: float, y: float, second_z: float) -> np.ndarray:
    """``Rz(second_z) Ry(y) Rz(first_z)``: scipy's extrinsic ``from_euler("zyz", [first_z, y, second_z])``."""
    def about_z(angle: float) -> np.ndarray:
        c, s = np.cos(angle), np.sin(angle)
        return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])

    c, s = np.cos(y), np.sin(y)
    about_y = np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])
    return about_z(second_z) @ about_y @ about_z(first_z)


def draw_orientation(rng: np.random.Generator, max_tilt_rad: float = MAX_TILT_RAD) -> np.ndarray:
    """A starting orientation as the reference draws it: tilt U(0, max), azimuth and turn U(-pi, pi)."""
    tilt = rng.uniform(0.0, max_tilt_rad)
    azimuth = rng.uniform(-np.pi, np.pi)
    turn = rng.uniform(-np.pi, np.pi)
    return rotation_zyz(turn, tilt, azimuth)


def limit_tilt(rotation: np.ndarray, max_tilt_rad: float = MAX_TILT_RAD) -> np.ndarray:
    """Rotations ``(n, 3, 3)`` with the z axis projected into the tilt cone and the frame re-orthonormalised."""
    feature = rotation_to_feature(rotation, np.float64)
    xy = feature[:, 3:5]
    radius = np.linalg.norm(xy, axis=1, keepdims=True)
    limit = np.sin(max_tilt_rad)
    feature[:, 3:5] = np.where(radius > limit, xy / np.maximum(radius, 1e-12) * limit, xy)
    feature[:, 5] = np.sqrt(np.maximum(1.0 - (feature[:, 3:5] ** 2).sum(axis=1), 0.0))
    return feature_to_rotation(feature)


def turn(rotation: np.ndarray, rotation_moves: np.ndarray, max_turn_rad: float,
         max_tilt_rad: float = MAX_TILT_RAD) -> np.ndarray:
    """Apply relative turns ``(n, 3)`` in [-1, 1]: projected into the unit ball, scaled by the longest
    turn, applied in the world frame, then held within the tilt limit."""
    if _turn_compiled is not None:  # the same steps, one compiled call (the array version costs ~20 small calls)
        out = np.empty_like(rotation, dtype=np.float64)
        _turn_compiled(np.ascontiguousarray(rotation, np.float64), np.ascontiguousarray(rotation_moves, np.float64),
                       max_turn_rad, np.sin(max_tilt_rad), out)
        return out
    norm = np.linalg.norm(rotation_moves, axis=1, keepdims=True)
    vector = rotation_moves / np.maximum(norm, 1.0) * max_turn_rad
    return limit_tilt(rotation_from_vector(vector) @ rotation, max_tilt_rad)


def _turn(rotation, moves, max_turn_rad, max_radius_xy, out):  # pragma: no cover - compiled
    """``turn`` for each env: Rodrigues' rotation, composed in the world frame, z axis projected into
    the tilt cone, y made orthogonal to z (Gram-Schmidt), x = y x z."""
    for b in range(rotation.shape[0]):
        wx, wy, wz = moves[b, 0], moves[b, 1], moves[b, 2]
        length = np.sqrt(wx * wx + wy * wy + wz * wz)
        factor = max_turn_rad / max(length, 1.0)
        angle = length * factor
        kx, ky, kz = (wx / length, wy / length, wz / length) if length > 1e-12 else (0.0, 0.0, 0.0)
        sin, cos = np.sin(angle), 1.0 - np.cos(angle)
        k = np.array([[0.0, -kz, ky], [kz, 0.0, -kx], [-ky, kx, 0.0]])
        turned = (np.eye(3) + sin * k + cos * (k @ k)) @ rotation[b]
        z = turned[:, 2].copy()
        radius = np.sqrt(z[0] * z[0] + z[1] * z[1])
        if radius > max_radius_xy:
            z[0] *= max_radius_xy / radius
            z[1] *= max_radius_xy / radius
        z[2] = np.sqrt(max(1.0 - z[0] * z[0] - z[1] * z[1], 0.0))
        z /= np.sqrt((z * z).sum())
        y = turned[:, 1] - (turned[:, 1] * z).sum() * z
        y /= np.sqrt((y * y).sum())
        out[b, :, 0] = np.cross(y, z)
        out[b, :, 1] = y
        out[b, :, 2] = z


def tilt_angle(rotation: np.ndarray) -> np.ndarray:
    """The angle between each sensor's axis and the vertical (rad)."""
    return np.arccos(np.clip(rotation[..., 2, 2], -1.0, 1.0))


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


def _height(fields_flat, base, resolution, limit, scale, half, object_x, object_y, cos_o, sin_o, x, y):
    """The triangulated height field of one env at world point (x, y) (heightfield.sample's rule)."""
    dx = x - object_x
    dy = y - object_y
    fx = min(max((cos_o * dx + sin_o * dy) * scale + half, 0.0), limit)
    fy = min(max((cos_o * dy - sin_o * dx) * scale + half, 0.0), limit)
    x0 = int(fx)
    y0 = int(fy)
    tx = fx - x0
    ty = fy - y0
    index = base + y0 * resolution + x0
    h00 = fields_flat[index]
    h11 = fields_flat[index + resolution + 1]
    if tx >= ty:
        h_side = fields_flat[index + 1]
        return h00 + (h_side - h00) * tx + (h11 - h_side) * ty
    h_side = fields_flat[index + resolution]
    return h00 + (h_side - h00) * ty + (h11 - h_side) * tx


def _ray_hit(fields_flat, base, resolution, limit, scale, half, object_x, object_y, cos_o, sin_o, bx, by, bz, gx, gy,
             z_top, step, z_stop):
    """The height (m) where the ray through (bx, by, bz) with sideways travel (gx, gy) per unit height
    first meets the scene coming down from ``z_top``; ``z_stop`` or lower if it passes below ``z_stop``."""
    z_high = z_top
    f_high = z_high - _height(fields_flat, base, resolution, limit, scale, half, object_x, object_y, cos_o, sin_o,
                              bx + (z_high - bz) * gx, by + (z_high - bz) * gy)
    if f_high <= 0.0:
        return z_high
    while True:
        z_low = max(z_high - step, 0.0)
        f_low = z_low - _height(fields_flat, base, resolution, limit, scale, half, object_x, object_y, cos_o, sin_o,
                                bx + (z_low - bz) * gx, by + (z_low - bz) * gy)
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
        if z_low < z_stop:  # the ray's depth is 0 whatever the rest of the image holds
            return z_low
        z_high, f_high = z_low, f_low


def _tilted_depth(fields_flat, offsets, rotations, object_xy, object_yaw, sensor_xy, blocks, press_m, u, v,
                  resolution, border, scale, half, spacing, depth_out, contact_out):  # pragma: no cover - compiled
    """Depth maps ``depth_out (n, H, W)`` and contact coordinates ``contact_out (n,)`` of tilted sensors.

    ``rotations`` (n, 3, 3) sensor to world; ``blocks`` (n, B, B) each env's ``block_maxima``;
    the rest as in ``kernels.render_batch``. Every ``COARSE``-th pixel of every ``COARSE``-th row is
    traced first, so that the highest contact found among them stops the other rays early.
    """
    n = rotations.shape[0]
    height = v.shape[0]
    width = u.shape[0]
    limit = float(resolution - border)
    for b in range(n):
        r = rotations[b]
        nz = r[2, 2]
        gx = r[0, 2] / nz  # sideways travel per unit of height along the ray
        gy = r[1, 2] / nz
        sideways = np.sqrt(gx * gx + gy * gy)
        step = STEP_CELLS * spacing / sideways if sideways > 1e-9 else np.inf
        object_x = object_xy[b, 0]
        object_y = object_xy[b, 1]
        cos_o = np.cos(object_yaw[b])
        sin_o = np.sin(object_yaw[b])
        base = int(offsets[b])
        press = float(press_m[b])
        # the highest point any ray can meet: the blocks under the rays' reach between the object's top and 0
        block_max = blocks[b]
        count = block_max.shape[0]
        z_object = max(float(block_max.max()), 0.0)
        low_x = low_y = np.inf
        high_x = high_y = -np.inf
        for corner_v in (v[0], v[height - 1]):
            for corner_u in (u[0], u[width - 1]):
                corner_x = sensor_xy[b, 0] + r[0, 0] * corner_u + r[0, 1] * corner_v
                corner_y = sensor_xy[b, 1] + r[1, 0] * corner_u + r[1, 1] * corner_v
                corner_z = r[2, 0] * corner_u + r[2, 1] * corner_v
                for z in (0.0, z_object):
                    dx = corner_x + (z - corner_z) * gx - object_x
                    dy = corner_y + (z - corner_z) * gy - object_y
                    fx = min(max((cos_o * dx + sin_o * dy) * scale + half, 0.0), limit)
                    fy = min(max((cos_o * dy - sin_o * dx) * scale + half, 0.0), limit)
                    low_x, high_x = min(low_x, fx), max(high_x, fx)
                    low_y, high_y = min(low_y, fy), max(high_y, fy)
        z_top = 0.0
        for block_y in range(int(low_y) // BLOCK, min(int(high_y) // BLOCK, count - 1) + 1):
            for block_x in range(int(low_x) // BLOCK, min(int(high_x) // BLOCK, count - 1) + 1):
                z_top = max(z_top, float(block_max[block_y, block_x]))
        running_top = -np.inf
        depth = depth_out[b]
        for sweep in range(2):
            for i in range(height):
                if sweep == 0 and i % COARSE != 0:
                    continue
                for j in range(width):
                    coarse = i % COARSE == 0 and j % COARSE == 0
                    if coarse != (sweep == 0):
                        continue
                    bx = sensor_xy[b, 0] + r[0, 0] * u[j] + r[0, 1] * v[i]
                    by = sensor_xy[b, 1] + r[1, 0] * u[j] + r[1, 1] * v[i]
                    bz = r[2, 0] * u[j] + r[2, 1] * v[i]
                    hit = _ray_hit(fields_flat, base, resolution, limit, scale, half, object_x, object_y, cos_o,
                                   sin_o, bx, by, bz, gx, gy, z_top, step, bz + (running_top - press) * nz)
                    s = (hit - bz) / nz
                    depth[i, j] = s
                    running_top = max(running_top, s)
        gel = running_top - press
        contact_out[b] = running_top
        for i in range(height):
            for j in range(width):
                depth[i, j] = max(depth[i, j] - gel, 0.0)


_turn_compiled = kernels.numba.njit(cache=True)(_turn) if kernels.AVAILABLE else None

if kernels.AVAILABLE:
    # the kernel finds the compiled _height among its globals when numba compiles it
    _height = kernels.numba.njit(cache=True, inline="always")(_height)
    _ray_hit = kernels.numba.njit(cache=True)(_ray_hit)
    tilted_depth_kernel = kernels.numba.njit(cache=True, nogil=True, error_model="numpy")(_tilted_depth)


def tilted_depth_numpy(fields_flat: np.ndarray, offsets: np.ndarray, rotations: np.ndarray, object_xy: np.ndarray,
                       object_yaw: np.ndarray, sensor_xy: np.ndarray, blocks: np.ndarray, press_m: np.ndarray,
                       u: np.ndarray, v: np.ndarray, resolution: int, border: int, scale: float, half: float,
                       spacing: float) -> tuple[np.ndarray, np.ndarray]:
    """``_tilted_depth`` in array passes (every ray marches from the object's top to the floor, no early
    stop; the same crossings): ``(depth, contact)``."""
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

    z_top = np.maximum(blocks.reshape(n, -1).max(axis=1).astype(np.float64), 0.0)[:, None, None]
    steps = np.where(sideways > 1e-9, STEP_CELLS * spacing / np.maximum(sideways, 1e-300), np.inf)
    count = int(np.ceil(np.max(z_top / steps))) if np.isfinite(steps).any() else 1
    z_high = np.broadcast_to(z_top, bx.shape).copy()
    f_high = z_high - height_at(z_high)
    found = f_high <= 0.0
    z_low, f_low = z_high.copy(), f_high.copy()
    for _ in range(max(count, 1)):
        z_next = np.maximum(z_high - steps, 0.0)
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
