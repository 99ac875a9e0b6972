"""Train the learned tactile agent and evaluate it on the test split: accuracy/error by step.

    python experiments/tactile.py [--family TactileMNIST] [--updates 1200] [--num-envs 64]
                                        [--reuse 4] [--eval-episodes 512] [--out runs/tactile]

Trains the perception model (a CNN over the touch map, ``gauntlet.agents.tactile.model``) on the
training split with the coverage-scan exploration policy (``gauntlet.agents.tactile.scan``), then
evaluates the learned agent (scan + model) and the blind random baseline on the test split with
the env's own per-step scores. Writes ``<out>/<family>.json`` (curves, training losses, settings),
``<out>/<family>.png`` (curve by step) and ``<out>/<family>.pt`` (checkpoint). ``--smoke`` runs a
tiny version (used by the tests). ``--check-agent N`` trains nothing: it plays N test episodes of
the registered ``tactile-learned`` agent with ``<out>/<family>.pt`` in the single env (one episode
at a time, through ``gauntlet.rollout``, the saved half-precision weights) and prints its
final-step score, an independent check of the batched evaluation; with ``--random-moves`` it also
evaluates that checkpoint with uniform random moves instead of the scan (the policy's ablation).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

CLASSIFICATION_FAMILIES = {"TactileMNIST", "Starstruck", "Glyphs"}


def run(family: str, updates: int, num_envs: int, eval_episodes: int, out: Path, seed: int = 0,
        objects_per_split: int | None = None, threads: int = 1, reuse: int = 4) -> dict[str, Any]:
    import torch

    from gauntlet.agents.tactile import training

    # One thread by default: on a few busy cores, torch's thread pool contends with itself and the envs.
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    start = time.perf_counter()
    model, log = training.train(family, updates=updates, num_envs=num_envs, seed=seed,
                                objects_per_split=objects_per_split, reuse=reuse,
                                progress=lambda u, loss: print(f"update {u + 1}/{updates}: loss {loss:.3f}", flush=True)
                                if (u + 1) % 10 == 0 or u == 0 else None)
    train_s = time.perf_counter() - start
    eval_envs = min(num_envs, eval_episodes)
    learned = training.evaluate(model, family, "test", episodes=eval_episodes, num_envs=eval_envs,
                                objects_per_split=objects_per_split)
    baseline = training.evaluate(None, family, "test", episodes=eval_episodes, num_envs=eval_envs,
                                 objects_per_split=objects_per_split)
    metric = "accuracy" if family in CLASSIFICATION_FAMILIES else "error"
    import gymnasium as gym

    split = "test" if f"gauntlet/{family}-test-v0" in gym.registry else "all objects, held-out seeds"
    result = {"family": family, "metric": metric, "split": split, "updates": updates, "num_envs": num_envs,
              "reuse": reuse, "episodes_trained": -(-updates // reuse) * num_envs,
              "eval_episodes": (eval_episodes // eval_envs) * eval_envs,
              "objects_per_split": objects_per_split, "seed": seed, "train_seconds": train_s,
              "learned_by_step": learned.tolist(), "random_by_step": baseline.tolist(),
              "final_step": {"learned": float(learned[-1]), "random": float(baseline[-1])},
              "training_loss": log.losses}
    out.mkdir(parents=True, exist_ok=True)
    training.save(model, out / f"{family}.pt", family=family, step_limit=len(learned))
    _write_json(out / f"{family}.json", result)
    _plot(result, out / f"{family}.png")
    print(f"{family}: final-step {split} {metric} learned {learned[-1]:.3f}, random {baseline[-1]:.3f} "
          f"({result['episodes_trained']} training episodes, {train_s:.0f} s); wrote {out}")
    return result


def check_agent(family: str, checkpoint: Path, episodes: int, seed: int = 20_000,
                objects_per_split: int | None = None) -> float:
    """Mean final-step score (accuracy or error) of ``tactile-learned`` over single-env test episodes."""
    import gymnasium as gym
    import torch

    import gauntlet
    from gauntlet.runner import rollout

    torch.set_num_threads(1)
    env_id = f"gauntlet/{family}-test-v0"
    if env_id not in gym.registry:
        env_id = f"gauntlet/{family}-v0"
    env = gym.make(env_id, objects_per_split=objects_per_split)
    agent = gauntlet.make_agent("tactile-learned", checkpoint=str(checkpoint))
    key = "final_accuracy" if family in CLASSIFICATION_FAMILIES else "final_error"
    scores = [rollout(env, agent, seed=seed + i).steps[-1].info["stats"][key] for i in range(episodes)]
    score = float(np.mean(scores))
    print(f"{family}: tactile-learned ({checkpoint}) on {env_id}, {episodes} single-env episodes: "
          f"final-step {key.removeprefix('final_')} {score:.3f}")
    return score


def check_random_moves(family: str, checkpoint: Path, episodes: int, objects_per_split: int | None = None) -> float:
    """Final-step score of the checkpoint's model when the sensor moves at random (batched evaluation)."""
    import torch

    from gauntlet.agents.tactile import training

    torch.set_num_threads(1)
    model, _ = training.load(checkpoint)
    num_envs = min(64, episodes)
    curve = training.evaluate(model, family, "test", episodes=episodes, num_envs=num_envs,
                              objects_per_split=objects_per_split, random_moves=True)
    metric = "accuracy" if family in CLASSIFICATION_FAMILIES else "error"
    print(f"{family}: the same model with random moves, {(episodes // num_envs) * num_envs} test episodes: "
          f"final-step {metric} {curve[-1]:.3f}")
    return float(curve[-1])


