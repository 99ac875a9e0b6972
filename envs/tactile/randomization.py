"""Domain randomisation of the simulated sensor (the ``-DR`` envs): what is drawn per episode, from which range.

Every episode of a ``domain_randomization=True`` env draws, from its platform's own RNG after every
other draw of the reset (so ``reset(seed=s)`` repeats them, and envs without it draw exactly what
they drew before), three things the sensor model has a parameter for:

- **indentation**: the gel sinks ``PRESS_DEPTH_M`` (2.125 mm, half the gel) times a factor uniform
  in ``PRESS_SCALE_RANGE`` below the highest contact point: 1.59 to 2.66 mm. A softer or harder
  gel, or a robot pressing with another force, shows as a deeper or shallower imprint.
- **lighting**: per colour channel (one LED each) a relative brightness gain uniform in
  ``LED_GAIN_RANGE`` and an additive offset uniform in ``LIGHT_OFFSET_RANGE`` (image units, [0, 1]
  before the map to [-1, 1]): LED intensities and ambient light.
- **sensor noise**: the standard deviation of the per-frame Gaussian pixel noise, uniform in
  ``FRAME_NOISE_STD_RANGE`` (image units).

The model has no parameter for the gel's elasticity (there is no elasticity model), the LED
directions, the calibration coefficients or the vignetting, so those are not randomised. The draws
add to the fixed ``episode_noise``/``frame_noise`` options when both are set: the colour gains are
the sum of both draws, and the pixel noise's variance the sum of both variances.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gauntlet.envs.tactile.sensor import PRESS_DEPTH_M

PRESS_SCALE_RANGE = (0.75, 1.25)
LED_GAIN_RANGE = (-0.15, 0.15)
LIGHT_OFFSET_RANGE = (-0.04, 0.04)
FRAME_NOISE_STD_RANGE = (0.0, 0.02)


@dataclass(frozen=True)
class EpisodeAppearance:
    """One episode's randomised sensor parameters."""

    press_depth_m: float
    colour_gains: np.ndarray  # (2, 3): per-channel relative gain, then offset
    frame_noise_std: float


def draw_episode_appearance(rng: np.random.Generator) -> EpisodeAppearance:
    """The randomised sensor parameters of a new episode, drawn from ``rng`` (always four calls)."""
    press_scale = rng.uniform(*PRESS_SCALE_RANGE)
    gains = rng.uniform(*LED_GAIN_RANGE, size=3)
    offsets = rng.uniform(*LIGHT_OFFSET_RANGE, size=3)
    noise_std = rng.uniform(*FRAME_NOISE_STD_RANGE)
    return EpisodeAppearance(float(np.float32(PRESS_DEPTH_M * press_scale)), np.stack([gains, offsets]),
                             float(noise_std))
