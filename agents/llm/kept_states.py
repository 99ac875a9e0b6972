"""The states a local model kept while it wrote its replies, for a monitor to read without a second pass.

A monitor asks the loaded model to ``watch`` a layer; from then on each reply decoded on it files
the states of that layer at the positions that wrote the reply's tokens under the reply's
``reply_key`` (its text and calls, as an episode's records keep them), and the monitor takes them
with ``kept_states``. Both local runtimes (transformers' ``LoadedWeights`` and llama.cpp's
``LlamaRuntime``) keep them this way. Two identical replies share a key and the later one's states
win: in the runner's order (decode, then observe) that is the reply observed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

# Replies whose kept hidden states stay available to a monitor, per loaded model.
KEPT_REPLIES = 32


def reply_key(message: Any) -> str:
    """What files a reply's kept states: its text and calls, as an episode's records keep them."""
    calls = [[call["name"], call["args"]] for call in message.tool_calls]
    return hashlib.sha256(json.dumps([message.text, calls], sort_keys=True, default=str).encode()).hexdigest()


class KeptStates:
    """The watched layers and the kept replies' states of one loaded model (see the module doc).
    A subclass says how many blocks the model has (``n_blocks``)."""

    watched: set[int]
    kept: list[tuple[str, dict[int, np.ndarray]]]

    @property
    def n_blocks(self) -> int:
        """How many transformer blocks the model has."""
        raise NotImplementedError

    def layer_number(self, layer: int) -> int:
        """``layer`` (negative: from the end) as a number in 0..L, transformers' hidden-state numbering
        (0 the embeddings, ``i`` block ``i``'s output, L the final norm's)."""
        count = self.n_blocks + 1
        if not -count <= layer < count:
            raise ValueError(f"layer {layer} is not one of this model's hidden states "
                             f"(0..{count - 1}, or -1..-{count})")
        return layer % count

    def watch(self, layers: Sequence[int]) -> None:
        """Keep, from now on, the states of ``layers`` of every reply decoded on this model."""
        self.watched |= {self.layer_number(layer) for layer in layers}

    def file_states(self, key: str, states: dict[int, np.ndarray]) -> None:
        self.kept = [*[(k, s) for k, s in self.kept if k != key], (key, states)][-KEPT_REPLIES:]

    def kept_states(self, key: str, layer: int) -> np.ndarray | None:
        """The states of ``layer`` (``(reply tokens, hidden)``) kept while the reply ``key`` was
        decoded, the latest reply of that key; None when they were not kept."""
        number = self.layer_number(layer)
        for kept_key, states in reversed(self.kept):
            if kept_key == key and number in states:
                return states[number]
        return None
