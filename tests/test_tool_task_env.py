"""ToolTaskEnv: tool tasks as a Gymnasium env, against a real key-value MCP server defined here."""

from __future__ import annotations

import itertools
import json
import re
import weakref

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

import gauntlet
from gauntlet.branching import BranchingError
from gauntlet.bridges.server_process import serve_command, spawn_http_server
from gauntlet.bridges.tool_task_env import ToolTaskEnv, tool_call_action
from gauntlet.episode import load_episodes
from gauntlet.tasks import NO_ANSWER, EvalSpec, GoldCall, Scorer, ToolTask, save_suite


# A small stateful tool server: one key-value store per client session ----------------------------
class Entry(BaseModel):
    key: str
    value: str | float


class Keys(BaseModel):
    keys: list[str] = Field(description="stored keys, sorted")


class Total(BaseModel):
    total: float = Field(description="sum of the numeric values")


class Echo(BaseModel):
    text: str


def kv_server() -> FastMCP:
    server = FastMCP("kv", log_level="WARNING")
    stores: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
    read_only = ToolAnnotations(readOnlyHint=True, idempotentHint=True)

    def store(ctx: Context) -> dict:
        return stores.setdefault(ctx.session, {})

    @server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True))
    def put(key: str, value: str | float, ctx: Context) -> Entry:
        """Store value under key (replacing any value there)."""
        store(ctx)[key] = value
        return Entry(key=key, value=value)

    @server.tool(annotations=read_only)
    def get(key: str, ctx: Context) -> Entry:
        """The value stored under key."""
        if key not in store(ctx):
            raise ToolError(f"no key {key!r}; stored keys: {sorted(store(ctx))}")
        return Entry(key=key, value=store(ctx)[key])

    @server.tool(annotations=read_only)
    def keys(ctx: Context) -> Keys:
        """Every stored key."""
        return Keys(keys=sorted(store(ctx)))

    @server.tool(annotations=read_only)
    def total(ctx: Context) -> Total:
        """The sum of the numeric values stored."""
        return Total(total=sum(v for v in store(ctx).values() if isinstance(v, float | int)))

    @server.tool(annotations=read_only)
    def echo(text: str, times: int = 1) -> Echo:
        """The text, repeated `times` times."""
        return Echo(text=text * times)

    return server


_tickets = itertools.count()


def ticket_server() -> FastMCP:
    """A server whose answers depend on every call ever made in this process: not replayable."""
    server = FastMCP("tickets", log_level="WARNING")

    @server.tool()
    def ticket() -> int:
        """A fresh ticket number."""
        return next(_tickets)

    return server


def put(key, value) -> GoldCall:
    return GoldCall(call="put", args={"key": key, "value": value}, obs={"key": key, "value": value})


TASKS = [
    ToolTask(id="fruit-total", question="Store apples=3 and pears=4, then report the total.",
             gold_trajectory=[put("apples", 3.0), put("pears", 4.0), GoldCall(call="total", obs={"total": 7.0})],
             answer=7, eval_spec=EvalSpec(kind="numeric", abs_tol=1e-9)),
    ToolTask(id="fruit-keys", question="Store kiwi=1 and fig=2, then list the keys.",
             gold_trajectory=[put("kiwi", 1.0), put("fig", 2.0), GoldCall(call="keys", obs={"keys": ["fig", "kiwi"]})],
             answer=["kiwi", "fig"], eval_spec=EvalSpec(kind="set")),
    ToolTask(id="greeting", question="Store 'Hello, World' under greeting and read it back.",
             gold_trajectory=[put("greeting", "Hello, World"), GoldCall(call="get", args={"key": "greeting"})],
             answer="World", eval_spec=EvalSpec(kind="contains")),
    ToolTask(id="ordered", question="Store a=1 then b=2, then list the keys in order.",
             gold_trajectory=[put("a", 1.0), put("b", 2.0), GoldCall(call="keys")], answer=["a", "b"],
             eval_spec=EvalSpec(kind="list", trajectory="ordered", trajectory_weight=0.5)),
]


@pytest.fixture
def env():
    env = ToolTaskEnv(TASKS, kv_server)
    yield env
    env.close()


def call(env, name, **arguments):
    return env.step(tool_call_action(name, arguments))


def result_of(observation) -> dict:
    return json.loads(observation["result"])


@pytest.mark.filterwarnings("ignore:.*not having a spec")  # the raw env is checked without gym.make on purpose
def test_passes_the_gymnasium_env_checker():
    raw = ToolTaskEnv(TASKS, kv_server)
    made = gym.make("gauntlet/ToolTask-v0", tasks=TASKS, server=kv_server)
    try:
        check_env(raw)
        check_env(made.unwrapped)
    finally:
        raw.close()
        made.close()


