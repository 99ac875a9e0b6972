"""The env MCP server: tool results against stepping the env directly, over memory, stdio and HTTP."""

from __future__ import annotations

import io
import socket
import subprocess

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from mcp.shared.memory import create_connected_server_and_client_session as connect
from PIL import Image

from gauntlet import load_episodes
from gauntlet.bridges.env_server import EnvServer, build_control_server, build_env_server
from gauntlet.bridges.env_sessions import observation_json
from gauntlet.bridges.mcp_client import BlockingMCPClient, ServerTarget
from gauntlet.bridges.ports import PortInUseError
from gauntlet.bridges.server_process import serve_command, spawn_http_server
from gauntlet.bridges.serving import serve
from gauntlet.bridges.targets import resolve_server
from gauntlet.errors import UserError
from gauntlet.registry import UnknownEntryError, registry
from gauntlet.spaces import describe
from tests.module_registered_envs import IMPORT_ROOT, MODULE_IDS

BEACON = "GauntletTest/Beacon-v0"


class BeaconEnv(gym.Env):
    """A walk on a line toward a hidden target: privileged state, a reward-like info key, an RGB frame."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(self, render_mode: str | None = None):
        self.render_mode = render_mode
        self.action_space = spaces.Discrete(3)  # 0: left, 1: stay, 2: right
        self.observation_space = spaces.Box(-10, 10, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position, self.target = 0, int(self.np_random.integers(1, 6))
        return np.array([0], np.float32), {"privileged": {"target": self.target}}

    def step(self, action):
        self.position = int(np.clip(self.position + int(action) - 1, -10, 10))
        reward = -float(abs(self.target - self.position))
        info = {"privileged": {"target": self.target}, "reward_distance": reward, "moves": 1}
        return np.array([self.position], np.float32), reward, self.position == self.target, False, info

    def render(self):
        frame = np.zeros((4, 21, 3), np.uint8)
        frame[:, self.position + 10, 0] = 255
        frame[:, self.target + 10, 1] = 255
        return frame


if BEACON not in gym.registry:
    gym.register(id=BEACON, entry_point=BeaconEnv, max_episode_steps=40)

STDIO_COMMAND = tuple(serve_command("env:CartPole-v1"))


@pytest.fixture
def anyio_backend():
    return "asyncio"


def direct_cartpole(seed: int, actions: list[int]) -> list[np.ndarray]:
    env = gym.make("CartPole-v1")
    observations = [env.reset(seed=seed)[0]]
    for action in actions:
        observation, _, terminated, truncated, _ = env.step(action)
        observations.append(observation)
        if terminated or truncated:
            break
    env.close()
    return observations


def as_float32(observation) -> np.ndarray:
    return np.asarray(observation, dtype=np.float32)


def bitwise_equal(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


ACTIONS = [1, 0, 1, 1, 0, 0, 1, 0, 1, 1]


async def ok(client, tool: str, arguments: dict) -> dict:
    """The structured result of a call that must succeed."""
    result = await client.call_tool(tool, arguments)
    assert not result.isError, result.content[0].text
    return result.structuredContent


# In memory --------------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_observations_over_mcp_are_bitwise_those_of_stepping_cartpole_directly():
    truth = direct_cartpole(7, ACTIONS)
    async with connect(build_env_server("CartPole-v1")) as client:
        first = await client.call_tool("reset", {"seed": 7})
        observations = [first.structuredContent["observation"]]
        for action in ACTIONS[:len(truth) - 1]:
            observations.append((await client.call_tool("step", {"action": action})).structuredContent["observation"])
    assert len(observations) == len(truth)
    assert all(bitwise_equal(as_float32(got), want) for got, want in zip(observations, truth))


@pytest.mark.anyio
async def test_reward_is_hidden_by_default_and_returned_with_expose_reward():
    async with connect(build_env_server(BEACON)) as client:
        step_tool = next(t for t in (await client.list_tools()).tools if t.name == "step")
        await client.call_tool("reset", {"seed": 0})
        result = (await client.call_tool("step", {"action": 2})).structuredContent
    assert "reward" not in step_tool.outputSchema["properties"]
    assert "reward" not in result and "reward_distance" not in result["info"]
    assert result["info"]["moves"] == 1

    env = gym.make(BEACON)
    env.reset(seed=0)
    _, true_reward, *_ = env.step(2)
    async with connect(build_env_server(BEACON, expose_reward=True)) as client:
        await client.call_tool("reset", {"seed": 0})
        shown = (await client.call_tool("step", {"action": 2})).structuredContent
    assert shown["reward"] == true_reward and shown["info"]["reward_distance"] == true_reward


@pytest.mark.anyio
async def test_privileged_state_is_hidden_unless_exposed_but_the_operator_sees_it():
    server = build_env_server(BEACON, expose_reward=False)
    async with connect(server) as client:
        reset = (await client.call_tool("reset", {"seed": 3})).structuredContent
        step = (await client.call_tool("step", {"action": 2})).structuredContent
        [operator_view] = server.control.sessions()
    target = gym.make(BEACON).reset(seed=3)[1]["privileged"]["target"]
    assert "privileged" not in reset["info"] and "privileged" not in step["info"]
    assert operator_view.privileged == {"target": target}
    assert operator_view.rewards == [-abs(target - 1.0)]

    async with connect(build_env_server(BEACON, expose_privileged=True)) as client:
        reset = (await client.call_tool("reset", {"seed": 3})).structuredContent
    assert reset["info"]["privileged"] == {"target": target}


@pytest.mark.anyio
async def test_action_outside_the_space_is_an_error_result_naming_the_space():
    async with connect(build_env_server("CartPole-v1")) as client:
        await client.call_tool("reset", {"seed": 0})
        for bad in (5, "left", [1]):
            result = await client.call_tool("step", {"action": bad})
            assert result.isError
            assert describe(spaces.Discrete(2)) in result.content[0].text
        assert not (await client.call_tool("step", {"action": 1})).isError


@pytest.mark.anyio
async def test_step_before_reset_is_an_error_saying_call_reset_first():
    async with connect(build_env_server("CartPole-v1")) as client:
        result = await client.call_tool("step", {"action": 0})
    assert result.isError and "call reset first" in result.content[0].text


@pytest.mark.anyio
async def test_restoring_an_unknown_snapshot_id_is_an_error_listing_the_known_ones():
    async with connect(build_env_server("CartPole-v1")) as client:
        await client.call_tool("reset", {"seed": 0})
        taken = (await client.call_tool("snapshot", {})).structuredContent["snapshot_id"]
        result = await client.call_tool("restore", {"snapshot_id": "snap-404"})
    assert result.isError
    assert "snap-404" in result.content[0].text and taken in result.content[0].text


@pytest.mark.anyio
async def test_snapshot_then_restore_over_mcp_gives_identical_futures_in_mujoco(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MuJoCo writes MUJOCO_LOG.TXT into the working directory
    actions = [[0.1], [-0.1], [0.05], [0.0], [-0.05]]
    async with connect(build_env_server("InvertedPendulum-v5")) as client:
        await client.call_tool("reset", {"seed": 11})
        await client.call_tool("step", {"action": [0.3]})
        snapshot = (await client.call_tool("snapshot", {})).structuredContent
        futures = []
        for _ in range(3):
            restored = await ok(client, "restore", {"snapshot_id": snapshot["snapshot_id"]})
            future = [restored["observation"]]
            for action in actions:
                future.append((await ok(client, "step", {"action": action}))["observation"])
            futures.append(future)
    assert restored["step"] == snapshot["step"] == 1
    assert futures[0] == futures[1] == futures[2]
    assert futures[0][1] != futures[0][2]  # the actions did move the pendulum


@pytest.mark.anyio
@pytest.mark.parametrize("env_id,seed,action", [(BEACON, 2, 2), ("CartPole-v1", 4, 1)])
async def test_render_returns_a_png_of_the_env_frame(env_id, seed, action):
    async with connect(build_env_server(env_id)) as client:
        await client.call_tool("reset", {"seed": seed})
        await client.call_tool("step", {"action": action})
        result = await client.call_tool("render", {})
    assert not result.isError, result.content
    [image] = result.content
    assert image.type == "image" and image.mimeType == "image/png"
    import base64

    frame = np.asarray(Image.open(io.BytesIO(base64.b64decode(image.data))))
    env = gym.make(env_id, render_mode="rgb_array")
    env.reset(seed=seed)
    env.step(action)
    assert np.array_equal(frame, env.render())


@pytest.mark.anyio
async def test_tool_schemas_describe_the_spaces_and_annotations_tell_the_truth():
    async with connect(build_env_server("CartPole-v1")) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == {"reset", "step", "render", "snapshot", "restore"}
    action_space = gym.make("CartPole-v1").action_space
    assert describe(action_space) in tools["step"].inputSchema["properties"]["action"]["description"]
    assert all(tools[name].outputSchema for name in ("reset", "step", "snapshot", "restore"))
    assert tools["render"].annotations.readOnlyHint and tools["render"].annotations.idempotentHint
    assert not tools["step"].annotations.readOnlyHint and tools["step"].annotations.destructiveHint
    assert not tools["step"].annotations.idempotentHint
    assert tools["restore"].annotations.idempotentHint and tools["restore"].annotations.destructiveHint
    assert not tools["snapshot"].annotations.destructiveHint


@pytest.mark.anyio
async def test_two_client_sessions_of_one_server_have_separate_envs():
    server = build_env_server("CartPole-v1")
    async with connect(server) as first, connect(server) as second:
        await first.call_tool("reset", {"seed": 1})
        await second.call_tool("reset", {"seed": 2})
        for action in ACTIONS[:3]:
            await first.call_tool("step", {"action": action})
        second_step = (await second.call_tool("step", {"action": 0})).structuredContent
    assert bitwise_equal(as_float32(second_step["observation"]), direct_cartpole(2, [0])[1])
    assert [s.step for s in server.control.sessions()] == [0, 0]  # both closed; their episodes summarised
    assert [e.length for s in server.control.sessions() for e in s.episodes] == [3, 1]


@pytest.mark.anyio
async def test_record_writes_one_episode_per_reset_with_rewards_and_privileged(tmp_path):
    server = build_env_server(BEACON, record=tmp_path / "run")
    async with connect(server) as client:
        await client.call_tool("reset", {"seed": 4})
        await client.call_tool("step", {"action": 2})
        await client.call_tool("step", {"action": 0})
        await client.call_tool("reset", {"seed": 5})
        await client.call_tool("step", {"action": 1})
    server.control.close()
    episodes = load_episodes(tmp_path / "run")
    assert [len(e.steps) for e in episodes] == [2, 1] and all(e.complete for e in episodes)
    assert [e.seed for e in episodes] == [4, 5]
    assert [s.action for s in episodes[0].steps] == [2, 0]
    target = gym.make(BEACON).reset(seed=4)[1]["privileged"]["target"]
    assert episodes[0].steps[0].privileged == {"target": target}
    assert [s.reward for s in episodes[0].steps] == [-abs(target - 1.0), -float(target)]


@pytest.mark.anyio
async def test_control_server_reports_sessions_and_offers_nothing_to_act_with():
    server = build_env_server(BEACON)
    control = build_control_server(server)
    async with connect(server) as agent, connect(control) as operator:
        await agent.call_tool("reset", {"seed": 0})
        await agent.call_tool("step", {"action": 2})
        listed = (await operator.call_tool("list_sessions", {})).structuredContent["sessions"]
        one = (await operator.call_tool("session_summary", {"session_id": listed[0]["session_id"]})).structuredContent
        missing = await operator.call_tool("session_summary", {"session_id": "session-999"})
        operator_tools = {t.name: t for t in (await operator.list_tools()).tools}
    assert one["rewards"] == listed[0]["rewards"] and len(one["rewards"]) == 1
    assert missing.isError and "session-999" in missing.content[0].text
    assert set(operator_tools) == {"list_sessions", "session_summary"}
    assert all(tool.annotations.readOnlyHint for tool in operator_tools.values())


def test_large_image_observations_reach_the_client_as_a_summary():
    camera = spaces.Dict({"image": spaces.Box(0, 255, (128, 128, 3), np.uint8), "speed": spaces.Box(-1, 1, (2,))})
    frame = np.full((128, 128, 3), 7, np.uint8)
    frame[0, 0] = 200
    shown = observation_json(camera, {"image": frame, "speed": np.array([0.5, -0.25], np.float32)})
    assert shown["speed"] == [0.5, -0.25]
    assert shown["image"]["shape"] == [128, 128, 3] and shown["image"]["max"] == 200.0
    assert "render()" in shown["image"]["summary"]


def test_record_must_name_a_folder_not_a_jsonl_file(tmp_path):
    with pytest.raises(UserError, match="record names a folder"):
        build_env_server("CartPole-v1", record=tmp_path / "episodes.jsonl")


# Every id form Gymnasium takes --------------------------------------------------------------------
@pytest.mark.anyio
@pytest.mark.parametrize("env_id", [
    "CartPole-v1", pytest.param("CartPole", marks=pytest.mark.filterwarnings("ignore:.*latest versioned environment")),
    "gymnasium.envs.classic_control:CartPole-v1", *MODULE_IDS])
async def test_every_id_form_gymnasium_takes_is_served_with_cartpoles_observations_and_frames(env_id):
    truth = direct_cartpole(4, ACTIONS[:3])
    async with connect(build_env_server(env_id)) as client:
        observations = [(await ok(client, "reset", {"seed": 4}))["observation"]]
        observations += [(await ok(client, "step", {"action": action}))["observation"] for action in ACTIONS[:3]]
        rendered = await client.call_tool("render", {})
    assert all(bitwise_equal(as_float32(got), want) for got, want in zip(observations, truth, strict=True))
    assert not rendered.isError and rendered.content[0].mimeType == "image/png"


def test_a_module_id_is_served_over_stdio_by_a_process_that_imports_the_module_first():
    target = ServerTarget(command=tuple(serve_command(f"env:{MODULE_IDS[0]}")), env=(("PYTHONPATH", IMPORT_ROOT),))
    client = BlockingMCPClient(target)
    try:
        client.open()
        observations = [client.call_tool("reset", {"seed": 5}).structuredContent["observation"]]
        observations += [client.call_tool("step", {"action": a}).structuredContent["observation"] for a in ACTIONS[:4]]
    finally:
        client.close()
    truth = direct_cartpole(5, ACTIONS[:4])
    assert all(bitwise_equal(as_float32(got), want) for got, want in zip(observations, truth, strict=True))


def test_a_module_id_whose_module_is_missing_is_a_user_error_naming_the_module():
    with pytest.raises(UserError, match="no module named 'no_such_env_module'; install it or add its folder"):
        build_env_server("no_such_env_module:Thing-v0")


# Resolving and serving ----------------------------------------------------------------------------
def test_resolve_server_builds_env_servers_and_registered_servers():
    assert isinstance(resolve_server("env:CartPole-v1", expose_reward=True), EnvServer)
    registry.add("server", "test-cartpole", f"{__name__}:_cartpole_factory")
    assert resolve_server("test-cartpole", record=None).name == "gauntlet-env-CartPole-v1"
    for value in (True, False):  # false is an option given, not one left unset
        with pytest.raises(UserError, match="does not take expose_reward; it takes no options"):
            resolve_server("test-cartpole", expose_reward=value)
    with pytest.raises(UnknownEntryError, match="env:<ENV_ID>"):
        resolve_server("no-such-server")


def _cartpole_factory():
    return build_env_server("CartPole-v1")


def test_serving_http_on_a_port_in_use_raises_port_in_use_error():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(PortInUseError) as caught:
            serve(build_env_server("CartPole-v1"), "http", "127.0.0.1", port)
        result = subprocess.run([*STDIO_COMMAND, "--transport", "http", "--port", str(port)],
                                capture_output=True, text=True, timeout=120)
    message = f"port {port} on 127.0.0.1 is in use; pick another with --port"
    assert str(caught.value) == message and isinstance(caught.value, OSError)
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [f"error: {message}"]


def test_stdio_round_trip_matches_stepping_cartpole_directly():
    client = BlockingMCPClient(ServerTarget(command=STDIO_COMMAND))
    try:
        client.open()
        observations = [client.call_tool("reset", {"seed": 5}).structuredContent["observation"]]
        observations += [client.call_tool("step", {"action": a}).structuredContent["observation"] for a in ACTIONS[:4]]
        bad = client.call_tool("step", {"action": 2})
    finally:
        client.close()
    truth = direct_cartpole(5, ACTIONS[:4])
    assert all(bitwise_equal(as_float32(got), want) for got, want in zip(observations, truth, strict=True))
    assert bad.isError and "Discrete(2)" in bad.content[0].text


@pytest.fixture(scope="module")
def http_cartpole():
    with spawn_http_server("env:CartPole-v1", "--control-port", "0") as served:
        yield served


def test_two_http_clients_act_in_separate_envs(http_cartpole):
    first, second = (BlockingMCPClient(ServerTarget(url=http_cartpole.url)) for _ in range(2))
    try:
        first.open()
        second.open()
        first.call_tool("reset", {"seed": 1})
        second.call_tool("reset", {"seed": 2})
        first_observations = [first.call_tool("step", {"action": a}).structuredContent["observation"]
                              for a in ACTIONS[:3]]
        second_observation = second.call_tool("step", {"action": 1}).structuredContent["observation"]
    finally:
        first.close()
        second.close()
    assert all(bitwise_equal(as_float32(got), want)
               for got, want in zip(first_observations, direct_cartpole(1, ACTIONS[:3])[1:], strict=True))
    assert bitwise_equal(as_float32(second_observation), direct_cartpole(2, [1])[1])


def test_operator_reads_rewards_on_the_control_port_which_the_agent_cannot_call(http_cartpole):
    agent, operator = BlockingMCPClient(ServerTarget(url=http_cartpole.url)), BlockingMCPClient(
        ServerTarget(url=http_cartpole.control_url))
    try:
        agent.open()
        operator.open()
        agent.call_tool("reset", {"seed": 9})
        for action in ACTIONS[:4]:
            agent.call_tool("step", {"action": action})
        agent_tools = {tool.name for tool in agent.list_tools()}
        refused = agent.call_tool("list_sessions", {})
        sessions = operator.call_tool("list_sessions", {}).structuredContent["sessions"]
    finally:
        agent.close()
        operator.close()
    mine = [s for s in sessions if s["seed"] == 9 and s["open"]]
    assert len(mine) == 1 and mine[0]["rewards"] == [1.0] * 4 and mine[0]["total_reward"] == 4.0
    assert "list_sessions" not in agent_tools and refused.isError


def test_stopping_an_http_server_with_sigterm_completes_the_recorded_episode(tmp_path):
    client = None
    with spawn_http_server("env:CartPole-v1", "--record", str(tmp_path / "run")) as served:
        client = BlockingMCPClient(ServerTarget(url=served.url))
        client.open()
        client.call_tool("reset", {"seed": 3})
        for action in ACTIONS[:3]:
            client.call_tool("step", {"action": action})
    # Leaving the block sent SIGTERM while the client was still connected.
    client.close()
    [episode] = load_episodes(tmp_path / "run")
    assert served.process.returncode == 0
    assert episode.complete and [s.action for s in episode.steps] == ACTIONS[:3]
    assert episode.outcome.metrics["ended_by"] == "close"


class _BrokenDisplayBeacon(BeaconEnv):
    def render(self):
        raise RuntimeError("cannot open display :0 via /usr/lib/secret/libGL.so")


BROKEN_RENDER = "GauntletTest/BrokenRenderBeacon-v0"
if BROKEN_RENDER not in gym.registry:
    gym.register(id=BROKEN_RENDER, entry_point=_BrokenDisplayBeacon, max_episode_steps=40)


@pytest.mark.anyio
async def test_a_render_the_server_cannot_do_tells_the_agent_so_without_internals_and_logs_why(caplog):
    async with connect(build_env_server(BROKEN_RENDER)) as client:
        await ok(client, "reset", {"seed": 0})
        with caplog.at_level("WARNING", logger="gauntlet.server.env"):
            result = await client.call_tool("render", {})
        assert result.isError
        assert "not available on this server" in result.content[0].text
        assert "libGL" not in result.content[0].text and "display" not in result.content[0].text
        assert any("cannot open display" in (record.exc_text or "") for record in caplog.records)
        assert not (await client.call_tool("step", {"action": 1})).isError
