"""The experiment script at smoke size and the demo: they run and report every metric the issue names."""

from __future__ import annotations

import json

import pytest

from tests.shared import load_experiment



def test_smoke_experiment_writes_the_comparison_table_and_plots(tmp_path):
    experiment = load_experiment("calspi")
    experiment.main(["--smoke", "--out", str(tmp_path)])
    result = json.loads((tmp_path / "results.json").read_text())
    methods = {entry["method"] for entry in result["table"]}
    assert methods == {"baseline", "calspi", "no-gate", "mopo", "bc"}
    for entry in result["table"]:
        assert entry["seeds"] == 2
        assert entry["ci95"][0] <= entry["mean_return"] <= entry["ci95"][1]
        assert 0.0 <= entry["p_worse_than_baseline"] <= 1.0
        assert entry["worst_seed_return"] <= entry["mean_return"]
    calspi = next(e for e in result["table"] if e["method"] == "calspi")
    assert 0.0 <= calspi["switch_fraction"] <= 1.0 and 0.0 <= calspi["coverage_holds_fraction"] <= 1.0
    assert 0.0 <= calspi["fitted_certificate_held_fraction"] <= 1.0
    assert next(e for e in result["table"] if e["method"] == "baseline")["p_worse_than_baseline"] == 0.0
    for row in result["rows"]:
        assert len(row["coverage"]["coverages"]) == 3
    assert (tmp_path / "returns-InvertedPendulum.png").stat().st_size > 0
    assert "| InvertedPendulum | 1,000 | calspi | 2 |" in experiment.markdown_table(result["table"])
    # Coverage at the states the search visited: root actions stepped for real from branched states.
    for row in result["rows"]:
        searched = row["search_coverage"]
        assert searched["transitions"] >= searched["root_states"] >= 1
        assert 0.0 <= searched["coverage_all"] <= 1.0
        assert row["value_error_bound"] >= 0.0
    assert 0.0 <= calspi["search_coverage_all"] <= 1.0
    # Merging runs (a cell counted once) writes one results.json, table.md and the figures.
    merged = tmp_path / "merged"
    experiment.main(["--markdown", str(tmp_path / "results.json"), str(tmp_path / "rows.json"), "--write",
                     "--out", str(merged)])
    assert json.loads((merged / "results.json").read_text())["table"] == result["table"]
    assert (merged / "table.md").read_text().count("| calspi |") == 1


def test_t_interval_matches_the_textbook_formula():
    experiment = load_experiment("calspi")
    low, high = experiment.t_interval([1.0, 2.0, 3.0])
    # mean 2, sd 1, n 3, t_{0.975, 2} = 4.302653
    assert low == pytest.approx(2 - 4.302653 / 3**0.5, rel=1e-5)
    assert high == pytest.approx(2 + 4.302653 / 3**0.5, rel=1e-5)


def test_demo_runs_an_episode_and_reports_how_often_it_switched(tmp_path, capsys):
    from gauntlet.agents.calspi.demo import run_demo

    run_demo(tmp_path)
    printed = capsys.readouterr().out
    assert "switched away from the baseline at" in printed
    assert (tmp_path / "calspi-episode.jsonl").stat().st_size > 0


def test_smoke_paired_run_and_gap_diagnostics(tmp_path):
    experiment = load_experiment("calspi")
    result = experiment.main(["--smoke", "--methods", "baseline", "calspi", "--search", '{"switching": "paired"}',
                              "--out", str(tmp_path / "paired")])
    assert {e["method"] for e in result["table"]} == {"baseline", "calspi"}
    row = result["rows"][0]
    assert row["search"]["switching"] == "paired" and 0 <= row["td_error_bound"] < float("inf")
    diagnostics = experiment.main(["--smoke", "--diagnose", "10", "--diagnose-every", "5",
                                   "--out", str(tmp_path / "diagnose")])["diagnostics"]
    assert len(diagnostics) == 2 and all(d["states"] == 2 for d in diagnostics)
    for d in diagnostics:  # each decision: both rules at the same state; no switch without a positive gap
        for decision in d["decisions"]:
            assert not decision["switched_paired"] or decision["LB_paired"] > decision["UB_baseline"]
    assert json.loads((tmp_path / "diagnose" / "gap-diagnostics.json").read_text())[0]["delta_TD"] > 0


def test_a_method_run_on_some_seeds_of_a_cell_is_summarised_over_those_seeds():
    experiment = load_experiment("calspi")

    def row(seed, baseline, no_gate=None):
        returns = {"baseline": baseline, "calspi": baseline}
        episodes = {"baseline": [baseline] * 3, "calspi": [baseline] * 3}
        if no_gate is not None:
            returns["no-gate"], episodes["no-gate"] = no_gate, [no_gate] * 3
        switched = {method: (0.0 if method == "calspi" else None) for method in returns}
        coverage = {"fraction_of_draws_covering_p": 1.0, "coverage_of_fitted_threshold": 0.95, "p": 0.9}
        return {"domain": "HalfCheetah", "size": 200_000, "seed": seed, "returns": returns,
                "episode_returns": episodes, "switch_fraction": switched, "coverage": coverage}

    # seed 0 ran without the ungated search; seeds 1 and 2 ran it, one far below its own baseline
    table = experiment.summarise([row(0, 2000.0), row(1, 2100.0, 1000.0), row(2, 1900.0, 2500.0)], 0.05)
    by_method = {entry["method"]: entry for entry in table}
    assert by_method["baseline"]["seeds"] == by_method["calspi"]["seeds"] == 3
    ungated = by_method["no-gate"]
    assert ungated["seeds"] == 2 and ungated["mean_return"] == pytest.approx(1750.0)
    assert ungated["margin"] == pytest.approx(0.05 * 2000.0)  # the mean of seeds 1 and 2's baselines
    assert ungated["p_worse_than_baseline"] == 0.5 and ungated["episodes_worse"] == [3, 6]
