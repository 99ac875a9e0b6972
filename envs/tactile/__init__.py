"""gauntlet.envs.tactile: active tactile perception (Tactile MNIST suite) on a simulated GelSight Mini.

Light on purpose: importing this package imports nothing heavy. The envs live in
``gauntlet.envs.tactile.env``; the data builders in ``mnist3d``; the sensor in ``sensor``.
"""
