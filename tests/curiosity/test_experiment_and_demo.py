"""The experiment script at smoke size, and the demo: real files with measured numbers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gauntlet.agents.curiosity.demo import run_demo
from tests.shared import load_experiment



# Every result at smoke size, lookahead planners included: minutes on a loaded 2-core machine.
@pytest.mark.starts_early
@pytest.mark.timeout(900)
def test_smoke_experiment_writes_results_i_to_iv_and_figures(tmp_path):
    experiment = load_experiment("curiosity")
    results = experiment.run("smoke", tmp_path, seed=0)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["iv"] == json.loads(json.dumps(results["iv"]))
    for env_id in ("ActiveRegression-v0", "RuleDiscovery-v0", "LocationFinding-v0",
                   "LocationFinding-v0 (transformer ICL)", "RuleDiscovery-v0 (transformer ICL)"):
        rows = {**saved["i"], **saved["i_meta"]}[env_id]["per_context_size"]
        assert [row["t"] for row in rows] == list(range(1, len(rows) + 1))
    assert saved["ii"]["share_of_steps_crossing_the_ice_edge"] >= 0.0
    for policy in ("random", "random-prior", "uncertainty", "greedy-eig", "curiosity-dad"):
        assert saved["iii"][policy]["spce"]["mean"] <= saved["iii"][policy]["snmc"]["mean"]
        assert saved["iii"][policy]["spce"]["mean"] <= saved["iii"]["max_spce_log_L_plus_1"]
    assert set(saved["iii"]["paired_spce_difference_curiosity_dad_minus"]) == set(experiment.LF_POLICY_NAMES) - {
        "curiosity-dad"}
    for rules in (saved["iv"], saved["iv"]["dfa"]):
        # Noise-free binary answers: the optimal expected number of queries is at least log2 |H|
        # (a bound on the expectation over rules, not on a 4-episode average of a policy).
        assert rules["optimal_expected"] >= rules["information_lower_bound_log2_H"] - 1e-9
        for policy in ("random", "uncertainty", "greedy-eig"):
            assert 1.0 <= rules[policy]["mean"] <= 2 ** rules["n_bits"] + 1
    trained = saved["v"]["belief_training_seeds"]
    assert set(trained["per_seed"]) == {"0", "1"}
    for row in trained["per_seed"].values():
        difference = np.array(row["per_episode"]) - np.array(trained["baselines_per_episode"]["random"])
        assert np.isclose(row["paired_difference_minus"]["random"]["mean"], difference.mean())
    assert saved["v"]["curiosity-belief-regression"]["n"] == experiment.SIZES["smoke"]["regression_episodes"]
    for figure in saved["figures"]:
        assert Path(figure).stat().st_size > 10_000


def test_rerunning_some_iii_policies_keeps_the_others(tmp_path):
    experiment = load_experiment("curiosity")
    experiment.run("smoke", tmp_path, seed=1, only=["iii"], policies=["random"])
    results = experiment.run("smoke", tmp_path, seed=1, only=["iii"], policies=["random-prior"])
    assert {"random", "random-prior"} <= set(results["iii"])
    try:
        experiment.run("smoke", tmp_path, seed=1, only=["iii"], policies=["oracle"])
    except ValueError as error:
        assert "policies must be among" in str(error)
    else:
        raise AssertionError("an unknown policy was accepted")


def test_same_seed_reproduces_the_experiment(tmp_path):
    experiment = load_experiment("curiosity")
    size = experiment.SIZES["smoke"]
    first, second = experiment.result_iv(size, seed=5), experiment.result_iv(size, seed=5)
    assert first == second
    assert not np.isnan(first["random"]["mean"])


def test_demo_saves_the_curious_designs_plot(tmp_path):
    run_demo(tmp_path)
    assert (tmp_path / "curiosity_location_finding.png").stat().st_size > 10_000


def test_regression_belief_seeds_need_result_v_and_are_added_to_it(tmp_path):
    experiment = load_experiment("curiosity")
    with pytest.raises(SystemExit, match="needs result \\(v\\)"):
        experiment.main(["--size", "smoke", "--regression-belief-seeds", "3", "--out", str(tmp_path)])
    registered = experiment.run("smoke", tmp_path, seed=0, only=["v"])["v"]["curiosity-belief-regression"]
    experiment.main(["--size", "smoke", "--regression-belief-seeds", "0,3", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "results.json").read_text())
    assert set(saved["v"]["belief_training_seeds"]["per_seed"]) == {"0", "3"}
    # Training seed 0 is the registered agent's config (its weights from the data cache): the same designs.
    assert saved["v"]["belief_training_seeds"]["per_seed"]["0"]["information"]["mean"] == pytest.approx(
        registered["mean"])


def _belief_run(seed_rows: dict[str, list[float]], baseline_shift: float = 0.0) -> dict:
    """A results.json with result (iii) (four histories) and some --belief-seeds rows."""
    iii = {"curiosity-belief": {"spce_per_history": [5.0, 6.0, 7.0, 8.0]},
           **{name: {"spce_per_history": [4.0 + baseline_shift, 5.0, 6.0, 7.0]}
              for name in ("random-prior", "uncertainty", "greedy-eig")}}
    return {"size": "smoke", "seed": 0, "iii": iii,
            "iii_belief_training_seeds": {key: {"spce_per_history": row} for key, row in seed_rows.items()}}


def test_merging_belief_seed_runs_adds_their_seeds_and_redoes_the_paired_summary():
    experiment = load_experiment("curiosity")
    merged = experiment.merge_belief_seeds(_belief_run({"1": [6.0, 7.0, 8.0, 9.0]}),
                                           [_belief_run({"2": [7.0, 8.0, 9.0, 10.0]})])
    summary = merged["iii_belief_seed_summary"]
    assert summary["training_seeds"] == [0, 1, 2] and summary["histories"] == 4
    # seeds 0, 1, 2 are 1, 2, 3 above every baseline history: the mean over seeds is 2 above, exactly
    assert summary["mean_over_seeds"]["paired_difference_minus"]["greedy-eig"]["mean"] == pytest.approx(2.0)
    assert summary["over_seed_means"]["mean"] == pytest.approx(7.5) and summary["over_seed_means"]["n"] == 3
    with pytest.raises(ValueError, match="not run on a copy"):
        experiment.merge_belief_seeds(_belief_run({}), [_belief_run({"2": [1.0] * 4}, baseline_shift=0.5)])
    with pytest.raises(ValueError, match="seed 1 is in both"):
        experiment.merge_belief_seeds(_belief_run({"1": [6.0] * 4}), [_belief_run({"1": [7.0] * 4})])