def test_gold_agent_scores_one_on_every_task_of_the_suite(tmp_path, env):
    suite = save_suite(TASKS, tmp_path / "kv.jsonl")
    for seed, task in enumerate(TASKS):
        episode = gauntlet.rollout(env, gauntlet.make_agent("gold", suite=suite), seed=seed)
        assert episode.outcome.score == 1.0 and episode.outcome.success
        assert episode.steps[-1].info["task_id"] == task.id
        made = [step.tool_call.name for step in episode.steps]
        assert made == [gold.call for gold in task.gold_trajectory] + ["submit_answer"]
        assert not [event for step in episode.steps for event in step.events]  # results matched the gold obs


def test_every_step_records_its_tool_call_once_in_its_info_in_the_episode_file(tmp_path, env):
    path = tmp_path / "run.jsonl"
    kept = gauntlet.rollout(env, gauntlet.make_agent("gold", suite=TASKS), seed=0, record=path, keep_steps=True)
    [episode] = load_episodes(path)
    calls = [step.tool_call for step in episode.steps]
    assert [c.name for c in calls] == ["put", "put", "total", "submit_answer"]
    assert calls[2].result == {"total": 7.0} and calls[2].server == "kv" and not calls[2].is_error
    assert all(c.latency_ms > 0 for c in calls[:3])
    assert all(step.info["tool_call"] is step.tool_call for step in episode.steps)  # its one home: info
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert all("tool_call" not in line for line in lines if line["kind"] == "step")  # not a second copy
    assert episode.steps == kept.steps  # the file reads back as the steps held in memory


def test_wrong_answer_ends_the_episode_with_score_zero(env):
    env.reset(seed=0)
    call(env, "put", key="apples", value=3)
    _, reward, terminated, truncated, info = env.step('{"answer": 8}')
    assert terminated and not truncated and reward == 0.0
    assert info["score"] == 0.0 and not info["success"] and info["privileged"]["details"]["expected_answer"] == 7


def test_unparseable_action_is_an_error_observation_with_a_penalty_not_a_crash():
    env = ToolTaskEnv(TASKS, kv_server, invalid_action_penalty=0.25)
    try:
        env.reset(seed=0)
        observation, reward, terminated, truncated, info = env.step("put apples 3")
        _, reward_after, *_ = call(env, "total")
    finally:
        env.close()
    shown = result_of(observation)
    assert shown["is_error"] and '{"name": "<tool>", "arguments": {...}}' in shown["result"]["error"]
    assert reward == -0.25 and reward_after == 0.0 and not terminated and not truncated
    assert info["invalid_action"] and info["tool_call"].is_error


def test_action_outside_the_space_raises_value_error_naming_the_format(env):
    env.reset(seed=0)
    with pytest.raises(ValueError, match='"name": "<tool>"'):
        env.step(42)
    with pytest.raises(ValueError, match="printable ASCII"):
        env.step('{"name": "echo", "arguments": {"text": "café"}}')


def test_unknown_tool_is_an_error_observation_listing_the_tools(env):
    env.reset(seed=0)
    observation, _, terminated, _, info = call(env, "delete", key="apples")
    error = result_of(observation)["result"]["error"]
    assert "unknown tool 'delete'" in error and "put" in error and "submit_answer" in error
    assert info["tool_call"].is_error and not terminated


def test_tool_error_comes_back_as_an_error_observation(env):
    env.reset(seed=0)
    observation, *_ = call(env, "get", key="missing")
    shown = result_of(observation)
    assert shown["is_error"] and "no key 'missing'" in shown["result"]


def test_step_limit_truncates_and_scores_no_answer():
    env = ToolTaskEnv(TASKS, kv_server, max_steps=2)
    try:
        env.reset(seed=0)
        first = call(env, "keys")
        _, reward, terminated, truncated, info = call(env, "keys")
    finally:
        env.close()
    assert not first[3] and truncated and not terminated
    assert reward == 0.0 and not info["privileged"]["submitted"]


def test_results_are_escaped_to_ascii_and_cut_to_the_text_limit():
    env = ToolTaskEnv(TASKS, kv_server, max_text_length=200)
    try:
        env.reset(seed=0)
        accented, *_ = call(env, "echo", text="caf\u00e9")
        long, *_ = call(env, "echo", text="x", times=1000)
        space = env.observation_space
    finally:
        env.close()
    assert "caf\\u00e9" in accented["result"] and space.contains(accented)
    full = json.dumps({"tool": "echo", "is_error": False, "result": {"text": "x" * 1000}})
    marker = re.search(r"\.\.\.\[truncated (\d+) chars\]$", long["result"])
    kept = long["result"][:marker.start()]
    assert len(long["result"]) <= 200 and space.contains(long)
    assert full.startswith(kept) and int(marker.group(1)) == len(full) - len(kept)


