"""rollout and run_many: recording modes, hooks, seeds, resumption, backends."""

from __future__ import annotations

import json
import platform
import shutil

import gymnasium as gym
import numpy as np
import pytest

import gauntlet
from gauntlet.agent import Agent, AgentOutput
from gauntlet.batch import RunFolderError, RunSpec, episode_path, run_many
from gauntlet.episode import AgentSpec, EpisodeWriter, Message, ToolCall, load_episodes, to_plain
from gauntlet.hooks import Decision
from gauntlet.info_keys import COST, PRIVILEGED, TOOL_CALL
from gauntlet.runner import episode_seed, rollout


def _timeless(outcome):
    """The outcome without its wall time, the one metric two runs of the same episode never share."""
    return outcome.model_copy(update={"metrics": {k: v for k, v in outcome.metrics.items() if k != "wall_s"}})


def _bare_return(env_id, seed, actions):
    env = gym.make(env_id)
    env.reset(seed=seed)
    total = 0.0
    for action in actions:
        _, reward, terminated, truncated, _ = env.step(action)
        total += reward
        if terminated or truncated:
            break
    return total


def test_rollout_records_what_a_bare_step_loop_computes():
    env = gym.make("InvertedPendulum-v5")
    episode = rollout(env, gauntlet.make_agent("random"), seed=4)
    assert episode.outcome.score == _bare_return("InvertedPendulum-v5", 4, episode.actions)
    assert episode.outcome.metrics["length"] == len(episode.steps)
    assert episode.steps[-1].terminated or episode.steps[-1].truncated


@pytest.mark.parametrize("record", ["memory", "none", "disk"])
def test_recording_modes_agree_on_the_outcome(record, tmp_path):
    env = gym.make("CartPole-v1")
    mode = tmp_path / "ep.jsonl" if record == "disk" else record
    episode = rollout(env, gauntlet.make_agent("random"), seed=11, record=mode)
    reference = rollout(env, gauntlet.make_agent("random"), seed=11)
    assert _timeless(episode.outcome) == _timeless(reference.outcome)
    assert len(episode.steps) == (len(reference.steps) if record == "memory" else 0)
    if record == "disk":
        (loaded,) = load_episodes(mode)
        assert loaded.actions == [int(a) for a in reference.actions]


def test_max_steps_cuts_the_episode_and_marks_it_truncated():
    episode = rollout(gym.make("Pendulum-v1"), gauntlet.make_agent("random"), seed=0, max_steps=7)
    assert len(episode.steps) == 7 and episode.steps[-1].truncated


class _CostlyCartPole(gym.Wrapper):
    """CartPole whose steps report a float32 safety cost (the cart's distance from centre) and privileged state."""

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        return observation, reward, terminated, truncated, {**info, COST: np.float32(abs(observation[0])),
                                                            PRIVILEGED: {"x": float(observation[0])}}


class _TalkativeAgent(Agent):
    """A random agent that returns an AgentOutput with a message."""

    name = "talkative"

    def __init__(self):
        self._random = gauntlet.make_agent("random")

    def reset(self, *, seed, observation_space, action_space):
        self._random.reset(seed=seed, observation_space=observation_space, action_space=action_space)

    def act(self, observation, info):
        return AgentOutput(action=self._random.act(observation, info),
                           messages=[Message(role="assistant", content="push")])


class _Angle:
    name = "angle"

    def observe(self, step):
        return {"abs_angle": float(abs(step.observation[2]))}


class _Proceed:
    name = "proceed"

    def decide(self, prefix, candidates):
        return Decision.proceed()


RECORD_MODES = ["memory", "none", "disk", "disk, steps kept", "monitor, disk", "controller, disk"]


