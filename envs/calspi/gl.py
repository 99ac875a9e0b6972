"""Pick a MuJoCo rendering backend that works on this machine, before anything renders.

Left to itself, Gymnasium's MuJoCo renderer tries GLFW first when ``MUJOCO_GL`` is unset. Without a
display that attempt fails, and depending on the drivers it either leaves PyOpenGL bound to the wrong
platform (every later backend fails) or aborts the whole process. A headless machine gets an
offscreen backend instead: EGL (GPU or Mesa), else OSMesa (software). An operator's own choice of
``MUJOCO_GL`` always wins.
"""

from __future__ import annotations

import ctypes.util
import os
import sys

# Offscreen backends in order of preference, with the shared library each one loads.
_OFFSCREEN = (("egl", "EGL"), ("osmesa", "OSMesa"))


def choose_gl_backend() -> str | None:
    """Set ``MUJOCO_GL`` (and the matching ``PYOPENGL_PLATFORM``) if unset and there is no display.

    Returns the backend now in force, or ``None`` when the choice is left to MuJoCo (a display is
    present, or no offscreen library is installed).
    """
    if "MUJOCO_GL" in os.environ:
        return os.environ["MUJOCO_GL"]
    if not sys.platform.startswith("linux") or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return None
    preferred = os.environ.get("PYOPENGL_PLATFORM", "").lower()
    candidates = sorted(_OFFSCREEN, key=lambda item: item[0] != preferred)
    for backend, library in candidates:
        if ctypes.util.find_library(library):
            os.environ["MUJOCO_GL"] = backend
            os.environ.setdefault("PYOPENGL_PLATFORM", backend)
            return backend
    return None
