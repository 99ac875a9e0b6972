"""TextWorld: generated text adventures as ``gauntlet/TextWorld-v0``, with the expert's next command in
``info["privileged"]`` and native snapshot/restore. See ``env.TextWorldEnv``. This module stays light:
registering the family imports nothing heavy (TextWorld loads when an env is made).
"""
