"""The episodes ``gauntlet oversight deploy`` and ``collect`` run: the held-out default names episodes that
exist on every registered benchmark, and episodes past the end of a benchmark with a fixed number of
them are refused in one line before any work."""

from __future__ import annotations

import json

import pytest

from gauntlet.controllers.oversight.benchmarks import BENCHMARKS, episode_count, get_benchmark
from gauntlet.controllers.oversight.online import UNSEEN_FIRST, held_out_episodes
from tests.oversight.test_text_benchmarks import SHORT_TASK, SMALL_TEXTWORLD
from tests.test_cli import assert_one_line_error, gauntlet

# Options that keep a benchmark cheap (the way it numbers its episodes is the same under any options); a
# benchmark missing here is tested with its registered defaults.
SMALL = {"corridor": {"length": 6, "max_steps": 12}, "taxi": {"expert_episodes": 100}, "textworld": SMALL_TEXTWORLD,
         "scienceworld": {"tasks": SHORT_TASK}}
# The tool suites' small data come from fixtures (tests/oversight/conftest.py).
SMALL_SUITES = {"chem": "small_chem", "disaster": "small_disaster", "llm-chem": "small_chem",
                "llm-disaster": "small_disaster"}
GROUPS = {"chem": "oversight-tools", "disaster": "oversight-tools", "llm-chem": "oversight-tools",
          "llm-disaster": "oversight-tools", "scienceworld": "scienceworld"}
pytestmark = pytest.mark.filterwarnings("ignore:Use `@` matmul:PendingDeprecationWarning:rasterio.*")


def _options(name: str, request: pytest.FixtureRequest) -> dict:
    return request.getfixturevalue(SMALL_SUITES[name]) if name in SMALL_SUITES else SMALL.get(name, {})


@pytest.mark.parametrize("name", [pytest.param(name, marks=[pytest.mark.xdist_group(GROUPS[name])] if name in GROUPS
                                               else []) for name in sorted(BENCHMARKS)])
def test_the_held_out_default_names_episodes_that_exist_on_every_registered_benchmark(name, request):
    options = _options(name, request)
    benchmark = get_benchmark(name, **options)
    total = episode_count(benchmark)
    chosen = held_out_episodes(name, options, 1)
    assert chosen == (range(UNSEEN_FIRST, UNSEEN_FIRST + 1) if total is None else range(total - 1, total))
    for episode in chosen:
        env = benchmark.make_env(episode)
        try:
            env.reset(seed=benchmark.episode_seed(episode))
        finally:
            env.close()


@pytest.mark.xdist_group("oversight-tools")
@pytest.mark.parametrize(("command", "first", "count", "fix"), [
    ("collect", -2, 5, "use --first <= {last_first}"),
    ("deploy", -2, 5, "use --first <= {last_first}"),
    ("deploy", None, 1, "use --episodes <= {total}")], ids=["collect-first", "deploy-first", "deploy-default"])
def test_episodes_past_a_tool_suites_end_are_refused_in_one_line_naming_its_size(
        command, first, count, fix, small_chem, tmp_path):
    total = episode_count(get_benchmark("chem", **small_chem))
    count += total if first is None else 0
    episodes = ["--episodes", str(count)]
    episodes = episodes if first is None else ["--first", str(total + first), *episodes]
    # The refusal comes first: before the model is read (there is none) and before the folder is made.
    where = ["--out", str(tmp_path / "rows")] if command == "collect" else ["--model", str(tmp_path / "none.joblib")]
    result = gauntlet("oversight", command, "chem", *where, "--options", json.dumps(small_chem), *episodes)
    assert_one_line_error(result, f"chem has {total} episodes: {' '.join(episodes)} runs past its end; "
                                  + fix.format(last_first=total - count, total=total))
    assert not (tmp_path / "rows").exists()
