"""Branchable: snapshot an environment mid-episode and restore it, bit for bit.

Guarantee: after ``restore(snapshot)``, the same actions give bit-identical observations, rewards
and termination flags; restoring twice from one snapshot gives two identical futures; a snapshot
survives pickling. ``branchable(env)`` gives that to any Gymnasium env that can provide it, choosing
a strategy by what the env is:

``native``
    The env implements ``snapshot()``/``restore()`` itself (every Gauntlet env does).
``mujoco``
    MuJoCo envs: the full integration state from ``mj_getState`` (time, qpos, qvel, act, warm
    start, controls, applied forces, mocap, plugin state) plus the env's RNG.
``attributes``
    Classic-control envs: a copy of the env's plain-data attributes (``state``, counters) plus RNG.
``deepcopy``
    Anything else: a deep copy of the whole env, accepted only after a self-check (two copies fed
    the same actions must agree bit for bit, and the copy must survive pickling).

Every strategy also carries the wrapper chain's counters (``TimeLimit`` elapsed steps, ...) and the
RNGs of the action and observation spaces.
"""

from __future__ import annotations

import copy
import pickle
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import PassiveEnvChecker

STRATEGIES = ("native", "mujoco", "attributes", "deepcopy")
# Attributes of classic-control envs that hold rendering resources, not simulation state.
_RENDER_ATTRIBUTES = frozenset({"screen", "clock", "isopen", "viewer", "surf"})
_SKIP_ATTRIBUTES = frozenset({"spec", "action_space", "observation_space", "metadata",
                              "render_mode", "_np_random", "_np_random_seed", "np_random"})


class BranchingError(RuntimeError):
    """An env cannot be snapshotted faithfully."""


@dataclass
class Snapshot:
    """A picklable capture of an env's state, every RNG included."""

    env_id: str | None
    strategy: str
    state: Any
    rng: dict[str, Any] | None
    wrappers: list[dict[str, Any]] = field(default_factory=list)
    spaces_rng: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None


@runtime_checkable
class Branchable(Protocol):
    """Something that can capture its state and return to it later."""

    def snapshot(self) -> Any: ...

    def restore(self, snapshot: Any) -> None: ...


def _rng_state(generator: np.random.Generator | None) -> dict[str, Any] | None:
    return None if generator is None else copy.deepcopy(dict(generator.bit_generator.state))


def _set_rng(generator: np.random.Generator, state: dict[str, Any]) -> None:
    generator.bit_generator.state = state


def _recorded(rng: dict[str, Any] | None) -> dict[str, Any]:
    """The RNG state a mujoco/attributes snapshot always records (only native and deepcopy record none)."""
    if rng is None:
        raise BranchingError("snapshot has no RNG state, though its strategy records one")
    return rng


def _is_mujoco(env: gym.Env) -> bool:
    return hasattr(env, "model") and hasattr(env, "data") and type(env.data).__module__.startswith("mujoco")


def _is_plain(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str, np.ndarray, np.generic)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_plain(item) for item in value)
    return False


def choose_strategy(env: gym.Env) -> str:
    """The strategy ``branchable`` would use for ``env`` (see the module docstring)."""
    base = env.unwrapped
    if isinstance(base, Branchable) and not isinstance(base, BranchableEnv):
        return "native"
    if _is_mujoco(base):
        return "mujoco"
    if type(base).__module__.startswith("gymnasium.envs.classic_control"):
        return "attributes"
    return "deepcopy"


