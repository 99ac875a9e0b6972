"""``gauntlet demo --only oversight``: prefix branching to a deployed controller on Taxi, in about a minute.

1. branch every prefix of 60 base episodes of a lapsing Taxi driver into each overseer action
   (continue, quit, hand over to the Q-learned expert for good or for 3 steps, roll back, a stronger
   driver), with the replay check on every row;
2. evaluate on held-out episodes: regret of the scalar risk router (raw and recalibrated) against the
   action-conditioned controller and the oracle, and the paired difference of the controller's regret
   from the best scalar router's and the best fixed policy's, with CIs over episodes;
3. deploy both, through the runner, on 10 new episodes, and record one overseen episode.
"""

from __future__ import annotations

from pathlib import Path

EPISODES = 60
ONLINE = 10


def run_demo(out_dir: Path, *, episodes: int = EPISODES, online_episodes: int = ONLINE) -> None:
    from gauntlet.controllers.oversight.collect import CollectSpec, collect, load_rows
    from gauntlet.controllers.oversight.metrics import (EvaluationConfig, comparison_lines, evaluate, markdown_table,
                                                        split_by_episode)
    from gauntlet.controllers.oversight.models import (ActionConditioned, RiskScore, ScalarRouter, failure_data,
                                                       save_model, utility_data)
    from gauntlet.controllers.oversight.online import compare_online
    from gauntlet.controllers.oversight.utility import UtilityConfig

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    print(f"Oversight demo: branching every prefix of {episodes} Taxi episodes into each overseer action")
    result = collect(CollectSpec(benchmark="taxi", episodes=tuple(range(episodes))), out / "rows", workers=2)
    rows = load_rows(out / "rows")
    print(f"{len(rows)} rows ({result.rows_per_s:.0f} rows/s on 2 workers); replay match "
          f"{result.stats.match_rate:.3f} (a restored prefix reproduces the original episode exactly)")
    train, test = split_by_episode(rows, 0.3, 0)
    table = evaluate(train, test, EvaluationConfig(controller_kinds=("rf",), n_boot=200), seed=0)
    print(markdown_table(table))
    print(comparison_lines(table))
    for name, values in table["calibration"].items():
        print(f"risk {name}: ECE {values['ece']:.3f}, AUROC {values['auroc']:.3f}")
    config = UtilityConfig()
    fit, calibration = split_by_episode(train, 0.3, 0)
    controller = ActionConditioned("rf").fit(*utility_data(train))
    model = save_model(out / "taxi-controller.joblib", controller, utility=config, benchmark="taxi")
    risk = RiskScore("rf").fit(*failure_data(fit))
    router = ScalarRouter(risk).fit(*utility_data(calibration, risk.feature_names))
    scalar = save_model(out / "taxi-controller.scalar.joblib", router, utility=config, benchmark="taxi")
    online = compare_online("taxi", model, range(100_000, 100_000 + online_episodes), scalar_model=scalar,
                            record_dir=out / "online")
    for name, summary in online["methods"].items():
        print(f"online {name}: mean utility {summary['mean_utility']:.3f}, success {summary['success_rate']:.2f}, "
              f"intervened in {summary['intervention_rate']:.0%} of episodes")
    print(f"overseen episodes (decisions and handovers recorded) in {out / 'online'}; "
          f"`gauntlet report {out / 'online'}` shows them")
