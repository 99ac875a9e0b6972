"""Prefix-branching oversight ("Calibration Is Not Control"): estimate, per prefix of an agent's
episode, the utility of each overseer action by running every action from the identical coupled
state, and learn a controller that picks the best one.

Modules: ``utility`` (overseer actions and the realised utility of a branch), ``lapsing``
(branchable lapsing base agents and experts), ``features`` (the prefix as the overseer sees it),
``protocol`` (branched rows of one episode), ``benchmarks`` (the benchmarks rows are collected on).
Nothing heavy is imported here: registering the family must stay cheap.
"""
