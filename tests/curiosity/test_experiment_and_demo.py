"""The experiment script at smoke size, and the demo: real files with measured numbers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gauntlet.agents.curiosity.demo import run_demo
from tests.shared import load_experiment



# Every result at smoke size, lookahead planners included: minutes on a loaded 2-core machine.
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
