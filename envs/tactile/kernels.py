"""The fused touch kernel: depth map and tactile RGB of a batch of sensors in one compiled pass.

The NumPy renderer (``TactileRenderer.grid_coordinates`` / ``depth`` / ``tactile_rgb``) spends
about 45 whole-array passes and ~100 small calls per step. This kernel does the same arithmetic,
pixel by pixel, in three sweeps over each env's image while it sits in the L1 cache:

1. field coordinates f = A (u, v) + b, clamp, sample the triangulated height field (scene height),
   keeping the maximum (the gel's resting point);
2. depth = max(scene - (max(top, 0) - press), 0), with each env's own press depth;
3. slopes by central differences (edges replicated) -> look-up bin -> calibrated colour + background
   (+ per-episode gain/offset and per-frame noise) -> clip to [-1, 1].

It is written to give **bit-identical** float32 results to the NumPy path: every operation is the
same IEEE float32 operation in the same order (no fast-math, so no reassociation or fused
multiply-adds), integer indices are exact in both (here int32 arithmetic; the NumPy path's float32
index arithmetic is exact below 2^24 vertices per batch, e.g. 1,024 envs of 128 x 128).
``tests/tactile/test_kernel.py`` checks this on random scenes, poses and noise. It needs ``numba``;
without it ``AVAILABLE`` is False and the renderer keeps the NumPy path.
"""

from __future__ import annotations

import numpy as np

try:  # numba is optional: the NumPy renderer is the reference and the fallback
    import numba
except ImportError:  # pragma: no cover - depends on the installation
    AVAILABLE = False
else:
    AVAILABLE = True


def _render_batch(fields_flat, offsets, cosines, object_xy, sensor_xy, scale, half, u, v, resolution, border, press_m,
                  lut, background, bins_x, bins_y, centre, top_bin, lut_bins, gains, noise, use_gains, use_noise,
                  signed, rgb, depth_out, contact_out, image_out):  # pragma: no cover - compiled
    """Render every env b of the batch into ``depth_out[b]``, ``contact_out[b]`` and ``image_out[b]``.

    ``cosines`` (4, n): ``TactileRenderer.pose_cosines``; with the poses (float64) they give the
    float32 map fx = a u + b v + c, fy = d u + e v + f of ``TactileRenderer.pose_coefficients``.
    ``signed``: ``lut`` and ``background`` are pre-scaled to [-1, 1] (no colour noise). ``press_m`` (n,)
    float32: how far each env's gel sinks below the highest contact point.
    """
    n = cosines.shape[1]
    height = v.shape[0]
    width = u.shape[0]
    zero = np.float32(0.0)
    limit = np.float32(resolution - border)
    # Per-row scratch. Each sweep is split into a loop without look-ups (which the compiler turns
    # into SIMD code) and a loop that does the look-ups.
    row_index = np.empty(width, np.int32)
    row_side = np.empty(width, np.int32)
    row_t_side = np.empty(width, np.float32)
    row_t_diag = np.empty(width, np.float32)
    row_entry = np.empty(width, np.int32)
    diagonal = np.int32(resolution + 1)
    for b in range(n):
        # pose_coefficients, operation for operation in float64, rounded to float32
        cos_rel, sin_rel, cos_o, sin_o = cosines[0, b], cosines[1, b], cosines[2, b], cosines[3, b]
        dx = sensor_xy[b, 0] - object_xy[b, 0]
        dy = sensor_xy[b, 1] - object_xy[b, 1]
        a_ = np.float32(cos_rel * scale)
        b_ = np.float32(sin_rel * -scale)
        c_ = np.float32((cos_o * dx + sin_o * dy) * scale + half)
        d_ = np.float32(sin_rel * scale)
        e_ = a_
        f_ = np.float32((cos_o * dy - sin_o * dx) * scale + half)
        base = np.int32(offsets[b])
        depth = depth_out[b]
        top = np.float32(-np.inf)
        # sweep 1: scene height on the triangulated surface (heightfield.sample)
        for i in range(height):
            bv = b_ * v[i]
            ev = e_ * v[i]
            for j in range(width):
                fx = a_ * u[j] + bv + c_  # (a u + b v) + c, grid_coordinates' order
                fy = d_ * u[j] + ev + f_
                fx = min(max(fx, zero), limit)
                fy = min(max(fy, zero), limit)
                x0 = np.int32(fx)  # fx >= 0: truncation is floor
                y0 = np.int32(fy)
                tx = fx - np.float32(x0)
                ty = fy - np.float32(y0)
                index = base + y0 * np.int32(resolution) + x0
                # triangle (00, 10, 11) if tx >= ty, else (00, 11, 01)
                upper = tx >= ty
                row_index[j] = index
                row_side[j] = index + (np.int32(1) if upper else np.int32(resolution))
                row_t_side[j] = tx if upper else ty
                row_t_diag[j] = ty if upper else tx
            for j in range(width):
                h00 = fields_flat[row_index[j]]
                h_side = fields_flat[row_side[j]]
                h11 = fields_flat[row_index[j] + diagonal]
                # h00 + t_side (h_side - h00) + t_diag (h11 - h_side), in heightfield.sample's order
                depth[i, j] = h00 + (h_side - h00) * row_t_side[j] + (h11 - h_side) * row_t_diag[j]
        # the highest point: four running maxima, not one, so the comparisons do not wait on each
        # other (the maximum is exact in any order)
        flat = depth.reshape(height * width)
        top1 = top2 = top3 = top
        quads = (height * width) // 4 * 4
        for k in range(0, quads, 4):
            top = max(top, flat[k])
            top1 = max(top1, flat[k + 1])
            top2 = max(top2, flat[k + 2])
            top3 = max(top3, flat[k + 3])
        for k in range(quads, height * width):
            top = max(top, flat[k])
        top = max(max(top, top1), max(top2, top3))
        # sweep 2: the gel rests on the highest point (the platform at 0 is the floor) and sinks by press
        press = press_m[b]
        gel_z = max(top, zero) - press
        contact_out[b] = gel_z + press
        for i in range(height):
            for j in range(width):
                depth[i, j] = max(depth[i, j] - gel_z, zero)
        if not rgb:
            continue
        # sweep 3: slopes -> calibrated colour (sensor.tactile_rgb)
        _colour_env(depth, image_out[b], b, lut, background, bins_x, bins_y, centre, top_bin, lut_bins, gains, noise,
                    use_gains, use_noise, signed, row_entry)