def test_restore_replays_the_call_prefix_and_gives_identical_observations(env):
    env.reset(seed=1)
    call(env, "put", key="x", value=1)
    call(env, "put", key="y", value=2)
    snapshot = env.snapshot()
    continuation = [("put", {"key": "z", "value": 3}), ("total", {}), ("keys", {})]
    futures = []
    for _ in range(2):
        env.restore(snapshot)
        futures.append([call(env, name, **arguments)[0] for name, arguments in continuation])
    assert futures[0] == futures[1]
    assert result_of(futures[0][1])["result"] == {"total": 6.0}


def test_fork_is_independent_of_the_original(env):
    env.reset(seed=0)
    call(env, "put", key="apples", value=3)
    fork = env.fork(env.snapshot())
    try:
        call(fork, "put", key="pears", value=10)
        forked_total = result_of(call(fork, "total")[0])["result"]
        original_total = result_of(call(env, "total")[0])["result"]
    finally:
        fork.close()
    assert forked_total == {"total": 13.0} and original_total == {"total": 3.0}


def test_gauntlet_fork_of_a_branchable_gym_made_env_matches_the_original():
    env = gauntlet.branchable(gym.make("gauntlet/ToolTask-v0", tasks=TASKS, server=kv_server))
    env.reset(seed=2)
    call(env, "put", key="greeting", value="hi")
    twin = gauntlet.fork(env, env.snapshot())
    try:
        assert call(twin, "get", key="greeting")[0] == call(env, "get", key="greeting")[0]
    finally:
        twin.close()
        env.close()


def test_a_server_instance_serves_every_reset_with_fresh_session_state():
    env = ToolTaskEnv(TASKS, kv_server())
    try:
        env.reset(seed=0)
        call(env, "put", key="apples", value=3)
        env.reset(seed=0)
        observation, *_ = call(env, "keys")
    finally:
        env.close()
    assert result_of(observation)["result"] == {"keys": []}


def test_restore_refuses_tools_that_do_not_replay():
    env = ToolTaskEnv(ToolTask(id="ticket", question="Take a ticket.", answer=0), ticket_server)
    try:
        env.reset(seed=0)
        call(env, "ticket")
        with pytest.raises(BranchingError, match="not deterministic"):
            env.restore(env.snapshot())
    finally:
        env.close()


# Across transports, against the env bridge server ------------------------------------------------
def cartpole_task() -> ToolTask:
    """Push CartPole right twice from seed 0 and report the cart position, computed directly."""
    direct = gym.make("CartPole-v1")
    first, _ = direct.reset(seed=0)
    gold = [GoldCall(call="reset", args={"seed": 0}, obs={"observation": first.tolist(), "info": {}})]
    for step in (1, 2):
        observation, *_ = direct.step(1)
        gold.append(GoldCall(call="step", args={"action": 1}, obs={
            "observation": observation.tolist(), "terminated": False, "truncated": False, "step": step, "info": {}}))
    return ToolTask(id="cartpole-push", server="env:CartPole-v1", question="Reset with seed 0, push right twice, "
                    "and report the cart position.", gold_trajectory=gold, answer=float(observation[0]),
                    eval_spec=EvalSpec(kind="numeric"))


def run_gold(server) -> gauntlet.Episode:
    task = cartpole_task()
    env = ToolTaskEnv([task], server)
    try:
        return gauntlet.rollout(env, gauntlet.make_agent("gold", suite=[task]), seed=0)
    finally:
        env.close()


def test_gold_agent_scores_one_through_a_stdio_env_server():
    episode = run_gold(serve_command("env:CartPole-v1"))
    assert episode.outcome.score == 1.0
    assert episode.steps[0].tool_call.server == "gauntlet-env-CartPole-v1"
    assert not [event for step in episode.steps for event in step.events]


def test_gold_agent_scores_one_through_an_http_env_server():
    with spawn_http_server("env:CartPole-v1") as served:
        episode = run_gold(served.url)
    assert episode.outcome.score == 1.0
    assert not [event for step in episode.steps for event in step.events]


def test_task_server_names_resolve_in_memory_when_no_server_is_given():
    episode = run_gold(None)
    assert episode.outcome.score == 1.0


class HalfCredit(Scorer):
    """A suite's own scorer: half the core score, so the test can tell which scorer graded."""

    def score(self, task, answer=NO_ANSWER, calls=()):
        report = super().score(task, answer, calls)
        return report.model_copy(update={"score": report.score / 2})


def test_a_scorer_named_by_module_path_grades_the_episode():
    env = ToolTaskEnv(TASKS, kv_server, scorer=f"{__name__}:HalfCredit")
    try:
        episode = gauntlet.rollout(env, gauntlet.make_agent("gold", suite=TASKS), seed=0)
    finally:
        env.close()
    assert isinstance(env.scorer, HalfCredit) and episode.outcome.score == 0.5
