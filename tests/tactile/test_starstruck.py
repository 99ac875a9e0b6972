"""Starstruck scenes: deterministic, separated shapes, labels that count stars."""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from gauntlet.envs.tactile import starstruck

from .conftest import SMOKE_OBJECTS


def test_scenes_are_deterministic_and_hold_two_to_five_separate_shapes():
    rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
    for _ in range(10):
        (field_a, stars_a), (field_b, stars_b) = starstruck.scene(rng_a, 128), starstruck.scene(rng_b, 128)
        assert np.array_equal(field_a, field_b) and stars_a == stars_b
        _, shapes = ndimage.label(field_a > 0)
        assert 1 <= stars_a <= 3 and stars_a + 1 <= shapes <= stars_a + 2


def test_a_star_has_five_tips_and_distractors_do_not():
    from matplotlib.path import Path

    # walk a circle at 0.8 of the circumradius: a star's outline crosses into it once per tip
    theta = np.linspace(0, 2 * np.pi, 720, endpoint=False)
    ring = np.stack([0.8 * np.cos(theta), 0.8 * np.sin(theta)], axis=1)
    for kind in ("star", *starstruck.DISTRACTORS):
        inside = Path(starstruck.outline(kind, 1.0, 0.3, np.zeros(2))).contains_points(ring)
        tips = np.count_nonzero(inside & ~np.roll(inside, 1))
        assert (tips == 5) == (kind == "star"), kind


def test_split_labels_cover_one_to_three_stars():
    objects = starstruck.load("train", count=SMOKE_OBJECTS)
    assert set(objects.labels.tolist()) == {0, 1, 2} and len(objects) == SMOKE_OBJECTS
    assert objects.fields.shape[1:] == (128, 128) and (objects.volume_m3 > 0).all()