def _rollout_in_mode(mode, tmp_path, env, agent, **kwargs):
    """The episode as ``mode`` returns it, and its steps as recorded (in memory, or read back from the file)."""
    path = tmp_path / "ep.jsonl"
    options = {"memory": {"record": "memory"}, "none": {"record": "none"},
               "disk": {"record": path}, "disk, steps kept": {"record": path, "keep_steps": True},
               "monitor, disk": {"record": path, "hooks": [_Angle()]},
               "controller, disk": {"record": path, "hooks": [_Proceed()]}}[mode]
    episode = rollout(env, agent, **options, **kwargs)
    if mode == "none":
        return episode, None
    steps = load_episodes(path)[0].steps if "disk" in mode else episode.steps
    if "disk" in mode and episode.steps:
        assert to_plain([s.model_dump() for s in steps]) == to_plain([s.model_dump() for s in episode.steps])
    return episode, steps


@pytest.mark.parametrize("mode", RECORD_MODES)
def test_every_record_mode_sums_the_cost_from_info_the_same_way(mode, tmp_path):
    reference = rollout(_CostlyCartPole(gym.make("CartPole-v1")), gauntlet.make_agent("random"), seed=5)
    episode, steps = _rollout_in_mode(mode, tmp_path, _CostlyCartPole(gym.make("CartPole-v1")),
                                      gauntlet.make_agent("random"), seed=5)
    assert episode.outcome.metrics["cost"] == reference.outcome.metrics["cost"] > 0
    assert _timeless(episode.outcome) == _timeless(reference.outcome)
    if steps is not None:
        assert sum(step.cost for step in steps) == pytest.approx(episode.outcome.metrics["cost"], rel=1e-12)
        # The info keeps the env's float32 (written in float32's shortest form); Step.cost is its float value.
        assert [step.cost for step in steps] == [float(np.float32(step.info[COST])) for step in steps]
        assert [step.privileged for step in steps] == [{"x": pytest.approx(step.observation[0])} for step in steps]


@pytest.mark.parametrize("mode", RECORD_MODES)
def test_every_record_mode_marks_the_max_steps_cut_as_truncated(mode, tmp_path):
    episode, steps = _rollout_in_mode(mode, tmp_path, gym.make("Pendulum-v1"), gauntlet.make_agent("random"),
                                      seed=0, max_steps=7)
    assert episode.outcome.metrics["length"] == 7
    if steps is not None:
        assert [step.truncated for step in steps] == [False] * 6 + [True]


@pytest.mark.parametrize("mode", RECORD_MODES)
def test_every_record_mode_takes_the_action_out_of_an_agent_output(mode, tmp_path):
    episode, steps = _rollout_in_mode(mode, tmp_path, gym.make("CartPole-v1"), _TalkativeAgent(), seed=2)
    reference = rollout(gym.make("CartPole-v1"), gauntlet.make_agent("random"), seed=2)
    assert _timeless(episode.outcome) == _timeless(reference.outcome)
    if steps is not None:
        assert [step.action for step in steps] == [int(a) for a in reference.actions]
        assert all(step.messages[0].content == "push" for step in steps)


class _ToolCartPole(gym.Wrapper):
    """CartPole whose every step reports the tool call it ran (a push, its action) and privileged state."""

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        call = ToolCall(server="cart", name="push", arguments={"direction": int(action)}, result=float(observation[0]))
        return observation, reward, terminated, truncated, {**info, TOOL_CALL: call,
                                                            PRIVILEGED: {"x": float(observation[0])}}


class _SelfCallingAgent(Agent):
    """A random agent that runs a tool of its own at every third step (``AgentOutput.tool_call``) and keeps
    the infos it is given."""

    name = "self-calling"

    def __init__(self):
        self._random = gauntlet.make_agent("random")
        self.infos: list[dict] = []

    def reset(self, *, seed, observation_space, action_space):
        self._random.reset(seed=seed, observation_space=observation_space, action_space=action_space)
        self.infos = []

    def act(self, observation, info):
        self.infos.append(info)
        k = len(self.infos) - 1
        own = ToolCall(server="agent", name="note", arguments={"step": k}) if k % 3 == 0 else None
        return AgentOutput(action=self._random.act(observation, info), tool_call=own)


