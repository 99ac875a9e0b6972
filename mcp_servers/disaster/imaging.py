"""Imaging physics of the ``hard`` realism level as plain array functions (no scene knowledge, no I/O).

* ``sun_position``: solar azimuth and elevation from latitude, day of year and local solar time
  (Cooper's declination, the standard hour-angle formulas).
* ``cast_shadows``: which pixels of a height field are out of direct sunlight (ray marching toward the sun).
* ``haze_transmittance`` / ``add_haze``: a thin aerosol layer of optical depth ``tau`` at 550 nm,
  wavelength-dependent by Angstrom's law; the image is attenuated by the two-way transmittance and
  brightened by the light the haze scatters (``rho' = rho t + airlight (1 - t)``), which lowers contrast.
* ``add_sensor_noise``: read and shot noise plus detector striping (a gain per image column).
* ``shift_image``: a sub-pixel translation (bilinear), for the misregistration of two acquisitions.
* ``layover``: where a SAR sensor lays the facade of a raised box over the ground in front of it.

Directions: rows grow southward and columns eastward; azimuths are degrees clockwise from north.
"""

from __future__ import annotations

import math

import numpy as np

ANGSTROM_EXPONENT = 1.3   # continental aerosol: optical depth falls with wavelength as lambda^-1.3
AIRLIGHT = 0.25           # reflectance of the light the haze scatters into the sensor (a bright, flat grey)
READ_NOISE = 0.005        # reflectance, standard deviation
SHOT_NOISE = 1e-4         # variance per unit reflectance (photon noise grows with the signal)
STRIPING = 0.005          # relative gain spread between detector columns


def sun_position(lat_deg: float, day_of_year: int, solar_hour: float) -> tuple[float, float]:
    """Sun azimuth (degrees clockwise from north) and elevation (degrees) at local solar time ``solar_hour``."""
    declination = math.radians(23.44) * math.sin(2 * math.pi * (284 + day_of_year) / 365)  # Cooper (1969)
    hour_angle = math.radians(15.0 * (solar_hour - 12.0))
    latitude = math.radians(lat_deg)
    sin_elevation = (math.sin(latitude) * math.sin(declination)
                     + math.cos(latitude) * math.cos(declination) * math.cos(hour_angle))
    elevation = math.asin(max(-1.0, min(1.0, sin_elevation)))
    # Azimuth from south (westward positive), turned to clockwise from north.
    from_south = math.atan2(math.sin(hour_angle),
                            math.cos(hour_angle) * math.sin(latitude) - math.tan(declination) * math.cos(latitude))
    return (math.degrees(from_south) + 180.0) % 360.0, math.degrees(elevation)


def toward(azimuth_deg: float) -> tuple[float, float]:
    """The unit step (rows, cols) of image space toward ``azimuth_deg`` (north is up, east is right)."""
    azimuth = math.radians(azimuth_deg)
    return -math.cos(azimuth), math.sin(azimuth)


def cast_shadows(height_m: np.ndarray, pixel_m: float, sun_azimuth_deg: float, sun_elevation_deg: float
                 ) -> np.ndarray:
    """Pixels out of direct sunlight: some surface toward the sun rises above the sun's ray through them.

    Shadow test: ``max_s [H(p + s u) - (s - 1/2) tan(elevation)] > H(p)`` over distances ``s`` (pixels)
    toward the sun (``u``), marched one pixel at a time along the dominant axis: a pixel's surface stands
    from its near edge, half a pixel before its centre. The world beyond the edge is flat ground.
    """
    rows, cols = height_m.shape
    step_r, step_c = toward(sun_azimuth_deg)
    per_step = max(abs(step_r), abs(step_c))  # march so that every step moves one whole pixel on one axis
    rise_per_px = pixel_m * math.tan(math.radians(sun_elevation_deg))
    steps = int(math.ceil(float(height_m.max(initial=0.0)) * per_step / rise_per_px))
    horizon = np.full(height_m.shape, -np.inf, np.float32)
    for k in range(1, steps + 1):
        dr, dc = round(k * step_r / per_step), round(k * step_c / per_step)
        if abs(dr) >= rows or abs(dc) >= cols:
            break
        drop = (k - 0.5) / per_step * rise_per_px
        source = height_m[max(dr, 0):rows + min(dr, 0), max(dc, 0):cols + min(dc, 0)]
        target = horizon[max(-dr, 0):rows + min(-dr, 0), max(-dc, 0):cols + min(-dc, 0)]
        np.maximum(target, source - drop, out=target)
    return horizon > height_m + 1e-3


def haze_transmittance(tau_550: np.ndarray, wavelengths_nm, air_mass: float) -> np.ndarray:
    """Two-way transmittance of a haze layer of optical depth ``tau_550`` (at 550 nm): ``(bands, h, w)``."""
    scale = (np.asarray(wavelengths_nm, float) / 550.0) ** -ANGSTROM_EXPONENT  # Angstrom's law
    return np.exp(-(scale * air_mass).astype(tau_550.dtype)[:, None, None] * tau_550[None])


def add_haze(reflectance: np.ndarray, transmittance: np.ndarray) -> np.ndarray:
    """The image seen through the haze: attenuated and veiled by scattered light (lower contrast)."""
    return reflectance * transmittance + AIRLIGHT * (1.0 - transmittance)


def add_sensor_noise(reflectance: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Read noise, signal-dependent shot noise and column striping on a ``(bands, h, w)`` image (computed in
    the image's float type)."""
    bands, _, cols = reflectance.shape
    dtype = reflectance.dtype
    column_gain = 1.0 + STRIPING * rng.standard_normal((bands, 1, cols), dtype=dtype)
    sigma = np.sqrt(dtype.type(READ_NOISE ** 2) + dtype.type(SHOT_NOISE) * np.maximum(reflectance, 0.0))
    return reflectance * column_gain + sigma * rng.standard_normal(reflectance.shape, dtype=dtype)


def shift_image(image: np.ndarray, shift_px: tuple[float, float]) -> np.ndarray:
    """Every band of ``image`` (``(bands, h, w)``) moved by ``shift_px`` (rows, cols): the content at
    (r, c) appears at (r + dr, c + dc). Bilinear resampling (no overshoot at sharp edges, as many
    processors resample); the edges repeat the nearest pixel."""
    from scipy import ndimage

    return np.stack([ndimage.shift(band, shift_px, order=1, mode="nearest") for band in image])


def layover(boxes_px: list[tuple[int, int, int, int]], heights_m, shape: tuple[int, int], pixel_m: float,
            incidence_deg: float, sensor_side: str) -> np.ndarray:
    """How much facade a side-looking SAR lays over each ground pixel (0..n, boxes may overlap).

    A point at height z is imaged z / tan(incidence) closer to the sensor, so the wall of a box of
    height H facing the sensor spreads over the ``H / tan(incidence)`` of ground in front of it.
    ``boxes_px``: (row0, row1, col0, col1) in pixels; ``sensor_side``: ``"west"`` or ``"east"`` (the
    range direction is along the columns)."""
    cover = np.zeros(shape, np.float32)
    cols = shape[1]
    for (r0, r1, c0, c1), height in zip(boxes_px, heights_m):
        length = height / math.tan(math.radians(incidence_deg)) / pixel_m
        whole, part = int(length), length - int(length)
        if sensor_side == "west":
            near, far, edge = max(c0 - whole, 0), c0, c0 - whole - 1
        else:
            near, far, edge = c1, min(c1 + whole, cols), c1 + whole
        cover[r0:r1, near:far] += 1.0
        if 0 <= edge < cols:
            cover[r0:r1, edge] += part
    return cover