def _write_json(path: Path, data: dict[str, Any]) -> None:
    scratch = path.with_suffix(".json.tmp")
    scratch.write_text(json.dumps(data, indent=1))
    os.replace(scratch, path)


def _plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.arange(1, len(result["learned_by_step"]) + 1)
    figure, axis = plt.subplots(figsize=(5, 3.2))
    axis.plot(steps, result["learned_by_step"], marker="o", label="learned (coverage scan + touch-map CNN)")
    axis.plot(steps, result["random_by_step"], marker=".", label="random baseline")
    axis.set_xlabel("step")
    axis.set_ylabel(f"test {result['metric']}")
    axis.set_title(f"{result['family']}-v0 ({result['split']})")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    scratch = path.with_suffix(".tmp.png")
    figure.savefig(scratch, dpi=120)
    plt.close(figure)
    os.replace(scratch, path)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="TactileMNIST",
                        choices=["TactileMNIST", "TactileMNISTCenterOfMass", "TactileMNISTVolume", "Starstruck",
                                 "Glyphs", "GlyphPose", "Toolbox", "ShapesCenterOfMass", "ShapesVolume"])
    parser.add_argument("--updates", type=int, default=1200)
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--reuse", type=int, default=4, help="gradient steps per collected batch of episodes")
    parser.add_argument("--eval-episodes", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--out", type=Path, default=Path("runs/tactile"))
    parser.add_argument("--smoke", action="store_true", help="a tiny run on 20 objects per split")
    parser.add_argument("--check-agent", type=int, metavar="N", default=0,
                        help="only play N single-env test episodes of tactile-learned with <out>/<family>.pt")
    parser.add_argument("--random-moves", action="store_true",
                        help="with --check-agent: also evaluate the checkpoint with random moves (batched)")
    args = parser.parse_args(argv)
    if args.check_agent:
        checkpoint = args.out / f"{args.family}.pt"
        if not checkpoint.is_file():
            parser.exit(2, f"error: no checkpoint {checkpoint}; train one first (without --check-agent)\n")
        result = {"final_step": check_agent(args.family, checkpoint, args.check_agent)}
        if args.random_moves:
            result["final_step_random_moves"] = check_random_moves(args.family, checkpoint, args.check_agent)
        return result
    if args.smoke:
        return run(args.family, updates=3, num_envs=4, eval_episodes=8, out=args.out, seed=args.seed,
                   objects_per_split=20, reuse=2)
    return run(args.family, args.updates, args.num_envs, args.eval_episodes, args.out, args.seed,
               threads=args.threads, reuse=args.reuse)


if __name__ == "__main__":
    main()
