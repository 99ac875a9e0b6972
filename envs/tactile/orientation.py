"""A tilted sensor's orientation: its 6-D representation, its motion and its tilt limit.

``R`` (3 x 3, sensor frame to world) has the sensor's x, y axes along its image
(x across the 18.88 mm side) and its z axis along the sensor's axis, pointing away from the scene;
``R = I`` is the untilted sensor pressing straight down. The tilt is the angle between the sensor's z
axis and the world's, at most ``MAX_TILT_RAD`` (45 degrees, the reference's ``max_tilt_angle``).
Observations carry the reference's 6-D representation (Zhou et al., 2019, with the second and third
columns of ``R`` instead of the first and second, as the reference does): ``(R[:, 1], R[:, 2])``.
A move turns the sensor by a rotation vector in the unit ball times the longest turn of one transfer,
applied in the world frame (``R' = Rot(w) R``), then projects the z axis back into the tilt cone
(the reference's projection: its x, y part into the disc of radius sin(45 degrees)).
"""

from __future__ import annotations

import numpy as np

from gauntlet.envs.tactile import kernels

MAX_TILT_RAD = np.pi / 4


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
    """``turn`` for each env, in scalars (no small arrays to allocate): Rodrigues' rotation
    T = I + sin(a) K + (1 - cos(a)) K^2 with K^2 = k k^T - I, composed in the world frame, z axis
    projected into the tilt cone, y made orthogonal to z (Gram-Schmidt), x = y x z."""
    for b in range(rotation.shape[0]):
        wx, wy, wz = moves[b, 0], moves[b, 1], moves[b, 2]
        length = np.sqrt(wx * wx + wy * wy + wz * wz)
        angle = length * (max_turn_rad / max(length, 1.0))
        kx, ky, kz = (wx / length, wy / length, wz / length) if length > 1e-12 else (0.0, 0.0, 0.0)
        sin, cos = np.sin(angle), 1.0 - np.cos(angle)
        # the turn's rows
        t00, t01, t02 = 1.0 + cos * (kx * kx - 1.0), -sin * kz + cos * kx * ky, sin * ky + cos * kx * kz
        t10, t11, t12 = sin * kz + cos * ky * kx, 1.0 + cos * (ky * ky - 1.0), -sin * kx + cos * ky * kz
        t20, t21, t22 = -sin * ky + cos * kz * kx, sin * kx + cos * kz * ky, 1.0 + cos * (kz * kz - 1.0)
        r = rotation[b]
        # the turned frame's y and z axes (columns 1 and 2 of T R)
        y0 = t00 * r[0, 1] + t01 * r[1, 1] + t02 * r[2, 1]
        y1 = t10 * r[0, 1] + t11 * r[1, 1] + t12 * r[2, 1]
        y2 = t20 * r[0, 1] + t21 * r[1, 1] + t22 * r[2, 1]
        z0 = t00 * r[0, 2] + t01 * r[1, 2] + t02 * r[2, 2]
        z1 = t10 * r[0, 2] + t11 * r[1, 2] + t12 * r[2, 2]
        radius = np.sqrt(z0 * z0 + z1 * z1)
        if radius > max_radius_xy:
            z0 *= max_radius_xy / radius
            z1 *= max_radius_xy / radius
        z2 = np.sqrt(max(1.0 - z0 * z0 - z1 * z1, 0.0))
        norm = np.sqrt(z0 * z0 + z1 * z1 + z2 * z2)
        z0, z1, z2 = z0 / norm, z1 / norm, z2 / norm
        along = y0 * z0 + y1 * z1 + y2 * z2
        y0, y1, y2 = y0 - along * z0, y1 - along * z1, y2 - along * z2
        norm = np.sqrt(y0 * y0 + y1 * y1 + y2 * y2)
        y0, y1, y2 = y0 / norm, y1 / norm, y2 / norm
        out[b, 0, 0], out[b, 1, 0], out[b, 2, 0] = y1 * z2 - y2 * z1, y2 * z0 - y0 * z2, y0 * z1 - y1 * z0
        out[b, 0, 1], out[b, 1, 1], out[b, 2, 1] = y0, y1, y2
        out[b, 0, 2], out[b, 1, 2], out[b, 2, 2] = z0, z1, z2


def tilt_angle(rotation: np.ndarray) -> np.ndarray:
    """The angle between each sensor's axis and the vertical (rad)."""
    return np.arccos(np.clip(rotation[..., 2, 2], -1.0, 1.0))


_turn_compiled = kernels.numba.njit(cache=True)(_turn) if kernels.AVAILABLE else None
