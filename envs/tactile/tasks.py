"""What each tactile task family asks the agent to predict, and how a prediction is scored.

A task owns its object set (a ``MeshSplit``), the prediction space, the target of an episode (from
the object and its pose on the platform) and the normalised loss: cross-entropy / log K for
classification, squared error / target variance for regression, so that a blind guess (uniform
logits, or the mean target) costs about 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from gymnasium import spaces

from gauntlet.envs.tactile import mnist3d
from gauntlet.envs.tactile.heightfield import MeshSplit

CELL_HALF_M = 0.06  # the platform is 12 x 12 cm
OBJECT_OFFSET_M = 0.01  # objects are placed uniformly within +-1 cm of the platform centre
MAX_OBJECT_YAW_RAD = np.pi / 8  # and turned uniformly within +-22.5 degrees (the reference's setting)
POSE_OFFSET_M = 0.02  # pose tasks: position uniform within +-2 cm, yaw uniform on the circle


@dataclass(frozen=True)
class TactileTask:
    """One task family: its objects, step limit and prediction target."""

    name: str
    kind: str  # "classification" | "regression"
    objects: MeshSplit
    step_limit: int
    num_classes: int = 0
    target_name: str = ""
    target_dim: int = 0
    target_variance: np.ndarray | None = None  # per target dimension (regression)
    max_object_yaw_rad: float = MAX_OBJECT_YAW_RAD  # pose randomisation at reset
    max_object_offset_m: float = OBJECT_OFFSET_M
    sensor_rotates: bool = False  # the sensor can turn about its vertical axis (Shapes families)

    @property
    def prediction_space(self) -> spaces.Box:
        size = self.num_classes if self.kind == "classification" else self.target_dim
        return spaces.Box(-np.inf, np.inf, shape=(size,), dtype=np.float32)

    @property
    def target_space(self) -> spaces.Space:
        if self.kind == "classification":
            return spaces.Discrete(self.num_classes)
        return spaces.Box(-np.inf, np.inf, shape=(self.target_dim,), dtype=np.float32)

    def targets(self, object_index: np.ndarray, object_xy: np.ndarray, object_yaw: np.ndarray) -> np.ndarray:
        """Targets of a batch of episodes: class labels ``(n,)`` or regression targets ``(n, d)``."""
        if self.kind == "classification":
            return self.objects.labels[object_index].astype(np.int64)
        if self.target_name == "center_of_mass":
            return center_of_mass_normalised(self.objects.centroid_m[object_index, :2], object_xy, object_yaw)
        if self.target_name == "volume":
            return (self.objects.volume_m3[object_index] * 1e6)[:, None].astype(np.float32)
        if self.target_name == "pose":  # position in platform units, yaw as (cos, sin)
            return np.stack([object_xy[:, 0] / CELL_HALF_M, object_xy[:, 1] / CELL_HALF_M,
                             np.cos(object_yaw), np.sin(object_yaw)], axis=1).astype(np.float32)
        raise ValueError(f"unknown regression target {self.target_name!r}")

    def losses(self, predictions: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Normalised losses ``(n,)`` and per-step scores ``(n,)`` (accuracy 0/1, or the error)."""
        # Few array calls, no copies: at one env per call, NumPy's per-call overhead is the cost.
        predictions = np.asarray(predictions, np.float64)
        if self.kind == "classification":
            shifted = predictions - predictions.max(axis=1, keepdims=True)
            log_normaliser = np.log(np.exp(shifted).sum(axis=1))
            # -log softmax at the target, with only the target's log-probability formed
            cross_entropy = -(shifted[np.arange(len(targets)), targets] - log_normaliser)
            correct = (predictions.argmax(axis=1) == targets).astype(np.float64)
            return cross_entropy / self._log_num_classes, correct
        difference = predictions - targets
        squared = difference * difference
        normalised = (squared / self.target_variance).sum(axis=1) / self.target_dim  # the mean over dimensions
        error = np.sqrt(squared.sum(axis=1))
        return normalised, error

    def pose_errors(self, predictions: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pose tasks, as the reference reports them: position error (mm, Euclidean in the platform
        plane) and yaw error (degrees, the angle between the predicted and true heading, 0 to 180), ``(n,)`` each.

        The predicted heading is the direction of (cos, sin); a component within 1e-5 of 0 counts as +1e-5,
        as in the reference, so a zero vector points at 45 degrees.
        """
        predictions = np.asarray(predictions, np.float64)
        targets = np.asarray(targets, np.float64)
        position_mm = np.hypot(*(predictions[:, :2] - targets[:, :2]).T) * CELL_HALF_M * 1e3
        heading = np.where(np.abs(predictions[:, 2:]) < 1e-5, 1e-5, predictions[:, 2:])
        difference = np.arctan2(heading[:, 1], heading[:, 0]) - np.arctan2(targets[:, 3], targets[:, 2])
        yaw_deg = np.degrees(np.abs((difference + np.pi) % (2 * np.pi) - np.pi))
        return position_mm, yaw_deg

    @cached_property
    def _log_num_classes(self) -> np.float64:
        return np.log(self.num_classes)


def center_of_mass_normalised(centroid_xy: np.ndarray, object_xy: np.ndarray, object_yaw: np.ndarray) -> np.ndarray:
    """World-frame centre of mass of posed objects, in platform units ([-1, 1] across 12 cm)."""
    cos, sin = np.cos(object_yaw), np.sin(object_yaw)
    world_x = cos * centroid_xy[:, 0] - sin * centroid_xy[:, 1] + object_xy[:, 0]
    world_y = sin * centroid_xy[:, 0] + cos * centroid_xy[:, 1] + object_xy[:, 1]
    return (np.stack([world_x, world_y], axis=1) / CELL_HALF_M).astype(np.float32)


def center_of_mass_variance(centroid_xy: np.ndarray) -> np.ndarray:
    """Per-axis variance of the normalised centre of mass under the random pose (exact, not sampled).

    With yaw uniform on [-a, a]: E cos = sin(a) / a, E cos^2 = (1 + sin(2a) / (2a)) / 2, E sin =
    E sin cos = 0; the offset is uniform on [-d, d] (variance d^2 / 3), independent of the yaw and
    the object. For x' = c_x cos - c_y sin + o_x:  E x' = k1 E c_x,
    E x'^2 = k2 E c_x^2 + (1 - k2) E c_y^2 + d^2 / 3 (and symmetrically for y').
    """
    a = MAX_OBJECT_YAW_RAD
    k1 = np.sin(a) / a
    k2 = (1 + np.sin(2 * a) / (2 * a)) / 2
    mean_c = centroid_xy.mean(axis=0)
    mean_sq = (centroid_xy ** 2).mean(axis=0)
    offset = OBJECT_OFFSET_M ** 2 / 3
    second = np.array([k2 * mean_sq[0] + (1 - k2) * mean_sq[1], (1 - k2) * mean_sq[0] + k2 * mean_sq[1]]) + offset
    return (second - (k1 * mean_c) ** 2) / CELL_HALF_M ** 2


def make_task(family: str, split: str = "train", *, objects_per_split: int | None = None) -> TactileTask:
    """The task of a registered family (``TactileMNIST``, ``TactileMNISTVolume``, ...)."""
    if family == "TactileMNIST":
        objects = mnist3d.load(split, count=objects_per_split)
        return TactileTask(family, "classification", objects, step_limit=16, num_classes=10)
    if family in ("TactileMNISTCenterOfMass", "TactileMNISTVolume", "ShapesCenterOfMass", "ShapesVolume"):
        if family.startswith("Shapes"):
            from gauntlet.envs.tactile import shapes

            load = shapes.load
        else:
            load = mnist3d.load
        objects = load(split, count=objects_per_split)
        reference = load("train", count=objects_per_split)  # normalise by the training split
        step_limit = 16 if family.startswith("TactileMNIST") else 32
        if family.endswith("CenterOfMass"):
            return TactileTask(family, "regression", objects, step_limit=step_limit, target_name="center_of_mass",
                               target_dim=2, target_variance=center_of_mass_variance(reference.centroid_m[:, :2]),
                               sensor_rotates=family.startswith("Shapes"))
        variance = np.array([np.var(reference.volume_m3 * 1e6)])
        return TactileTask(family, "regression", objects, step_limit=step_limit, target_name="volume",
                           target_dim=1, target_variance=variance, sensor_rotates=family.startswith("Shapes"))
    if family == "Starstruck":
        from gauntlet.envs.tactile import starstruck

        objects = starstruck.load(split, count=objects_per_split)
        # scenes are random layouts over the whole platform already: no further pose randomisation
        return TactileTask(family, "classification", objects, step_limit=32, num_classes=3,
                           max_object_yaw_rad=0.0, max_object_offset_m=0.0)
    if family in ("Glyphs", "GlyphPose", "Toolbox"):
        from gauntlet.envs.tactile import glyphs

        if split != "train":
            raise ValueError(f"{family} has no {split!r} split: one object per class, the pose is random; use 'train'")
        if family == "Toolbox":
            from gauntlet.envs.tactile import wrench

            objects = wrench.load()
        else:
            objects = glyphs.load(count=objects_per_split)
        if family == "Glyphs":
            return TactileTask(family, "classification", objects, step_limit=32, num_classes=len(glyphs.class_names()))
        # Position uniform in +-offset per axis (variance offset^2 / 3), yaw uniform on the circle
        # (cos and sin each have mean 0 and variance 1/2).
        offset = POSE_OFFSET_M
        variance = np.array([offset ** 2 / 3 / CELL_HALF_M ** 2] * 2 + [0.5, 0.5])
        return TactileTask(family, "regression", objects, step_limit=32, target_name="pose", target_dim=4,
                           target_variance=variance, max_object_yaw_rad=np.pi, max_object_offset_m=offset)
    raise ValueError(f"unknown tactile task family {family!r}; expected one of {FAMILIES}")


FAMILIES = ("TactileMNIST", "TactileMNISTCenterOfMass", "TactileMNISTVolume", "Starstruck", "Glyphs", "GlyphPose",
            "Toolbox", "ShapesCenterOfMass", "ShapesVolume")
