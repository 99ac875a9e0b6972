"""Collection at scale: resumable after a kill, refusing another collection's folder, the same rows on
one or two workers, and the ``gauntlet oversight`` commands end to end (collect, evaluate, train, deploy)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gauntlet.controllers.oversight.collect import (ROWS, STATS, CollectionError, CollectSpec, collect, load_meta,
                                                    load_rows)
from gauntlet.controllers.oversight.models import load_model
from gauntlet.controllers.oversight.utility import LADDER, UtilityConfig
from tests.test_cli import assert_one_line_error, gauntlet

SPEC = CollectSpec(benchmark="corridor", episodes=tuple(range(6)), options={"length": 6, "max_steps": 12},
                   strengths=(1.0, 0.5))


def _keys(rows: list[dict]) -> list[tuple]:
    return sorted((row["episode"], row["expert_strength"], row["t"], row["draw"]) for row in rows)


def test_collect_writes_every_job_once_and_resumes_without_redoing(tmp_path: Path) -> None:
    first = collect(SPEC, tmp_path)
    assert first.jobs_run == 12 and first.jobs_resumed == 0
    rows = load_rows(tmp_path)
    assert len(_keys(rows)) == len(set(_keys(rows))) == first.rows
    assert {row["expert_strength"] for row in rows} == {1.0, 0.5}
    assert all(row["prefix_match"] for row in rows)
    # The jobs' wall time by part adds up across them: the base episodes' and each action's branches'.
    assert set(first.stats.action_s) == {"base", *LADDER} and 0 < sum(first.stats.action_s.values()) <= \
        first.stats.seconds
    again = collect(SPEC, tmp_path)
    assert again.jobs_run == 0 and again.jobs_resumed == 12 and again.rows == first.rows
    # A resumed run ran nothing, yet still reports what every job in the folder cost.
    assert again.stats.rows == 0 and again.jobs_unmeasured == 0
    assert (again.all_stats.rows, again.all_stats.branches, again.all_stats.env_steps) == \
        (first.stats.rows, first.stats.branches, first.stats.env_steps)
    assert again.all_stats.seconds == pytest.approx(first.stats.seconds)
    assert again.all_stats.action_s == pytest.approx(first.stats.action_s)
    # A folder written before jobs were timed: its jobs are counted as not timed, not as free.
    (tmp_path / STATS).unlink()
    older = collect(SPEC, tmp_path)
    assert older.jobs_unmeasured == 12 and older.all_stats.rows == 0
    assert load_meta(tmp_path)["benchmark"] == "corridor"


def test_a_torn_tail_is_cut_back_to_the_last_whole_job_and_redone(tmp_path: Path) -> None:
    collect(SPEC, tmp_path)
    whole = (tmp_path / ROWS).read_bytes()
    lines = whole.splitlines(keepends=True)
    # A kill during the last job's write: its done line and half of a row are missing.
    done_lines = [i for i, line in enumerate(lines) if line.startswith(b'{"done"')]
    torn = b"".join(lines[:done_lines[-1] - 1]) + lines[done_lines[-1] - 1][:17]
    (tmp_path / ROWS).write_bytes(torn)
    assert _keys(load_rows(tmp_path)) == _keys(json.loads(line) for line in lines[:done_lines[-2] + 1]
                                               if not line.startswith(b'{"done"'))
    resumed = collect(SPEC, tmp_path)
    assert resumed.jobs_run == 1
    assert (tmp_path / ROWS).read_bytes() == whole  # jobs are deterministic: the redone job is byte-identical
    # The redone job's time is counted once, and a stats line torn by a kill is skipped, not fatal.
    with (tmp_path / STATS).open("ab") as handle:
        handle.write(b'{"episode": 3, "expert_st')
    again = collect(SPEC, tmp_path)
    assert again.all_stats.rows == len(load_rows(tmp_path)) and again.jobs_unmeasured == 0
    # Jobs appended after the torn line are timed: the torn line was ended first.
    more = CollectSpec(benchmark="corridor", episodes=(*SPEC.episodes, 6), options=SPEC.options,
                       strengths=SPEC.strengths)
    grown = collect(more, tmp_path)
    assert grown.jobs_run == 2 and grown.jobs_unmeasured == 0 and grown.all_stats.rows == len(load_rows(tmp_path))


def test_another_collection_in_the_folder_is_refused(tmp_path: Path) -> None:
    collect(SPEC, tmp_path)
    other = CollectSpec(benchmark="corridor", episodes=SPEC.episodes, options=SPEC.options, strengths=SPEC.strengths,
                        config=UtilityConfig(s=0.02))
    with pytest.raises(CollectionError, match="differs in config"):
        collect(other, tmp_path)


def test_a_collection_grows_by_more_episodes_but_never_shrinks(tmp_path: Path) -> None:
    collect(SPEC, tmp_path)
    more = CollectSpec(benchmark="corridor", episodes=(*SPEC.episodes, max(SPEC.episodes) + 1, max(SPEC.episodes) + 2),
                       options=SPEC.options, strengths=SPEC.strengths)
    grown = collect(more, tmp_path)
    assert grown.jobs_resumed == len(SPEC.jobs()) and grown.jobs_run == len(more.jobs()) - len(SPEC.jobs())
    assert {row["episode"] for row in load_rows(tmp_path)} == set(more.episodes)
    assert collect(more, tmp_path).jobs_run == 0
    # Fewer episodes than the folder holds would leave rows outside the spec: refused.
    with pytest.raises(CollectionError, match="differs in episodes"):
        collect(SPEC, tmp_path)


def test_a_folder_takes_one_collection_at_a_time(tmp_path: Path) -> None:
    from gauntlet.controllers.oversight.collect import LOCK
    from gauntlet.fileio import exclusive_folder

    with (exclusive_folder(tmp_path, LOCK, RuntimeError),
          pytest.raises(CollectionError, match="another collection is writing")):
        collect(SPEC, tmp_path)
    assert not (tmp_path / ROWS).exists()
    assert collect(SPEC, tmp_path).jobs_run == len(SPEC.jobs())  # the lock went with its holder


def test_two_workers_collect_the_same_rows_as_one(tmp_path: Path) -> None:
    collect(SPEC, tmp_path / "one", workers=1)
    collect(SPEC, tmp_path / "two", workers=2)
    key = lambda row: (row["episode"], row["expert_strength"], row["t"], row["draw"])
    assert sorted(load_rows(tmp_path / "one"), key=key) == sorted(load_rows(tmp_path / "two"), key=key)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"benchmark": "nope", "episodes": (0,)}, "unknown oversight benchmark"),
    ({"benchmark": "corridor", "episodes": ()}, "at least one episode"),
    ({"benchmark": "corridor", "episodes": (0,), "actions": ("continue", "pray")}, "unknown overseer actions"),
    ({"benchmark": "corridor", "episodes": (0,), "strengths": (1.5,)}, r"\[0, 1\]"),
])
def test_bad_specs_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CollectSpec(**kwargs)


def test_a_collection_killed_with_sigkill_resumes_to_the_same_rows(tmp_path: Path) -> None:
    """The real command, killed -9 mid-collection, then run again: every job once, rows as a clean run's."""
    out = tmp_path / "killed"
    args = ["oversight", "collect", "corridor", "--episodes", "300", "--options",
            '{"length": 8, "max_steps": 16}', "--out", str(out)]
    script = Path(sys.executable).with_name("gauntlet")
    process = subprocess.Popen([str(script), *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if (out / ROWS).exists() and (out / ROWS).read_bytes().count(b'{"done"') >= 5:
            break
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    partial = (out / ROWS).read_bytes().count(b'{"done"')
    assert partial >= 5
    result = gauntlet(*args)
    assert result.returncode == 0, result.stderr
    clean = tmp_path / "clean"
    collect(CollectSpec(benchmark="corridor", episodes=tuple(range(300)), options={"length": 8, "max_steps": 16}),
            clean)
    key = lambda row: (row["episode"], row["t"], row["draw"])
    killed_rows = load_rows(out)
    assert len({key(row) for row in killed_rows}) == len(killed_rows)
    assert sorted(killed_rows, key=key) == sorted(load_rows(clean), key=key)


@pytest.mark.starts_early
def test_the_oversight_commands_end_to_end(tmp_path: Path) -> None:
    rows = tmp_path / "rows"
    collected = gauntlet("oversight", "collect", "corridor", "-n", "40", "--out", str(rows), "--workers", "2",
                         "--options", '{"length": 6, "max_steps": 12}')
    assert collected.returncode == 0, collected.stderr
    assert "replay match rate" in collected.stdout and "1.0000" in collected.stdout
    evaluated = gauntlet("oversight", "evaluate", str(rows), "--trees", "25", "--json", str(tmp_path / "eval.json"))
    assert evaluated.returncode == 0, evaluated.stderr
    result = json.loads((tmp_path / "eval.json").read_text())["result"]
    assert result["config"]["trees"] == 25
    assert result["methods"]["oracle"]["regret"] == 0.0
    assert {"action_conditioned_rf", "scalar_raw", "scalar_platt", "always_continue"} <= set(result["methods"])
    # Cross-fitted, with the expert's handovers kept as references no overseer may choose (as the LLM rows').
    crossed = gauntlet("oversight", "evaluate", str(rows), "--trees", "25", "--folds", "4", "--reference",
                       "expert,expert_k", "--intervention", "stronger", "--json", str(tmp_path / "cross.json"))
    assert crossed.returncode == 0, crossed.stderr
    assert "cross-fitted over 4 folds" in crossed.stdout and "| reference_expert |" in crossed.stdout
    assert "action_conditioned_rf vs best_scalar (scalar_" in crossed.stdout  # the paired comparison
    payload = json.loads((tmp_path / "cross.json").read_text())
    assert payload["folds"] == 4 and payload["result"]["n_test_episodes"] == 40
    assert payload["result"]["config"]["intervention"] == "stronger"
    assert not any(action.startswith("expert") for name, method in payload["result"]["methods"].items()
                   if not name.startswith("reference_") for action in method["action_share"])
    deployable = gauntlet("oversight", "train", str(rows), "--out", str(tmp_path / "deployable.joblib"), "--trees",
                          "5", "--reference", "expert,expert_k", "--intervention", "stronger")
    assert deployable.returncode == 0, deployable.stderr
    assert "expert" not in load_model(tmp_path / "deployable.joblib").model.actions
    assert load_model(tmp_path / "deployable.scalar.joblib").model.intervention == "stronger"
    assert_one_line_error(gauntlet("oversight", "train", str(rows), "--out", str(tmp_path / "x.joblib"),
                                   "--reference", "stronger", "--intervention", "stronger"), "also a --reference")
    assert_one_line_error(gauntlet("oversight", "evaluate", str(rows), "--folds", "41"),
                          "41 folds need 41 or more episodes", "use fewer folds")
    trained = gauntlet("oversight", "train", str(rows), "--out", str(tmp_path / "model.joblib"), "--trees", "25")
    assert trained.returncode == 0, trained.stderr
    assert load_model(tmp_path / "model.joblib").model.n_estimators == 25
    assert (tmp_path / "model.scalar.joblib").is_file()
    deployed = gauntlet("oversight", "deploy", "corridor", "--model", str(tmp_path / "model.joblib"), "-n", "5",
                        "--options", '{"length": 6, "max_steps": 12}', "--out", str(tmp_path / "online"))
    assert deployed.returncode == 0, deployed.stderr
    for method in ("no_oversight", "action_conditioned", "scalar"):
        assert f"{method}: mean utility" in deployed.stdout
    assert len(list((tmp_path / "online").glob("action_conditioned-*.jsonl"))) == 5


@pytest.mark.parametrize(("args", "words"), [
    (["collect", "nope", "--out", "{tmp}/x"], ["unknown oversight benchmark 'nope'"]),
    (["collect", "corridor", "--out", "{tmp}/x", "--options", "[1]"], ["--options must be a JSON object"]),
    (["collect", "corridor", "--out", "{tmp}/x", "--options", '{"lenght": 6}'], ["does not take --options", "lenght"]),
    (["collect", "corridor", "--out", "{tmp}/x", "--expert-strength", "strong"], ["--expert-strength"]),
    (["collect", "corridor", "--out", "{tmp}/x", "--actions", "pray"], ["unknown overseer actions"]),
    (["evaluate", "{tmp}/missing"], ["no rows.jsonl"]),
    (["evaluate", "{tmp}/missing", "--trees", "0"], ["--trees"]),
    (["evaluate", "{tmp}/missing", "--folds", "1"], ["--folds"]),
    (["evaluate", "{tmp}/missing", "--reference", ","], ["--reference names nothing"]),
    (["train", "{tmp}/missing", "--out", "{tmp}/m.joblib", "--reference", " "], ["--reference names nothing"]),
    (["train", "{tmp}/missing", "--out", "{tmp}/m.joblib"], ["no rows.jsonl"]),
    (["deploy", "corridor", "--model", "{tmp}/missing.joblib"], ["no model file"]),
])
def test_bad_oversight_commands_fail_in_one_line(tmp_path: Path, args: list[str], words: list[str]) -> None:
    result = gauntlet("oversight", *[arg.replace("{tmp}", str(tmp_path)) for arg in args])
    assert_one_line_error(result, *words)


def test_llm_rows_keep_the_privileged_expert_a_reference_unless_told_otherwise(tmp_path: Path) -> None:
    # The real 0.5B's rows of the llm-smoke plan (kept in git): four games, seven actions a prefix.
    rows = Path(__file__).resolve().parents[2] / "experiments/results/oversight-llm-smoke-exact/rows/llm-textworld"
    out = tmp_path / "eval.json"
    default = gauntlet("oversight", "evaluate", str(rows), "--folds", "4", "--trees", "5", "--json", str(out))
    assert default.returncode == 0, default.stderr
    result = json.loads(out.read_text())["result"]
    assert result["config"]["intervention"] == "stronger" and result["config"]["reference"] == ["expert"]
    assert "always_expert" not in result["methods"] and "reference_expert" in result["methods"]
    told = gauntlet("oversight", "evaluate", str(rows), "--folds", "4", "--trees", "5", "--reference", "none",
                    "--intervention", "expert", "--json", str(out))
    assert told.returncode == 0, told.stderr
    assert "always_expert" in json.loads(out.read_text())["result"]["methods"]
    trained = gauntlet("oversight", "train", str(rows), "--out", str(tmp_path / "m.joblib"), "--trees", "5",
                       "--test-fraction", "0")
    assert trained.returncode == 0, trained.stderr
    assert "expert" not in load_model(tmp_path / "m.joblib").model.actions
    assert load_model(tmp_path / "m.scalar.joblib").model.intervention == "stronger"
    assert_one_line_error(gauntlet("oversight", "evaluate", str(rows), "--intervention", "expert_k"),
                          "no branches of ['expert_k']", "--intervention")
