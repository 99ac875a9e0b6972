"""The in-process transformers backend (``hf:``), by its old single-module name.

Its parts live by job: ``hf_weights`` (loading a tokenizer and model once per file and device, the
prefix caches and watched layers the loaded model holds), ``gguf_conversion`` (a GGUF file as a
checked fp32 folder, kept in the data cache), ``hf_chat`` (``LocalChatModel``: chat rendering,
decoding from the prefix cache, fresh hidden-state reads) and ``kept_states`` (the states a reply
carries for a monitor). This module re-exports their public names.
"""

from gauntlet.agents.llm.chat_template import render_messages
from gauntlet.agents.llm.gguf_conversion import (
    CONVERSION_RECORD,
    DEQUANTISED_DATA,
    DEQUANTISED_VERSION,
    dequantised_folder,
    one_gguf_parse,
    save_dequantised,
)
from gauntlet.agents.llm.hf_chat import (
    PREFILL_CHUNK,
    HiddenStates,
    LocalChatModel,
    decoding_states,
    prefill,
    sampling_seed,
)
from gauntlet.agents.llm.hf_weights import PREFIXES_KEPT, LoadedWeights, load_weights, torch_threads
from gauntlet.agents.llm.kept_states import ReplyStates

__all__ = ["CONVERSION_RECORD", "DEQUANTISED_DATA", "DEQUANTISED_VERSION", "PREFILL_CHUNK", "PREFIXES_KEPT",
           "HiddenStates", "LoadedWeights", "LocalChatModel", "ReplyStates", "decoding_states", "dequantised_folder",
           "load_weights", "one_gguf_parse", "prefill", "render_messages", "sampling_seed", "save_dequantised",
           "torch_threads"]
