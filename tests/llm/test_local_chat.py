"""The in-process local model: renders tools through its own chat template, calls them, replays
identically, counts tokens, and gives the hidden states a direct transformers forward gives.

The template and tool-call tests run the offline default (Qwen2.5-Coder-0.5B-Instruct, the smallest
pinned model that makes valid calls), loaded once per test process: loading dequantises 491 MB of GGUF.
The mechanics that hold for any causal LM run on a tiny random Qwen2 with the same tokenizer.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from gauntlet.agents.llm.local_chat import LocalChatModel, render_messages, torch_threads
from gauntlet.agents.llm.text_calls import openai_tool_schemas

TOOLS = [
    {"name": "search_chemical", "description": "Find catalogue chemicals matching a name, abbreviation or CAS number.",
     "inputSchema": {"type": "object", "title": "search_chemicalArguments", "required": ["query"],
                     "properties": {"query": {"type": "string", "title": "Query", "description": "a name or CAS"}}}},
    {"name": "calculate", "description": "Evaluate arithmetic exactly as written.",
     "inputSchema": {"type": "object", "required": ["expression"],
                     "properties": {"expression": {"type": "string", "description": "e.g. '(12.5 + 3.2) / 0.85'"}}}},
]
QUESTION = [HumanMessage("Find the catalogue entry for the coupling reagent HATU.")]
earlier_call = AIMessage(content="",
                         tool_calls=[{"name": "search_chemical", "args": {"query": "HATU"}, "id": "call_0"}])
CONVERSATION = [SystemMessage("You price chemicals."), *QUESTION, earlier_call,
                ToolMessage('[{"id": 42, "name": "HATU"}]', tool_call_id="call_0")]

model_tests = pytest.mark.xdist_group("offline-model")  # one load, when the run groups tests


@pytest.fixture(scope="session")
def tiny_model(local_model, tmp_path_factory) -> LocalChatModel:
    """A 2-layer Qwen2 with random weights, the offline model's tokenizer and chat template, saved as a
    model folder: prefix reuse, chunked reading, sampling, the length cut and hidden states hold for
    any causal LM, and this one runs them in milliseconds instead of the 0.5B model's minutes."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    folder = tmp_path_factory.mktemp("tiny-qwen2")
    tokenizer = local_model.weights.tokenizer
    config = Qwen2Config(vocab_size=local_model.weights.model.config.vocab_size, hidden_size=32,
                         intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                         max_position_embeddings=4096)
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    model = LocalChatModel(model_path=str(folder), max_new_tokens=32)
    model.weights  # noqa: B018 - loaded here
    return model


def test_one_gguf_parse_shares_one_reader_per_file_for_the_block_and_restores_the_reader(monkeypatch, tmp_path):
    import gguf

    from gauntlet.agents.llm.local_chat import one_gguf_parse

    opened = []

    class Reader:
        def __init__(self, path, mode="r"):
            opened.append((str(path), mode))

    monkeypatch.setattr(gguf, "GGUFReader", Reader)
    first, second = tmp_path / "a.gguf", tmp_path / "b.gguf"
    with one_gguf_parse():
        readers = [gguf.GGUFReader(first), gguf.GGUFReader(str(first)), gguf.GGUFReader(second), gguf.GGUFReader(first)]
    assert readers[0] is readers[1] is readers[3] and readers[2] is not readers[0]
    assert opened == [(str(first), "r"), (str(second), "r")]
    assert gguf.GGUFReader is Reader and gguf.GGUFReader(first) is not readers[0]


def test_a_template_that_shows_tools_gets_them_as_tools_and_calls_as_structured_calls():
    schemas = openai_tool_schemas(TOOLS)
    rendered = render_messages(CONVERSATION, schemas, template="{{ tools }} {{ message.tool_calls }}")
    assert [entry["role"] for entry in rendered] == ["system", "user", "assistant", "tool"]
    assert rendered[0]["content"] == "You price chemicals."
    assert rendered[2]["tool_calls"] == [{"type": "function",
                                          "function": {"name": "search_chemical", "arguments": {"query": "HATU"}}}]
    assert rendered[3] == {"role": "tool", "content": '[{"id": 42, "name": "HATU"}]', "tool_call_id": "call_0"}


