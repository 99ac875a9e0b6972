"""32 client sessions at once on one HTTP server: each session's state stays its own.

A disaster server gives every HTTP session its own workspace: 32 sessions each save a layer of
their own, read it back, and find the layers of other sessions missing by name. The env bridge gives
every session its own env: 32 sessions step 32 episodes in lockstep, and each sees exactly the
observations a CartPole of its own seed and actions gives.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from gauntlet.bridges.server_process import spawn_http_server

pytestmark = pytest.mark.xdist_group("http-sessions")

SESSIONS = 32
CARTPOLE_STEPS = 6
# Session i tries the layers of sessions i + k (mod 32): its neighbours in time and sessions far off,
# so every layer is tried by eight others (all 992 pairs would take most of a minute on 2 cores).
OTHERS = (1, 2, 3, 5, 8, 13, 21, 31)


async def in_sessions(url: str, run: Callable[[int, ClientSession, asyncio.Barrier], Awaitable[Any]]) -> list[Any]:
    """Run ``run(i, session, barrier)`` for ``SESSIONS`` client sessions at once, each on its own
    streamable HTTP connection; the barrier lets every session finish one phase before any starts the next."""
    barrier = asyncio.Barrier(SESSIONS)

    async def one(i: int) -> Any:
        try:
            async with streamable_http_client(url) as (read, write, _), ClientSession(read, write) as session:
                await session.initialize()
                return await run(i, session, barrier)
        except BaseException:
            await barrier.abort()  # the other sessions stop waiting for this one
            raise

    return await asyncio.gather(*(one(i) for i in range(SESSIONS)))


def point_layer(i: int) -> dict[str, Any]:
    """Session ``i``'s layer: one point whose attributes name the session (so every file differs)."""
    return {"type": "FeatureCollection", "features": [{
        "type": "Feature", "geometry": {"type": "Point", "coordinates": [350000.0 + i, 5600000.0 + i]},
        "properties": {"session": i, "note": f"written by session {i}"}}]}


def error_text(result) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


def test_32_disaster_sessions_each_read_their_own_layer_and_not_another_sessions(tmp_path):
    paths: dict[int, str] = {}

    async def session_run(i: int, session: ClientSession, barrier: asyncio.Barrier) -> dict[str, Any]:
        saved = await session.call_tool("vec_from_geojson", {"geojson": point_layer(i), "crs": "EPSG:32632"})
        assert not saved.isError, error_text(saved)
        paths[i] = saved.structuredContent["path"]
        await barrier.wait()  # every session has written before any reads
        own = await session.call_tool("vec_info", {"layer": paths[i]})
        others = {}
        for j in ((i + k) % SESSIONS for k in OTHERS):
            others[j] = await session.call_tool("vec_info", {"layer": paths[j]})
        return {"own": own, "others": others}

    options = json.dumps({"families": ["vec"], "data_root": str(tmp_path)})
    with spawn_http_server("disaster", "--server-kwargs", options) as served:
        seen = asyncio.run(in_sessions(served.url, session_run))

    assert len(set(paths.values())) == SESSIONS and all(path.startswith("ws/") for path in paths.values())
    for i, results in enumerate(seen):
        own = results["own"]
        assert not own.isError, error_text(own)
        assert own.structuredContent["info"]["example"] == point_layer(i)["features"][0]["properties"]
        assert len(results["others"]) == len(OTHERS)
        for j, other in results["others"].items():
            assert other.isError, f"session {i} read session {j}'s layer {paths[j]}"
            assert "does not exist" in error_text(other)


def cartpole_actions(i: int) -> list[int]:
    """Session ``i``'s actions: the bits of ``i``, so the 32 sessions drive 32 different episodes."""
    return [(i >> k) & 1 for k in range(CARTPOLE_STEPS)]


def direct_cartpole(seed: int, actions: list[int]) -> list[tuple[np.ndarray, bool]]:
    """Observations (float32) and termination of CartPole-v1 reset with ``seed``, then stepped with ``actions``."""
    env = gym.make("CartPole-v1")
    observation, _ = env.reset(seed=seed)
    seen = [(observation, False)]
    for action in actions:
        observation, _, terminated, _, _ = env.step(action)
        seen.append((observation, terminated))
        if terminated:
            break
    return seen


def test_32_env_bridge_sessions_step_independent_episodes_whose_observations_never_mix():
    async def session_run(i: int, session: ClientSession, barrier: asyncio.Barrier) -> list[tuple[np.ndarray, bool]]:
        reset = await session.call_tool("reset", {"seed": 1000 + i})
        assert not reset.isError, error_text(reset)
        seen = [(np.asarray(reset.structuredContent["observation"], np.float32), False)]
        for action in cartpole_actions(i):
            await barrier.wait()  # lockstep: every session's k-th step is in flight together
            if seen[-1][1]:
                continue
            step = await session.call_tool("step", {"action": action})
            assert not step.isError, error_text(step)
            seen.append((np.asarray(step.structuredContent["observation"], np.float32),
                         bool(step.structuredContent["terminated"])))
        return seen

    with spawn_http_server("env:CartPole-v1") as served:
        seen = asyncio.run(in_sessions(served.url, session_run))

    for i, observed in enumerate(seen):
        expected = direct_cartpole(1000 + i, cartpole_actions(i))
        assert len(observed) == len(expected)
        for (got, got_end), (want, want_end) in zip(observed, expected):
            assert got.tobytes() == want.astype(np.float32).tobytes() and got_end == want_end, f"session {i}"