@pytest.mark.parametrize("mode", RECORD_MODES)
def test_every_record_mode_keeps_a_steps_tool_call_once_in_its_info(mode, tmp_path):
    agent = _SelfCallingAgent()
    episode, steps = _rollout_in_mode(mode, tmp_path, _ToolCartPole(gym.make("CartPole-v1")), agent, seed=3)
    # The agent reads the env's own infos, as the env gave them: the runner copies what it records.
    assert all(TOOL_CALL in info and PRIVILEGED in info for info in agent.infos[1:])
    if steps is None:
        return
    assert len(steps) > 3
    for step in steps:
        expected = (ToolCall(server="agent", name="note", arguments={"step": step.index}) if step.index % 3 == 0
                    else ToolCall(server="cart", name="push", arguments={"direction": int(step.action)},
                                  result=pytest.approx(step.observation[0])))
        assert step.info[TOOL_CALL] == expected and step.tool_call == expected
        assert PRIVILEGED not in step.info and step.privileged == {"x": pytest.approx(step.observation[0])}
    if "disk" in mode:  # one home on disk too: inside the step's info, never beside it
        lines = [json.loads(line) for line in (tmp_path / "ep.jsonl").read_text().splitlines()]
        assert all("tool_call" not in line and "tool_call" in line["info"] for line in lines if line["kind"] == "step")


def test_agent_output_cannot_be_subclassed_so_no_field_of_a_subclass_goes_unrecorded():
    with pytest.raises(TypeError, match="AgentOutput, which is final"):
        type("WithConfidence", (AgentOutput,), {})


def test_replay_agent_reproduces_a_recorded_episode_exactly(tmp_path):
    path = tmp_path / "ep.jsonl"
    original = rollout(gym.make("HalfCheetah-v5"), gauntlet.make_agent("random"), seed=2, max_steps=50, record=path,
                       keep_steps=True)
    replayed = rollout(gym.make("HalfCheetah-v5"), gauntlet.make_agent("replay", episode=path), seed=2, max_steps=50)
    assert replayed.outcome.score == original.outcome.score
    for a, b in zip(original.steps, replayed.steps, strict=True):
        np.testing.assert_array_equal(a.observation, b.observation)


class _AngleMonitor:
    name = "angle"

    def observe(self, step):
        return {"abs_angle": float(abs(step.observation[2]))}


class _NoPushRight:
    """Replaces every 'push right' with 'push left' and halts after 5 steps."""

    name = "no-right"

    def decide(self, prefix, candidates):
        if len(prefix.steps) >= 5:
            return Decision.intervene("halt", reason="enough")
        if int(candidates[0]) == 1:
            assert hasattr(prefix.env, "snapshot")  # controllers get a Branchable env
            return Decision.intervene("replace_action", action=0, reason="no pushing right")
        return Decision.proceed()


def test_hooks_record_monitor_scores_and_controller_interventions():
    episode = rollout(gym.make("CartPole-v1"), gauntlet.make_agent("random"), seed=0,
                      hooks=[_AngleMonitor(), _NoPushRight()])
    assert len(episode.steps) == 5 and episode.steps[-1].truncated
    assert all(int(step.action) == 0 for step in episode.steps)
    for step in episode.steps:
        monitor = [e for e in step.events if e.kind == "monitor"]
        assert monitor[0].data["abs_angle"] == pytest.approx(abs(step.observation[2]))
        assert all(e.cost_ms >= 0 for e in step.events)
    interventions = [e.data["intervention"] for s in episode.steps for e in s.events if e.kind == "intervention"]
    # Every push right replaced; the halt that ended the episode is on the last step taken.
    assert interventions[-1] == "halt" and set(interventions[:-1]) == {"replace_action"}


