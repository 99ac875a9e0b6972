"""``render_mode="rgb_array"``: the platform from above with the sensor's footprint, and its image."""

from __future__ import annotations

import numpy as np

from gauntlet.envs.tactile import heightfield
from gauntlet.envs.tactile.sensor import SENSOR_HEIGHT_M, SENSOR_WIDTH_M
from gauntlet.envs.tactile.tasks import CELL_HALF_M

VIEW_PX = 240


def render_platform(fields_flat: np.ndarray, offset: int, resolution: int, field_size_m: float,
                    object_xy: np.ndarray, object_yaw: float, sensor_xy: np.ndarray, sensor_yaw: float,
                    max_height_m: float, image: np.ndarray) -> np.ndarray:
    """One frame ``(VIEW_PX, 2 * VIEW_PX, 3)`` uint8: top view (left) and tactile image (right)."""
    spacing = heightfield.vertex_spacing(resolution, field_size_m)
    world = ((np.arange(VIEW_PX) + 0.5) / VIEW_PX * 2 - 1) * CELL_HALF_M
    wx, wy = np.meshgrid(world, world[::-1])  # image rows go down, world y goes up
    cos, sin = np.cos(object_yaw), np.sin(object_yaw)
    dx, dy = wx - object_xy[0], wy - object_xy[1]
    fx = ((cos * dx + sin * dy) / spacing + field_size_m / 2 / spacing)[None].astype(np.float32)
    fy = ((-sin * dx + cos * dy) / spacing + field_size_m / 2 / spacing)[None].astype(np.float32)
    heights = heightfield.sample(fields_flat, np.array([[[offset]]], np.float32), fx, fy, resolution)[0]
    shade = np.clip(heights / max(max_height_m, 1e-9), 0, 1)
    top = np.empty((VIEW_PX, VIEW_PX, 3), np.float32)
    top[...] = np.array([0.85, 0.85, 0.82])
    top *= (1 - 0.6 * shade)[..., None]
    # The sensor's footprint, as a red outline.
    corners = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1], [-1, -1]]) * [SENSOR_WIDTH_M / 2, SENSOR_HEIGHT_M / 2]
    c, s = np.cos(sensor_yaw), np.sin(sensor_yaw)
    outline = corners @ np.array([[c, s], [-s, c]]) + sensor_xy
    for start, end in zip(outline[:-1], outline[1:]):
        t = np.linspace(0, 1, 200)[:, None]
        points = start + t * (end - start)
        col = np.clip(((points[:, 0] / CELL_HALF_M + 1) / 2 * VIEW_PX).astype(int), 0, VIEW_PX - 1)
        row = np.clip(((1 - (points[:, 1] / CELL_HALF_M + 1) / 2) * VIEW_PX).astype(int), 0, VIEW_PX - 1)
        top[row, col] = (0.9, 0.1, 0.1)
    # The tactile image, nearest-neighbour scaled to the view's height.
    rows = np.minimum((np.arange(VIEW_PX) * image.shape[0]) // VIEW_PX, image.shape[0] - 1)
    cols = np.minimum((np.arange(VIEW_PX) * image.shape[1]) // VIEW_PX, image.shape[1] - 1)
    tactile = (image[rows][:, cols] + 1) / 2
    frame = np.concatenate([top, tactile], axis=1)
    return (np.clip(frame, 0, 1) * 255).astype(np.uint8)
