"""``gauntlet demo --only tactile``: a Tactile MNIST episode, saved as images, and accuracy by step.

1. plays one 16-step episode of ``gauntlet/TactileMNIST-v0`` with the random agent and saves every
   rendered frame (top view with the sensor outline + the tactile image) as a PNG strip and a GIF;
2. shows the learned agent's accuracy-by-step curve: from the full experiment's results shipped in
   ``experiments/results/tactile/`` (else a run of your own in ``runs/tactile/``), else
   from a smoke-size training run done here (a few seconds of training, so expect it near chance;
   the full run is documented in docs/tactile.md);
3. with the shipped checkpoint, plays one test episode with the learned agent (scan + touch map);
4. with the shipped Toolbox checkpoint, finds a wrench's pose by touch: position (mm) and yaw (degrees)
   errors after the last touch.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

DEMO_OBJECTS = 50  # objects per split: builds in a few seconds
SMOKE_UPDATES = 6


def run_demo(out_dir: Path) -> None:
    import gymnasium as gym
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    import gauntlet
    from gauntlet.agents.tactile.random_agent import TactileRandomAgent
    from gauntlet.runner import rollout

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    env = gym.make("gauntlet/TactileMNIST-v0", objects_per_split=DEMO_OBJECTS, render_mode="rgb_array")
    frames = []

    class Recording(TactileRandomAgent):
        def act(self, observation, info):
            frames.append(env.render())
            return super().act(observation, info)

    episode = rollout(env, Recording(), seed=0, record=out / "episode.jsonl", keep_steps=True)
    frames.append(env.render())
    strip = np.concatenate([np.concatenate(frames[i:i + 4], axis=1) for i in range(0, 16, 4)], axis=0)
    plt.imsave(out / "episode.png", strip)
    images = [Image.fromarray(frame) for frame in frames]
    images[0].save(out / "episode.gif", save_all=True, append_images=images[1:], duration=400, loop=0)
    print(f"1. played a 16-step TactileMNIST episode (digit {episode.steps[-1].info['target']}) with the random "
          f"agent: return {episode.total_reward:.2f}; frames in {out / 'episode.png'} and {out / 'episode.gif'}, "
          f"the episode record in {out / 'episode.jsonl'}")

    shipped = Path(__file__).resolve().parents[2] / "experiments" / "results" / "tactile"
    full = next((folder / "TactileMNIST.json" for folder in (shipped, Path("runs/tactile"))
                 if (folder / "TactileMNIST.json").is_file()), Path("runs/tactile/TactileMNIST.json"))
    if full.is_file():
        result = json.loads(full.read_text())
        source = f"the full experiment in {full}"
    else:
        import torch

        from gauntlet.agents.tactile import training

        torch.set_num_threads(1)  # on a few busy cores, torch's thread pool contends with itself
        model, _ = training.train("TactileMNIST", updates=SMOKE_UPDATES, num_envs=16, objects_per_split=DEMO_OBJECTS)
        result = {"learned_by_step": training.evaluate(model, episodes=64, num_envs=16,
                                                       objects_per_split=DEMO_OBJECTS).tolist(),
                  "random_by_step": training.evaluate(None, episodes=64, num_envs=16,
                                                      objects_per_split=DEMO_OBJECTS).tolist()}
        source = (f"a smoke-size model trained here for {SMOKE_UPDATES} updates; run "
                  "experiments/tactile.py for the full result")
    _plot_curve(result, out / "accuracy_by_step.png")
    print(f"2. accuracy by step on the test split ({source}): learned {result['learned_by_step'][-1]:.3f} vs "
          f"random {result['random_by_step'][-1]:.3f} at the last step; curve in {out / 'accuracy_by_step.png'}")
    checkpoint = shipped / "TactileMNIST.pt"
    if checkpoint.is_file():
        test_env = gym.make("gauntlet/TactileMNIST-test-v0", objects_per_split=DEMO_OBJECTS)
        agent = gauntlet.make_agent("tactile-learned", checkpoint=str(checkpoint))
        played = rollout(test_env, agent, seed=0)
        guesses = [int(np.argmax(step.action["prediction"])) for step in played.steps]
        print(f"3. the learned agent ({checkpoint.name}) on a test digit {played.steps[-1].info['target']}: "
              f"its guess after each touch {guesses}")
    pose_checkpoint = shipped / "Toolbox.pt"
    if pose_checkpoint.is_file():
        pose = rollout(gym.make("gauntlet/Toolbox-v0"),
                       gauntlet.make_agent("tactile-learned", checkpoint=str(pose_checkpoint)), seed=0)
        metrics = pose.steps[-1].info["metrics"]
        yaw = np.degrees(np.arctan2(*pose.steps[-1].info["target"][[3, 2]]))
        print(f"4. the learned agent ({pose_checkpoint.name}) finds a wrench's pose (yaw {yaw:.0f} deg) by touch: "
              f"after {len(pose.steps)} touches, position error {metrics['position_error_mm']:.1f} mm, "
              f"yaw error {metrics['yaw_error_deg']:.1f} deg")


def _plot_curve(result: dict, path: Path) -> None:
    import matplotlib.pyplot as plt

    steps = np.arange(1, len(result["learned_by_step"]) + 1)
    figure, axis = plt.subplots(figsize=(5, 3.2))
    axis.plot(steps, result["learned_by_step"], marker="o", label="learned agent")
    axis.plot(steps, result["random_by_step"], marker=".", label="random baseline")
    axis.set_xlabel("step")
    axis.set_ylabel("test accuracy")
    axis.set_title("TactileMNIST-v0")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
