"""Rendering: the platform from above with the sensor's footprint and its image (``rgb_array``), and
the window that shows it (``human``)."""

from __future__ import annotations

import math
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any

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


def tile_frames(frames: Sequence[np.ndarray]) -> np.ndarray:
    """Frames of one shape in a near-square grid, row by row (cells left over stay black)."""
    columns = math.ceil(math.sqrt(len(frames)))
    rows = math.ceil(len(frames) / columns)
    height, width, channels = frames[0].shape
    grid = np.zeros((rows * height, columns * width, channels), frames[0].dtype)
    for k, frame in enumerate(frames):
        row, column = divmod(k, columns)
        grid[row * height:(row + 1) * height, column * width:(column + 1) * width] = frame
    return grid


def no_display_reason() -> str | None:
    """Why no window can be opened here (no display, or a matplotlib backend without windows), else None."""
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return "there is no display (neither DISPLAY nor WAYLAND_DISPLAY is set)"
    import matplotlib
    from matplotlib.backends import BackendFilter, backend_registry

    backend = matplotlib.get_backend()
    if backend.lower() in backend_registry.list_builtin(BackendFilter.NON_INTERACTIVE):
        return f"matplotlib's backend {backend!r} cannot open a window"
    return None


class HumanViewer:
    """``render_mode="human"``: shows each frame in a matplotlib window, at most ``fps`` frames a second.

    Without a display it warns once and shows nothing (the env keeps working, so a headless run with
    ``render_mode="human"`` does not fail); ``last_frame`` holds the latest frame either way.
    """

    def __init__(self, fps: float):
        self.fps = fps
        self.last_frame: np.ndarray | None = None
        self._headless = False
        self._figure: Any = None
        self._image: Any = None

    def show(self, frame: np.ndarray) -> None:
        self.last_frame = frame
        if self._headless:
            return
        if self._image is None:
            reason = no_display_reason()
            if reason is not None:
                self._headless = True
                warnings.warn(f"render_mode='human' shows nothing: {reason}; use render_mode='rgb_array' "
                              "to get the frames as arrays", UserWarning, stacklevel=3)
                return
            import matplotlib.pyplot as plt

            plt.ion()
            self._figure, axes = plt.subplots(figsize=(frame.shape[1] / 100, frame.shape[0] / 100))
            axes.set_axis_off()
            self._image = axes.imshow(frame)
        else:
            self._image.set_data(frame)
        import matplotlib.pyplot as plt

        plt.pause(1 / self.fps)  # draws the frame and runs the window's event loop

    def close(self) -> None:
        if self._figure is not None:
            import matplotlib.pyplot as plt

            plt.close(self._figure)
            self._figure = self._image = None
