"""The HTML run report: self-contained, and its numbers are the episodes' numbers."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import numpy as np
import pytest

from gauntlet.batch import RunSpec, run_many
from gauntlet.episode import AgentSpec, EpisodeHeader, EpisodeWriter, Event, Outcome, load_episodes
from gauntlet.errors import UserError
from gauntlet import trace_view
from gauntlet.report import return_stats, summarize, write_report
from gauntlet.stats import bootstrap_ci


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "run"
    run_many(RunSpec(env_id="CartPole-v1", agent=AgentSpec(name="random"), seed=11, max_steps=40), 12, out,
             workers=1, progress=False)
    return out


def _row(page: str, label: str) -> str:
    """The value cell of the summary row ``label``."""
    match = re.search(rf"<td>{re.escape(label)}</td><td[^>]*>([^<]*)</td>", page)
    assert match, f"no summary row {label!r}"
    return match.group(1)


def _write_crafted_file(path: Path) -> None:
    """Three episodes with what a CartPole run lacks: success flags, safety cost, monitor and
    controller events, and one episode cut short before its outcome."""
    with EpisodeWriter(path) as writer:
        for number, (rewards, success) in enumerate([([1.0, 2.0], True), ([0.5, 0.5, 0.5], False)]):
            writer.begin(EpisodeHeader(run_id="crafted", episode_id=f"crafted-{number}", env_id="Toy-v0",
                                       seed=number, agent=AgentSpec(name="scripted")))
            for index, reward in enumerate(rewards):
                events = [Event(source="probe", kind="monitor", data={"risk": 0.1}, cost_ms=2.0),
                          Event(source="guard", kind="decision", data={"kind": "continue"}, cost_ms=0.5)]
                writer.step(index, [float(index)], 0, reward, index == len(rewards) - 1, False, {},
                            cost=0.25, events=[event.model_dump() for event in events])
            writer.end(Outcome(score=sum(rewards), success=success,
                               metrics={"return": sum(rewards), "length": len(rewards)}))
        writer.begin(EpisodeHeader(run_id="crafted", episode_id="crafted-cut", env_id="Toy-v0", seed=9,
                                   agent=AgentSpec(name="scripted")))
        writer.step(0, [0.0], 0, 7.0, False, False, {})


def test_the_report_is_one_self_contained_file(run_dir, tmp_path):
    page = write_report(run_dir, tmp_path / "report.html").read_text()
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page), "the report loads an external asset"
    assert "<script" not in page and "<link" not in page
    sources = re.findall(r"""src\s*=\s*["']([^"']*)""", page)
    assert len(sources) == 4 and all(source.startswith("data:image/png;base64,") for source in sources)


def test_the_summary_shows_the_numbers_computed_from_the_episodes(run_dir, tmp_path):
    page = write_report(run_dir, tmp_path / "report.html").read_text()
    episodes = load_episodes(run_dir)
    returns = [sum(step.reward for step in episode.steps) for episode in episodes]
    assert _row(page, "episodes") == str(len(episodes))
    assert _row(page, "complete") == str(len(episodes))
    assert _row(page, "mean return") == f"{statistics.fmean(returns):.3f}"
    assert _row(page, "std return") == f"{statistics.stdev(returns):.3f}"
    assert _row(page, "min return") == f"{min(returns):.3f}"
    assert _row(page, "median return") == f"{statistics.median(returns):.3f}"
    assert _row(page, "max return") == f"{max(returns):.3f}"
    assert _row(page, "mean length (steps)") == f"{statistics.fmean(len(e.steps) for e in episodes):.3f}"
    low, high = (float(x) for x in _row(page, "95% CI of mean return (bootstrap)").strip("[]").split(","))
    assert low <= statistics.fmean(returns) <= high


def test_the_run_metadata_comes_from_the_run_file(run_dir, tmp_path):
    page = write_report(run_dir, tmp_path / "report.html").read_text()
    assert _row_value(page, "env id") == "CartPole-v1"
    assert _row_value(page, "seed") == "11"
    assert _row_value(page, "max steps") == "40"
    assert "version: gymnasium" in page


def _row_value(page: str, label: str) -> str:
    match = re.search(rf"<tr><td>{re.escape(label)}</td><td>([^<]*)</td></tr>", page)
    assert match, f"no metadata row {label!r}"
    return match.group(1)


def test_every_episode_has_a_row_in_the_episode_table(run_dir, tmp_path):
    page = write_report(run_dir, tmp_path / "report.html").read_text()
    for episode in load_episodes(run_dir):
        assert f"<td>{episode.episode_id}</td>" in page


def test_a_single_episode_file_gets_a_report_too(run_dir, tmp_path):
    file = run_dir / "episodes" / "ep-000000.jsonl"
    episode = load_episodes(file)[0]
    page = write_report(file, tmp_path / "one.html").read_text()
    assert _row(page, "episodes") == "1"
    assert _row(page, "mean return") == f"{episode.total_reward:.3f}"
    assert _row(page, "std return") == "0.000"


def test_success_cost_events_and_incomplete_episodes_are_counted(tmp_path):
    crafted = tmp_path / "crafted.jsonl"
    _write_crafted_file(crafted)
    page = write_report(crafted, tmp_path / "crafted.html").read_text()
    assert _row(page, "episodes") == "3"
    assert _row(page, "complete") == "2" and _row(page, "incomplete") == "1"
    assert _row(page, "mean return") == f"{(3.0 + 1.5) / 2:.3f}"  # the cut episode is left out
    assert _row(page, "success rate") == "0.500 (of 2 episodes)"
    assert _row(page, "total cost") == f"{0.25 * 5:.3f}"
    # five steps carry one monitor event (2 ms) and one controller decision (0.5 ms) each
    assert re.search(r"<td>probe</td><td>monitor</td><td[^>]*>5</td><td[^>]*>10\.000</td>", page)
    assert re.search(r"<td>guard</td><td>decision</td><td[^>]*>5</td><td[^>]*>2\.500</td>", page)


def test_text_from_episodes_is_escaped(tmp_path):
    hostile = tmp_path / "hostile.jsonl"
    with EpisodeWriter(hostile) as writer:
        writer.begin(EpisodeHeader(run_id="r", episode_id="<script>alert(1)</script>", env_id="Toy-v0", seed=0,
                                   agent=AgentSpec(name="<b>agent</b>")))
        writer.step(0, [0.0], 0, 1.0, True, False, {})
        writer.end(Outcome(score=1.0))
    page = write_report(hostile, tmp_path / "hostile.html").read_text()
    assert "<script>" not in page and "<b>agent" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_folder_without_episodes_is_a_user_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no episodes"):
        write_report(tmp_path / "empty", tmp_path / "r.html")


def test_the_bootstrap_interval_is_reproducible_and_brackets_the_mean():
    values = np.random.default_rng(5).normal(10.0, 3.0, size=50)
    first, second = bootstrap_ci(values), bootstrap_ci(values)
    assert first == second
    assert first[0] < values.mean() < first[1]


def test_return_stats_of_one_value_have_no_spread():
    stats = return_stats([4.0])
    assert (stats.mean, stats.std, stats.ci_low, stats.ci_high) == (4.0, 0.0, 4.0, 4.0)
    assert return_stats([]) is None


def test_summarize_uses_complete_episodes_for_returns(tmp_path):
    crafted = tmp_path / "crafted.jsonl"
    _write_crafted_file(crafted)
    summary = summarize(load_episodes(crafted))
    assert summary.returns.n == 2 and summary.incomplete == 1
    assert summary.mean_length == pytest.approx((2 + 3 + 1) / 3)


def test_every_episode_in_the_table_links_to_its_trace(run_dir, tmp_path):
    page = write_report(run_dir, tmp_path / "report.html").read_text()
    anchors = set(re.findall(r'\sid="([^"]+)"', page))
    links = re.findall(r'href="#([^"]+)"', page)
    assert links and [link for link in links if link not in anchors] == []
    for position in range(len(load_episodes(run_dir))):
        assert f'<a href="#ep-{position}">trace</a>' in page


def test_a_large_run_traces_its_first_episodes_and_says_so(run_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(trace_view, "TRACE_MAX_EPISODES", 5)
    page = write_report(run_dir, tmp_path / "report.html").read_text()
    assert re.findall(r'<section class="trace" id="(ep-\d+)"', page) == [f"ep-{i}" for i in range(5)]
    assert '<a href="#ep-5">' not in page
    assert "Traces of the first 5 of 12 episodes" in page
