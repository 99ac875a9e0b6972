"""`gauntlet eval` on the runner's machinery: workers, task selection, repeats with pass@k and pass^k, and
resuming a run folder, including one whose process was killed half-way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import gymnasium as gym
import pytest

from gauntlet.agents.tool import GoldAgent
from gauntlet.bridges.tool_task_env import tool_call_action
from gauntlet.batch import episode_path, is_complete
from gauntlet.cli import main
from gauntlet.episode import Event, read_episode_file
from gauntlet.evaluation import TOOL_TASK_ENV, evaluate_suite
from gauntlet.registry import Entry, registry
from gauntlet.runner import rollout

N_TASKS = 10


def toy_tasks(n: int = N_TASKS) -> list[dict]:
    """Tasks on the CartPole env server; task k resets with seed k and asks the observation's size."""
    return [{"id": f"t-{k:02d}", "server": "env:CartPole-v1", "answer": 4, "eval_spec": {"kind": "numeric"},
             "question": f"Reset the environment with seed {k}. How many numbers are in the observation?",
             "gold_trajectory": [{"call": "reset", "args": {"seed": k}, "obs": None}]} for k in range(n)]


def write_suite(path: Path, tasks: list[dict]) -> Path:
    path.write_text("".join(json.dumps(task) + "\n" for task in tasks))
    return path


