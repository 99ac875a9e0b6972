"""The fused touch kernel gives the NumPy renderer's bits: depth, contact height and tactile RGB."""

from __future__ import annotations

import numpy as np
import pytest

from gauntlet.envs.tactile import heightfield, kernels
from gauntlet.envs.tactile.env import TactilePerceptionVectorEnv
from gauntlet.envs.tactile.sensor import SensorConfig, TactileRenderer

from .conftest import SMOKE_OBJECTS

needs_numba = pytest.mark.skipif(not kernels.AVAILABLE, reason="the fused kernel needs numba")


def _scenes(rng: np.random.Generator, count: int, resolution: int) -> np.ndarray:
    """Rough random reliefs (steep, flat and empty regions) inside the zero border, in metres."""
    fields = rng.uniform(0, 0.004, (count, resolution, resolution)).astype(np.float32)
    fields *= rng.uniform(0, 1, (count, resolution, resolution)) > 0.3  # sharp holes: extreme slopes
    fields[:, :resolution // 3] *= 0.0  # flat platform regions: zero slopes, no contact
    fields[:, :heightfield.BORDER] = fields[:, -heightfield.BORDER:] = 0
    fields[:, :, :heightfield.BORDER] = fields[:, :, -heightfield.BORDER:] = 0
    return fields


def _render_both(renderer: TactileRenderer, fields: np.ndarray, rng: np.random.Generator, *, gains: bool,
                 noise: bool, rgb: bool):
    n, resolution = len(fields), fields.shape[-1]
    offsets = (np.arange(n) * resolution ** 2).astype(np.float32)[:, None, None]
    # poses reaching past the field's edge too: clamped look-ups must agree
    poses = (rng.uniform(-0.005, 0.005, (n, 2)), rng.uniform(-np.pi, np.pi, n), rng.uniform(-0.02, 0.02, (n, 2)),
             rng.uniform(-np.pi, np.pi, n))
    height, width = renderer.config.image_size
    colour_gains = rng.normal(0, 0.2, (n, 2, 3)).astype(np.float32) if gains else None
    pixel_noise = rng.normal(0, 0.1, (n, height, width, 3)).astype(np.float32) if noise else None
    results = {}
    for backend in ("numpy", "numba"):
        renderer.backend = backend
        results[backend] = renderer.render(fields.reshape(-1), offsets, *poses, colour_gains, pixel_noise, rgb)
    return results["numpy"], results["numba"]


@needs_numba
@pytest.mark.parametrize("image_size", [(64, 64), (24, 40), (5, 4)])
@pytest.mark.parametrize("gains,noise", [(False, False), (True, False), (False, True), (True, True)])
def test_fused_kernel_is_bit_identical_to_the_numpy_renderer(image_size, gains, noise):
    rng = np.random.default_rng(hash((image_size, gains, noise)) % 2 ** 32)
    resolution = 33
    renderer = TactileRenderer(SensorConfig(image_size), resolution, 0.03)  # ~1 mm vertices: steep slopes
    fields = _scenes(rng, 12, resolution)
    (depth, contact, image), (fused_depth, fused_contact, fused_image) = _render_both(
        renderer, fields, rng, gains=gains, noise=noise, rgb=True)
    assert fused_depth.dtype == fused_image.dtype == np.float32
    assert np.array_equal(depth, fused_depth) and np.array_equal(contact, fused_contact)
    assert np.array_equal(image, fused_image)
    # the scenes exercise the cases: pixels in and out of contact, many slopes, clipped colours
    assert (depth == 0).any() and (depth > 0).any()
    if image_size == (64, 64):
        assert len(np.unique(image[..., 0])) > 100
    if noise:
        assert (np.abs(image) == 1).any()


@needs_numba
def test_fused_kernel_depth_only_matches_and_returns_no_image():
    rng = np.random.default_rng(7)
    renderer = TactileRenderer(SensorConfig((16, 16)), 33, 0.03)
    (depth, contact, image), (fused_depth, fused_contact, fused_image) = _render_both(
        renderer, _scenes(rng, 3, 33), rng, gains=False, noise=False, rgb=False)
    assert image is None and fused_image is None
    assert np.array_equal(depth, fused_depth) and np.array_equal(contact, fused_contact)


@needs_numba
@pytest.mark.parametrize("family", ["TactileMNIST", "Starstruck", "ShapesVolume"])  # ShapesVolume: the sensor turns
def test_vector_env_gives_the_same_bits_with_either_backend_across_autoresets_and_noise(family):
    trajectories = {}
    for backend in ("numpy", "numba"):
        env = TactilePerceptionVectorEnv(3, family, objects_per_split=SMOKE_OBJECTS, image_size=(20, 28),
                                         episode_noise=0.1, frame_noise=0.05)
        env.sim.renderer.backend = backend
        action_space = env.action_space
        action_space.seed(0)
        observation, _ = env.reset(seed=11)
        steps = [observation]
        for _ in range(env.task.step_limit + 3):  # includes the autoreset step
            observation, reward, *_ = env.step(action_space.sample())
            steps.append({**observation, "reward": reward})
        trajectories[backend] = steps
    for slow, fast in zip(trajectories["numpy"], trajectories["numba"]):
        assert slow.keys() == fast.keys()
        for key in slow:
            assert np.array_equal(slow[key], fast[key]), key


@needs_numba
def test_splitting_a_batch_over_threads_changes_no_bit():
    envs = [TactilePerceptionVectorEnv(5, objects_per_split=SMOKE_OBJECTS, image_size=(12, 16), frame_noise=0.05,
                                       render_threads=threads) for threads in (1, 2, 3)]
    observations = [env.reset(seed=4)[0] for env in envs]
    rng = np.random.default_rng(1)
    for _ in range(5):
        action = {"action": rng.uniform(-1, 1, (5, 2)), "prediction": rng.normal(size=(5, 10))}
        observations = [env.step(action)[0] for env in envs]
        for other in observations[1:]:
            assert all(np.array_equal(observations[0][key], other[key]) for key in other)


@pytest.mark.parametrize("threads", [0, 1.5, "2", True])
def test_render_threads_must_be_a_positive_int(threads):
    with pytest.raises(ValueError, match="render_threads"):
        TactilePerceptionVectorEnv(2, objects_per_split=SMOKE_OBJECTS, render_threads=threads)


def test_unknown_backend_is_a_value_error_naming_the_choices():
    renderer = TactileRenderer(SensorConfig((8, 8)), 9, 0.01)
    renderer.backend = "cuda"
    fields = np.zeros(81, np.float32)
    with pytest.raises(ValueError, match="'numpy' or 'numba'"):
        renderer.render(fields, np.zeros((1, 1, 1), np.float32), np.zeros((1, 2)), np.zeros(1), np.zeros((1, 2)),
                        np.zeros(1))


def test_default_backend_is_the_fused_kernel_when_numba_is_installed():
    renderer = TactileRenderer(SensorConfig((8, 8)), 9, 0.01)
    assert renderer.backend == ("numba" if kernels.AVAILABLE else "numpy")
