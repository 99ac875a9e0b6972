"""Can the adaptive agent's lookahead tell a blank touch from one that feels the digit?

    python experiments/tactile_blank_probe.py --checkpoint experiments/results/tactile/TactileMNIST-adaptive-seed0.pt
        [--classifier experiments/results/tactile/TactileMNIST.pt] [--episodes 256] [--out DIR]

A precondition for skipping the lattice points the belief predicts blank (so that the lattice rule
could end early): plays the lattice rule (``adaptive.AdaptivePolicy`` over the scan's lattice) on
TactileMNIST **training** objects and, for every touch after the first, compares the gain the
lookahead predicted for the spot the sensor went to (the belief's normalised entropy before the
touch minus ``L_t`` read there) with what the touch felt (mean absolute colour change of the
tactile image; below ``BLANK_CHANGE`` the touch is blank). Prints the share of blank touches and
the AUC of the predicted gain for telling a touch that felt something from a blank one (0.5: no
better than chance, 1: perfect), overall and by touch range; writes
``<out>/<checkpoint stem>-blank-probe.json``. ``--smoke`` is the tests' size.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from gauntlet.fileio import write_atomically

BLANK_CHANGE = 1e-3  # mean |colour change| of a touch that felt nothing (the gel's own noise is far below)
SEED = 900_000  # training-object episodes, apart from every evaluation's seeds
RANGES = ((2, 6), (7, 11), (12, 16))  # touch ranges reported apart (inclusive)


def auc(score: np.ndarray, positive: np.ndarray) -> float:
    """Probability that a random positive scores above a random negative (ties count half)."""
    pos, neg = score[positive], score[~positive]
    if not len(pos) or not len(neg):
        return float("nan")
    return float((pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean())


def probe(checkpoint: Path, classifier: Path | None, episodes: int, num_envs: int,
          objects_per_split: int | None = None) -> dict[str, Any]:
    import torch

    from gauntlet.agents.tactile.adaptive import AdaptivePolicy, ClassifierWithLookahead, lookahead_at
    from gauntlet.agents.tactile.belief_training import load_belief
    from gauntlet.agents.tactile.touchmap import TouchMap, gel_background, touch_features
    from gauntlet.agents.tactile.training import load, make_scan, make_vector_env
    from gauntlet.envs.tactile.env import component_shape
    from gauntlet.envs.tactile.simulation import WORKSPACE_HALF_M

    torch.set_num_threads(1)
    belief = load_belief(checkpoint)[0]
    model = (belief if classifier is None else ClassifierWithLookahead(belief, load(classifier)[0])).eval()
    env = make_vector_env("TactileMNIST", "train", num_envs, objects_per_split)
    background = gel_background(component_shape(env.single_observation_space, "sensor_img")[:2])
    move_dims, length = component_shape(env.single_action_space, "action")[0], env.task.step_limit
    half = torch.from_numpy(WORKSPACE_HALF_M.astype(np.float32))
    gains, felt, touch = [], [], []
    with torch.no_grad():
        for batch in range(max(1, episodes // num_envs)):
            observation, _ = env.reset(seed=SEED + batch * num_envs)
            policy = AdaptivePolicy(move_dims, lattice=make_scan(env, "TactileMNIST").points)
            touches = TouchMap(num_envs, background)
            before: tuple[np.ndarray, torch.Tensor] | None = None  # (entropy, lookahead map) before the touch
            for step in range(length):
                change = touch_features(torch.from_numpy(observation["sensor_img"]), background)[:, 3:]
                if before is not None:  # the gain predicted before this touch, read where the sensor went
                    here = torch.from_numpy(observation["sensor_pos"][:, :2]) * half
                    gains.append(before[0] - lookahead_at(before[1], here[:, None])[:, 0].numpy())
                    felt.append(change.mean(dim=(1, 2, 3)).numpy())
                    touch.append(np.full(num_envs, step + 1))
                maps = touches.add(observation["sensor_img"], observation["sensor_pos"])
                logits, lookahead = model(maps)
                belief_p = logits.softmax(dim=1)
                entropy = (-(belief_p * belief_p.clamp_min(1e-12).log()).sum(dim=1) / np.log(logits.shape[1])).numpy()
                before = (entropy, lookahead)
                moves = policy.act(observation["sensor_pos"], maps, lookahead, length - 1 - step)
                observation, *_ = env.step({"action": moves, "prediction": logits.numpy().astype(np.float32)})
    gain, change_all, touches_at = np.concatenate(gains), np.concatenate(felt), np.concatenate(touch)
    blank = change_all < BLANK_CHANGE
    result: dict[str, Any] = {"checkpoint": str(checkpoint),
                              "classifier": None if classifier is None else str(classifier), "split": "train",
                              "episodes": len(gain) // (length - 1), "touches": len(gain),
                              "blank_share": float(blank.mean()), "auc_felt": auc(gain, ~blank), "by_touches": {}}
    for low, high in RANGES:
        chosen = (touches_at >= low) & (touches_at <= high)
        result["by_touches"][f"{low}-{high}"] = {"blank_share": float(blank[chosen].mean()),
                                                 "auc_felt": auc(gain[chosen], ~blank[chosen])}
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="an adaptive (belief) checkpoint")
    parser.add_argument("--classifier", type=Path, default=None, help="a scan-trained checkpoint that predicts")
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--out", type=Path, default=Path("runs/tactile"))
    parser.add_argument("--smoke", action="store_true", help="2 episodes on 20 objects per split")
    args = parser.parse_args(argv)
    for path in (args.checkpoint, args.classifier):
        if path is not None and not path.is_file():
            parser.exit(2, f"error: no checkpoint {path}; train one with experiments/tactile.py (--adaptive)\n")
    episodes, num_envs = (2, 2) if args.smoke else (args.episodes, min(32, args.episodes))
    result = probe(args.checkpoint, args.classifier, episodes, num_envs, 20 if args.smoke else None)
    print(f"{result['episodes']} training-object episodes, {result['touches']} touches after the first: "
          f"blank {result['blank_share']:.3f}; AUC of the predicted gain for a touch that felt something "
          f"{result['auc_felt']:.3f}")
    for span, row in result["by_touches"].items():
        print(f"touches {span}: blank {row['blank_share']:.3f}, AUC {row['auc_felt']:.3f}")
    args.out.mkdir(parents=True, exist_ok=True)
    write_atomically(args.out / f"{args.checkpoint.stem}-blank-probe.json", json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
