"""The batched tactile simulation shared by the single env and the native vector env.

One ``TactileSimulation`` holds ``n`` platforms (object, object pose, sensor pose, step counter,
sensor randomisation, one RNG each) and advances all of them with one array call per step: move
every sensor, render every touch, score every prediction. The single env is this with ``n = 1``,
so a vector env seeded with ``s`` gives, in slot ``i``, exactly what a single env seeded with
``s + i`` gives.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np

from gauntlet.envs.tactile import orientation, tilt
from gauntlet.envs.tactile.randomization import draw_episode_appearance
from gauntlet.envs.tactile.sensor import PRESS_DEPTH_M, SensorConfig, TactileRenderer
from gauntlet.envs.tactile.tasks import CELL_HALF_M, TactileTask
from gauntlet.info_keys import METRICS

# Sensor motion limits of the reference benchmark: 0.2 m/s, 4 m/s^2, pi/2 rad/s, 10 pi rad/s^2,
# 0.2 s per transfer.
LINEAR_VELOCITY_M_S = 0.2
LINEAR_ACCELERATION_M_S2 = 4.0
ANGULAR_VELOCITY_RAD_S = np.pi / 2
ANGULAR_ACCELERATION_RAD_S2 = 10 * np.pi
TRANSFER_TIME_S = 0.2
ACTION_REGULARIZATION = 1e-3
# The sensor case keeps its centre this far inside the platform edge (x, y), as in the reference.
CELL_PADDING_M = np.array([0.0215, 0.0195])
WORKSPACE_HALF_M = CELL_HALF_M - CELL_PADDING_M
_WORKSPACE_LOW_M = -WORKSPACE_HALF_M
_WORKSPACE_HALF_X_M, _WORKSPACE_HALF_Y_M = WORKSPACE_HALF_M.tolist()  # for Python-float arithmetic


def max_transfer_distance_m(velocity: float = LINEAR_VELOCITY_M_S, acceleration: float = LINEAR_ACCELERATION_M_S2,
                            duration: float = TRANSFER_TIME_S) -> float:
    """Longest move in one transfer under a trapezoidal velocity profile (rest to rest)."""
    ramp_time = velocity / acceleration
    if 2 * ramp_time >= duration:  # never reaches full speed: accelerate half the time, brake the rest
        return acceleration * (duration / 2) ** 2
    return velocity * duration - velocity * ramp_time


MAX_STEP_M = max_transfer_distance_m()  # 3 cm
MAX_TURN_RAD = max_transfer_distance_m(ANGULAR_VELOCITY_RAD_S, ANGULAR_ACCELERATION_RAD_S2)  # 0.236 rad
ALL = slice(None)  # "every platform", for the ``which`` arguments below
# Object pose perturbation at every touch (the reference's ``perturb_object_pose``): a shift with
# this standard deviation per axis of the object's own frame, and a turn about the vertical.
PERTURBATION_SHIFT_STD_M = 1e-3
PERTURBATION_YAW_STD_RAD = 5e-2


@dataclass
class PlatformState:
    """Everything that evolves in ``n`` platforms (what a snapshot holds, besides the RNGs)."""

    object_index: np.ndarray  # (n,)
    object_xy: np.ndarray  # (n, 2) m
    object_yaw: np.ndarray  # (n,) rad
    sensor_xy: np.ndarray  # (n, 2) m
    sensor_yaw: np.ndarray  # (n,) rad
    sensor_z: np.ndarray  # (n,) m, height of the gel's deepest contact point
    step: np.ndarray  # (n,) steps taken this episode
    targets: np.ndarray  # (n,) or (n, d)
    colour_gains: np.ndarray  # (n, 2, 3)
    press_depth_m: np.ndarray  # (n,) float32, how far the gel sinks below the highest contact point
    frame_noise_std: np.ndarray  # (n,) std of the per-frame pixel noise (image units)
    score_sum: np.ndarray  # (n,) running sum of per-step accuracy or error
    last_score: np.ndarray  # (n,)
    image: np.ndarray  # (n, H, W, 3) latest tactile image ((n, H, W, 1) depth image with depth_only)
    depth: np.ndarray  # (n, H, W) latest contact depth map
    sensor_rotation: np.ndarray  # (n, 3, 3) sensor to world (tilting sensors; else the yaw's rotation, unused)
    position_error_mm: np.ndarray  # (n,) pose tasks: the latest prediction's position error
    yaw_error_deg: np.ndarray  # (n,) pose tasks: the latest prediction's yaw error


class TactileSimulation:
    """``n`` tactile platforms of one task, stepped together."""

    def __init__(self, task: TactileTask, num_envs: int, sensor: SensorConfig, *, render_rgb: bool = True,
                 sensor_tilt: bool = False, perturb_objects: bool = False, depth_only: bool = False):
        if sensor_tilt and not task.sensor_rotates:
            raise ValueError(f"sensor_tilt needs a family whose sensor turns (ShapesCenterOfMass, ShapesVolume), "
                             f"not {task.name}")
        self.task = task
        self.n = num_envs
        self.sensor_config = sensor
        self.depth_only = depth_only  # the observation is the depth image, and no colour is rendered
        self.render_rgb = render_rgb and not depth_only
        self.sensor_tilt = sensor_tilt
        self.perturb_objects = perturb_objects
        objects = task.objects
        self.resolution = objects.fields.shape[-1]
        self.renderer = TactileRenderer(sensor, self.resolution, objects.footprint_m)
        self.fields = np.zeros((num_envs, self.resolution, self.resolution), np.float32)
        self._fields_flat = self.fields.reshape(-1)
        self._offsets = (np.arange(num_envs) * self.resolution ** 2).astype(np.float32)[:, None, None]
        self.max_height_m = float(objects.fields.max(initial=1) * objects.height_scale_m) if len(objects) else 1.0
        self.rngs: list[np.random.Generator] = [np.random.default_rng() for _ in range(num_envs)]
        height, width = sensor.image_size
        target_shape = (num_envs,) if task.kind == "classification" else (num_envs, task.target_dim)
        self.state = PlatformState(
            object_index=np.zeros(num_envs, np.int64), object_xy=np.zeros((num_envs, 2)),
            object_yaw=np.zeros(num_envs), sensor_xy=np.zeros((num_envs, 2)), sensor_yaw=np.zeros(num_envs),
            sensor_z=np.zeros(num_envs), step=np.zeros(num_envs, np.int64),
            targets=np.zeros(target_shape, np.int64 if task.kind == "classification" else np.float32),
            colour_gains=np.zeros((num_envs, 2, 3), np.float32),
            press_depth_m=np.full(num_envs, PRESS_DEPTH_M, np.float32),
            frame_noise_std=np.full(num_envs, sensor.frame_noise), score_sum=np.zeros(num_envs),
            last_score=np.zeros(num_envs),
            image=np.zeros((num_envs, height, width, 1 if depth_only else 3), np.float32),
            depth=np.zeros((num_envs, height, width), np.float32),
            sensor_rotation=np.tile(np.eye(3), (num_envs, 1, 1)),
            position_error_mm=np.zeros(num_envs), yaw_error_deg=np.zeros(num_envs))
        # per platform, the highest field point of each block of cells (the tilted sensor's contact search),
        # and the same per object already loaded: built once per object, not at every reset (70 us each)
        self.block_maxima = np.zeros((num_envs,) + tilt.block_maxima(self.fields[0]).shape, np.float32)
        self._object_block_maxima: dict[int, np.ndarray] = {}

    # -- episodes -------------------------------------------------------------------------------
    def reset(self, which: np.ndarray | slice = ALL) -> None:
        """Start new episodes on the platforms ``which`` (indices), drawing from their own RNGs."""
        state = self.state
        objects = self.task.objects
        for i in np.arange(self.n)[which]:
            rng = self.rngs[i]
            index = int(rng.integers(len(objects)))
            state.object_index[i] = index
            offset, yaw = self.task.max_object_offset_m, self.task.max_object_yaw_rad
            state.object_xy[i] = rng.uniform(-offset, offset, size=2)
            state.object_yaw[i] = rng.uniform(-yaw, yaw)
            # one scalar draw per axis: the same draws as with array bounds, at a fraction of the cost
            state.sensor_xy[i] = (rng.uniform(-_WORKSPACE_HALF_X_M, _WORKSPACE_HALF_X_M),
                                  rng.uniform(-_WORKSPACE_HALF_Y_M, _WORKSPACE_HALF_Y_M))
            if self.sensor_tilt:  # the reference's draw: tilt, azimuth, turn
                state.sensor_rotation[i] = orientation.draw_orientation(rng)
                state.sensor_yaw[i] = _yaw_of(state.sensor_rotation[i])
            else:
                state.sensor_yaw[i] = rng.uniform(-np.pi, np.pi) if self.task.sensor_rotates else 0.0
            noise = self.sensor_config.episode_noise
            state.colour_gains[i] = rng.normal(0.0, noise, size=(2, 3)) if noise > 0 else 0.0
            if self.sensor_config.domain_randomization:  # drawn last: the draws above stay as without it
                appearance = draw_episode_appearance(rng)
                state.press_depth_m[i] = appearance.press_depth_m
                state.colour_gains[i] += appearance.colour_gains
                state.frame_noise_std[i] = np.hypot(self.sensor_config.frame_noise, appearance.frame_noise_std)
            self._load_object(i, index)
        state.step[which] = 0
        state.score_sum[which] = 0.0
        state.last_score[which] = 0.0
        state.position_error_mm[which] = 0.0
        state.yaw_error_deg[which] = 0.0
        state.targets[which] = self.task.targets(state.object_index[which], state.object_xy[which],
                                                 state.object_yaw[which])
        self.touch(which)
        self.perturb(which)

    def perturb(self, which) -> None:
        """Nudge the objects of the platforms ``which`` as the sensor's touch does (the reference's
        object pose perturbation, drawn from each platform's RNG): a shift of N(0, 1 mm) per axis of
        the object's frame and a turn of N(0, 0.05 rad); targets that depend on the pose follow."""
        if not self.perturb_objects:
            return
        state = self.state
        for i in np.arange(self.n)[which]:
            shift_x, shift_y, turn = self.rngs[i].normal(size=3).tolist()
            shift_x *= PERTURBATION_SHIFT_STD_M
            shift_y *= PERTURBATION_SHIFT_STD_M
            yaw = float(state.object_yaw[i])
            cos, sin = np.cos(yaw), np.sin(yaw)
            state.object_xy[i, 0] += cos * shift_x - sin * shift_y
            state.object_xy[i, 1] += sin * shift_x + cos * shift_y
            state.object_yaw[i] = (yaw + turn * PERTURBATION_YAW_STD_RAD + np.pi) % (2 * np.pi) - np.pi
        if self.task.kind == "regression" and self.task.target_name != "volume":
            state.targets[which] = self.task.targets(state.object_index[which], state.object_xy[which],
                                                     state.object_yaw[which])

    def move(self, which, moves: np.ndarray, lengths: np.ndarray) -> None:
        """Apply relative moves ``(k, 2)`` or ``(k, 3)`` in [-1, 1] to the platforms ``which``: x, y
        projected into the unit disc, scaled to the longest transfer, clipped to the workspace; the
        third component (rotating sensors) turns the sensor by up to the longest turn. ``lengths``
        ``(k,)``: the Euclidean norms of the x, y parts."""
        state = self.state
        if moves.shape[1] == 5:  # a tilting sensor: x, y, then a rotation vector
            state.sensor_rotation[which] = orientation.turn(state.sensor_rotation[which], moves[:, 2:], MAX_TURN_RAD)
            state.sensor_yaw[which] = _yaw_of(state.sensor_rotation[which])
            moves = moves[:, :2]
        if moves.shape[1] == 3:
            state.sensor_yaw[which] = np.remainder(state.sensor_yaw[which] + moves[:, 2] * MAX_TURN_RAD + np.pi,
                                                   2 * np.pi) - np.pi
            moves = moves[:, :2]
        position = moves / np.maximum(lengths, 1.0)[:, None]
        position *= MAX_STEP_M
        position += state.sensor_xy[which]
        np.maximum(position, _WORKSPACE_LOW_M, out=position)
        state.sensor_xy[which] = np.minimum(position, WORKSPACE_HALF_M, out=position)

    def touch(self, which=ALL) -> None:
        """Press the sensors of the platforms ``which`` into their scenes and render the readings."""
        state = self.state
        config = self.sensor_config
        noise = None
        if self.render_rgb and (config.frame_noise > 0 or config.domain_randomization):
            shape = config.image_size + (3,)
            noise = np.stack([self.rngs[i].normal(0.0, state.frame_noise_std[i], size=shape).astype(np.float32)
                              for i in np.arange(self.n)[which]])
        gains = state.colour_gains[which] if config.episode_noise > 0 or config.domain_randomization else None
        if self.sensor_tilt:
            depth, sensor_z, image = self.renderer.render_tilted(
                self._fields_flat, self._offsets[which], state.object_xy[which], state.object_yaw[which],
                state.sensor_xy[which], state.sensor_rotation[which], self.block_maxima[which], gains, noise,
                self.render_rgb, press_m=state.press_depth_m[which])
        else:
            depth, sensor_z, image = self.renderer.render(
                self._fields_flat, self._offsets[which], state.object_xy[which], state.object_yaw[which],
                state.sensor_xy[which], state.sensor_yaw[which], gains, noise, self.render_rgb,
                press_m=state.press_depth_m[which])
        if self.depth_only:
            image = depth_image(depth)
        # Observations hand out these arrays without copying, so they are replaced, never written into.
        whole = isinstance(which, slice)
        if whole:
            state.depth = depth
        else:
            state.depth = state.depth.copy()
            state.depth[which] = depth
        state.sensor_z[which] = sensor_z
        if image is not None:  # rendered when self.render_rgb
            if whole:
                state.image = image
            else:
                state.image = state.image.copy()
                state.image[which] = image

    def step(self, which, moves: np.ndarray, predictions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Score the predictions of the platforms ``which``, move and touch.

        Returns their rewards, normalised losses and termination flags."""
        state = self.state
        losses, scores = self.task.losses(predictions, state.targets[which])
        if self.task.target_name == "pose":
            state.position_error_mm[which], state.yaw_error_deg[which] = self.task.pose_errors(
                predictions, state.targets[which])
        moves = np.asarray(moves, np.float64)
        squared = moves * moves
        lengths = np.sqrt(squared.sum(axis=1))
        rewards = -ACTION_REGULARIZATION * lengths - losses
        # the move's x, y part is the whole move unless the sensor also turns
        self.move(which, moves, lengths if moves.shape[1] == 2 else np.sqrt(squared[:, :2].sum(axis=1)))
        self.touch(which)
        self.perturb(which)
        state.step[which] += 1
        state.score_sum[which] += scores
        state.last_score[which] = scores
        return rewards, losses, state.step[which] >= self.task.step_limit

    # -- observations ---------------------------------------------------------------------------
    def observations(self) -> dict[str, np.ndarray]:
        """Every platform's observation, batched (the vector env's)."""
        state = self.state
        position = np.empty((self.n, 3), np.float32)
        position[:, :2] = state.sensor_xy / WORKSPACE_HALF_M
        position[:, 2] = state.sensor_z / self.max_height_m * 2 - 1
        np.minimum(np.maximum(position, -1, out=position), 1, out=position)
        time_step = (state.step / self.task.step_limit * 2 - 1).astype(np.float32)
        observation = {"sensor_img": state.image, "sensor_pos": position, "time_step": time_step}
        if self.task.sensor_rotates:
            observation["sensor_rot"] = self._sensor_rotations()
        return observation

    def observation(self, i: int) -> dict[str, np.ndarray]:
        """Platform ``i``'s observation: ``observations()``'s slot ``i``, bit for bit.

        The same arithmetic on Python floats (IEEE float64, as NumPy's): clipping to [-1, 1] before
        rounding to float32 rather than after gives the same float32, since +-1 are exact. For one
        env this is a few calls where the batched version makes a dozen.
        """
        state = self.state
        x, y = state.sensor_xy[i].tolist()
        z = float(state.sensor_z[i]) / self.max_height_m * 2 - 1
        position = np.array([min(max(x / _WORKSPACE_HALF_X_M, -1.0), 1.0),
                             min(max(y / _WORKSPACE_HALF_Y_M, -1.0), 1.0), min(max(z, -1.0), 1.0)], np.float32)
        observation = {"sensor_img": state.image[i], "sensor_pos": position,
                       "time_step": np.array(int(state.step[i]) / self.task.step_limit * 2 - 1, np.float32)}
        if self.task.sensor_rotates:
            observation["sensor_rot"] = self._sensor_rotations()[i]
        return observation

    def _sensor_rotations(self) -> np.ndarray:
        if self.sensor_tilt:  # the 6-D representation (orientation.py)
            return orientation.rotation_to_feature(self.state.sensor_rotation)
        # NumPy's cos and sin for one platform too: Python's math module may round differently
        return np.stack([np.cos(self.state.sensor_yaw), np.sin(self.state.sensor_yaw)], axis=1).astype(np.float32)

    def infos(self, losses: np.ndarray | None = None) -> dict[str, Any]:
        """Every platform's info, batched (the vector env's): ``losses`` of the last step, else 0."""
        state = self.state
        steps = np.maximum(state.step, 1)
        stat = self._stat_name
        metrics = {stat: state.last_score.copy()}
        if self.task.target_name == "pose":
            metrics.update(position_error_mm=state.position_error_mm.copy(), yaw_error_deg=state.yaw_error_deg.copy())
        return {"loss": np.zeros(self.n) if losses is None else losses, "target": state.targets.copy(),
                "stats": {f"final_{stat}": state.last_score.copy(), f"average_{stat}": state.score_sum / steps},
                METRICS: metrics}

    def info(self, i: int, loss: float = 0.0) -> dict[str, Any]:
        """Platform ``i``'s info, as ``infos()``'s slot ``i`` in Python scalars (the single env's)."""
        state = self.state
        target = state.targets[i]
        stat = self._stat_name
        final = float(state.last_score[i])
        metrics = {stat: final}
        if self.task.target_name == "pose":
            metrics.update(position_error_mm=float(state.position_error_mm[i]),
                           yaw_error_deg=float(state.yaw_error_deg[i]))
        return {"loss": loss, "target": target.item() if target.ndim == 0 else target.copy(),
                "stats": {f"final_{stat}": final,
                          f"average_{stat}": float(state.score_sum[i]) / max(int(state.step[i]), 1)},
                METRICS: metrics}

    @property
    def _stat_name(self) -> str:
        # Also the family's metric (gauntlet.info_keys.METRICS): the latest prediction's accuracy or error.
        return "accuracy" if self.task.kind == "classification" else "error"

    # -- branching ------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        return {"state": copy.deepcopy(self.state), "rngs": [copy.deepcopy(r.bit_generator.state) for r in self.rngs]}

    def restore(self, snapshot: dict[str, Any]) -> None:
        self.state = copy.deepcopy(snapshot["state"])
        for rng, rng_state in zip(self.rngs, snapshot["rngs"]):
            rng.bit_generator.state = copy.deepcopy(rng_state)
        for i, index in enumerate(self.state.object_index):
            self._load_object(i, int(index))

    def _load_object(self, i: int, index: int) -> None:
        """Put object ``index``'s height field on platform ``i``."""
        self.task.objects.heights_m(index, out=self.fields[i])
        if self.sensor_tilt:
            if index not in self._object_block_maxima:
                self._object_block_maxima[index] = tilt.block_maxima(self.fields[i])
            self.block_maxima[i] = self._object_block_maxima[index]


def _yaw_of(rotation: np.ndarray) -> np.ndarray:
    """The heading of sensors' x axes in the platform plane (rad): their yaw, tilted or not."""
    return np.arctan2(rotation[..., 1, 0], rotation[..., 0, 0])


def depth_image(depth_m: np.ndarray) -> np.ndarray:
    """The depth-only observation ``(n, H, W, 1)`` float32: how far the scene pushes into the gel,
    from -1 (untouched) to 1 at the nominal press depth (deeper presses of the ``-DR`` envs clip at 1)."""
    image = depth_m * np.float32(2 / PRESS_DEPTH_M)
    image -= np.float32(1)
    np.minimum(image, np.float32(1), out=image)
    return image[..., None]
