"""Registers the oversight controllers, the ``gauntlet oversight`` command and the taxi expert's data
(string targets only: scikit-learn and the benchmarks load when an entry is used)."""

from __future__ import annotations

PACKAGE = "gauntlet.controllers.oversight"


def register() -> None:
    from gauntlet.registry import registry

    registry.add("controller", "oversight", f"{PACKAGE}.controller:OversightController",
                 "the action-conditioned prefix controller: per-action utility forests choose continue, hand over "
                 "to the expert (for good or k steps) or quit, before every step (config: model=FILE; an env without "
                 "its expert's input, and every `eval`, is refused: use `gauntlet oversight deploy`)")
    registry.add("controller", "oversight-scalar", f"{PACKAGE}.controller:ScalarRoutingController",
                 "the scalar baseline: a failure-risk score above a tuned threshold hands over to the expert "
                 "(config: model=FILE; runs where `oversight` runs)")
    registry.add("command", "oversight", f"{PACKAGE}.cli:app",
                 "prefix-branching oversight: collect branched rows, train and evaluate controllers, deploy them")
    registry.add("demo", "oversight", f"{PACKAGE}.demo:run_demo",
                 "branch Taxi prefixes into continue/intervene/quit, evaluate scalar routing against the "
                 "action-conditioned controller, deploy both through the runner")
    registry.add("data", "oversight-taxi-expert", f"{PACKAGE}.benchmarks.basic:build_taxi_expert",
                 "the Taxi expert's Q-table, learned by tabular Q-learning (seeded)", version="1")
