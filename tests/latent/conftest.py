"""A tiny causal LM for the latent monitor's tests: two layers, random weights, the offline model's
tokenizer and chat template. The tokenizer alone is read from the offline model's GGUF file (about
30 s, against about 100 s for the whole model's conversion, which the LLM tests wait for) and kept in
the run's shared data cache, so the processes of a run read it once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def save_offline_tokenizer(folder: Path, gguf_sha256: str) -> None:
    from transformers import AutoTokenizer

    from gauntlet.agents.llm.offline_model import model_path
    from gauntlet.datacache import sha256_of

    gguf = model_path("small")
    if sha256_of(gguf) != gguf_sha256:
        raise ValueError(f"{gguf.name} is not the file the tokenizer was asked of")
    AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name, local_files_only=True).save_pretrained(folder)


@pytest.fixture(scope="session")
def tiny_model_folder(shared_data_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    from gauntlet.agents.llm.offline_model import model_path
    from gauntlet.datacache import ensure_built, sha256_of

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GAUNTLET_HOME", str(shared_data_home))
        saved = ensure_built("test-offline-tokenizer", "1", save_offline_tokenizer,
                             params={"gguf_sha256": sha256_of(model_path("small"))})
        tokenizer = AutoTokenizer.from_pretrained(saved, local_files_only=True)
    folder = tmp_path_factory.mktemp("tiny-causal-lm")
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096)
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_weights(tiny_model_folder: Path) -> Any:
    from gauntlet.agents.llm.local_chat import load_weights

    return load_weights(str(tiny_model_folder))
