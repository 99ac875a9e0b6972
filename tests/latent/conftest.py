"""A tiny causal LM for the latent monitor's tests: two layers, random weights, the offline model's
tokenizer and chat template (read from the offline model's dequantised folder, shared with the LLM
tests through the run's data cache)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def tiny_model_folder(shared_data_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    from gauntlet.agents.llm.local_chat import dequantised_folder
    from gauntlet.agents.llm.offline_model import model_path

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GAUNTLET_HOME", str(shared_data_home))
        tokenizer = AutoTokenizer.from_pretrained(dequantised_folder(model_path()), local_files_only=True)
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
