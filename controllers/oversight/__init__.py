"""Prefix-branching oversight ("Calibration Is Not Control"): estimate, per prefix of an agent's
episode, the utility of each overseer action by running every action from the identical coupled
state, and learn a controller that picks the best one.

Modules, in the order of the pipeline:

- ``utility``: the overseer actions and the realised utility of a branch.
- ``lapsing``: branchable experts and the lapsing base agents built from them.
- ``features``: the prefix as the overseer sees it (``History``) and the features read from it.
- ``benchmarks``: the benchmarks rows are collected on (a sub-package: corridor, taxi, text games, tool suites).
- ``protocol``: the branched rows of one base episode, every action run from the identical prefix.
- ``collect``: collections of rows at scale, resumable, on the fan-out ``gauntlet run`` uses.
- ``models``: the learners (action-conditioned utility regressors, the scalar risk and its routers).
- ``metrics``: control regret, calibration and the experiment's result table.
- ``controller``: the trained overseers as runner controllers (``oversight``, ``oversight-scalar``).
- ``online``: overseers deployed on held-out episodes through the runner, priced as rows are.
- ``cli``: the ``gauntlet oversight`` command (collect, evaluate, train, deploy).
- ``demo``: ``gauntlet demo --only oversight``, Taxi from branching to a deployed controller.
- ``registration``: the registry entries (controllers, command, demo, the taxi expert's data).

Nothing heavy is imported here: registering the family must stay cheap.
"""
