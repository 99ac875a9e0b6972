"""A simulated GelSight Mini: contact depth maps and Taxim-style tactile RGB, batched on the CPU.

Geometry (GelSight Mini, as the reference benchmark models it): sensing surface 18.88 x 14.16 mm,
gel 4.25 mm thick, pressed into the scene by half its thickness at each touch. The gel's lowest
point settles on the highest point of the scene under the sensing surface, then sinks a further
``press_depth_m``; the contact depth map is how far the scene pushes into the gel at each pixel.

Tactile RGB follows Taxim's photometric idea (Si & Yuan, 2022): the colour of a pixel is a
calibrated function of the gel surface normal, added to the background image of the undeformed
gel. Three coloured LEDs light the gel from three sides 120 degrees apart; each channel responds
linearly to the slope towards its LED and quadratically to the overall slope (the polynomial
Taxim fits to calibration presses, here with hand-set coefficients of that form), tabulated over
slope bins as Taxim tabulates its polynomial. Slopes are central differences over two pixels of
the depth map, which also stands in for the gel's elastic smoothing of sharp creases (the objects'
height fields are themselves smooth). Optional domain randomisation: a per-episode gain/offset per channel and per-frame
Gaussian pixel noise, and per-episode draws of indentation, lighting and noise level
(``randomization.py``, the ``-DR`` envs).

Everything works over a leading batch axis, one call per step for all envs: ``TactileRenderer.render``
runs the fused compiled kernel of ``kernels.py`` when numba is installed, else the NumPy array
passes below (``grid_coordinates``, ``depth``, ``tactile_rgb``: the reference, bit-identical).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache

import numpy as np

from gauntlet.envs.tactile import heightfield, kernels, tilt

SENSOR_WIDTH_M = 0.01888
SENSOR_HEIGHT_M = 0.01416
GEL_THICKNESS_M = 0.00425
PRESS_DEPTH_M = GEL_THICKNESS_M / 2
DEFAULT_IMAGE_SIZE = (64, 64)  # (height, width) in pixels

# Calibration of the photometric model (per channel R, G, B): LED azimuth, response to the slope
# towards the LED, response to the squared slope, and the undeformed gel's colour (in [0, 1]).
LED_AZIMUTH_RAD = np.array([np.pi / 2, np.pi / 2 + 2 * np.pi / 3, np.pi / 2 + 4 * np.pi / 3])
SLOPE_GAIN = np.array([0.55, 0.50, 0.60])
CURVATURE_GAIN = np.array([-0.10, -0.08, -0.12])
BACKGROUND_RGB = np.array([0.42, 0.46, 0.50])
VIGNETTE = 0.12  # relative brightness fall-off from the centre to the corners
# The response is tabulated over slope bins, as Taxim tabulates its calibrated polynomial.
LUT_BINS = 129
LUT_CENTRE = np.float32((LUT_BINS - 1) / 2 + 0.5)  # +0.5: truncation below rounds to the nearest bin
LUT_MAX_SLOPE = 3.0


@dataclass(frozen=True)
class SensorConfig:
    """Output size and domain randomisation of the simulated sensor."""

    image_size: tuple[int, int] = DEFAULT_IMAGE_SIZE  # (height, width) pixels
    episode_noise: float = 0.0  # std of the per-episode colour gain / offset
    frame_noise: float = 0.0  # std of per-frame pixel noise (image units in [0, 1])
    domain_randomization: bool = False  # per-episode indentation, lighting and noise level (randomization.py)

    def __post_init__(self) -> None:
        height, width = self.image_size
        if height < 4 or width < 4:
            raise ValueError(f"sensor image_size must be at least (4, 4) pixels, got {self.image_size}")
        if self.episode_noise < 0 or self.frame_noise < 0:
            raise ValueError("sensor noise levels must be >= 0")


class TactileRenderer:
    """Renders touches of a batch of sensors on a batch of height-field objects in one call."""

    def __init__(self, config: SensorConfig, field_resolution: int, field_size_m: float):
        self.config = config
        self.resolution = field_resolution
        self.field_size_m = field_size_m
        height, width = config.image_size
        # Pixel centres in the sensor frame (m): x across the 18.88 mm side, y across 14.16 mm.
        self.u = ((np.arange(width, dtype=np.float32) + 0.5) / width - 0.5) * np.float32(SENSOR_WIDTH_M)
        # Image rows run from the sensor's +y edge down, so the image looks like the view from above.
        self.v = (0.5 - (np.arange(height, dtype=np.float32) + 0.5) / height) * np.float32(SENSOR_HEIGHT_M)
        self.pixel_m = (SENSOR_WIDTH_M / width, SENSOR_HEIGHT_M / height)
        # Central difference of depth (m) over two pixels -> slope -> bin: one factor per axis.
        bins_per_slope = (LUT_BINS - 1) / 2 / LUT_MAX_SLOPE
        self._bins_per_step = tuple(np.float32(bins_per_slope / (2 * p)) for p in self.pixel_m)
        slopes = (np.arange(LUT_BINS) - (LUT_BINS - 1) / 2) / bins_per_slope
        slope_y, slope_x = np.meshgrid(slopes, slopes, indexing="ij")
        self.colour_lut = colour_response(slope_x, slope_y).reshape(-1, 3).astype(np.float32)
        yy, xx = np.meshgrid(np.linspace(-1, 1, height), np.linspace(-1, 1, width), indexing="ij")
        vignette = 1.0 - VIGNETTE * (xx ** 2 + yy ** 2) / 2
        self.background = (vignette[..., None] * BACKGROUND_RGB).astype(np.float32)  # (H, W, 3)
        self._colour_lut_signed = self.colour_lut * np.float32(2)
        self._background_signed = self.background * np.float32(2) - np.float32(1)
        # "numba": the fused kernel (kernels.py, bit-identical); "numpy": the array passes below.
        self.backend = "numba" if kernels.AVAILABLE else "numpy"
        # Threads that share a batch's envs in the fused kernel (it releases the GIL). Envs are
        # independent, so the split never changes a result; 1 keeps the env on one core.
        self.threads = 1
        self._no_gains = np.zeros((0, 2, 3), np.float32)
        self._no_noise = np.zeros((0, 1, 1, 3), np.float32)
        self._no_image = np.zeros((0, 1, 1, 3), np.float32)
        # The kernel's fixed arguments, built once: per call they cost more than a small batch's
        # bookkeeping (every scalar float32 or int where the NumPy path is float32: a float64 would
        # make numba compute, and round, in float64).
        scale, half = self.field_scale()
        self._geometry = (scale, half, self.u, self.v, self.resolution, heightfield.BORDER)
        self._colour_bins = (self._bins_per_step[0], self._bins_per_step[1], LUT_CENTRE, np.float32(LUT_BINS - 1),
                             LUT_BINS)

    def render(self, fields_flat: np.ndarray, offsets: np.ndarray, object_xy: np.ndarray, object_yaw: np.ndarray,
               sensor_xy: np.ndarray, sensor_yaw: np.ndarray, gains: np.ndarray | None = None,
               noise: np.ndarray | None = None, rgb: bool = True, *, press_m: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """One touch per env: contact depth maps ``(n, H, W)``, contact heights ``(n,)`` and tactile
        images ``(n, H, W, 3)`` (None unless ``rgb``), by ``self.backend``.

        ``fields_flat``/``offsets`` as in ``heightfield.sample``; ``gains``/``noise`` as in
        ``tactile_rgb``; ``press_m`` as in ``depth``. Both backends give the same bits.
        """
        if press_m is None:
            press_m = np.full(len(object_yaw), PRESS_DEPTH_M, np.float32)
        if self.backend == "numpy":
            fx, fy = self.grid_coordinates(object_xy, object_yaw, sensor_xy, sensor_yaw)
            depth, contact = self.depth(fields_flat, offsets, fx, fy, press_m)
            return depth, contact, self.tactile_rgb(depth, gains, noise) if rgb else None
        if self.backend != "numba" or not kernels.AVAILABLE:
            raise ValueError(f"unknown or unavailable renderer backend {self.backend!r}; expected 'numpy' "
                             f"or 'numba' (numba installed: {kernels.AVAILABLE})")
        n = len(object_yaw)
        height, width = self.config.image_size
        depth = np.empty((n, height, width), np.float32)
        contact = np.empty(n, np.float32)
        image = np.empty((n, height, width, 3), np.float32) if rgb else self._no_image
        signed = gains is None and noise is None
        per_env = [offsets.reshape(-1).astype(np.int64), self.pose_cosines(object_yaw, sensor_yaw).T,
                   np.ascontiguousarray(object_xy, np.float64), np.ascontiguousarray(sensor_xy, np.float64),
                   self._no_gains if gains is None else np.ascontiguousarray(gains, np.float32),
                   self._no_noise if noise is None else np.ascontiguousarray(noise, np.float32),
                   np.ascontiguousarray(press_m, np.float32), depth, contact, image]
        lut, background = (self._colour_lut_signed, self._background_signed) if signed else (self.colour_lut,
                                                                                           self.background)

        def run(offsets_, cosines, object_xy_, sensor_xy_, gains_, noise_, press_, depth_, contact_, image_) -> None:
            kernels.render_batch(fields_flat, offsets_, np.ascontiguousarray(cosines.T), object_xy_, sensor_xy_,
                                 *self._geometry, press_, lut, background, *self._colour_bins, gains_, noise_,
                                 gains is not None, noise is not None, signed, rgb, depth_, contact_, image_)

        chunks = min(self.threads, n)
        if chunks <= 1:
            run(*per_env)
            return depth, contact, image if rgb else None
        bounds = [n * k // chunks for k in range(chunks + 1)]
        # placeholders (no gains, noise or image) are passed whole, per-env arrays in slices
        pending = [_pool(chunks - 1).submit(run, *(array[start:stop] if len(array) else array for array in per_env))
                   for start, stop in zip(bounds[1:-1], bounds[2:])]
        run(*(array[:bounds[1]] if len(array) else array for array in per_env))
        for job in pending:
            job.result()
        return depth, contact, image if rgb else None

    def render_tilted(self, fields_flat: np.ndarray, offsets: np.ndarray, object_xy: np.ndarray,
                      object_yaw: np.ndarray, sensor_xy: np.ndarray, sensor_rotation: np.ndarray,
                      block_maxima: np.ndarray, gains: np.ndarray | None = None, noise: np.ndarray | None = None,
                      rgb: bool = True, *, press_m: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """``render`` for sensors that may tilt: ``sensor_rotation`` ``(n, 3, 3)`` (sensor to world,
        ``tilt.py``), ``block_maxima`` ``(n, B, B)`` each env's ``tilt.block_maxima``. The depth is measured
        along each sensor's axis (``tilt.py``); the colour follows from it as for an untilted sensor."""
        if press_m is None:
            press_m = np.full(len(object_yaw), PRESS_DEPTH_M, np.float32)
        scale, half = self.field_scale()
        geometry = (self.resolution, heightfield.BORDER, scale, half,
                    heightfield.vertex_spacing(self.resolution, self.field_size_m))
        blocks = np.ascontiguousarray(block_maxima, np.float32)
        arguments = (fields_flat, offsets.reshape(-1).astype(np.int64),
                     np.ascontiguousarray(sensor_rotation, np.float64),
                     np.ascontiguousarray(object_xy, np.float64), np.ascontiguousarray(object_yaw, np.float64),
                     np.ascontiguousarray(sensor_xy, np.float64), blocks, blocks.max(axis=(1, 2)),
                     np.ascontiguousarray(press_m, np.float64), self.u.astype(np.float64), self.v.astype(np.float64))
        if self.backend == "numba" and tilt.tilted_depth_kernel is not None:
            height, width = self.config.image_size
            depth = np.empty((len(object_yaw), height, width), np.float32)
            contact = np.empty(len(object_yaw), np.float32)
            tilt.tilted_depth_kernel(*arguments, *geometry, depth, contact)
            if not rgb:
                return depth, contact, None
            image = np.empty(depth.shape + (3,), np.float32)
            signed = gains is None and noise is None
            lut, background = ((self._colour_lut_signed, self._background_signed) if signed
                               else (self.colour_lut, self.background))
            kernels.colour_batch(depth, lut, background, *self._colour_bins,
                                 self._no_gains if gains is None else np.ascontiguousarray(gains, np.float32),
                                 self._no_noise if noise is None else np.ascontiguousarray(noise, np.float32),
                                 gains is not None, noise is not None, signed, image)
            return depth, contact, image
        depth, contact = tilt.tilted_depth_numpy(*arguments, *geometry)
        return depth, contact, self.tactile_rgb(depth, gains, noise) if rgb else None

    def pose_cosines(self, object_yaw: np.ndarray, sensor_yaw: np.ndarray) -> np.ndarray:
        """cos and sin of the sensor's yaw relative to the object and of the object's yaw, ``(4, n)``."""
        # sin x = cos(x - pi / 2): one trig call for the four values, one subtraction for both sines
        angles = np.empty((4, len(object_yaw)))
        np.subtract(sensor_yaw, object_yaw, out=angles[0])
        angles[2] = object_yaw
        np.subtract(angles[::2], np.pi / 2, out=angles[1::2])
        return np.cos(angles, out=angles)

    def field_scale(self) -> tuple[float, float]:
        """Field units per metre, and the field coordinate of the object's origin."""
        spacing = heightfield.vertex_spacing(self.resolution, self.field_size_m)
        return 1.0 / spacing, self.field_size_m / 2 / spacing

    def pose_coefficients(self, object_xy: np.ndarray, object_yaw: np.ndarray, sensor_xy: np.ndarray,
                          sensor_yaw: np.ndarray) -> np.ndarray:
        """Per env the affine map ``(6, n)`` float32 from pixel (u, v) (m) to field coordinates.

        fx = a u + b v + c, fy = d u + e v + f: a pixel in world = sensor_xy + R(sensor_yaw) (u, v);
        in the object frame = R(-object_yaw) (world - object_xy); in field units = (object + size / 2) /
        spacing. (The fused kernel repeats these float64 operations in the same order.)
        """
        cos_rel, sin_rel, cos_o, sin_o = self.pose_cosines(object_yaw, sensor_yaw)
        dx = sensor_xy[:, 0] - object_xy[:, 0]
        dy = sensor_xy[:, 1] - object_xy[:, 1]
        scale, half = self.field_scale()
        coefficients = np.empty((6, len(object_yaw)), np.float32)
        coefficients[0] = cos_rel * scale
        coefficients[1] = sin_rel * -scale
        coefficients[2] = (cos_o * dx + sin_o * dy) * scale + half
        coefficients[3] = sin_rel * scale
        coefficients[4] = coefficients[0]
        coefficients[5] = (cos_o * dy - sin_o * dx) * scale + half
        return coefficients

    def grid_coordinates(self, object_xy: np.ndarray, object_yaw: np.ndarray, sensor_xy: np.ndarray,
                         sensor_yaw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Fractional field coordinates ``(n, H, W)`` of every pixel, for each env's poses (world, m)."""
        coefficients = self.pose_coefficients(object_xy, object_yaw, sensor_xy, sensor_yaw)[:, :, None, None]
        a, b, c, d, e, f = coefficients
        fx = a * self.u[None, None, :] + b * self.v[None, :, None]
        fx += c
        fy = d * self.u[None, None, :] + e * self.v[None, :, None]
        fy += f
        return fx, fy

    def depth(self, fields_flat: np.ndarray, offsets: np.ndarray, fx: np.ndarray, fy: np.ndarray,
              press_m: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Contact depth maps ``(n, H, W)`` (m, >= 0) and the gel's resting height per env (m).

        The gel sinks ``press_m`` (per env, float32; default ``PRESS_DEPTH_M``) below the highest
        point under it (the platform, z = 0, is the floor of every scene).
        """
        press = np.float32(PRESS_DEPTH_M) if press_m is None else np.asarray(press_m, np.float32)
        scene = heightfield.sample(fields_flat, offsets, fx, fy, self.resolution)
        top = scene.max(axis=(1, 2))
        gel_z = np.maximum(top, 0) - press
        scene -= gel_z[:, None, None]
        np.maximum(scene, 0, out=scene)
        return scene, gel_z + press

    def tactile_rgb(self, depth: np.ndarray, gains: np.ndarray | None = None,
                    noise: np.ndarray | None = None) -> np.ndarray:
        """Tactile images ``(n, H, W, 3)`` float32 in [-1, 1] from contact depth maps (m).

        ``gains`` ``(n, 2, 3)``: per-env colour gain and offset (episode noise); ``noise``
        ``(n, H, W, 3)``: per-frame pixel noise, both already scaled.
        """
        n, height, width = depth.shape
        padded = np.empty((n, height + 2, width + 2), np.float32)
        padded[:, 1:-1, 1:-1] = depth
        padded[:, 0, 1:-1] = depth[:, 0]  # the gel's rim is held: replicate the edge
        padded[:, -1, 1:-1] = depth[:, -1]
        padded[:, :, 0] = padded[:, :, 1]
        padded[:, :, -1] = padded[:, :, -2]
        # Slopes of the gel surface as look-up bins: central differences scaled straight to bin units.
        bin_x = padded[:, 1:-1, 2:] - padded[:, 1:-1, :-2]
        bin_x *= self._bins_per_step[0]
        bin_x += LUT_CENTRE
        bin_y = padded[:, :-2, 1:-1] - padded[:, 2:, 1:-1]  # rows run towards -y
        bin_y *= self._bins_per_step[1]
        bin_y += LUT_CENTRE
        top_bin = np.float32(LUT_BINS - 1)
        np.minimum(np.maximum(bin_x, 0, out=bin_x), top_bin, out=bin_x)
        np.minimum(np.maximum(bin_y, 0, out=bin_y), top_bin, out=bin_y)
        index = bin_y.astype(np.int32)
        index *= LUT_BINS
        index += bin_x.astype(np.int32)
        if gains is None and noise is None:  # the table and background are pre-scaled to [-1, 1]
            image = self._colour_lut_signed.take(index, axis=0)
            image += self._background_signed
        else:
            image = self.colour_lut.take(index, axis=0)  # (n, H, W, 3), the calibrated response
            image += self.background
            if gains is not None:
                image *= 1.0 + gains[:, None, None, 0, :]
                image += gains[:, None, None, 1, :]
            if noise is not None:
                image += noise
            image *= 2.0
            image -= 1.0
        np.minimum(np.maximum(image, -1.0, out=image), 1.0, out=image)
        return image


def _pool(workers: int) -> ThreadPoolExecutor:
    """Worker threads for the fused kernel, shared by all renderers (the caller's thread is one more)."""
    return _process_pool(workers, os.getpid())


@cache
def _process_pool(workers: int, pid: int) -> ThreadPoolExecutor:
    # keyed by process: a forked child (e.g. a subprocess vector env) has none of its parent's threads
    return ThreadPoolExecutor(max_workers=max(workers, 1), thread_name_prefix="tactile-render")


def colour_response(slope_x: np.ndarray, slope_y: np.ndarray) -> np.ndarray:
    """The calibrated colour change ``(..., 3)`` of the gel at surface slopes (dz/dx, dz/dy).

    Normal n = (-gx, -gy, 1) / |.|; channel c sees the tangential normal projected on its LED's
    direction (linear term) and the overall tilt |n_xy|^2 (quadratic term).
    """
    inverse_norm = 1.0 / np.sqrt(slope_x ** 2 + slope_y ** 2 + 1.0)
    nx, ny = -slope_x * inverse_norm, -slope_y * inverse_norm
    tilt = nx ** 2 + ny ** 2
    towards = nx[..., None] * np.cos(LED_AZIMUTH_RAD) + ny[..., None] * np.sin(LED_AZIMUTH_RAD)
    return SLOPE_GAIN * towards + CURVATURE_GAIN * tilt[..., None]
