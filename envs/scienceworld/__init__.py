"""ScienceWorld: science tasks in a text simulation as ``gauntlet/ScienceWorld-v0``, with the gold action
sequence in ``info["privileged"]`` and branching by verified replay. See ``env.ScienceWorldEnv``. This
module stays light: registering the family imports nothing heavy (the simulator starts when an env is made).
"""