def test_a_template_without_tools_gets_them_in_the_system_message_and_calls_as_text():
    schemas = openai_tool_schemas(TOOLS)
    rendered = render_messages(CONVERSATION, schemas, template="{{ message.content }}")
    assert rendered[0]["content"].startswith("You price chemicals.\n\n# Tools")
    assert json.dumps(schemas[0]) in rendered[0]["content"]
    assert "title" not in json.dumps(schemas)  # schema titles are noise the model would read
    written = '<tool_call>\n{"name": "search_chemical", "arguments": {"query": "HATU"}}\n</tool_call>'
    assert rendered[2]["content"] == written
    assert "tool_calls" not in rendered[2]
    assert render_messages(QUESTION, schemas, template="")[0]["role"] == "system"


@model_tests
def test_a_gguf_model_is_kept_as_a_checked_fp32_folder_and_loads_from_it(offline_gguf, offline_home, local_model,
                                                                         monkeypatch):
    from gauntlet.agents.llm.local_chat import CONVERSION_RECORD, dequantised_folder, load_weights
    from gauntlet.datacache import sha256_of

    monkeypatch.setenv("GAUNTLET_HOME", str(offline_home))
    folder = dequantised_folder(offline_gguf)
    record = json.loads((folder / CONVERSION_RECORD).read_text())
    assert record == {"gguf_file": offline_gguf.name, "gguf_sha256": sha256_of(offline_gguf),
                      "probe_tokens": record["probe_tokens"], "max_logit_difference": 0.0}
    assert {"model.safetensors", "config.json", "tokenizer.json"} <= {path.name for path in folder.iterdir()}
    assert "quantization_config" not in json.loads((folder / "config.json").read_text())
    assert load_weights(str(folder)).model.num_parameters() == local_model.weights.model.num_parameters()


@model_tests
def test_earlier_calls_and_results_reach_the_prompt_through_the_models_own_template(local_model):
    tokenizer = local_model.weights.tokenizer
    prompt = tokenizer.decode(local_model.prompt_ids(CONVERSATION, openai_tool_schemas(TOOLS)))
    assert "You price chemicals." in prompt and '"name": "calculate"' in prompt
    assert '<tool_call>\n{"name": "search_chemical", "arguments": {"query": "HATU"}}\n</tool_call>' in prompt
    assert '[{"id": 42, "name": "HATU"}]' in prompt and prompt.endswith("<|im_start|>assistant\n")


@model_tests
def test_a_tool_request_gets_a_parsed_call_and_the_same_reply_every_time(local_model):
    bound = local_model.bind_tools(TOOLS)
    first, second = bound.invoke(QUESTION), bound.invoke(QUESTION)
    assert [call["name"] for call in first.tool_calls] == ["search_chemical"]
    assert "HATU" in first.tool_calls[0]["args"]["query"] and first.tool_calls[0]["id"] == "call_0"
    assert first.invalid_tool_calls == []
    assert (second.content, second.tool_calls, second.response_metadata["text"]) == (
        first.content, first.tool_calls, first.response_metadata["text"])
    prompt = local_model.prompt_ids(QUESTION, openai_tool_schemas(TOOLS))
    usage = first.usage_metadata
    assert usage is not None and usage["input_tokens"] == len(prompt)
    assert 0 < usage["output_tokens"] <= local_model.max_new_tokens
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert first.response_metadata["finish_reason"] == "stop" and first.response_metadata["latency_ms"] > 0


@model_tests
def test_a_prompt_that_extends_a_recent_one_reads_only_what_is_new_and_gets_the_same_reply(tiny_model):
    conversation = [*QUESTION, earlier_call, ToolMessage('[{"id": 42, "name": "HATU"}]', tool_call_id="call_0")]
    full_read = LocalChatModel(model_path=tiny_model.model_path, max_new_tokens=32, reuse_prefix=False)
    expected = full_read.bind_tools(TOOLS).invoke(conversation)
    assert expected.usage_metadata is not None
    assert expected.usage_metadata["input_token_details"]["cache_read"] == 0

    reusing = LocalChatModel(model_path=tiny_model.model_path, max_new_tokens=32)
    reusing.bind_tools(TOOLS).invoke(QUESTION)  # the step before: its sequence is a prefix of this prompt
    reply = reusing.bind_tools(TOOLS).invoke(conversation)
    question_prompt = tiny_model.prompt_ids(QUESTION, openai_tool_schemas(TOOLS))
    assert reply.usage_metadata is not None
    assert reply.usage_metadata["input_token_details"]["cache_read"] >= len(question_prompt)
    assert (reply.content, reply.tool_calls, reply.invalid_tool_calls) == (
        expected.content, expected.tool_calls, expected.invalid_tool_calls)


