"""`gauntlet demo --only tactile` end to end: the recorded episode, its frames and the accuracy curve."""

from __future__ import annotations

from PIL import Image

from gauntlet import load_episodes
from gauntlet.agents.tactile.demo import run_demo


def test_the_tactile_demo_writes_its_episode_frames_and_curve(tmp_path, capsys):
    run_demo(tmp_path)
    printed = capsys.readouterr().out
    assert "1. played a 16-step TactileMNIST episode" in printed and "2. accuracy by step" in printed
    # the shipped checkpoints: a test digit, and a wrench's pose found by touch
    assert "3. the learned agent (TactileMNIST.pt)" in printed
    pose_line = next(line for line in printed.splitlines() if line.startswith("4. "))
    assert "Toolbox.pt" in pose_line and "after 32 touches" in pose_line
    (episode,) = load_episodes(tmp_path / "episode.jsonl")
    assert len(episode.steps) == 16
    with Image.open(tmp_path / "episode.gif") as gif:
        assert gif.n_frames >= 16
    with Image.open(tmp_path / "accuracy_by_step.png") as curve:
        assert curve.size[0] > 100
