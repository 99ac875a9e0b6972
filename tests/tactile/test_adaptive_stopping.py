"""The stopping protocol of the lattice rule: its threshold is chosen on training objects (the smallest
that reaches the scan's last-touch accuracy there), frozen, and read on the test sets of every belief
seed, with the declared accuracy paired per episode against the scan's last touch; and the probe of
whether the lookahead tells a blank touch from one that feels the digit."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.shared import load_experiment

THRESHOLDS = (0.5, 0.9, 1.01)


@pytest.fixture(scope="module")
def experiment():
    return load_experiment("tactile")


def test_declared_accuracy_is_paired_per_episode_with_the_scans_last_touch(experiment):
    scores = np.array([[0.0, 1.0, 1.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    confidence = np.array([[0.6, 0.95, 0.95], [0.1, 0.2, 0.3], [0.95, 0.95, 0.95]])
    scan_final = np.array([1.0, 1.0, 0.0])
    rows = experiment.stopping_rule(scores, confidence, (0.9,), scan_final=scan_final)
    # declared: episode 0 at touch 2 (right), episode 1 never sure (wrong at 3), episode 2 at touch 1 (right)
    assert rows[0]["touches"] == pytest.approx(2.0) and rows[0]["accuracy"][0] == pytest.approx(2 / 3)
    difference = np.array([0.0, -1.0, 1.0])
    assert rows[0]["minus_scan_final"][0] == pytest.approx(0.0)
    half = 1.96 * difference.std(ddof=1) / np.sqrt(3)
    assert rows[0]["minus_scan_final"][1:] == pytest.approx([-half, half])
    assert "minus_scan_final" not in experiment.stopping_rule(scores, confidence, (0.9,))[0]


def test_the_threshold_is_the_smallest_that_reaches_the_target_else_never_stop(experiment):
    rows = [{"threshold": p, "accuracy": [a, 0, 1]} for p, a in zip((0.5, 0.9, 0.95, 1.01), (0.7, 0.93, 0.95, 0.94))]
    assert experiment.choose_threshold(rows, 0.93) == 0.9
    assert experiment.choose_threshold(rows, 0.94) == 0.95
    assert experiment.choose_threshold(rows, 0.951) == 1.01  # none reaches it: play every touch


def _run(scan_score: float, adaptive_final: float, adaptive_rows: list[float], scan_rows: list[float]) -> dict:
    """A lattice run file's fields the report reads: 16-touch curves and stopping rows at ``THRESHOLDS``."""
    scan = np.linspace(0.1, scan_score, 16)
    adaptive = np.linspace(0.2, adaptive_final, 16)
    return {"eval_episodes": 512, "sha256": "0" * 64, "scan_final": scan_score, "adaptive_final": adaptive_final,
            "touches_for_scan_final": 15,
            "accuracy_by_touches": {"scan": {"mean": scan.tolist()}, "adaptive": {"mean": adaptive.tolist()}},
            "adaptive_minus_scan": {"mean": (adaptive - scan).tolist(), "low": (adaptive - scan - 0.01).tolist(),
                                    "high": (adaptive - scan + 0.01).tolist()},
            "stopping_rule": {name: [{"threshold": p, "touches": 10.0 + i, "accuracy": [a, a - 0.02, a + 0.02],
                                      "minus_scan_final": [a - scan_score, -0.1, 0.1]}
                                     for i, (p, a) in enumerate(zip(THRESHOLDS, accuracies))]
                              for name, accuracies in (("adaptive", adaptive_rows), ("scan", scan_rows))}}


