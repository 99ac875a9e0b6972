"""The ``hard`` realism level: deterministic, the clean level unchanged, the same truth, and every effect
present and measurable (shadows, canopy, colours, parking lots, haze, noise, misregistration, layover)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import rasterio

from gauntlet.mcp_servers.disaster import imaging
from gauntlet.mcp_servers.disaster.scenes import build_scenes

EVENT = "turkiye-2023-earthquake"
# The time series' files (timeseries.py), added beside the published scene since builder version 3.
TIME_SERIES_FILE = re.compile(r"t\d+_.*|timeline(\.json)?")
SIZE_PX = 96
EXPERIMENT = Path(__file__).resolve().parents[2] / "experiments" / "disaster_hard.py"

# Digests of the decoded content (raster values and transforms, JSON and GeoJSON text) of the clean scenes of
# these events at 64 x 64 cells, seed 0, recorded with the scene builder as it was before the hard level existed
# (builder version 2), then again when the slope raster came to be computed in float64: numpy's float32 arctan
# gave slope.tif different last bits on CPUs with and without AVX-512. Computing it in float64 moved slope.tif by at
# most three float32 steps (under 1e-5 degrees) on 62 % of its cells and changed no other file (truth included), so
# the builder kept its version (3). The clean level is the published scenes: this must never change without a new
# version. The digests must not depend on the CPU: test_the_scenes_are_the_same_bits_without_avx512 builds them
# again with numpy's AVX-512 paths off.
CLEAN_DIGESTS = {"ahr-2021-flood": "fdb62ce67fcc087eeae07c4738acfb0f707817b871c24267dbd1d25eead179fa",
                 "turkiye-2023-earthquake": "fe89e972c3a9f6db3024f565f65abd644e9615b0babed5c3c2eb402336ef07ea"}


def content_digest(folder: Path, event: str) -> str:
    """SHA-256 over an event's scene and truth files, rasters by their decoded values (independent of how
    GDAL compresses them), GeoPackages left out (their bytes are pyogrio's; the GeoJSON carries the same)."""
    digest = hashlib.sha256()
    for sub in ("scenes", "truth"):
        for path in sorted((folder / sub / event).iterdir()):
            if path.suffix == ".gpkg" or TIME_SERIES_FILE.fullmatch(path.name):
                continue
            digest.update(f"{sub}/{path.name}".encode())
            if path.name == "manifest.json":  # the published manifest, without the time series' entries
                manifest = json.loads(path.read_text())
                manifest.pop("timeline", None)
                manifest["layers"] = {name: layer for name, layer in manifest["layers"].items()
                                      if not TIME_SERIES_FILE.fullmatch(name)}
                digest.update(json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode())
            elif path.suffix == ".tif":
                with rasterio.open(path) as src:
                    data = src.read()
                    digest.update(f"{data.dtype}{data.shape}{tuple(src.transform)}".encode())
                    digest.update(data.tobytes())
            else:
                digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def levels(tmp_path_factory) -> dict[str, Path]:
    """One event at both levels, same seed; and the hard level without its haze (every other draw the same)."""
    from gauntlet.mcp_servers.disaster import realism

    root = tmp_path_factory.mktemp("disaster-hard")
    for level in ("clean", "hard"):
        build_scenes(root / level, events=[EVENT], size_px=SIZE_PX, seed=0, realism=level)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(realism, "HAZE_TAU_550", (0.0, 0.0))
        build_scenes(root / "clear", events=[EVENT], size_px=SIZE_PX, seed=0, realism="hard")
    return {"clean": root / "clean", "hard": root / "hard", "hard without haze": root / "clear"}


def _read(levels, level: str, name: str) -> tuple[np.ndarray, rasterio.Affine]:
    with rasterio.open(levels[level] / "scenes" / EVENT / name) as src:
        return src.read().astype(np.float64), src.transform


def _json(levels, level: str, *parts: str):
    return json.loads((levels[level].joinpath(*parts)).read_text())


def _footprints_px(levels, transform) -> list[tuple[int, int, int, int]]:
    """Building footprints as (row0, row1, col0, col1) of the optical grid."""
    inverse = ~transform
    boxes = []
    for feature in _json(levels, "hard", "scenes", EVENT, "buildings.geojson")["features"]:
        (x0, y0), (x1, y1) = feature["geometry"]["coordinates"][0][0], feature["geometry"]["coordinates"][0][2]
        c0, r0 = inverse @ (x0, y0)  # the ring starts at the north-west corner
        c1, r1 = inverse @ (x1, y1)
        boxes.append((round(r0), round(r1), round(c0), round(c1)))
    return boxes


# The clean level ----------------------------------------------------------------------------------
def test_the_default_level_is_clean_and_builds_the_published_scenes_unchanged(tmp_path):
    build_scenes(tmp_path, events=sorted(CLEAN_DIGESTS), size_px=64, seed=0)
    assert {event: content_digest(tmp_path, event) for event in CLEAN_DIGESTS} == CLEAN_DIGESTS
    assert "realism" not in json.loads((tmp_path / "scenes" / "events.json").read_text())
    assert not (tmp_path / "truth" / "ahr-2021-flood" / "realism.json").exists()


def test_the_scenes_are_the_same_bits_without_avx512(tmp_path):
    """numpy picks its SIMD paths by CPU at start-up; a builder that leans on one (float32 arctan did) builds other
    files on another machine. Building in a child with numpy's AVX-512 paths off must give the same digests."""
    script = ("import sys; from pathlib import Path; from gauntlet.mcp_servers.disaster.scenes import build_scenes; "
              f"build_scenes(Path(sys.argv[1]), events={sorted(CLEAN_DIGESTS)!r}, size_px=64, seed=0)")
    env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR"}
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], env=env, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert {event: content_digest(tmp_path, event) for event in CLEAN_DIGESTS} == CLEAN_DIGESTS


