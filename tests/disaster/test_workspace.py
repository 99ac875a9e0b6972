"""Path confinement and artefact writing."""

from __future__ import annotations

import numpy as np
import pytest
from affine import Affine
from rasterio.crs import CRS

from gauntlet.mcp_servers.disaster.workspace import PathNotAllowed

PROFILE = {"crs": CRS.from_epsg(32632), "transform": Affine(10, 0, 360000, 0, -10, 5600000)}


def test_virtual_paths_resolve_under_their_roots(workspace, scenes_root):
    real = workspace.resolve("data/ahr-2021-flood/dem.tif")
    assert real == (scenes_root / "scenes" / "ahr-2021-flood" / "dem.tif").resolve()
    assert workspace.virtual(real) == "data/ahr-2021-flood/dem.tif"


@pytest.mark.parametrize("path", ["data/../truth/ahr-2021-flood/damage.json", "ws/../../etc/passwd", "/etc/passwd",
                                  "ahr-2021-flood/dem.tif", "", "data/ahr-2021-flood/missing.tif"])
def test_paths_outside_the_roots_or_missing_are_refused(workspace, path):
    with pytest.raises(PathNotAllowed):
        workspace.resolve(path)


def test_a_symlink_pointing_out_of_the_workspace_is_refused(workspace, scenes_root, tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    (workspace.workspace_dir / "link.tif").symlink_to(outside)
    with pytest.raises(PathNotAllowed, match="outside"):
        workspace.resolve("ws/link.tif")


def test_absolute_paths_inside_a_root_are_accepted(workspace):
    real = workspace.resolve("data/ahr-2021-flood/dem.tif")
    assert workspace.resolve(str(real)) == real


def test_artefacts_get_content_hashed_names_and_leave_no_temporary_files(workspace):
    data = np.arange(64, dtype=np.uint8).reshape(1, 8, 8)
    first = workspace.write_raster("mask", data, PROFILE)
    second = workspace.write_raster("mask", data.copy(), PROFILE)
    other = workspace.write_raster("mask", data[:, ::-1].copy(), PROFILE)
    assert first == second != other
    assert first.startswith("ws/mask-") and first.endswith(".tif")
    names = sorted(p.name for p in workspace.workspace_dir.iterdir())
    assert not [n for n in names if n.startswith(".tmp")]
    assert workspace.write_json("layer", {"b": 1, "a": 2}) == workspace.write_json("layer", {"a": 2, "b": 1})
