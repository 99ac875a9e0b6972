"""``gauntlet run`` and ``gauntlet eval``, killed with SIGKILL half-way and run again into the same folder.

The real console script runs in its own process group, which the test kills whole (the driver and its
workers, as ``kill -9`` of a job would) once some episodes are complete and at least one is being
written. Run again with the same options, it must finish the run as if it had never stopped:

- nothing lost: every episode 0..n-1 has one complete file, and the run folder holds no other;
- nothing duplicated: each file holds exactly one episode of this run, and the episodes completed
  before the kill were not run again (their files are untouched);
- every episode file loads with ``gauntlet.load_episodes``, the files the kill tore included;
- the same result as a clean run of the same command: episodes are seeded by the run's seed and their
  index alone, so each episode's seed, rewards and outcome, and the summary (and the scores of an
  eval), equal those of an uninterrupted run.

``eval`` runs a toy suite that a plugin registers the way a third-party package would: a
``.dist-info`` folder with a ``gauntlet.plugins`` entry point, on ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from gauntlet.batch import episode_path, is_complete
from gauntlet.episode import Episode, load_episodes
from tests.shared import cartpole_tasks, command_environment, gauntlet_command, write_plugin

RUN_EPISODES = 60
EVAL_TASKS = 30
EVAL_REPEATS = 2
KILL_AFTER_COMPLETE = 5
# A hang guard, not a speed requirement.
TIMEOUT_S = 300


def run_to_end(command: list[str], env: dict[str, str]) -> str:
    finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert finished.returncode == 0, finished.stderr
    return " ".join(finished.stdout.split())


def kill_mid_run(command: list[str], env: dict[str, str], out: Path, n_episodes: int) -> None:
    """Start ``command`` in its own process group; SIGKILL the group once ``KILL_AFTER_COMPLETE``
    episodes are complete and another is being written."""
    process = subprocess.Popen(command, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while True:
            states = [is_complete(episode_path(out, i)) for i in range(n_episodes)
                      if episode_path(out, i).exists()]
            if sum(states) >= KILL_AFTER_COMPLETE and not all(states):
                break
            if process.poll() is not None:
                stderr = process.stderr.read().decode() if process.stderr else ""
                pytest.fail(f"the run ended ({process.returncode}) before it could be killed half-way: {stderr}")
            assert time.monotonic() < deadline, "gave up waiting for the run to be half-way"
            time.sleep(0.005)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        if process.stderr:
            process.stderr.close()


def file_states(out: Path) -> dict[str, tuple[int, int, int]]:
    """Each complete episode file's identity and state: inode, modification time, size."""
    return {path.name: (stat.st_ino, stat.st_mtime_ns, stat.st_size)
            for path in sorted((out / "episodes").glob("ep-*.jsonl")) if is_complete(path)
            for stat in [path.stat()]}


def loaded(path: Path) -> list[Episode]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a torn last line is reported with a warning; that is expected here
        return load_episodes(path)


def what_happened(episode: Episode) -> dict[str, Any]:
    """An episode's seed, rewards and outcome: what a seeded episode must reproduce wherever it runs."""
    assert episode.outcome is not None
    return {"seed": episode.seed, "task": episode.task_id, "actions": [step.action for step in episode.steps],
            "rewards": [step.reward for step in episode.steps], "score": episode.outcome.score,
            "success": episode.outcome.success,
            "metrics": {name: value for name, value in episode.outcome.metrics.items() if name != "wall_s"}}


def assert_resumed_as_a_clean_run(out: Path, clean: Path, n_episodes: int,
                                  before_resume: dict[str, tuple[int, int, int]]) -> None:
    names = sorted(path.name for path in (out / "episodes").iterdir())
    assert names == [episode_path(out, i).name for i in range(n_episodes)], "episode files lost, doubled or stray"
    after = file_states(out)
    assert set(after) == set(names), "an episode file is still incomplete"
    for name, state in before_resume.items():
        assert after[name] == state, f"{name} was complete before the kill, yet the resume wrote it again"
    run_id = json.loads((out / "run.json").read_text())["run_id"]
    for i in range(n_episodes):
        [episode] = loaded(episode_path(out, i))
        [reference] = loaded(episode_path(clean, i))
        assert episode.complete and episode.run_id == run_id
        assert what_happened(episode) == what_happened(reference), f"episode {i} differs from the clean run's"

    def summary(folder: Path) -> list[dict[str, Any]]:
        return [{key: value for key, value in row.items() if key != "episode_id"}
                for row in json.loads((folder / "summary.json").read_text())["episodes"]]

    assert summary(out) == summary(clean)


