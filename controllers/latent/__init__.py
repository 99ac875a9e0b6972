"""The latent monitor (AEO, "Structure vs. Chaos", reconstructed) and its baselines: detect, from an agent
model's hidden states, that a response breaks the instruction hierarchy, and gate a correction on it.

Modules: ``hidden`` (hidden states of any transformers causal LM over a prompt and a response),
``hierarchy`` (the instruction-hierarchy suite and its rule checkers), ``corpora`` (injection corpora
shipped in wheels), ``monitors`` (the chaos score and the baseline detectors). Nothing heavy is
imported here: registering the family must stay cheap.
"""
