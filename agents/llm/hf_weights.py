"""A transformers tokenizer and causal LM loaded once per file and device in a process.

``load_weights`` loads a model folder, or a GGUF file through its dequantised fp32 folder
(``gauntlet.agents.llm.gguf_conversion``), without downloading anything. The ``LoadedWeights`` are
shared by every ``LocalChatModel`` of one file and device, so many episodes cost one load; calls on
shared weights take turns on its lock. They also hold what belongs to the loaded model rather than to
one conversation: the key-value caches of the last sequences read (``reusable_cache``/``keep``, the
prefix cache ``LocalChatModel`` starts from) and the layers a monitor asked it to ``watch``
(``gauntlet.agents.llm.kept_states``).
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gauntlet.agents.llm.kept_states import WatchedLayers

# Key-value caches of recent sequences kept per loaded model, for as many conversations as share it.
PREFIXES_KEPT = 4


@dataclass
class LoadedWeights(WatchedLayers):
    """A tokenizer and causal LM loaded from ``path`` (a ``.gguf`` file or a model folder) on ``device``,
    the lock its callers take turns on, and the key-value caches of the last sequences it read
    (``(token ids, cache)``, most recent last)."""

    tokenizer: Any
    model: Any
    lock: threading.Lock
    load_seconds: float
    path: str = ""
    device: str = "cpu"
    prefixes: list[tuple[list[int], Any]] = field(default_factory=list)
    watched: set[int] = field(default_factory=set)

    @property
    def template(self) -> str:
        return str(self.tokenizer.chat_template or "")

    @property
    def n_blocks(self) -> int:
        return int(self.model.config.num_hidden_layers)

    @property
    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def source(self) -> str:
        return f"transformers:{self.path}@{self.device}"

    def reusable_cache(self, prompt: list[int]) -> tuple[Any, int]:
        """A copy of the kept cache sharing the longest prefix with ``prompt``, cut to that prefix, and
        its length (None, 0 when none shares a token). At least the prompt's last token is left to read."""
        best, shared = None, 0
        for ids, cache in self.prefixes:
            length = next((index for index, (kept, new) in enumerate(zip(ids, prompt)) if kept != new),
                          min(len(ids), len(prompt)))
            if length > shared:
                best, shared = cache, length
        shared = min(shared, len(prompt) - 1)
        if best is None or shared <= 0:
            return None, 0
        cache = copy.deepcopy(best)
        cache.crop(shared - cache.get_seq_length())
        return cache, shared

    def keep(self, token_ids: list[int], cache: Any) -> None:
        """Keep ``cache`` (of the first ``cache.get_seq_length()`` of ``token_ids``) for later prompts."""
        self.prefixes = [*self.prefixes, (token_ids[:cache.get_seq_length()], cache)][-PREFIXES_KEPT:]


_loaded: dict[tuple[str, str], LoadedWeights] = {}
_loading = threading.Lock()


def load_weights(model_path: str, device: str = "cpu") -> LoadedWeights:
    """The tokenizer and model at ``model_path`` (a ``.gguf`` file or a model folder) on ``device``,
    loaded once per process; nothing is downloaded."""
    key = (str(Path(model_path).resolve()), device)
    with _loading:
        if key not in _loaded:
            _loaded[key] = _load(Path(key[0]), device)
        return _loaded[key]


def _load(path: Path, device: str) -> LoadedWeights:
    from gauntlet.agents.llm.gguf_conversion import dequantised_folder

    start = time.perf_counter()
    folder = dequantised_folder(path) if path.suffix == ".gguf" else path
    tokenizer, model = from_pretrained(str(folder), {})
    model.to(device).eval()
    return LoadedWeights(tokenizer, model, threading.Lock(), time.perf_counter() - start, str(path), device)


def from_pretrained(folder: str, extra: dict[str, str]) -> tuple[Any, Any]:
    """The tokenizer and fp32 causal LM in ``folder`` (``extra``: more ``from_pretrained`` arguments),
    from local files only."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, **extra)
    model: Any = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=torch.float32, **extra)
    return tokenizer, model.eval()


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """torch's intra-op thread count set to ``count`` for the block (it is per process: callers hold
    the weights' lock, so one call at a time changes it)."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


__all__ = ["PREFIXES_KEPT", "LoadedWeights", "from_pretrained", "load_weights", "torch_threads"]