def _colour_env(depth, image, b, lut, background, bins_x, bins_y, centre, top_bin, lut_bins, gains, noise, use_gains,
                use_noise, signed, row_entry):  # pragma: no cover - compiled
    """Env ``b``'s tactile image from its depth map (``sensor.tactile_rgb``, bit for bit): edges are
    replicated; the table entry is int(bin_y) * LUT_BINS + int(bin_x), each bin = clamp(difference *
    scale + centre). ``row_entry``: scratch of the image's width."""
    height, width = depth.shape
    zero = np.float32(0.0)
    one = np.float32(1.0)
    two = np.float32(2.0)
    for i in range(height):
        up = max(i - 1, 0)
        down = min(i + 1, height - 1)
        for j in range(width):
            bin_y = (depth[up, j] - depth[down, j]) * bins_y + centre  # rows run towards -y
            row_entry[j] = np.int32(min(max(bin_y, zero), top_bin)) * np.int32(lut_bins)
        bin_x = (depth[i, 1] - depth[i, 0]) * bins_x + centre
        row_entry[0] += np.int32(min(max(bin_x, zero), top_bin))
        for j in range(1, width - 1):
            bin_x = (depth[i, j + 1] - depth[i, j - 1]) * bins_x + centre
            row_entry[j] += np.int32(min(max(bin_x, zero), top_bin))
        bin_x = (depth[i, width - 1] - depth[i, width - 2]) * bins_x + centre
        row_entry[width - 1] += np.int32(min(max(bin_x, zero), top_bin))
        if signed:  # table and background pre-scaled to [-1, 1]
            for j in range(width):
                entry = row_entry[j]
                for c in range(3):
                    image[i, j, c] = min(max(lut[entry, c] + background[i, j, c], -one), one)
            continue
        for j in range(width):
            entry = row_entry[j]
            for c in range(3):
                value = lut[entry, c] + background[i, j, c]
                if use_gains:
                    value = value * (one + gains[b, 0, c])
                    value = value + gains[b, 1, c]
                if use_noise:
                    value = value + noise[b, i, j, c]
                value = value * two
                value = value - one
                image[i, j, c] = min(max(value, -one), one)


def _colour_batch(depth, lut, background, bins_x, bins_y, centre, top_bin, lut_bins, gains, noise, use_gains,
                  use_noise, signed, image_out):  # pragma: no cover - compiled
    """Sweep 3 of ``render_batch`` alone, for depth maps computed elsewhere (the tilted sensor's)."""
    row_entry = np.empty(depth.shape[2], np.int32)
    for b in range(depth.shape[0]):
        _colour_env(depth[b], image_out[b], b, lut, background, bins_x, bins_y, centre, top_bin, lut_bins, gains,
                    noise, use_gains, use_noise, signed, row_entry)


if AVAILABLE:
    # Not numba's parallel=True: on a loaded machine waking its worker threads cost ~20 ms per call
    # (measured), against ~20 us of work per env. nogil lets TactileRenderer split a batch over
    # plain threads instead (render_threads). cache: compile once per installation, not per process.
    # Without numba there is no render_batch: the renderer checks AVAILABLE before it calls the kernel.
    # the kernels find the compiled _colour_env among their globals when numba compiles them
    _colour_env = numba.njit(cache=True, inline="always", error_model="numpy")(_colour_env)
    render_batch = numba.njit(cache=True, nogil=True, error_model="numpy")(_render_batch)
    colour_batch = numba.njit(cache=True, nogil=True, error_model="numpy")(_colour_batch)
