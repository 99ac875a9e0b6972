"""Sentence embeddings for the non-latent baseline: the core's all-MiniLM-L6-v2 encoder
(``gauntlet.sentence_encoder``, shared with the LLM agent's tool scope), under the names the latent
monitor's detectors and experiments use."""

from __future__ import annotations

from gauntlet.sentence_encoder import SentenceEncoder, model_folder, sentence_encoder

__all__ = ["SentenceEncoder", "model_folder", "sentence_encoder"]