def test_report_freezes_each_seeds_threshold_on_training_objects_and_reads_it_on_the_test_sets(
        experiment, tmp_path, capsys):
    stem = "TactileMNIST-adaptive-seed{k}-lattice-with-TactileMNIST-{split}.json"
    files = {stem.format(k=0, split="train0"): _run(0.94, 0.95, [0.80, 0.94, 0.95], [0.70, 0.93, 0.94]),
             stem.format(k=1, split="train0"): _run(0.94, 0.93, [0.80, 0.90, 0.93], [0.70, 0.93, 0.94]),
             # test rows: a threshold picked on the test sets would be 0.5 here for both seeds
             stem.format(k=0, split="test0"): _run(0.90, 0.92, [0.91, 0.92, 0.92], [0.85, 0.89, 0.90]),
             stem.format(k=1, split="test0"): _run(0.90, 0.91, [0.91, 0.905, 0.91], [0.85, 0.89, 0.90]),
             stem.format(k=0, split="test1"): _run(0.88, 0.90, [0.90, 0.89, 0.90], [0.85, 0.87, 0.88])}
    for name, run in files.items():
        (tmp_path / name).write_text(json.dumps(run))
    report = experiment.main(["--adaptive", "--lattice-report", "--classifier", "TactileMNIST.pt",
                              "--out", str(tmp_path)])
    seed0, seed1 = report["seeds"][0], report["seeds"][1]
    assert (seed0["threshold"], seed1["threshold"]) == (0.9, 1.01)  # seed 1 never reaches 0.94 on training
    assert seed0["scan_threshold"] == 1.01 and seed1["threshold_keep"] == 1.01 and seed0["threshold_keep"] == 1.01
    test0 = seed0["tests"]["test0"]
    assert test0["adaptive_stop"]["threshold"] == 0.9 and test0["adaptive_stop"]["touches"] == 11.0
    assert test0["scan_stop_same_threshold"]["accuracy"][0] == 0.89
    # the scan's own threshold (1.01 here: it never reaches its last-touch accuracy early on training objects)
    assert test0["scan_stop_own_threshold"]["touches"] == 12.0
    assert test0["adaptive_stop_scan_threshold"]["accuracy"][0] == 0.92
    assert test0["adaptive_stop"]["minus_scan_final"][0] == pytest.approx(0.02)
    assert sorted(seed0["tests"]) == ["test0", "test1"] and list(seed1["tests"]) == ["test0"]
    mean = report["mean_over_seeds"]["test0"]
    assert mean["seeds"] == [0, 1] and mean["adaptive_stop_touches"] == pytest.approx((11.0 + 12.0) / 2)
    assert mean["scan"][-1] == pytest.approx(0.90) and len(mean["adaptive"]) == len(report["touches"])
    saved = json.loads((tmp_path / "TactileMNIST-adaptive-lattice-with-TactileMNIST-seeds.json").read_text())
    assert saved["seeds"]["1"]["threshold"] == 1.01
    assert "threshold 0.9" in capsys.readouterr().out
    # a seed with test runs but no training-object run cannot have a threshold
    (tmp_path / stem.format(k=1, split="train0")).unlink()
    with pytest.raises(SystemExit) as stop:
        experiment.main(["--adaptive", "--lattice-report", "--classifier", "TactileMNIST.pt", "--out", str(tmp_path)])
    error = capsys.readouterr().err
    assert stop.value.code == 2 and "seed(s) [1]" in error and "--eval-split train" in error


def test_auc_orders_scores_of_positives_above_negatives():
    probe = load_experiment("tactile_blank_probe")
    positive = np.array([True, True, False, False])
    assert probe.auc(np.array([0.9, 0.8, 0.1, 0.2]), positive) == 1.0
    assert probe.auc(np.array([0.1, 0.2, 0.9, 0.8]), positive) == 0.0
    assert probe.auc(np.ones(4), positive) == 0.5


def test_blank_probe_smoke_run(tmp_path, capsys):
    import torch

    from gauntlet.agents.tactile.adaptive import BeliefModel
    from gauntlet.agents.tactile.belief_training import save_belief
    from gauntlet.agents.tactile.model import TouchMapModel
    from gauntlet.agents.tactile.training import save

    torch.manual_seed(0)
    belief, classifier = tmp_path / "belief.pt", tmp_path / "scan.pt"
    save_belief(BeliefModel(10).eval(), belief, family="TactileMNIST", step_limit=16, seed=0)
    save(TouchMapModel(10).eval(), classifier, family="TactileMNIST", step_limit=16)
    probe = load_experiment("tactile_blank_probe")
    result = probe.main(["--checkpoint", str(belief), "--classifier", str(classifier), "--smoke",
                         "--out", str(tmp_path)])
    assert result["split"] == "train" and result["touches"] == 2 * 15  # every touch after the first
    assert 0.0 < result["blank_share"] < 1.0 and 0.0 <= result["auc_felt"] <= 1.0
    assert json.loads((tmp_path / "belief-blank-probe.json").read_text())["touches"] == 30
    with pytest.raises(SystemExit) as stop:
        probe.main(["--checkpoint", str(tmp_path / "missing.pt"), "--smoke", "--out", str(tmp_path)])
    assert stop.value.code == 2 and "missing.pt" in capsys.readouterr().err