@model_tests
def test_sampling_draws_from_the_episode_seed_same_seed_same_reply_other_seeds_other_replies(tiny_model):
    sampling = LocalChatModel(model_path=tiny_model.model_path, max_new_tokens=12, temperature=1.5)
    poem = [HumanMessage("Write a short poem about the sea.")]

    def text(seed):
        return sampling.invoke(poem, config={"metadata": {"sampling_seed": seed}}).response_metadata["text"]

    first = text(1)
    assert text(1) == first
    assert len({first, text(2), text(3)}) > 1
    greedy = LocalChatModel(model_path=tiny_model.model_path, max_new_tokens=12)
    assert greedy.invoke(poem, config={"metadata": {"sampling_seed": 2}}).response_metadata["text"] == \
        greedy.invoke(poem, config={"metadata": {"sampling_seed": 3}}).response_metadata["text"]


@model_tests
def test_a_long_prompt_read_in_chunks_gets_the_reply_a_whole_read_gets(tiny_model, monkeypatch):
    from gauntlet.agents.llm import hf_chat

    conversation = [*QUESTION, earlier_call, ToolMessage('[{"id": 42, "name": "HATU"}]', tool_call_id="call_0")]
    model = LocalChatModel(model_path=tiny_model.model_path, max_new_tokens=24, reuse_prefix=False)
    whole = model.bind_tools(TOOLS).invoke(conversation)
    read = []
    original = hf_chat.prefill

    def prefill(*args):
        cache = original(*args)
        read.append(cache.get_seq_length())
        return cache

    monkeypatch.setattr(hf_chat, "PREFILL_CHUNK", 97)
    monkeypatch.setattr(hf_chat, "prefill", prefill)
    chunked = model.bind_tools(TOOLS).invoke(conversation)
    prompt = tiny_model.prompt_ids(conversation, openai_tool_schemas(TOOLS))
    assert read == [97 * ((len(prompt) - 1) // 97)]  # the last piece (at most a chunk) is left to generate
    assert (chunked.content, chunked.tool_calls, chunked.response_metadata["text"]) == (
        whole.content, whole.tool_calls, whole.response_metadata["text"])


@model_tests
def test_a_reply_cut_at_max_new_tokens_says_so(tiny_model):
    short = LocalChatModel(model_path=tiny_model.model_path, max_new_tokens=3)
    assert short.weights is tiny_model.weights  # one load per file and device in a process
    reply = short.invoke([HumanMessage("Write a long poem about the sea.")])
    assert reply.usage_metadata is not None and reply.usage_metadata["output_tokens"] == 3
    assert reply.response_metadata["finish_reason"] == "length"
    assert reply.tool_calls == []


@model_tests
def test_hidden_states_are_those_of_a_direct_transformers_forward(tiny_model):
    import torch

    weights = tiny_model.weights
    response = '{"name": "search_chemical", "arguments": {"query": "HATU"}}'
    states = tiny_model.hidden_states(QUESTION, response, tools=TOOLS, layers=(0, 1, -1))

    rendered = render_messages(QUESTION, openai_tool_schemas(TOOLS), weights.template)
    prompt = weights.tokenizer.apply_chat_template(rendered, tools=openai_tool_schemas(TOOLS),
                                                   add_generation_prompt=True, tokenize=True, return_dict=True)
    token_ids = list(prompt["input_ids"]) + weights.tokenizer(response, add_special_tokens=False)["input_ids"]
    with torch_threads(tiny_model.threads), torch.inference_mode():  # same threads, same float sums
        direct = weights.model(torch.tensor([token_ids]), output_hidden_states=True).hidden_states

    assert states.token_ids == token_ids and states.prompt_length == len(prompt["input_ids"])
    assert len(direct) == weights.model.config.num_hidden_layers + 1
    for layer in (0, 1, -1):
        assert states.layers[layer].shape == (len(token_ids), weights.model.config.hidden_size)
        np.testing.assert_allclose(states.layers[layer], direct[layer][0].numpy(), rtol=1e-5, atol=1e-4)
    assert not np.allclose(states.layers[1], states.layers[-1])