# gauntlet run -----------------------------------------------------------------------------------
def run_command(out: Path, workers: int) -> list[str]:
    return gauntlet_command("run", "Pendulum-v1", "--agent", "random", "-n", str(RUN_EPISODES), "--seed", "11",
                            "--workers", str(workers), "--out", str(out))


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("clean-run") / "run"
    run_to_end(run_command(out, workers=1), command_environment())
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_a_run_killed_half_way_resumes_into_the_same_episodes_as_a_clean_run(workers, clean_run, tmp_path):
    out = tmp_path / "run"
    command = run_command(out, workers)
    kill_mid_run(command, command_environment(), out, RUN_EPISODES)
    before_resume = file_states(out)
    assert KILL_AFTER_COMPLETE <= len(before_resume) < RUN_EPISODES
    for path in (out / "episodes").glob("ep-*.jsonl"):  # a torn file loads too: the episode's prefix
        [episode] = loaded(path)
        assert episode.complete == is_complete(path)

    printed = run_to_end(command, command_environment())
    resumed = len(before_resume)
    assert f"ran {RUN_EPISODES - resumed}, resumed {resumed} already complete" in printed
    assert_resumed_as_a_clean_run(out, clean_run, RUN_EPISODES, before_resume)


# gauntlet eval ----------------------------------------------------------------------------------
PLUGIN = textwrap.dedent('''
    """A third-party package's registrations: the toy suite, on the CartPole env server."""
    from pathlib import Path

    SUITE = str(Path(__file__).with_name("toy.jsonl"))


    def register():
        from gauntlet.registry import registry

        registry.add("suite", "toy-kill", "toy_kill_family:SUITE", "toy tasks on the CartPole env server")
''')


@pytest.fixture(scope="module")
def toy_plugin(tmp_path_factory) -> Path:
    """A folder to put on PYTHONPATH: the plugin module, its suite and its distribution metadata.

    Task k resets with seed k, steps once and answers the observation's size. ``answers.jsonl`` is the
    suite with a wrong answer in every third task: the gold agent given it scores 0 there."""
    folder = tmp_path_factory.mktemp("toy-plugin")
    write_plugin(folder, "toy_kill_family", PLUGIN)
    tasks = cartpole_tasks(EVAL_TASKS, server="env:CartPole-v1")
    (folder / "toy.jsonl").write_text("".join(json.dumps(task) + "\n" for task in tasks))
    answers = [{**task, "answer": 5 if k % 3 == 0 else 4} for k, task in enumerate(tasks)]
    (folder / "answers.jsonl").write_text("".join(json.dumps(task) + "\n" for task in answers))
    return folder


def eval_command(plugin: Path, out: Path, workers: int) -> list[str]:
    return gauntlet_command("eval", "toy-kill", "--agent", "gold", "--agent-config",
                            json.dumps({"suite": str(plugin / "answers.jsonl")}), "--repeats", str(EVAL_REPEATS),
                            "--seed", "5", "--workers", str(workers), "--out", str(out))


def without_timings(value: Any) -> Any:
    """``value`` without its wall times (``wall_s``, ``*seconds*``) at any depth: all else is seeded."""
    if isinstance(value, dict):
        return {key: without_timings(item) for key, item in value.items() if key != "wall_s" and "seconds" not in key}
    if isinstance(value, list):
        return [without_timings(item) for item in value]
    return value


def comparable_scores(out: Path) -> dict[str, Any]:
    """scores.json without what differs between any two runs: the run id and wall times."""
    scores = json.loads((out / "scores.json").read_text())
    return without_timings({key: value for key, value in scores.items() if key != "run_id"})


@pytest.fixture(scope="module")
def clean_eval(toy_plugin, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("clean-eval") / "eval"
    run_to_end(eval_command(toy_plugin, out, workers=1), command_environment(PYTHONPATH=str(toy_plugin)))
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_an_eval_killed_half_way_resumes_into_the_same_scores_as_a_clean_run(workers, toy_plugin, clean_eval,
                                                                            tmp_path):
    out, env = tmp_path / "eval", command_environment(PYTHONPATH=str(toy_plugin))
    n_episodes = EVAL_TASKS * EVAL_REPEATS
    command = eval_command(toy_plugin, out, workers)
    kill_mid_run(command, env, out, n_episodes)
    before_resume = file_states(out)
    assert KILL_AFTER_COMPLETE <= len(before_resume) < n_episodes
    assert not (out / "scores.json").exists()

    printed = run_to_end(command, env)
    resumed = len(before_resume)
    assert f"ran {n_episodes - resumed}, resumed {resumed} already complete" in printed
    assert_resumed_as_a_clean_run(out, clean_eval, n_episodes, before_resume)
    assert comparable_scores(out) == comparable_scores(clean_eval)
    assert 0 < comparable_scores(out)["mean_score"] < 1  # the wrong answers were scored as such