def test_an_unknown_level_is_refused_with_the_levels_named(tmp_path):
    from gauntlet.errors import UserError

    with pytest.raises(UserError, match="clean, hard"):
        build_scenes(tmp_path, events=[EVENT], size_px=64, realism="foggy")


def test_the_hard_level_has_its_own_cache_entries_and_the_clean_keys_are_unchanged(monkeypatch, tmp_path):
    import gauntlet.datacache as datacache
    from gauntlet.mcp_servers.disaster import data
    from gauntlet.mcp_servers.disaster.realism import RENDER_VERSION
    from gauntlet.mcp_servers.disaster.scenes import BUILDER_VERSION

    asked = []
    monkeypatch.setattr(datacache, "ensure_built", lambda name, version, build, *, params=None, inputs=():
                        asked.append((name, version, params)) or tmp_path)
    data.build_default()
    data.build_default(realism="hard")
    data.build_subset(["ahr-2021-flood"], size_px=64)
    data.build_subset(["ahr-2021-flood"], size_px=64, realism="hard")
    subset = {"events": ["ahr-2021-flood"], "size_px": 64, "seed": 0}
    hard = ("disaster-hard", f"{BUILDER_VERSION}-hard{RENDER_VERSION}")
    assert asked == [("disaster", BUILDER_VERSION, None), (*hard, None), ("disaster", BUILDER_VERSION, subset),
                     (*hard, subset)]


# Determinism and truth ----------------------------------------------------------------------------
def test_building_the_hard_level_twice_gives_identical_files(tmp_path):
    for name in ("a", "b"):
        build_scenes(tmp_path / name, events=[EVENT], size_px=64, seed=5, realism="hard")
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert any(p.name == "realism.json" for p in files)
    for relative in files:
        assert (tmp_path / "a" / relative).read_bytes() == (tmp_path / "b" / relative).read_bytes(), relative