class BranchableEnv(gym.Wrapper):
    """Adds ``snapshot()``/``restore()`` to a Gymnasium env (see the module docstring)."""

    def __init__(self, env: gym.Env, strategy: str | None = None):
        super().__init__(env)
        self.strategy = strategy or choose_strategy(env)
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown branching strategy {self.strategy!r}; expected one of {STRATEGIES}")
        self._verified = self.strategy != "deepcopy"
        self._last_seed: int | None = None
        if self.strategy == "mujoco":
            # The module itself is not kept on the wrapper: a module cannot be deep-copied or pickled,
            # and the wrapper must copy like the env it wraps.
            import mujoco

            self._state_spec = mujoco.mjtState.mjSTATE_INTEGRATION
            base: Any = self.unwrapped  # a MuJoCo env: its model and data are not on gym.Env
            self._state_size = mujoco.mj_stateSize(base.model, self._state_spec)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None:
            self._last_seed = seed
        return self.env.reset(seed=seed, options=options)

    # The wrapper chain between us and the base env ---------------------------------------------
    def _chain(self) -> list[gym.Wrapper]:
        chain: list[gym.Wrapper] = []
        env = self.env
        while isinstance(env, gym.Wrapper):
            chain.append(env)
            env = env.env
        return chain

    @staticmethod
    def _wrapper_state(wrapper: gym.Env) -> dict[str, Any]:
        # The passive checker's flags record which one-time checks already ran; they are not env
        # state, and rewinding them alone (its cached data is not plain) breaks its next check.
        if isinstance(wrapper, PassiveEnvChecker):
            return {}
        return {k: copy.deepcopy(v) for k, v in vars(wrapper).items()
                if k != "env" and not k.startswith("_cached") and _is_plain(v)}

    def _spaces_rng(self) -> dict[str, Any]:
        states = {}
        for name in ("action_space", "observation_space"):
            space = getattr(self.unwrapped, name)
            if getattr(space, "_np_random", None) is not None:
                states[name] = _rng_state(space.np_random)
        return states

    # Snapshot / restore ------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        base: Any = self.unwrapped  # the strategy decides which of its attributes exist
        if self.strategy == "native":
            state, rng = base.snapshot(), None
        elif self.strategy == "mujoco":
            import mujoco

            state = np.empty(self._state_size, dtype=np.float64)
            mujoco.mj_getState(base.model, base.data, state, self._state_spec)
            rng = _rng_state(base.np_random)
        elif self.strategy == "attributes":
            state = {k: copy.deepcopy(v) for k, v in vars(base).items()
                     if k not in _SKIP_ATTRIBUTES and k not in _RENDER_ATTRIBUTES and _is_plain(v)}
            rng = _rng_state(base.np_random)
        else:
            if not self._verified:
                self._verify_deepcopy()
            state, rng = copy.deepcopy(base), None
        return Snapshot(env_id=self.env.spec.id if self.env.spec else None, strategy=self.strategy,
                        state=state, rng=rng, wrappers=[self._wrapper_state(w) for w in self._chain()],
                        spaces_rng=self._spaces_rng(), seed=self._last_seed)

    def restore(self, snapshot: Snapshot) -> None:
        if snapshot.strategy != self.strategy:
            raise BranchingError(f"snapshot was taken with strategy {snapshot.strategy!r}, "
                                 f"this env uses {self.strategy!r}")
        chain = self._chain()
        if len(chain) != len(snapshot.wrappers):
            raise BranchingError("snapshot was taken through a different wrapper chain")
        base: Any = self.unwrapped
        if self.strategy == "native":
            base.restore(snapshot.state)
        elif self.strategy == "mujoco":
            import mujoco

            mujoco.mj_setState(base.model, base.data, snapshot.state, self._state_spec)
            # Recompute derived quantities (positions, contacts) so render and sensors agree.
            mujoco.mj_forward(base.model, base.data)
            _set_rng(base.np_random, copy.deepcopy(_recorded(snapshot.rng)))
        elif self.strategy == "attributes":
            for key, value in snapshot.state.items():
                setattr(base, key, copy.deepcopy(value))
            _set_rng(base.np_random, copy.deepcopy(_recorded(snapshot.rng)))
        else:
            restored = copy.deepcopy(snapshot.state)
            innermost: gym.Wrapper = chain[-1] if chain else self
            innermost.env = restored
        for wrapper, state in zip(chain, snapshot.wrappers, strict=True):
            for key, value in state.items():
                setattr(wrapper, key, copy.deepcopy(value))
        for name, state in snapshot.spaces_rng.items():
            _set_rng(getattr(self.unwrapped, name).np_random, copy.deepcopy(state))
        self._last_seed = snapshot.seed

    # Copying and pickling ----------------------------------------------------------------------
    # Gymnasium's MuJoCo envs copy and pickle through their constructor arguments (EzPickle), so a
    # copy starts from a fresh model state. A branchable copy carries a snapshot along and restores
    # it on arrival, so the copy continues exactly where the original is.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(vars(self))
        if self.strategy == "mujoco":
            state["_arriving_snapshot"] = self.snapshot()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        snapshot = state.pop("_arriving_snapshot", None)
        vars(self).update(state)
        if snapshot is not None:
            self.restore(snapshot)

    def _verify_deepcopy(self, steps: int = 8) -> None:
        """Check that deep copies of the env evolve identically and survive pickling."""
        base = self.unwrapped
        name = self.env.spec.id if self.env.spec else type(base).__name__
        try:
            first, second = copy.deepcopy(base), pickle.loads(pickle.dumps(base))
        except Exception as exc:  # any failure to copy means the env cannot branch this way
            raise BranchingError(f"{name} cannot be branched: deep copy or pickling failed ({exc})") from None
        probe = copy.deepcopy(self.action_space)
        probe.seed(0)
        for _ in range(steps):
            action = probe.sample()
            a, b = first.step(action), second.step(copy.deepcopy(action))
            if not outputs_identical(a, b):
                raise BranchingError(f"{name} cannot be branched by deep copy: two copies fed the "
                                     "same action diverged; implement snapshot()/restore()")
            if a[2] or a[3]:
                break
        self._verified = True


def outputs_identical(a: Any, b: Any) -> bool:
    """Bitwise equality of nested step outputs (arrays compared by bytes, NaN equal to NaN)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(outputs_identical(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(outputs_identical(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return np.float64(a).tobytes() == np.float64(b).tobytes()
    return type(a) is type(b) and a == b


def branchable(env: gym.Env, strategy: str | None = None) -> BranchableEnv:
    """Wrap ``env`` so it can ``snapshot()`` and ``restore()``; returns it as is if it already can."""
    if isinstance(env, BranchableEnv):
        return env
    return BranchableEnv(env, strategy)


def fork(thing: Any, snapshot: Any) -> Any:
    """An independent copy of ``thing`` placed at ``snapshot``.

    Envs are rebuilt from their spec (same id and kwargs), wrapped with ``branchable`` and restored.
    Anything else that defines ``fork(snapshot)`` (tool sessions, task envs) is asked to do it.
    """
    if hasattr(thing, "fork") and not isinstance(thing, BranchableEnv):
        return thing.fork(snapshot)
    if isinstance(thing, gym.Env):
        source = branchable(thing)
        spec = source.env.spec
        if spec is None:
            if source.strategy != "deepcopy":
                raise BranchingError("cannot fork an env without a spec; create it with gymnasium.make")
            clone = branchable(copy.deepcopy(source.env), "deepcopy")
        else:
            clone = branchable(gym.make(spec), source.strategy)
        clone.reset(seed=snapshot.seed)
        clone.restore(snapshot)
        return clone
    raise TypeError(f"cannot fork a {type(thing).__name__}: it is neither a Gymnasium env nor defines fork()")
