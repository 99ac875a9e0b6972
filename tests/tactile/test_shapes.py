"""Shapes: watertight CSG solids whose volume and centre of mass come from the mesh itself."""

from __future__ import annotations

import numpy as np
import pytest

from gauntlet.envs.tactile import heightfield, shapes

from .conftest import SMOKE_OBJECTS


def test_a_box_with_a_hole_has_the_analytic_volume_and_centre():
    parts = [{"kind": "box", "centre": np.zeros(2), "half": np.array([0.02, 0.01]), "z0": 0.0, "height": 0.005}]
    holes = [{"centre": np.array([0.01, 0.0]), "radius": 0.003}]
    solid = shapes.mesh(parts, holes)
    assert solid.is_watertight
    polygon_area = 0.5 * shapes.SEGMENTS * 0.003 ** 2 * np.sin(2 * np.pi / shapes.SEGMENTS)  # the hole's prism
    assert solid.volume == pytest.approx((0.04 * 0.02 - polygon_area) * 0.005, rel=1e-9)
    # the hole removes mass at x = +1 cm, so the centre moves to -x by area * 1 cm / remaining area
    expected_x = -polygon_area * 0.01 / (0.04 * 0.02 - polygon_area)
    assert solid.center_mass == pytest.approx([expected_x, 0.0, 0.0025], abs=1e-9)


def test_solids_have_no_overhangs_so_the_top_surface_holds_their_volume():
    rng = np.random.default_rng(3)
    for _ in range(6):
        parts, holes = shapes.design(rng)
        solid = shapes.mesh(parts, holes)
        assert solid.is_watertight and solid.volume > 0
        surface = shapes.top_surface(parts, holes, 256)
        field_volume, field_centre = heightfield.volume_and_centroid(surface, shapes.FOOTPRINT_M)
        # the sampled top surface approximates the polygonal mesh: agreement to grid resolution
        assert field_volume == pytest.approx(solid.volume, rel=0.03)
        assert np.allclose(field_centre[:2], solid.center_mass[:2], atol=5e-4)


def test_split_is_built_deterministically_with_mesh_targets():
    objects = shapes.load("test", count=SMOKE_OBJECTS)
    rng = np.random.default_rng(shapes.SPLIT_SEEDS["test"])
    first = shapes.mesh(*shapes.design(rng))
    assert objects.volume_m3[0] == first.volume and np.array_equal(objects.centroid_m[0], first.center_mass)
    assert len(objects) == SMOKE_OBJECTS and objects.fields.max() > 0
