"""Sensor models: a 2.5 m land-cover class map seen by the optical (RGB+NIR, 2.5 m), Sentinel-2-like
(12 bands, 10 m) and C-band SAR (VV/VH, 10 m) sensors.

Each sensor is split in two: the signal (``optical_reflectance``, ``s2_reflectance``, ``sar_power``: a
deterministic function of the scene) and the acquisition (``optical``, ``s2``, ``sar_db``: texture,
noise and speckle drawn from the scene's generator). The clean scenes chain the two directly; the
``hard`` realism level (``realism.py``) changes the signal between them (shadows, canopy, colours,
layover) and the image after them (haze, noise, misregistration).
"""

from __future__ import annotations

import numpy as np

from gauntlet.mcp_servers.disaster import spectra

OPTICAL_FACTOR = 4  # optical pixels per 10 m cell: 2.5 m
SAR_LOOKS = 4       # multi-looked speckle: gamma distributed with mean 1


def optical_reflectance(class_map: np.ndarray) -> np.ndarray:
    """Surface reflectance (0..1) of every 2.5 m pixel in red, green, blue, NIR: ``(h, w, 4)``."""
    return spectra.REFLECTANCE[:, spectra.OPTICAL_FROM_S2][class_map]


def optical(reflectance: np.ndarray, rng: np.random.Generator, gain: float) -> np.ndarray:
    """One look of ``reflectance`` (``(h, w, 4)``): 6 % texture, the look's gain and sensor noise, as
    reflectance ``(4, h, w)``."""
    texture = 1.0 + 0.06 * rng.standard_normal(reflectance.shape[:2])[..., None]
    noisy = reflectance * texture * gain + rng.normal(0, 0.004, reflectance.shape)
    return np.moveaxis(noisy, -1, 0)


def to_dn(reflectance: np.ndarray) -> np.ndarray:
    """Reflectance as stored: x 10000, uint16."""
    return np.clip(reflectance * spectra.REFLECTANCE_SCALE, 0, 65535).round().astype(np.uint16)


def s2_reflectance(class_map: np.ndarray) -> np.ndarray:
    """The 12 Sentinel-2 bands of every 10 m cell, mixed from its 2.5 m classes: ``(12, n, n)``."""
    fractions = spectra.class_fractions(class_map, OPTICAL_FACTOR)
    return np.tensordot(spectra.REFLECTANCE.T, fractions, axes=1)


def s2(reflectance: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One Sentinel-2 look of ``reflectance``: sensor noise added."""
    return reflectance + rng.normal(0, 0.003, reflectance.shape)


def sar_power(class_map: np.ndarray) -> np.ndarray:
    """Mean VV and VH backscatter (linear power) of every 10 m cell, mixed from its 2.5 m classes: ``(2, n, n)``."""
    fractions = spectra.class_fractions(class_map, OPTICAL_FACTOR)
    return np.tensordot((10 ** (spectra.BACKSCATTER_DB / 10)).T, fractions, axes=1)


def sar_db(power: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One multi-looked SAR look of ``power``: gamma speckle, in dB (float32)."""
    speckled = power * rng.gamma(SAR_LOOKS, 1.0 / SAR_LOOKS, power.shape)
    return (10 * np.log10(np.maximum(speckled, 1e-6))).astype(np.float32)


def cell_mean(values: np.ndarray) -> np.ndarray:
    """The mean of a 2.5 m raster over every 10 m cell."""
    h, w = values.shape
    return values.reshape(h // OPTICAL_FACTOR, OPTICAL_FACTOR, w // OPTICAL_FACTOR, OPTICAL_FACTOR).mean(axis=(1, 3))


def render_clean(pre_map: np.ndarray, post_map: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The six images of a clean scene, drawn from ``rng`` in the order the scene files are written."""
    return {"pre_optical": to_dn(optical(optical_reflectance(pre_map), rng, 1.0)),
            "post_optical": to_dn(optical(optical_reflectance(post_map), rng, 1.03)),
            "pre_s2": to_dn(s2(s2_reflectance(pre_map), rng)),
            "post_s2": to_dn(s2(s2_reflectance(post_map), rng)),
            "pre_sar": sar_db(sar_power(pre_map), rng),
            "post_sar": sar_db(sar_power(post_map), rng)}
