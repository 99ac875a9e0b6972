"""Cal-SPI: calibrated safe policy improvement by gated model-based tree search.

Modules, in the paper's order: ``ensemble`` (probabilistic MLP ensemble with elites), ``calibration``
(Wilks tolerance bound on one-step model error), ``planner`` (gated continuous-action MCTS with
progressive widening), ``agent`` (baseline-relative switching at the root), ``ablations`` (no-gate
search, MOPO-style penalty, behaviour cloning). Importing this package loads no torch.
"""