def test_the_truth_is_the_same_at_both_levels_plus_the_parking_lot_cars(levels):
    for name in ("damage.json",):
        assert (levels["clean"] / "truth" / EVENT / name).read_bytes() == \
            (levels["hard"] / "truth" / EVENT / name).read_bytes()
    for name in ("buildings.geojson", "roads.geojson", "pois.geojson", "admin.geojson", "dem.tif", "slope.tif",
                 "population.tif"):
        assert (levels["clean"] / "scenes" / EVENT / name).read_bytes() == \
            (levels["hard"] / "scenes" / EVENT / name).read_bytes(), name
    masks = [rasterio.open(levels[level] / "truth" / EVENT / "hazard_mask.tif").read() for level in ("clean", "hard")]
    assert np.array_equal(*masks)
    clean, hard = (_json(levels, level, "truth", EVENT, "objects.json") for level in ("clean", "hard"))
    assert clean["bridges"] == hard["bridges"]
    for kind in ("vehicles", "ships", "tanks", "pools"):
        for before, after in zip(clean[kind], hard[kind]):
            assert {key: after[key] for key in before} == before
            assert 0.0 <= after["occluded_fraction"] <= 1.0 and 0.0 <= after["shadowed_fraction"] <= 1.0
        extra = hard[kind][len(clean[kind]):]
        assert all(record["parking_lot"] for record in extra) if kind == "vehicles" else not extra
    assert len(hard["vehicles"]) > len(clean["vehicles"])


# The effects --------------------------------------------------------------------------------------
def test_a_box_casts_its_shadow_away_from_the_sun_as_long_as_its_height_allows():
    height = np.zeros((40, 40), np.float32)
    height[20:24, 18:22] = 10.0  # a 10 m box
    # Sun due south at 45 degrees: a 10 m shadow, four 2.5 m pixels, to the north (up).
    shadow = imaging.cast_shadows(height, 2.5, 180.0, 45.0)
    expected = np.zeros_like(shadow)
    expected[16:20, 18:22] = True
    assert np.array_equal(shadow, expected)
    # Sun in the west, lower: a longer shadow to the east.
    east = imaging.cast_shadows(height, 2.5, 270.0, math.degrees(math.atan(0.5)))
    assert east[20:24, 22:30].all() and not east[20:24, 30:].any() and not east[:, :18].any()


def test_shadows_darken_the_ground_on_the_side_away_from_the_sun(levels):
    sun = _json(levels, "hard", "truth", EVENT, "realism.json")
    step_r, step_c = imaging.toward(sun["sun_azimuth_deg"])
    ratios = {}
    for level in ("clean", "hard"):
        optical, transform = _read(levels, level, "pre_optical.tif")
        brightness = optical.mean(axis=0)
        away, toward_sun = [], []
        for r0, r1, c0, c1 in _footprints_px(levels, transform):
            centre = np.array([(r0 + r1) / 2, (c0 + c1) / 2])
            reach = np.array([(r1 - r0) / 2 + 1.5, (c1 - c0) / 2 + 1.5])
            for sign, bucket in ((-1, away), (1, toward_sun)):
                r, c = (centre + sign * reach * np.array([step_r, step_c])).round().astype(int)
                if 0 <= r < brightness.shape[0] and 0 <= c < brightness.shape[1]:
                    bucket.append(brightness[r, c])
        ratios[level] = float(np.median(away) / np.median(toward_sun))
    assert ratios["hard"] < 0.7 < 0.9 < ratios["clean"], ratios
    assert 0.05 < sun["shadow_share"]["pre"] < 0.5


def test_the_sun_follows_the_date_and_latitude_of_the_event():
    azimuth, elevation = imaging.sun_position(0.0, 80, 12.0)  # equator, equinox, noon: overhead
    assert elevation > 89
    north_summer = imaging.sun_position(50.5, 196, 10.5)      # Ahr in July, mid-morning: south-east, high
    assert 100 < north_summer[0] < 160 and 45 < north_summer[1] < 60
    south = imaging.sun_position(-35.0, 196, 10.5)            # southern winter: north-east, low
    assert 10 < south[0] < 80 and 10 < south[1] < 35


