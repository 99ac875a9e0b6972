"""Registers the latent monitor, its gated correction, the ``gauntlet latent`` command and the injection
corpora's data builder (string targets only: torch, transformers and scikit-learn load when an entry is used)."""

from __future__ import annotations

PACKAGE = "gauntlet.controllers.latent"


def register() -> None:
    from gauntlet.controllers.latent.corpora import DATA_DESCRIPTION, DATA_NAME, DATA_VERSION, PINS
    from gauntlet.registry import registry

    registry.add("monitor", "latent", f"{PACKAGE}.monitor:LatentMonitor",
                 "the chaos score (AEO, reconstructed) of each LLM-agent reply's hidden states, and whether it "
                 "crosses its threshold (config: [model=FILE from gauntlet latent fit, default the shipped "
                 "score of the offline model][, reader=MODEL])")
    registry.add("controller", "latent-correct", f"{PACKAGE}.correction:LatentCorrection",
                 "gates a correction on a latent score: a flagged LLM-agent reply is written again with the "
                 "hierarchy restated, its tool results withheld, or the injected pieces the span filter reads "
                 "stripped from them (config: [model=FILE][, method=restate|withhold|strip, threshold=X, "
                 "layer=N, reader=MODEL]; with strip: [gate=score|spans, filter=FILE])")
    registry.add("command", "latent", f"{PACKAGE}.cli:app",
                 "latent monitor: fit a detector on a model's hidden states, evaluate it on held-out texts, "
                 "score replies")
    registry.add("demo", "latent", f"{PACKAGE}.demo:run_demo",
                 "the chaos score and its gated correction live on two LLM-agent episodes (offline model, CPU)")
    registry.add("demo", "latent-strip", f"{PACKAGE}.demo:strip_demo",
                 "the probe-gated strip on an attacked disaster task, the 1.5B alone and corrected (minutes; "
                 "builds the disaster suites on first use)")
    registry.add("data", DATA_NAME, f"{PACKAGE}.corpora:build", DATA_DESCRIPTION, version=DATA_VERSION, inputs=(PINS,))
