"""A reader for the latent hooks' tests that needs no model file: a two-layer causal LM with random weights
behind a byte-level tokenizer (every byte one token, no merges) with a plain chat template, and a chaos
score fitted for it. Its hidden states are a real model's, of a model that knows nothing; building both
takes about a second, where the offline model's tokenizer (``conftest.tiny_model_folder``) takes 30 s."""

from __future__ import annotations

from pathlib import Path

import numpy as np

LAYER = 2
HIDDEN = 32
CHAT_TEMPLATE = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
                 "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def build_tiny_reader(folder: Path) -> Path:
    """Write the tokenizer and the model to ``folder`` (a transformers model folder) and return it."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tokenizer = Tokenizer(models.BPE(vocab={symbol: index for index, symbol in enumerate(alphabet)}, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(folder)
    config = Qwen2Config(vocab_size=len(fast), hidden_size=HIDDEN, intermediate_size=2 * HIDDEN, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=65536)
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(folder)
    return folder


def tiny_score_file(path: Path, reader: Path, threshold: float) -> Path:
    """A chaos score of the reader's layer 2 fitted on random states, with ``threshold``, saved to ``path``."""
    from gauntlet.controllers.latent.detectors import ChaosScore, Example
    from gauntlet.controllers.latent.hidden import SequenceStates
    from gauntlet.controllers.latent.monitor import save_chaos_score

    rng = np.random.default_rng(0)
    examples = [Example(SequenceStates(response={LAYER: rng.normal(size=(6, HIDDEN)).astype(np.float32)},
                                       prompt_end={}, boundary=None)) for _ in range(10)]
    score = ChaosScore(LAYER, rank=4).fit(examples, np.zeros(10, dtype=int))
    return save_chaos_score(path, score, threshold=threshold, model=reader.name)