def test_trees_hide_some_objects_that_stay_in_the_truth(levels):
    truth = _json(levels, "hard", "truth", EVENT, "objects.json")
    # Without the haze, whose veil flattens NDVI, above all of shaded leaves.
    optical, transform = _read(levels, "hard without haze", "pre_optical.tif")
    red, nir = optical[0], optical[3]
    ndvi = (nir - red) / np.maximum(nir + red, 1)
    hidden = [v for v in truth["vehicles"] if v["occluded_fraction"] == 1.0]
    assert hidden
    for v in hidden:
        col, row = ~transform @ (v["x"], v["y"])
        assert ndvi[int(row), int(col)] > 0.3  # the pixel shows leaves, not the car
    realism = _json(levels, "hard", "truth", EVENT, "realism.json")
    assert realism["trees"]["count"] > 50


def test_cars_and_roofs_come_in_many_colours_and_lots_pack_cars_side_by_side(levels):
    truth = _json(levels, "hard", "truth", EVENT, "objects.json")["vehicles"]
    colours = {v["colour"] for v in truth}
    assert {"white", "black", "grey"} <= colours and len(colours) >= 5
    lot = np.array([(v["x"], v["y"]) for v in truth if v["parking_lot"]])
    spacing = np.hypot(*(lot[:, None, :] - lot[None, :, :]).transpose(2, 0, 1))
    np.fill_diagonal(spacing, np.inf)
    assert np.median(spacing.min(axis=1)) == pytest.approx(2.5)  # neighbours one 2.5 m bay apart
    roofs = _json(levels, "hard", "truth", EVENT, "realism.json")["roof_colours"]
    assert len(set(roofs.values())) >= 5


def test_haze_lowers_contrast_more_at_shorter_wavelengths():
    rng = np.random.default_rng(0)
    scene = rng.uniform(0.02, 0.5, (2, 32, 32))
    transmittance = imaging.haze_transmittance(np.full((32, 32), 0.2), (490, 842), air_mass=2.5)
    hazy = imaging.add_haze(scene, transmittance)
    contrast = hazy.std(axis=(1, 2)) / scene.std(axis=(1, 2))
    assert contrast[0] < contrast[1] < 1.0  # blue loses more contrast than NIR
    assert np.allclose(contrast, transmittance[:, 0, 0])
    for band in range(2):  # dark targets brighten, bright ones darken
        dark, bright = scene[band] < 0.1, scene[band] > 0.4
        assert hazy[band][dark].mean() > scene[band][dark].mean()
        assert hazy[band][bright].mean() < scene[band][bright].mean()


def test_the_hazy_scene_has_less_contrast_than_the_same_scene_without_haze(levels):
    tau = _json(levels, "hard", "truth", EVENT, "realism.json")["haze_tau_550"]
    assert tau["pre"] > 0 and tau["post"] > 0
    for name in ("pre_optical.tif", "post_optical.tif"):
        hazy, _ = _read(levels, "hard", name)
        clear, _ = _read(levels, "hard without haze", name)
        assert (hazy.std(axis=(1, 2)) < clear.std(axis=(1, 2))).all(), name
        assert hazy[2].mean() > clear[2].mean()  # the veil is bluish: the blue band brightens most


def test_sensor_noise_grows_with_the_signal():
    rng = np.random.default_rng(1)
    dark, bright = np.full((1, 200, 200), 0.02), np.full((1, 200, 200), 0.5)
    noise = [float((imaging.add_sensor_noise(image, rng) - image).std()) for image in (dark, bright)]
    assert noise[0] == pytest.approx(math.sqrt(imaging.READ_NOISE ** 2 + imaging.SHOT_NOISE * 0.02), rel=0.1)
    assert noise[1] > 1.5 * noise[0]


