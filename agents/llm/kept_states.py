"""The states a local model kept while it wrote a reply, carried by the reply itself.

A monitor asks a loaded model to ``watch`` a layer (``WatchedLayers``); from then on every reply decoded
on it carries the states of the watched layers (and of the chat model's own ``keep_hidden_layers``) at
the positions that wrote the reply's tokens, as ``ReplyStates`` in the reply's ``response_metadata``
(``STATES_KEY``). Both local runtimes (transformers' ``LoadedWeights`` and llama.cpp's
``LlamaRuntime``) keep them this way. A monitor reads them off the reply it scores
(``ReplyStates.of``): no store is searched, so two identical replies each keep their own states.

Where the reply goes, its states go: in the agent's LangGraph checkpoint (the arrays as bytes, so
message equality and the checkpoint's serialiser need nothing special) and, in memory only, on the
reply's episode record (``carry_states``; an episode file never holds them). ``source`` names the
loaded model that decoded them (backend, file, and for transformers the device), so a monitor takes
them only when its reader is that model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

STATES_KEY = "hidden_states"
"""Where a reply's ``response_metadata`` carries its ``ReplyStates``."""
RECORD_ATTRIBUTE = "_reply_states"
"""The in-memory attribute of an episode record (``gauntlet.episode.Message``) that carries the reply's
states: underscored, so it is never one of the record's fields, and the episode writer writes fields only."""


@dataclass(frozen=True, eq=False)  # arrays: compared by identity, as numpy cannot say one truth
class ReplyStates:
    """The states of ``layers`` (numbered 0..``hidden_states - 1``, transformers' hidden-state numbering:
    0 the embeddings, L the final norm's output) at the positions that wrote a reply's tokens, each
    ``(reply tokens, hidden)`` float32, decoded by the loaded model ``source``."""

    source: str
    hidden_states: int
    layers: Mapping[int, np.ndarray]

    def layer(self, layer: int) -> np.ndarray | None:
        """The states of ``layer`` (negative: from the end); None when they were not kept."""
        return self.layers.get(layer % self.hidden_states)

    def as_metadata(self) -> dict[str, Any]:
        """The states as plain data for ``response_metadata`` (what ``of`` reads back)."""
        return {"source": self.source, "hidden_states": self.hidden_states,
                "layers": {number: {"shape": list(rows.shape), "dtype": str(rows.dtype),
                                    "data": np.ascontiguousarray(rows).tobytes()}
                           for number, rows in self.layers.items()}}

    @classmethod
    def of(cls, reply: Any) -> ReplyStates | None:
        """The states a reply carries: an ``AIMessage`` (its ``response_metadata``) or its episode record
        (``carry_states``); None when it carries none."""
        carried = getattr(reply, RECORD_ATTRIBUTE, None)
        if isinstance(carried, ReplyStates):
            return carried
        saved = (getattr(reply, "response_metadata", None) or {}).get(STATES_KEY)
        if saved is None:
            return None
        layers = {int(number): np.frombuffer(rows["data"], dtype=rows["dtype"]).reshape(rows["shape"])
                  for number, rows in saved["layers"].items()}
        return cls(str(saved["source"]), int(saved["hidden_states"]), layers)


def with_states(metadata: dict[str, Any], states: ReplyStates) -> dict[str, Any]:
    """A reply's ``response_metadata`` carrying ``states``."""
    return {**metadata, STATES_KEY: states.as_metadata()}


def carry_states(record: Any, reply: Any) -> Any:
    """``record`` (the episode record of ``reply``) carrying the reply's states in memory, for a monitor
    that sees the step's records; the record's fields, and so the episode file, are unchanged."""
    states = ReplyStates.of(reply)
    if states is not None:
        setattr(record, RECORD_ATTRIBUTE, states)
    return record


class WatchedLayers:
    """The layers a loaded model keeps for every reply decoded on it (see the module doc). A subclass
    says how many blocks the model has (``n_blocks``) and names itself (``source``)."""

    watched: set[int]

    @property
    def n_blocks(self) -> int:
        """How many transformer blocks the model has."""
        raise NotImplementedError

    @property
    def source(self) -> str:
        """What decoded a reply's states: the backend and file (``ReplyStates.source``)."""
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

    def reply_states(self, layers: Mapping[int, np.ndarray]) -> ReplyStates:
        """A reply's kept states (``layers`` by number) as decoded on this model."""
        return ReplyStates(self.source, self.n_blocks + 1, dict(layers))


__all__ = ["RECORD_ATTRIBUTE", "STATES_KEY", "ReplyStates", "WatchedLayers", "carry_states", "with_states"]
