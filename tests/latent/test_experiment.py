"""experiments/latent_monitor.py at its smoke size, on the tiny model: every part runs and writes its
figures, the labels are the checkers' on the recorded replies, and a rerun reuses the generations."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.shared import load_experiment

pytestmark = pytest.mark.timeout(900)  # may wait for the offline tokenizer's one-time reading (see conftest)


def test_the_smoke_size_writes_detection_correction_corpora_and_the_monitor_file(tmp_path, tiny_model_folder,
                                                                                shared_data_home, monkeypatch):
    from gauntlet.controllers.latent.hierarchy import complied, hierarchy_suite, is_tool_call
    from gauntlet.controllers.latent.monitor import load_chaos_score

    monkeypatch.setenv("GAUNTLET_HOME", str(shared_data_home))
    experiment = load_experiment("latent_monitor")
    out = tmp_path / "latent"
    assert experiment.main(["--size", "smoke", "--model-path", str(tiny_model_folder), "--out", str(out)]) == 0
    results = json.loads((out / "latent_monitor.json").read_text())
    cases = hierarchy_suite(per_cell=1)
    answers = json.loads((out / "run" / "answers.json").read_text())["generations"]
    violated = [not complied(case, row["text"]) for case, row in zip(cases, answers, strict=True)
                if not is_tool_call(row["text"])]
    assert results["asked"] == len(cases) == 24 and results["cases"] == len(violated)
    assert results["violations"] == sum(violated)
    expected = {f"{name}@2" for name in ("aeo", "mahalanobis", "probe", "tasktracker")}
    assert set(results["detection"]) == expected | {"text"}
    for entry in results["detection"].values():
        auroc = entry["leave_one_rule_out"]["auroc"]
        assert auroc is None or 0.0 <= auroc <= 1.0
    correction = results["correction"]
    assert correction["gated_oracle"]["flagged"] == sum(violated)
    assert correction["as_answered"]["accuracy"] == pytest.approx(1 - np.mean(violated))
    assert set(results["corpora"]["detection"]) == expected | {"text"}
    assert results["corpora"]["model"] == results["model"] == tiny_model_folder.name  # the model, not a detector
    score, threshold, model = load_chaos_score(out / results["monitor_file"])
    assert (score.layer, model) == (2, tiny_model_folder.name) and threshold == results["monitor_threshold"]
    # The best detector a monitor can run on a reply, by leave-one-rule-out AUROC, ready for `--monitor-config`.
    from gauntlet.controllers.latent.detector_file import load_detector

    best = results["best_reply_detector"]
    reply_detectors = {key: entry for key, entry in results["detection"].items()
                       if entry["detector"] in ("aeo", "mahalanobis", "probe")}
    top = max(entry["leave_one_rule_out"]["auroc"] for entry in reply_detectors.values())
    assert best["detector"] in ("aeo", "mahalanobis", "probe") and best["leave_one_rule_out_auroc"] == top
    assert reply_detectors[f"{best['detector']}@{best['layer']}"]["leave_one_rule_out"]["auroc"] == top
    fitted = load_detector(out / best["file"])
    assert (fitted.layer, fitted.model, fitted.threshold) == (best["layer"], tiny_model_folder.name, best["threshold"])
    page = (out / "latent_monitor.md").read_text()
    assert best["file"] in page
    assert "leave-one-rule-out AUROC" in page and "Injection corpora, leave one dataset out" in page
    # A rerun reuses the recorded generations instead of generating again.
    before = (out / "run" / "answers.json").stat().st_mtime_ns
    assert experiment.main(["--size", "smoke", "--only", "hierarchy", "--model-path", str(tiny_model_folder),
                            "--out", str(out)]) == 0
    assert (out / "run" / "answers.json").stat().st_mtime_ns == before
    assert "corpora" in json.loads((out / "latent_monitor.json").read_text())  # the other part's figures are kept
    # Figures of the same model on the other backend are not mixed with these: they are dropped.
    stored = json.loads((out / "latent_monitor.json").read_text())
    assert stored["backend"] == stored["corpora"]["backend"] == "transformers"
    stored["corpora"]["backend"] = "llama.cpp"
    (out / "latent_monitor.json").write_text(json.dumps(stored))
    assert experiment.main(["--size", "smoke", "--only", "hierarchy", "--model-path", str(tiny_model_folder),
                            "--out", str(out)]) == 0
    assert "corpora" not in json.loads((out / "latent_monitor.json").read_text())


def test_the_layers_are_the_quarter_points_of_the_model_s_depth_and_the_gate_the_middle_one():
    experiment = load_experiment("latent_monitor")
    assert experiment.resolved_layers(experiment.SIZES["full"], 24) == ([6, 12, 18, 24], 12)
    assert experiment.resolved_layers(experiment.SIZES["scale"], 28) == ([7, 14, 21, 28], 14)
    assert experiment.resolved_layers(experiment.SIZES["smoke"], 24) == ([2], 2)


@pytest.mark.parametrize(("arguments", "problem"), [
    (["--model", "qwen-9000"], "no offline model 'qwen-9000'"),
    (["--backend", "llama", "--model-path", "{folder}"], "--backend llama reads a .gguf file"),
])
def test_a_model_that_cannot_be_read_is_one_line_and_exit_2_with_nothing_written(arguments, problem, tmp_path, capsys):
    experiment = load_experiment("latent_monitor")
    folder = tmp_path / "model"
    folder.mkdir()
    out = tmp_path / "latent"
    argv = [argument.format(folder=folder) for argument in arguments]
    assert experiment.main(["--size", "smoke", *argv, "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert problem in error and len(error.splitlines()) == 1
    assert not out.exists()


def test_the_committed_1_5b_gate_files_load_as_the_results_file_names_them():
    """The scale folder's gate files (what the attack study's --score takes) are the ones its results name:
    the detector, layer, model and threshold, so a stale or swapped file fails here, not in an hour-long run."""
    from pathlib import Path

    from gauntlet.controllers.latent.detector_file import load_detector

    folder = Path(__file__).resolve().parents[2] / "experiments" / "results" / "latent" / "llama-1.5b-scale"
    results = json.loads((folder / "latent_monitor.json").read_text())
    best = results["best_reply_detector"]
    probe = load_detector(folder / best["file"])
    assert (probe.detector.name, probe.layer, probe.source) == (best["detector"], best["layer"], "hierarchy")
    assert probe.threshold == pytest.approx(best["threshold"])
    chaos = load_detector(folder / results["monitor_file"])
    assert chaos.threshold == pytest.approx(results["monitor_threshold"]) and chaos.layer == results["gate_layer"]
    assert probe.model == chaos.model == "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
