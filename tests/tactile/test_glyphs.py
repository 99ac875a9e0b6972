"""Glyphs: 248 classes from the DejaVu fonts shipped with matplotlib, counters as holes."""

from __future__ import annotations

import numpy as np

from gauntlet.envs.tactile import glyphs, heightfield


def test_there_are_at_least_200_distinct_glyph_classes():
    names = glyphs.class_names()
    assert len(names) == len(set(names)) == 248
    assert all(glyphs.font_path(face).is_file() for face in glyphs.FACES)


def test_counters_are_holes_and_case_keeps_its_size():
    big_o = glyphs.glyph_mask("O", "DejaVuSans.ttf", 128)
    small_o = glyphs.glyph_mask("o", "DejaVuSans.ttf", 128)
    assert not big_o[64, 64] and big_o[64].any()  # the counter of an O is empty, its ring is not
    assert small_o.sum() < big_o.sum()  # one scale for all glyphs: lower case stays smaller
    bold = glyphs.glyph_mask("O", "DejaVuSans-Bold.ttf", 128)
    assert bold.sum() > big_o.sum()


def test_glyph_objects_are_extruded_with_zero_borders_and_exact_volumes():
    objects = glyphs.load(count=6, resolution=64)
    assert len(objects) == 6 and objects.labels[0] == 0 and objects.labels[-1] == 247
    assert objects.fields[:, :heightfield.BORDER].max() == 0
    heights = objects.fields.astype(np.float64) * objects.height_scale_m
    volume, _ = heightfield.volume_and_centroid(heights, objects.footprint_m)
    assert np.allclose(volume, objects.volume_m3) and (volume > 0).all()


def test_the_wrench_has_its_documented_dimensions():
    from gauntlet.envs.tactile import wrench

    mask = wrench.wrench_mask(201)  # 0.5 mm between vertices
    spacing = wrench.FOOTPRINT_M / 200
    columns = np.flatnonzero(mask.any(axis=0))
    # the jaw cuts the middle of the open end's rim, so the tips sit beside the slot
    jaw_depth = np.sqrt(wrench.OPEN_END_RADIUS_M ** 2 - (wrench.JAW_WIDTH_M / 2) ** 2)
    tip = wrench.LENGTH_M / 2 - wrench.OPEN_END_RADIUS_M + jaw_depth
    assert abs((columns[-1] - columns[0]) * spacing - (tip + wrench.LENGTH_M / 2)) <= 2 * spacing
    centre_row = mask[100]
    ring_centre = 100 + round((-wrench.LENGTH_M / 2 + wrench.RING_END_RADIUS_M) / spacing)
    assert not centre_row[ring_centre]  # the ring end's hole
    assert not centre_row[100 + round((wrench.LENGTH_M / 2 - 0.002) / spacing)]  # the open jaw
    assert centre_row[100]  # the handle
    handle_rows = np.flatnonzero(mask[:, 100])
    assert abs(len(handle_rows) * spacing - wrench.HANDLE_WIDTH_M) <= 2 * spacing