def test_episode_seeds_are_stable_and_distinct():
    seeds = [episode_seed(7, i) for i in range(1000)]
    assert len(set(seeds)) == 1000
    assert seeds[:10] == [episode_seed(7, i) for i in range(10)]
    assert episode_seed(8, 0) != episode_seed(7, 0)


def test_run_many_gives_the_same_episodes_on_one_or_two_workers(tmp_path):
    spec = RunSpec(env_id="CartPole-v1", seed=3)
    one = run_many(spec, 12, tmp_path / "one", workers=1, progress=False)
    two = run_many(spec, 12, tmp_path / "two", workers=2, progress=False)
    assert [e.score for e in one.episodes] == [e.score for e in two.episodes]
    assert [e.seed for e in one.episodes] == [episode_seed(3, i) for i in range(12)]
    assert len(load_episodes(tmp_path / "two")) == 12


def test_run_many_resumes_skipping_complete_episodes_and_redoing_torn_ones(tmp_path):
    spec = RunSpec(env_id="CartPole-v1", seed=0)
    first = run_many(spec, 6, tmp_path, workers=1, progress=False)
    # Simulate a crash mid-episode: episode 4 lost its outcome line, episode 5 never started.
    torn = episode_path(tmp_path, 4)
    torn.write_text("\n".join(torn.read_text().splitlines()[:-2]) + "\n")
    episode_path(tmp_path, 5).unlink()
    calls = []
    again = run_many(spec, 8, tmp_path, workers=1, progress=calls.append)
    assert again.skipped == 4 and again.ran == 4
    assert sorted(s.index for s in calls) == [4, 5, 6, 7]
    assert [e.score for e in again.episodes[:6]] == [e.score for e in first.episodes]


def test_run_many_refuses_a_folder_that_holds_another_run(tmp_path):
    run_many(RunSpec(env_id="CartPole-v1"), 1, tmp_path, workers=1, progress=False)
    with pytest.raises(RunFolderError, match="holds (a different|another) run"):
        run_many(RunSpec(env_id="Pendulum-v1"), 1, tmp_path, workers=1, progress=False)


def test_a_folder_resumes_when_a_hooks_config_spells_out_or_leaves_out_a_default(tmp_path):
    """A config written before an option existed leaves its default out; resuming with the default spelled out
    (or the other way round) is the same run. A value other than the default is another run."""
    from gauntlet.batch import HookSpec

    def spec(**config):
        return RunSpec(env_id="CartPole-v1", hooks=[HookSpec(kind="controller", name="budget", config=config)])

    first = run_many(spec(max_steps=5), 1, tmp_path, workers=1, progress=False)
    again = run_many(spec(max_steps=5, max_cost=None), 2, tmp_path, workers=1, progress=False)
    assert again.run_id == first.run_id and again.skipped == 1 and again.ran == 1
    assert run_many(spec(max_steps=5), 2, tmp_path, workers=1, progress=False).skipped == 2
    with pytest.raises(RunFolderError, match=r"differs in hooks\.0\.config\.max_cost"):
        run_many(spec(max_steps=5, max_cost=2.5), 2, tmp_path, workers=1, progress=False)


def test_two_runs_into_one_folder_at_once_refuse_in_one_line(tmp_path):
    """A second run while the first still writes (here: while the first reports its first episode) is
    refused with a RunFolderError naming the folder; the first finishes whole."""
    spec = RunSpec(env_id="CartPole-v1")
    errors: list[Exception] = []

    def second_run(summary) -> None:
        if not errors:
            with pytest.raises(RunFolderError, match="another run is writing to") as caught:
                run_many(spec, 3, tmp_path, workers=1, progress=False)
            errors.append(caught.value)

    first = run_many(spec, 3, tmp_path, workers=1, progress=second_run)
    assert len(errors) == 1 and first.ran == 3
    assert run_many(spec, 3, tmp_path, workers=1, progress=False).skipped == 3  # the lock left with its run