@pytest.fixture
def toy_suite(tmp_path, monkeypatch) -> Path:
    """A registered suite "toy" of N_TASKS tasks (a file, so worker processes read it too)."""
    path = write_suite(tmp_path / "toy.jsonl", toy_tasks())
    module = tmp_path / "toy_suite_module.py"
    module.write_text(f"SUITE = {str(path)!r}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry._entries["suite"], "toy", Entry("suite", "toy", "toy_suite_module:SUITE"))
    return path


@pytest.fixture
def half_wrong_answers(tmp_path) -> Path:
    """The toy suite with a wrong answer in every odd task: the gold agent given it scores 1, 0, 1, 0..."""
    tasks = toy_tasks()
    for task in tasks[1::2]:
        task["answer"] = 5
    return write_suite(tmp_path / "half-wrong.jsonl", tasks)


class FlakyGoldAgent(GoldAgent):
    """The gold agent, except at the attempts ``fail`` lists for a task id: there it submits a wrong answer.
    Every action comes with a ``model_call`` event, as an LLM agent's would: 100 tokens in, 7 out, $0.002."""

    name = "flaky-gold"

    def __init__(self, suite, fail):
        super().__init__(suite)
        self.fail = {task_id: set(attempts) for task_id, attempts in fail.items()}
        self.attempt = 0

    def config(self):
        return {**super().config(), "fail": {task_id: sorted(attempts) for task_id, attempts in self.fail.items()}}

    def reset(self, *, seed, observation_space, action_space):
        super().reset(seed=seed, observation_space=observation_space, action_space=action_space)
        self.attempt = seed // len(self._tasks)  # TaskPlan: attempt r at task t is seeded t + r * suite size

    def act(self, observation, info):
        output = super().act(observation, info)
        if self._cursor > len(self._task.gold_trajectory) and self.attempt in self.fail.get(self._task.id, ()):
            output.action = tool_call_action("submit_answer", {"answer": -1})
        output.events.append(Event(source=self.name, kind="model_call", data=MODEL_CALL))
        return output


@pytest.fixture
def flaky_agent(monkeypatch) -> str:
    monkeypatch.setitem(registry._entries["agent"], "flaky-gold",
                        Entry("agent", "flaky-gold", f"{__name__}:FlakyGoldAgent"))
    return "flaky-gold"


def eval_cli(*args: str) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", *args])
    return int(exit_info.value.code or 0)


def scores_of(out: Path) -> dict:
    return json.loads((out / "scores.json").read_text())


def test_eval_scores_equal_one_rollout_per_task_in_this_process(toy_suite, half_wrong_answers, tmp_path):
    evaluation = evaluate_suite("toy", "gold", tmp_path / "eval", agent_config={"suite": str(half_wrong_answers)},
                                workers=2)
    env = gym.make(TOOL_TASK_ENV, tasks=str(toy_suite))
    agent = GoldAgent(half_wrong_answers)
    try:
        expected = [rollout(env, agent, seed=index).steps[-1].info["score"] for index in range(N_TASKS)]
    finally:
        env.close()
    assert [result.score for result in evaluation.results] == expected == [1.0, 0.0] * (N_TASKS // 2)
    assert [task["score"] for task in scores_of(tmp_path / "eval")["tasks"]] == expected
    assert evaluation.mean_score == 0.5 and evaluation.success_rate == 0.5


def test_eval_on_two_workers_records_what_one_worker_records(toy_suite, half_wrong_answers, tmp_path):
    config = json.dumps({"suite": str(half_wrong_answers)})
    for workers in ("1", "2"):
        assert eval_cli("toy", "--agent", "gold", "--agent-config", config, "--workers", workers,
                        "--out", str(tmp_path / workers)) == 0
    one, two = scores_of(tmp_path / "1"), scores_of(tmp_path / "2")
    for scores in (one, two):
        for task in scores["tasks"]:
            assert task.pop("wall_s") > 0  # the one field two runs of an attempt never share
    assert one["tasks"] == two["tasks"] and one["mean_score"] == two["mean_score"] == 0.5
    for index in range(N_TASKS):
        a, b = (read_episode_file(episode_path(tmp_path / w, index))[0] for w in ("1", "2"))
        assert (a.seed, a.actions, [s.reward for s in a.steps]) == (b.seed, b.actions, [s.reward for s in b.steps])


def test_repeats_give_every_task_k_attempts_with_distinct_recorded_seeds(toy_suite, tmp_path):
    out = tmp_path / "eval"
    evaluation = evaluate_suite("toy", "gold", out, repeats=3, limit=2, workers=1)
    assert [(r.task_id, r.repeat) for r in evaluation.results] == [
        ("t-00", 0), ("t-00", 1), ("t-00", 2), ("t-01", 0), ("t-01", 1), ("t-01", 2)]
    assert {task_id: len(attempts) for task_id, attempts in evaluation.attempts().items()} == {"t-00": 3, "t-01": 3}
    episodes = [read_episode_file(episode_path(out, index))[0] for index in range(6)]
    assert len({episode.seed for episode in episodes}) == 6
    assert [episode.seed for episode in episodes] == [result.seed for result in evaluation.results]
    for episode, result in zip(episodes, evaluation.results):
        assert episode.reset_info["task_id"] == result.task_id
        assert (episode.config["task_index"], episode.config["repeat"]) == (result.index, result.repeat)
    assert [(task["task_id"], task["repeat"]) for task in scores_of(out)["tasks"]] == [
        (r.task_id, r.repeat) for r in evaluation.results]
    assert scores_of(out)["repeats"] == 3


MODEL_CALL = {"input_tokens": 100, "output_tokens": 7, "latency_ms": 3.0, "cost_usd": 0.002}
# Successes c of n attempts per task: t-00 always, t-01 at its first attempt only, t-02 never.
FAIL = {"t-01": [1, 2], "t-02": [0, 1, 2]}


def test_repeats_give_each_task_its_successes_out_of_n_and_the_suite_pass_at_k_and_pass_hat_k(
        toy_suite, flaky_agent, tmp_path):
    evaluation = evaluate_suite("toy", flaky_agent, tmp_path / "eval", agent_config={"fail": FAIL}, repeats=3,
                                limit=3, workers=1)
    assert [(r.task_id, r.repeat, r.success) for r in evaluation.results] == [
        ("t-00", 0, True), ("t-00", 1, True), ("t-00", 2, True), ("t-01", 0, True), ("t-01", 1, False),
        ("t-01", 2, False), ("t-02", 0, False), ("t-02", 1, False), ("t-02", 2, False)]
    section = scores_of(tmp_path / "eval")["pass_k"]
    assert [(t["task_id"], t["successes"], t["attempts"]) for t in section["tasks"]] == [
        ("t-00", 3, 3), ("t-01", 1, 3), ("t-02", 0, 3)]
    # pass@k = mean of 1 - C(3 - c, k)/C(3, k); pass^k = mean of C(c, k)/C(3, k), for c = 3, 1, 0.
    assert [row["k"] for row in section["k"]] == [1, 2, 3]
    assert [row["pass_at_k"] for row in section["k"]] == pytest.approx([4 / 9, 5 / 9, 2 / 3])
    assert [row["pass_hat_k"] for row in section["k"]] == pytest.approx([4 / 9, 1 / 3, 1 / 3])
    assert section["k"][0]["pass_hat_k"] == pytest.approx(evaluation.success_rate)
    for row in section["k"]:
        for name in ("pass_at_k", "pass_hat_k"):
            low, high = row[f"{name}_ci"]
            assert 0.0 <= low <= row[name] <= high <= 1.0
    # Every attempt is two steps (a reset call, then the answer), each with one model call.
    assert {(r.steps, r.model_calls, r.input_tokens, r.output_tokens) for r in evaluation.results} == {(2, 2, 200, 14)}
    assert all(r.cost_usd == pytest.approx(0.004) and r.wall_s > 0 for r in evaluation.results)
    assert all(task["mean_tokens"] == 214 and task["mean_cost_usd"] == pytest.approx(0.004)
               and task["mean_seconds"] > 0 for task in section["tasks"])
    assert section["mean_tokens_per_attempt"] == 214 and section["mean_seconds_per_attempt"] > 0


def test_eval_with_repeats_prints_each_task_c_of_n_and_the_pass_k_table(toy_suite, flaky_agent, tmp_path, capsys):
    assert eval_cli("toy", "--agent", flaky_agent, "--agent-config", json.dumps({"fail": FAIL}), "--repeats", "3",
                    "--limit", "3", "--workers", "1", "--out", str(tmp_path / "eval")) == 0
    out = capsys.readouterr().out
    lines = [" ".join(line.replace("│", " ").split()) for line in out.splitlines()]
    assert any(line.startswith("0 t-00 3 / 3 1.000 214 ") for line in lines)
    assert any(line.startswith("1 t-01 1 / 3 0.333 214 ") for line in lines)
    assert any(line.startswith("2 t-02 0 / 3 0.000 214 ") for line in lines)
    rows = {line.split()[0]: line.split() for line in lines if line[:2] in ("1 ", "2 ", "3 ") and "[" in line}
    assert {k: (row[1], row[4]) for k, row in rows.items()} == {
        "1": ("0.444", "0.444"), "2": ("0.556", "0.333"), "3": ("0.667", "0.333")}
    assert "s per attempt; 2.0 model calls, 200 input + 14 output tokens per attempt; $0.0360 in all" in " ".join(
        out.split())


def test_an_llm_agent_eval_reports_the_tokens_its_model_calls_recorded(toy_suite, tmp_path):
    script = tmp_path / "script.json"  # reset the env, then answer the observation's size
    script.write_text(json.dumps([{"content": "", "tool_calls": [{"name": "reset", "args": {"seed": 0}}]},
                                  {"content": "", "tool_calls": [{"name": "submit_answer", "args": {"answer": 4}}]}]))
    evaluation = evaluate_suite("toy", "llm", tmp_path / "eval", agent_config={"model": f"scripted:{script}"},
                                repeats=2, limit=2, workers=1)
    assert [(r.task_id, r.success, r.model_calls) for r in evaluation.results] == [
        ("t-00", True, 2), ("t-00", True, 2), ("t-01", True, 2), ("t-01", True, 2)]
    for index, result in enumerate(evaluation.results):
        steps = read_episode_file(episode_path(tmp_path / "eval", index))[0].steps
        calls = [event.data for step in steps for event in step.events if event.kind == "model_call"]
        assert (result.input_tokens, result.output_tokens) == (sum(call["input_tokens"] for call in calls),
                                                               sum(call["output_tokens"] for call in calls))
    assert all(r.input_tokens > 0 and r.output_tokens > 0 for r in evaluation.results)
    section = scores_of(tmp_path / "eval")["pass_k"]
    assert [(row["k"], row["pass_at_k"], row["pass_hat_k"]) for row in section["k"]] == [(1, 1.0, 1.0), (2, 1.0, 1.0)]
    assert section["mean_tokens_per_attempt"] == sum(r.input_tokens + r.output_tokens for r in evaluation.results) / 4


def test_tasks_picks_tasks_by_id_and_limit_keeps_the_first(toy_suite, tmp_path):
    out = tmp_path / "eval"
    assert eval_cli("toy", "--agent", "gold", "--tasks", "t-07,t-02,t-04", "--limit", "2", "--workers", "1",
                    "--out", str(out)) == 0
    assert [(task["index"], task["task_id"]) for task in scores_of(out)["tasks"]] == [(7, "t-07"), (2, "t-02")]


def grow(out, capsys, first: list[str], then: list[str], *, kept: int, ran: int) -> None:
    """Evaluate the toy suite with ``first`` options into ``out``, then with ``then``: the second run ran ``ran``
    new tasks and resumed the ``kept`` first episodes without writing them again."""
    assert eval_cli("toy", "--agent", "gold", *first, "--workers", "1", "--out", str(out)) == 0
    before = {index: episode_path(out, index).stat().st_mtime_ns for index in range(kept)}
    capsys.readouterr()
    assert eval_cli("toy", "--agent", "gold", *then, "--workers", "1", "--out", str(out)) == 0
    assert f"ran {ran}, resumed {kept} already complete" in capsys.readouterr().out
    assert {index: episode_path(out, index).stat().st_mtime_ns for index in range(kept)} == before


def test_a_larger_limit_into_the_same_folder_runs_only_the_new_tasks(toy_suite, tmp_path, capsys):
    out = tmp_path / "eval"
    grow(out, capsys, ["--limit", "3"], ["--limit", "5"], kept=3, ran=2)
    assert [task["task_id"] for task in scores_of(out)["tasks"]] == ["t-00", "t-01", "t-02", "t-03", "t-04"]
    summary = json.loads((out / "summary.json").read_text())  # the layout of a `gauntlet run` folder
    assert (summary["ran"], summary["skipped"], len(summary["episodes"])) == (2, 3, 5)


def test_a_longer_task_list_grows_the_folder_and_a_reordered_one_is_refused(toy_suite, tmp_path, capsys):
    out = tmp_path / "eval"
    grow(out, capsys, ["--tasks", "t-07,t-02"], ["--tasks", "t-07,t-02,t-04"], kept=2, ran=1)
    assert json.loads((out / "run.json").read_text())["spec"]["tasks"]["task_indices"] == [7, 2, 4]
    # The start of the recorded list reads those episodes again; run.json keeps the longer list.
    assert eval_cli("toy", "--agent", "gold", "--tasks", "t-07", "--workers", "1", "--out", str(out)) == 0
    assert [task["task_id"] for task in scores_of(out)["tasks"]] == ["t-07"]
    assert json.loads((out / "run.json").read_text())["spec"]["tasks"]["task_indices"] == [7, 2, 4]
    capsys.readouterr()
    # Another order would give recorded episodes other tasks: refused, naming the field.
    assert eval_cli("toy", "--agent", "gold", "--tasks", "t-02,t-07,t-04", "--workers", "1", "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tasks.task_indices" in err


def test_resuming_with_other_options_is_refused_naming_what_differs(toy_suite, tmp_path, capsys):
    out = tmp_path / "eval"
    assert eval_cli("toy", "--agent", "gold", "--limit", "1", "--workers", "1", "--out", str(out)) == 0
    capsys.readouterr()
    assert eval_cli("toy", "--agent", "gold", "--limit", "1", "--repeats", "2", "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tasks.repeats" in err and "--out" in err


def test_an_unknown_task_id_is_a_one_line_error_with_examples(toy_suite, tmp_path, capsys):
    assert eval_cli("toy", "--agent", "gold", "--tasks", "t-01,nope", "--out", str(tmp_path / "x")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'nope'" in err and "t-00" in err
    assert not (tmp_path / "x").exists()


@pytest.mark.starts_early
def test_the_ray_backend_scores_as_the_local_one(toy_suite, half_wrong_answers, tmp_path):
    pytest.importorskip("ray")
    config = {"suite": str(half_wrong_answers)}
    local = evaluate_suite("toy", "gold", tmp_path / "local", agent_config=config, limit=4, workers=1)
    remote = evaluate_suite("toy", "gold", tmp_path / "ray", agent_config=config, limit=4, backend="ray", workers=2)
    assert remote.results == local.results


# Killed half-way ---------------------------------------------------------------------------------
FAMILY = textwrap.dedent('''
    """A toy suite and a gold agent that waits at its gated tasks until the gate file exists."""
    import os
    import sys
    import time
    from pathlib import Path

    from gauntlet.agents.tool import GoldAgent
    from gauntlet.registry import registry

    SUITE = str(Path(__file__).with_name("toy.jsonl"))


    class GatedGoldAgent(GoldAgent):
        def __init__(self, suite, gate, log, gated):
            super().__init__(suite)
            self.gate, self.log, self.gated = Path(gate), Path(log), set(gated)

        def config(self):
            return {**super().config(), "gate": str(self.gate), "log": str(self.log), "gated": sorted(self.gated)}

        def act(self, observation, info):
            if self._task is None:  # the episode's first action
                with open(self.log, "a") as handle:
                    handle.write(f"{info['task_id']} {os.getpid()}\\n")
                while info["task_id"] in self.gated and not self.gate.exists():
                    time.sleep(0.02)
            return super().act(observation, info)


    registry.add("suite", "toy-gated", "toy_gated_family:SUITE")
    registry.add("agent", "gated-gold", "toy_gated_family:GatedGoldAgent")
''')

SCRIPT = textwrap.dedent("""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    import gauntlet  # noqa: F401
    import toy_gated_family  # noqa: F401  (registers the suite and agent, in workers too)

    if __name__ == "__main__":
        from gauntlet.cli import main

        main(sys.argv[1:])
""")


def wait_for(condition, what: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 300  # a hang guard, not a speed requirement
    while not condition():
        assert process.poll() is None, f"the eval exited ({process.returncode}) before {what}"
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def test_an_eval_killed_half_way_resumes_running_only_the_unfinished_episodes(tmp_path):
    write_suite(tmp_path / "toy.jsonl", toy_tasks())
    (tmp_path / "toy_gated_family.py").write_text(FAMILY)
    (tmp_path / "run_eval.py").write_text(SCRIPT)
    out, log, gate = tmp_path / "eval", tmp_path / "started.log", tmp_path / "gate"
    gated = [f"t-{k:02d}" for k in range(5, N_TASKS)]
    config = json.dumps({"suite": str(tmp_path / "toy.jsonl"), "gate": str(gate), "log": str(log), "gated": gated})
    command = [sys.executable, str(tmp_path / "run_eval.py"), "eval", "toy-gated", "--agent", "gated-gold",
               "--agent-config", config, "--workers", "2", "--out", str(out)]
    env = {key: value for key, value in os.environ.items() if key != "GAUNTLET_DEBUG"}

    first = subprocess.Popen(command, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    try:
        # Each of the two workers stops at the first gated task it takes: tasks 0-4 finish, 5 and 6 start.
        wait_for(lambda: all(is_complete(episode_path(out, k)) for k in range(5)), "tasks 0-4 finished", first)
        wait_for(lambda: log.exists() and {"t-05", "t-06"} <= {line.split()[0] for line in log.read_text().split(
            "\n") if line}, "tasks 5 and 6 started", first)
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the driver and its workers, as a kill of the whole job would
        first.wait()
    assert not any(is_complete(episode_path(out, k)) for k in range(5, N_TASKS))
    finished_before = {k: episode_path(out, k).stat() for k in range(5)}

    gate.touch()
    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    assert "ran 5, resumed 5 already complete" in " ".join(second.stdout.split())

    starts = [line.split()[0] for line in log.read_text().splitlines()]
    assert {task: starts.count(task) for task in sorted(set(starts))} == {
        f"t-{k:02d}": 2 if k in (5, 6) else 1 for k in range(N_TASKS)}
    for k, before in finished_before.items():
        after = episode_path(out, k).stat()
        assert (after.st_ino, after.st_mtime_ns, after.st_size) == (before.st_ino, before.st_mtime_ns, before.st_size)
    run_id = json.loads((out / "run.json").read_text())["run_id"]
    for k in range(N_TASKS):
        episodes = read_episode_file(episode_path(out, k))
        assert len(episodes) == 1 and episodes[0].complete and episodes[0].run_id == run_id
    scores = scores_of(out)
    assert [task["task_id"] for task in scores["tasks"]] == [f"t-{k:02d}" for k in range(N_TASKS)]
    assert scores["mean_score"] == 1.0


def test_eval_with_a_controller_records_its_decisions_and_scores_the_halted_attempts(toy_suite, tmp_path):
    from gauntlet.batch import HookSpec
    from gauntlet.episode import load_episodes

    # A budget of zero steps halts every attempt before its first call: nothing is answered, all score 0.
    evaluation = evaluate_suite("toy", "gold", tmp_path / "eval", limit=2, workers=1,
                                hooks=[HookSpec(kind="controller", name="budget", config={"max_steps": 0})])
    assert [result.score for result in evaluation.results] == [0.0, 0.0]
    for path in sorted((tmp_path / "eval" / "episodes").glob("*.jsonl")):
        (episode,) = load_episodes(path)
        assert episode.steps == []
        assert episode.outcome.metrics["truncated"] is True
        assert [(event.kind, event.data["intervention"]) for event in episode.outcome.events] == [
            ("decision", "halt"), ("intervention", "halt")]
