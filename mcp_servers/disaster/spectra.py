"""Land-cover classes and their signatures: 12-band Sentinel-2-like reflectance and C-band SAR
backscatter (VV/VH, dB). Optical RGB+NIR uses the B4/B3/B2/B8 columns of the same table."""

from __future__ import annotations

import numpy as np

CLASSES = ("water", "flood_water", "dense_vegetation", "grass", "bare_soil", "urban_ground", "road",
           "roof_concrete", "roof_tile", "rubble", "burned", "lava", "mud",
           # small objects (scene_objects.py): painted metal, ship decks, white tank roofs, pool water
           "vehicle", "ship", "tank_roof", "pool_water")
CLASS = {name: index for index, name in enumerate(CLASSES)}

S2_BANDS = ("B1", "B2", "B3", "B4", "B5", "B6", "B7", "B8", "B8A", "B9", "B11", "B12")
S2_WAVELENGTH_NM = (443, 490, 560, 665, 705, 740, 783, 842, 865, 945, 1610, 2190)
OPTICAL_BANDS = ("red", "green", "blue", "nir")
OPTICAL_FROM_S2 = (3, 2, 1, 7)
REFLECTANCE_SCALE = 10000.0

# Rows follow CLASSES; columns follow S2_BANDS (surface reflectance, 0..1).
REFLECTANCE = np.array([
    [.060, .050, .040, .020, .015, .010, .010, .010, .008, .005, .003, .002],
    [.090, .100, .120, .110, .090, .070, .060, .050, .045, .030, .020, .015],
    [.030, .040, .070, .040, .100, .280, .360, .400, .410, .350, .200, .090],
    [.050, .060, .090, .080, .140, .240, .280, .300, .310, .270, .250, .140],
    [.100, .120, .160, .210, .240, .260, .270, .280, .290, .270, .340, .280],
    [.130, .140, .160, .180, .190, .200, .210, .220, .220, .200, .240, .210],
    [.090, .100, .110, .120, .120, .130, .130, .140, .140, .130, .150, .140],
    [.220, .240, .260, .280, .290, .300, .300, .310, .310, .290, .330, .300],
    [.080, .090, .120, .250, .280, .300, .310, .320, .320, .300, .380, .320],
    [.120, .120, .120, .150, .160, .160, .170, .170, .170, .160, .240, .220],
    [.040, .040, .050, .060, .070, .080, .090, .100, .100, .100, .180, .200],
    [.030, .030, .030, .030, .030, .030, .030, .030, .030, .030, .040, .050],
    [.120, .140, .170, .200, .220, .230, .240, .240, .240, .220, .270, .240],
    [.400, .420, .440, .450, .450, .450, .450, .450, .450, .440, .400, .380],
    [.200, .210, .220, .230, .260, .280, .290, .300, .300, .280, .250, .220],
    [.500, .540, .560, .570, .570, .570, .570, .570, .570, .560, .520, .480],
    [.200, .250, .220, .080, .050, .040, .030, .030, .030, .020, .010, .010],
])

# Rows follow CLASSES; columns VV, VH in dB. Roofs are bright from double bounce; water is dark.
BACKSCATTER_DB = np.array([
    [-22.0, -29.0], [-19.0, -27.0], [-8.0, -14.0], [-11.0, -18.0], [-13.0, -21.0], [-9.0, -17.0],
    [-15.0, -23.0], [-2.0, -9.0], [-2.5, -9.5], [-7.0, -15.0], [-12.0, -20.0], [-10.0, -18.0], [-14.0, -22.0],
    [-3.0, -12.0], [1.0, -6.0], [-1.0, -8.0], [-20.0, -28.0],
])


def class_fractions(class_map: np.ndarray, factor: int) -> np.ndarray:
    """Fraction of each class in every ``factor x factor`` block: ``(n_classes, h/f, w/f)``."""
    h, w = class_map.shape
    onehot = np.stack([class_map == k for k in range(len(CLASSES))]).astype(np.float32)
    return onehot.reshape(len(CLASSES), h // factor, factor, w // factor, factor).mean(axis=(2, 4))