def test_post_image_is_shifted_against_pre_by_the_recorded_misregistration(levels):
    from skimage.registration import phase_cross_correlation

    shift = _json(levels, "hard", "truth", EVENT, "realism.json")["misregistration_px"]
    assert 0.3 <= math.hypot(*shift) <= 3.0
    pre, _ = _read(levels, "hard", "pre_optical.tif")
    post, _ = _read(levels, "hard", "post_optical.tif")
    found, _, _ = phase_cross_correlation(pre[3], post[3], upsample_factor=20)
    # phase correlation gives the shift that brings post back onto pre
    assert np.allclose(-found, shift, atol=0.25), (found, shift)
    clean_pre, _ = _read(levels, "clean", "pre_optical.tif")
    clean_post, _ = _read(levels, "clean", "post_optical.tif")
    assert np.allclose(phase_cross_correlation(clean_pre[3], clean_post[3], upsample_factor=20)[0], 0, atol=0.1)


def test_sar_layover_brightens_the_ground_in_front_of_tall_buildings(levels):
    realism = _json(levels, "hard", "truth", EVENT, "realism.json")
    sensor_west = realism["sar_look_direction"] == "east"
    power = {level: 10 ** (_read(levels, level, "pre_sar.tif")[0][0] / 10) for level in levels}
    _, transform = _read(levels, "hard", "pre_sar.tif")
    inverse = ~transform
    footprints = np.zeros(power["hard"].shape, bool)
    boxes = []
    for feature in _json(levels, "hard", "scenes", EVENT, "buildings.geojson")["features"]:
        (x0, y0), (x1, y1) = feature["geometry"]["coordinates"][0][0], feature["geometry"]["coordinates"][0][2]
        c0, r0 = inverse @ (x0, y0)
        c1, r1 = inverse @ (x1, y1)
        box = (int(r0), int(math.ceil(r1)), int(c0), int(math.ceil(c1)))
        footprints[box[0]:box[1], box[2]:box[3]] = True
        if feature["properties"]["storeys"] >= 2:
            boxes.append(box)
    front, behind = np.zeros_like(footprints), np.zeros_like(footprints)
    for r0, r1, c0, c1 in boxes:
        near, far = (c0 - 1, c1) if sensor_west else (c1, c0 - 1)
        if 0 <= near < footprints.shape[1] and 0 <= far < footprints.shape[1]:
            front[r0:r1, near] = True
            behind[r0:r1, far] = True
    front &= ~footprints
    behind &= ~footprints
    gain_front = power["hard"][front].mean() / power["clean"][front].mean()
    gain_behind = power["hard"][behind].mean() / power["clean"][behind].mean()
    assert front.sum() > 20
    assert gain_front > 1.5 and gain_front > 1.3 * gain_behind, (gain_front, gain_behind)


def test_the_manifest_tells_the_sun_and_sar_geometry_but_not_the_errors(levels):
    manifest = _json(levels, "hard", "scenes", EVENT, "manifest.json")
    assert manifest["realism"] == "hard"
    assert set(manifest["acquisition"]) == {"sun_azimuth_deg", "sun_elevation_deg", "sar_pass",
                                            "sar_look_direction", "sar_incidence_deg"}
    assert "acquisition" not in _json(levels, "clean", "scenes", EVENT, "manifest.json")


# The experiment -----------------------------------------------------------------------------------
def test_the_experiment_smoke_size_measures_both_levels(tmp_path):
    done = subprocess.run([sys.executable, str(EXPERIMENT), "--size", "smoke", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((tmp_path / "disaster_hard.json").read_text())
    clean, hard = results["levels"]["clean"]["objects"], results["levels"]["hard"]["objects"]
    assert set(clean) == set(hard) >= {"vehicles", "vehicles_post", "ships", "tanks", "pools", "bridges"}
    assert hard["vehicles"]["truth"] > clean["vehicles"]["truth"]  # the parking lots' cars
    assert hard["vehicles"]["f1"] < clean["vehicles"]["f1"]
    assert results["build_seconds"]["per_event"]["ahr-2021-flood"]["hard"] > 0
    assert "| vehicles, bright blobs of 1-4 px, pre-event |" in (tmp_path / "disaster_hard.md").read_text()
