"""A GGUF model as a checked transformers folder (fp32 safetensors, tokenizer, chat template), kept.

transformers reads a GGUF file by dequantising it to fp32, so the model runs on CPU without a native
build and ``hidden_states`` can read every layer. Reading a GGUF file with transformers takes 90-100 s
on two cores (most of it parsing the file and converting its tokenizer, not the dequantisation; 65-70 s
with one parse, ``one_gguf_parse``), a saved fp32 folder 2 s: the folder is kept in the data cache
under the file's SHA-256, and checked before it is kept (``save_dequantised``).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from gauntlet.agents.llm.hf_weights import from_pretrained

DEQUANTISED_DATA = "llm-dequantised"
DEQUANTISED_VERSION = "1"
CONVERSION_RECORD = "conversion.json"
_PROBE = [{"role": "system", "content": "You answer in one word."}, {"role": "user", "content": "Name a colour."}]


def dequantised_folder(gguf: Path) -> Path:
    """A transformers folder (fp32 safetensors, tokenizer, chat template) holding exactly what
    transformers reads from ``gguf``, made once per file and kept in the data cache under the file's
    SHA-256: the cache checks its files on use, and the conversion is checked before it is kept."""
    from gauntlet.datacache import ensure_built, sha256_of

    digest = sha256_of(gguf)
    return ensure_built(DEQUANTISED_DATA, DEQUANTISED_VERSION, functools.partial(save_dequantised, gguf),
                        params={"gguf_sha256": digest})


@contextmanager
def one_gguf_parse() -> Iterator[None]:
    """One parsed ``gguf.GGUFReader`` per file for the block.

    This patches ``gguf.GGUFReader`` (the class ``transformers.modeling_gguf_pytorch_utils.
    load_gguf_checkpoint`` imports on each call) for the block, and restores it after. Why: transformers
    opens a GGUF file three times (config, tokenizer, weights), each time by path, and parses its header
    each time, 20 s of the conversion's 105 s here; it takes no reader from its caller, so there is no
    supported way to hand it one. The reader is a read-only memory map, so the three can share one.
    """
    import gguf

    original = gguf.GGUFReader
    readers: dict[tuple[str, str], Any] = {}

    def shared(path: str | os.PathLike[str], mode: Literal["r", "r+", "c"] = "r") -> Any:
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = original(path, mode)
        return readers[key]

    gguf.GGUFReader = shared  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        gguf.GGUFReader = original  # type: ignore[misc]


def save_dequantised(gguf: Path, folder: Path, gguf_sha256: str) -> None:
    """Write the GGUF model ``gguf`` to ``folder`` as a transformers folder, then load that folder back
    and refuse it unless it tokenises a probe conversation alike and gives bit-identical logits."""
    import torch
    from safetensors.torch import save_model

    from gauntlet.datacache import sha256_of

    if sha256_of(gguf) != gguf_sha256:
        raise ValueError(f"{gguf.name} changed while it was being converted; convert it again")
    with one_gguf_parse():
        tokenizer, model = from_pretrained(str(gguf.parent), {"gguf_file": gguf.name})
    config = model.config.to_dict()
    config.pop("quantization_config", None)  # the weights are plain fp32 now; transformers refuses to save a GGUF model
    type(model.config).from_dict(config).save_pretrained(folder)
    save_model(model, str(Path(folder) / "model.safetensors"))  # handles the tied embedding and output weights
    tokenizer.save_pretrained(folder)
    saved_tokenizer, saved_model = from_pretrained(str(folder), {})
    ids = tokenizer.apply_chat_template(_PROBE, add_generation_prompt=True, return_dict=False)
    same_ids = saved_tokenizer.apply_chat_template(_PROBE, add_generation_prompt=True, return_dict=False) == ids
    with torch.no_grad():
        difference = float((model(torch.tensor([ids])).logits - saved_model(torch.tensor([ids])).logits).abs().max())
    if not same_ids or saved_tokenizer.chat_template != tokenizer.chat_template or difference != 0.0:
        raise ValueError(f"{gguf.name} did not convert faithfully (same tokens: {same_ids}, largest logit "
                         f"difference {difference}); load it with a transformers version that does")
    record = {"gguf_file": gguf.name, "gguf_sha256": gguf_sha256, "probe_tokens": len(ids),
              "max_logit_difference": difference}
    (Path(folder) / CONVERSION_RECORD).write_text(json.dumps(record, indent=1))


__all__ = ["CONVERSION_RECORD", "DEQUANTISED_DATA", "DEQUANTISED_VERSION", "dequantised_folder", "one_gguf_parse",
           "save_dequantised"]
