"""Cal-SPI envs render on a headless machine without MUJOCO_GL set by hand."""

import ctypes.util
import os
import subprocess
import sys

import pytest

pytest.importorskip("mujoco")

_SCRIPT = """
import gymnasium as gym
import gauntlet  # noqa: F401
env = gym.make("gauntlet/CalSPI-InvertedPendulum-v0", render_mode="rgb_array")
env.reset(seed=0)
frame = env.render()
print(frame.shape, int(frame.max()) > 0)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the headless backends are Linux ones")
@pytest.mark.skipif(not (ctypes.util.find_library("EGL") or ctypes.util.find_library("OSMesa")),
                    reason="needs an offscreen GL library (EGL or OSMesa)")
def test_headless_make_and_render_without_mujoco_gl_gives_a_frame():
    env = {k: v for k, v in os.environ.items()
           if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY")}
    done = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[0].endswith("3) True")


def test_an_operators_choice_of_backend_is_kept(monkeypatch):
    from gauntlet.envs.calspi.gl import choose_gl_backend

    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    assert choose_gl_backend() == "osmesa"
    assert os.environ["MUJOCO_GL"] == "osmesa"
