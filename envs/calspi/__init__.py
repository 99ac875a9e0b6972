"""Cal-SPI offline safe-policy-improvement tasks on MuJoCo (``gauntlet/CalSPI-<Domain>-v0``).

Each task bundles a MuJoCo env, a frozen baseline policy of middling quality, offline datasets
collected by that baseline with exploration noise, and a true-return evaluator. Importing this
package is light; MuJoCo loads only when a task is made.
"""