def test_run_many_rejects_unknown_env_before_touching_the_folder(tmp_path):
    with pytest.raises(gym.error.Error):
        run_many(RunSpec(env_id="NoSuchEnv-v0"), 1, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def test_run_folder_records_spec_and_versions(tmp_path):
    spec = RunSpec(env_id="CartPole-v1", agent=AgentSpec(name="random"), max_steps=10)
    result = run_many(spec, 2, tmp_path, workers=1, progress=False)
    meta = json.loads((tmp_path / "run.json").read_text())
    assert meta["run_id"] == result.run_id and RunSpec.model_validate(meta["spec"]) == spec
    assert all(e.length <= 10 for e in result.episodes)
    # Enough to tell two setups apart: the numerics libraries (the disaster suites' gold answers come from
    # them) and the CPU's vector extensions, in the run and in every episode.
    from importlib.metadata import version

    versions = meta["versions"]
    assert (versions["shapely"], versions["scipy"]) == (version("shapely"), version("scipy"))
    assert versions["cpu"].split()[0] == platform.machine()
    assert all(episode.versions == versions for episode in load_episodes(tmp_path))


@pytest.mark.timeout(240)
def test_ray_backend_matches_the_local_backend(tmp_path):
    pytest.importorskip("ray")
    spec = RunSpec(env_id="CartPole-v1", seed=9)
    local = run_many(spec, 6, tmp_path / "local", workers=1, progress=False)
    remote = run_many(spec, 6, tmp_path / "ray", backend="ray", workers=2, progress=False)
    assert [e.score for e in remote.episodes] == [e.score for e in local.episodes]
    local_eps = load_episodes(tmp_path / "local")
    ray_eps = load_episodes(tmp_path / "ray")
    assert [e.actions for e in ray_eps] == [e.actions for e in local_eps]
    shutil.rmtree(tmp_path / "ray")


def test_rollout_records_the_env_kwargs_so_the_episode_can_be_remade(tmp_path):
    env = gym.make("FrozenLake-v1", is_slippery=False)
    episode = rollout(env, gauntlet.make_agent("random"), seed=0, record=tmp_path / "ep.jsonl")
    (loaded,) = load_episodes(tmp_path / "ep.jsonl")
    assert loaded.config["env_kwargs"]["is_slippery"] is False
    assert episode.config["env_kwargs"] == loaded.config["env_kwargs"]


def test_the_returned_episode_holds_the_header_its_file_holds(tmp_path):
    path = tmp_path / "ep.jsonl"
    episode = rollout(gym.make("CartPole-v1"), gauntlet.make_agent("random"), seed=3, record=path, config={"k": 1})
    (loaded,) = load_episodes(path)
    assert to_plain(episode.header().model_dump()) == to_plain(loaded.header().model_dump())
    assert episode.versions["gauntlet"] == gauntlet.__version__


def test_the_returned_episode_names_the_sidecar_once_its_file_has_one(tmp_path):
    path = tmp_path / "ep.jsonl"
    wide = gym.wrappers.TransformObservation(
        gym.make("CartPole-v1"), lambda observation: np.tile(observation, 25),
        gym.spaces.Box(-np.inf, np.inf, (100,), np.float32))
    agent = gauntlet.make_agent("random")
    with EpisodeWriter(path) as writer:
        narrow = rollout(gym.make("CartPole-v1"), agent, seed=0, record=writer)
        with_arrays = rollout(wide, agent, seed=1, record=writer)
        after = rollout(gym.make("CartPole-v1"), agent, seed=2, record=writer)
    assert narrow.sidecar is None
    assert with_arrays.sidecar == after.sidecar == str(path.with_suffix(".npz"))
    loaded = load_episodes(path)
    key = loaded[1].initial_observation["__array__"]
    np.testing.assert_array_equal(loaded[1].array(key), with_arrays.initial_observation)
