"""The llama.cpp backend: the prompt transformers renders, states that match a transformers forward,
replies that are one valid call under the grammar, and a prefix cache that changes no reply.

These run the small offline model (Qwen2.5-Coder-0.5B-Instruct Q4_K_M) on llama.cpp, one load per test
process; the transformers reference is the same file dequantised (the ``local_model`` fixture).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from gauntlet.agents.llm.call_grammar import CallGrammarError, call_grammar
from gauntlet.agents.llm.calls import ToolSpec
from gauntlet.agents.llm.chat_template import render_messages
from gauntlet.agents.llm.graph import ConversationTooLong
from gauntlet.agents.llm.kept_states import ReplyStates
from gauntlet.agents.llm.llama_chat import LlamaChatModel
from gauntlet.agents.llm.llama_runtime import PROMPT_BATCH, ContextFullError, LlamaRuntime
from gauntlet.agents.llm.models import make_chat_model
from gauntlet.agents.llm.text_calls import openai_tool_schemas
from gauntlet.errors import UserError

pytestmark = pytest.mark.xdist_group("offline-model")

TOOLS = [
    {"name": "search_chemical", "description": "Find catalogue chemicals matching a name, abbreviation or CAS number.",
     "inputSchema": {"type": "object", "required": ["query"],
                     "properties": {"query": {"type": "string", "description": "a name or CAS"}}}},
    {"name": "buy", "description": "The cost of buying an amount of a catalogue chemical.",
     "inputSchema": {"type": "object", "required": ["chemical_id", "amount"],
                     "properties": {"chemical_id": {"type": "integer"},
                                    "amount": {"$ref": "#/$defs/Amount"}},
                     "$defs": {"Amount": {"type": "object", "required": ["value", "unit"],
                                          "properties": {"value": {"type": "number"},
                                                         "unit": {"enum": ["g", "mg", "mmol"]}}}}}},
    {"name": "calculate", "description": "Evaluate arithmetic exactly as written.",
     "inputSchema": {"type": "object", "required": ["expression"],
                     "properties": {"expression": {"type": "string", "description": "e.g. '(12.5 + 3.2) / 0.85'"}}}},
]
SPECS = {spec.name: spec for spec in (ToolSpec(t["name"], t["description"], t["inputSchema"]) for t in TOOLS)}
CONVERSATION = [
    SystemMessage("You price chemicals with the tools. Reply with exactly one tool call."),
    HumanMessage("Find HATU, then buy 250 mg of it."),
    AIMessage(content="", tool_calls=[{"name": "search_chemical", "args": {"query": "HATU"}, "id": "call_0"}]),
    ToolMessage('[{"id": 42, "name": "HATU"}]', tool_call_id="call_0"),
]
LAYERS = (1, 12, -1)
# llama.cpp's matrix kernels differ by CPU: with AVX-512 every position read >= 0.9994; with AVX2 only (a wheel
# built for such a CPU), one position of a fresh 480-token read measured 0.99897. A wrong layer or position
# reads far lower.
TOLERANCE_COSINE = 0.998


@pytest.fixture(scope="session")
def llama_model(offline_gguf) -> LlamaChatModel:
    model = LlamaChatModel(model_path=str(offline_gguf), max_new_tokens=64)
    model.weights  # noqa: B018 - load once here
    return model


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1))


def test_the_prompt_is_the_text_and_tokens_transformers_makes_of_the_conversation(llama_model, local_model):
    schemas = openai_tool_schemas(TOOLS)
    assert llama_model.prompt_ids(CONVERSATION, schemas) == local_model.prompt_ids(CONVERSATION, schemas)
    assert render_messages(CONVERSATION, schemas, llama_model.weights.template)[2]["tool_calls"]


def test_states_kept_while_decoding_and_read_afresh_match_a_transformers_forward(llama_model, local_model):
    import torch

    runtime = llama_model.weights
    prompt = llama_model.prompt_ids(CONVERSATION, openai_tool_schemas(TOOLS))
    generation = runtime.generate(prompt, max_new_tokens=24, layers=LAYERS)
    sequence = prompt + generation.tokens
    with torch.no_grad():
        reference = local_model.weights.model(torch.tensor([sequence]), output_hidden_states=True).hidden_states
    fresh = runtime.hidden_states(sequence, LAYERS)
    for layer in LAYERS:
        number = runtime.layer_number(layer)
        expected = reference[layer][0].numpy()
        kept = generation.states[number]
        # The passes that wrote each token: the prompt's last position, then each token's but the end's.
        assert len(kept) == len(generation.tokens) - int(generation.finished)
        assert cosines(kept, expected[len(prompt) - 1:len(prompt) - 1 + len(kept)]).min() >= TOLERANCE_COSINE
        assert cosines(fresh[number], expected).min() >= TOLERANCE_COSINE


def test_a_reply_carries_the_states_of_its_own_decoding_pass_as_a_transformers_forward_gives_them(llama_model,
                                                                                                   local_model):
    import torch

    runtime = llama_model.weights
    runtime.watch((12,))
    plain = LlamaChatModel(model_path=llama_model.model_path, max_new_tokens=24, constrain_calls=False)
    reply = plain.invoke(CONVERSATION)
    carried = ReplyStates.of(reply)
    assert carried is not None and carried.source == runtime.source
    kept = carried.layer(12)
    prompt = plain.prompt_ids(CONVERSATION)
    # Prose re-tokenises to the tokens written (a call under the grammar need not: another decode would be
    # needed, and each decode changes the cache the sampling test below reads its prompt into).
    written = runtime.tokenize(reply.response_metadata["text"])
    assert runtime.detokenize(written) == reply.response_metadata["text"]
    assert kept is not None and kept.shape == (len(written), 896)
    with torch.no_grad():
        reference = local_model.weights.model(torch.tensor([prompt + written]), output_hidden_states=True).hidden_states
    # The passes that wrote each token: the prompt's last position, then each written token's.
    expected = reference[12][0].numpy()[len(prompt) - 1:len(prompt) - 1 + len(kept)]
    assert cosines(kept, expected).min() >= TOLERANCE_COSINE
    read = llama_model.hidden_states(CONVERSATION, reply.response_metadata["text"], tools=TOOLS, layers=(12,))
    assert read.layers[12].shape[0] == len(read.token_ids)


def test_a_constrained_reply_is_exactly_one_call_valid_under_its_tools_schema(llama_model):
    bound = llama_model.bind_tools(TOOLS)
    for question in ("Buy 250 mg of chemical 42.", "What is 12.5 times 3? Use the calculator.",
                     "Say hello in prose, do not call any tool."):
        reply = bound.invoke([SystemMessage("You use tools."), HumanMessage(question)])
        assert reply.invalid_tool_calls == [] and len(reply.tool_calls) == 1, reply
        call = reply.tool_calls[0]
        assert SPECS[call["name"]].argument_problem(call["args"]) is None
        assert reply.response_metadata["constrained"] is True


def test_a_thought_reply_is_one_line_of_words_then_exactly_one_valid_call(offline_gguf):
    thinking = LlamaChatModel(model_path=str(offline_gguf), max_new_tokens=128, thought=True).bind_tools(TOOLS)
    reply = thinking.invoke([SystemMessage("You use tools."), HumanMessage("Buy 250 mg of chemical 42.")])
    assert reply.invalid_tool_calls == [] and len(reply.tool_calls) == 1, reply
    assert SPECS[reply.tool_calls[0]["name"]].argument_problem(reply.tool_calls[0]["args"]) is None
    line = reply.text.strip()
    assert line.startswith("Thought: ") and "\n" not in line and "<" not in line and len(line) > len("Thought: ")
    # The grammar's thought rule is one line before the tags; without the option there is none.
    assert "thought ::=" in call_grammar(list(SPECS.values()), thought=True)
    assert "thought ::=" not in call_grammar(list(SPECS.values()))


def test_an_unconstrained_model_may_reply_in_prose(offline_gguf):
    free = LlamaChatModel(model_path=str(offline_gguf), max_new_tokens=16, constrain_calls=False)
    reply = free.invoke([HumanMessage("Say the word hello and nothing else.")])
    assert reply.tool_calls == [] and "hello" in reply.text.lower()


def test_a_prompt_that_extends_an_earlier_one_reads_only_what_is_new_and_gets_the_same_reply(offline_gguf,
                                                                                              llama_model):
    runtime = llama_model.weights
    prompt = llama_model.prompt_ids(CONVERSATION, openai_tool_schemas(TOOLS))
    fresh = runtime.generate(prompt, max_new_tokens=24, reuse_prefix=False)
    first = runtime.generate(prompt[:-40], max_new_tokens=4)
    extended = runtime.generate(prompt, max_new_tokens=24)
    assert extended.reused >= len(prompt) - 40 - 1 and extended.tokens == fresh.tokens
    assert first.tokens  # the shorter prompt was read and answered


def test_a_kept_sequence_serves_a_prompt_after_another_one_came_between(llama_model):
    runtime = llama_model.weights
    a = llama_model.prompt_ids([HumanMessage("Name a colour.")])
    b = llama_model.prompt_ids([SystemMessage("You count."), HumanMessage("Count to three.")])
    runtime.generate(a, max_new_tokens=4)
    runtime.generate(b, max_new_tokens=4)
    again = runtime.generate(a, max_new_tokens=4)
    assert again.reused == len(a) - 1


def test_a_reply_without_the_prefix_cache_has_a_new_runtime_s_numbers_whatever_the_cache_held(offline_gguf,
                                                                                              llama_model):
    # Read after a cached prefix, or beside kept sequences, a prompt's states differ from an empty cache's
    # by about 2 % at the last layer (the module doc); without the prefix cache they must be a new runtime's,
    # to the bit, so a run made that way replays exactly.
    runtime = llama_model.weights
    first = llama_model.prompt_ids(CONVERSATION[:2], openai_tool_schemas(TOOLS))
    written = runtime.generate(first, max_new_tokens=16)
    follow = first + written.tokens + runtime.tokenize("<|im_end|>\n<|im_start|>user\nAnd the price?<|im_end|>\n"
                                                      "<|im_start|>assistant\n")
    runtime.generate(runtime.tokenize("<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\n"),
                     max_new_tokens=4)
    cached = runtime.generate(follow, max_new_tokens=8, layers=(-1,))
    assert cached.reused > len(first)
    alone = runtime.generate(follow, max_new_tokens=8, layers=(-1,), reuse_prefix=False)
    fresh = LlamaRuntime(offline_gguf, threads=runtime.threads, context=4096).generate(
        follow, max_new_tokens=8, layers=(-1,), reuse_prefix=False)
    last = runtime.layer_number(-1)
    assert alone.reused == 0 and alone.tokens == fresh.tokens
    assert np.array_equal(alone.states[last], fresh.states[last])
    assert runtime._kept_order == []  # nothing read without the cache is kept for later prompts


def test_an_exact_reply_has_a_new_runtime_s_numbers_and_reads_only_what_whole_batches_do_not_hold(
        offline_gguf, llama_model):
    # The exact mode keeps the bits of an empty cache's read (reuse_prefix=False) while reusing the whole
    # prompt batches such a read shares with the cache, whatever other calls came between.
    runtime = llama_model.weights
    fresh_runtime = LlamaRuntime(offline_gguf, threads=runtime.threads, context=4096)
    last = runtime.layer_number(-1)
    system = "<|im_start|>system\nYou price chemicals. " + " ".join(
        f"Tool {index}: the price of item {index} per gram." for index in range(70)) + "<|im_end|>\n"
    first = runtime.tokenize(system + "<|im_start|>user\nWhat do 5 g of item 7 cost?<|im_end|>\n"
                                      "<|im_start|>assistant\n")
    assert len(first) > 2 * PROMPT_BATCH
    opening = runtime.generate(first, max_new_tokens=12, exact=True)
    follow = first + opening.tokens + runtime.tokenize("\n<|im_start|>user\nResult: 12.5 dollars.<|im_end|>\n"
                                                       "<|im_start|>assistant\n")

    alone = fresh_runtime.generate(follow, max_new_tokens=8, layers=(-1,), reuse_prefix=False)

    def same_as_fresh(written):
        return written.tokens == alone.tokens and np.array_equal(written.states[last], alone.states[last])

    runtime.generate(runtime.tokenize(system + "<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\n"),
                     max_new_tokens=4, exact=True)
    reused = runtime.generate(follow, max_new_tokens=8, layers=(-1,), exact=True)
    assert reused.reused == len(first) // PROMPT_BATCH * PROMPT_BATCH and same_as_fresh(reused)
    # A call that reuses as the default does (another layout, a reply decoded a token at a time) leaves nothing an
    # exact call may reuse: the next one reads from an empty cache.
    cached = runtime.generate(follow, max_new_tokens=8, layers=(-1,))
    assert cached.reused > len(first)
    after = runtime.generate(follow, max_new_tokens=8, layers=(-1,), exact=True)
    assert after.reused == 0 and same_as_fresh(after) and runtime._kept_order == []
    # The persisted system prefix, cut to whole batches: a new process loads it (the second one here) and still
    # has a new runtime's numbers.
    shared = len(runtime.tokenize(system))
    for _ in range(2):
        process = LlamaRuntime(offline_gguf, threads=runtime.threads, context=4096)
        loaded = process.generate(follow, max_new_tokens=8, layers=(-1,), exact=True, persist_prefix=shared)
        assert loaded.reused == shared // PROMPT_BATCH * PROMPT_BATCH and same_as_fresh(loaded)
    assert process.prefix_loads == 1


def test_a_full_cache_drops_kept_sequences_and_changes_no_reply(offline_gguf):
    small = LlamaRuntime(offline_gguf, context=768, threads=1, kept_prefixes=3)
    prompts = [small.tokenize(f"<|im_start|>user\nStory {index}: " + "the cat sat on the mat. " * 30 +
                              "<|im_end|>\n<|im_start|>assistant\n") for index in range(5)]
    for prompt in prompts:
        assert small.generate(prompt, max_new_tokens=8).tokens == \
            small.generate(prompt, max_new_tokens=8, reuse_prefix=False).tokens
    with pytest.raises(ContextFullError, match="do not fit"):
        small.generate(prompts[0] * 4, max_new_tokens=8)


def test_sampling_draws_from_the_episode_seed(offline_gguf, tmp_path):
    # Without the prefix cache: a prompt read in one batch and one read a token at a time after a cached
    # prefix give logits equal only up to float rounding, which a sample at temperature 1.2 can tell apart.
    # On a runtime of its own (the file linked under another name): where the sequences other tests left
    # in the shared runtime's cache sit shifts that rounding too.
    own = tmp_path / offline_gguf.name
    os.link(offline_gguf, own)
    sampler = LlamaChatModel(model_path=str(own), max_new_tokens=12, temperature=1.2, constrain_calls=False,
                             reuse_prefix=False)
    question = [HumanMessage("Write one word about the sea.")]

    def reply(seed: int) -> str:
        return sampler.invoke(question, config={"metadata": {"sampling_seed": seed}}).text

    assert reply(1) == reply(1)
    assert len({reply(seed) for seed in range(2, 7)}) > 1
    # A min-p near 1 keeps only the most likely token: every seed then writes the greedy reply.
    greedy = sampler.model_copy(update={"temperature": 0.0}).invoke(question).text
    strict = sampler.model_copy(update={"min_p": 0.999})
    assert {strict.invoke(question, config={"metadata": {"sampling_seed": seed}}).text for seed in range(2, 7)} == \
        {greedy}


def test_two_tools_with_same_named_definitions_keep_their_own_rules():
    other = ToolSpec("sell", "sell", {"type": "object", "required": ["amount"],
                                      "properties": {"amount": {"$ref": "#/$defs/Amount"}},
                                      "$defs": {"Amount": {"type": "string"}}})
    rules = dict(line.split(" ::= ", 1) for line in call_grammar([SPECS["buy"], other]).splitlines())
    assert rules["call-sell-arguments-amount"] == "string"  # sell's own Amount, not buy's object
    assert rules[rules["call-buy-arguments-amount"]].startswith('"{"')


def test_a_schema_that_has_no_grammar_names_its_tool():
    remote = ToolSpec("fetch", "", {"type": "object", "properties": {"x": {"$ref": "https://example.org/s.json"}}})
    with pytest.raises(CallGrammarError, match="'fetch'"):
        call_grammar([remote])


def test_a_pattern_the_converter_cannot_read_is_left_to_the_schema_check():
    smiles = ToolSpec("mass", "", {"type": "object", "required": ["smiles"],
                                   "properties": {"smiles": {"type": "string", "pattern": "\\S"},
                                                  "title": {"type": "string", "description": "a note"}}})
    rules = dict(line.split(" ::= ", 1) for line in call_grammar([smiles]).splitlines())
    assert rules["call-mass-arguments-smiles-kv"].endswith(" string")
    assert rules["call-mass-arguments-title-kv"].endswith(" string")  # an argument named like a keyword stays
    assert smiles.argument_problem({"smiles": "  "}) is not None  # the decoded call is still checked


def test_a_file_llama_cpp_cannot_load_is_one_user_error(tmp_path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(UserError, match="could not load broken.gguf"):
        make_chat_model(f"llama:{broken}").weights  # type: ignore[attr-defined]  # noqa: B018 - loads
    with pytest.raises(UserError, match="is not a .gguf file"):
        make_chat_model(f"llama:{tmp_path / 'missing.gguf'}")


def test_a_reply_that_repeats_a_call_to_avoid_is_drawn_again_and_counted(llama_model, monkeypatch):
    from gauntlet.agents.llm.llama_chat import REDRAW_MIN_P

    question = [SystemMessage("You use tools."), HumanMessage("Buy 250 mg of chemical 42.")]
    greedy = llama_model.bind_tools(TOOLS).invoke(question)
    (call,) = greedy.tool_calls
    avoided = [{"name": call["name"], "arguments": call["args"]}]
    runtime, drawn = llama_model.weights, []
    generate = runtime.generate
    monkeypatch.setattr(runtime, "generate", lambda *args, **kwargs: drawn.append(kwargs["sampling"]) or
                        generate(*args, **kwargs))
    redrawn = llama_model.bind_tools(TOOLS).invoke(question, avoid_calls=avoided)
    monkeypatch.undo()
    # The first draw is the model's own (greedy); each redraw is hotter, among plausible tokens only.
    assert drawn[0].temperature == 0 and all(d.temperature > 0 and d.min_p == REDRAW_MIN_P for d in drawn[1:])
    assert redrawn.response_metadata["redrawn"] >= 1
    assert redrawn.usage_metadata["output_tokens"] > greedy.usage_metadata["output_tokens"]  # every draw counts
    if redrawn.response_metadata["redrawn"] < llama_model.resample_repeats:
        assert [redrawn.tool_calls[0]["name"], redrawn.tool_calls[0]["args"]] != [call["name"], call["args"]]
    never = llama_model.model_copy(update={"resample_repeats": 0}).bind_tools(TOOLS).invoke(question,
                                                                                        avoid_calls=avoided)
    assert never.tool_calls[0]["args"] == call["args"] and never.response_metadata["redrawn"] == 0


def test_a_call_cut_at_the_token_limit_is_one_malformed_call_not_the_objects_inside_it(offline_gguf):
    short = LlamaChatModel(model_path=str(offline_gguf), max_new_tokens=6)
    reply = short.bind_tools(TOOLS).invoke([HumanMessage("Buy 250 mg of chemical 42.")])
    assert reply.tool_calls == [] and len(reply.invalid_tool_calls) == 1
    assert reply.invalid_tool_calls[0]["error"] == "the call was cut at 6 tokens; write a shorter call"
    # Each cut reply is drawn again, hotter (greedy would write the same runaway call after the error); no
    # six-token call exists, so every draw is cut and the last stands. Without redraws there is one draw.
    assert reply.response_metadata["redrawn"] == short.resample_repeats
    assert reply.usage_metadata["output_tokens"] == 6 * (short.resample_repeats + 1)
    once = short.model_copy(update={"resample_repeats": 0}).bind_tools(TOOLS).invoke([HumanMessage("Buy 250 mg.")])
    assert once.response_metadata["redrawn"] == 0 and once.usage_metadata["output_tokens"] == 6


LIMITED = {"name": "search", "description": "Search the catalogue.",
           "inputSchema": {"type": "object", "required": ["query", "limit"],
                           "properties": {"query": {"type": "string"},
                                          "limit": {"type": "integer", "minimum": 1, "maximum": 20}}}}


def test_a_bounded_integer_is_held_to_its_range_by_the_grammar():
    spec = ToolSpec(LIMITED["name"], LIMITED["description"], LIMITED["inputSchema"])
    rules = dict(line.split(" ::= ", 1) for line in call_grammar([spec]).splitlines())
    limit = next(body for name, body in rules.items() if "limit" in name and name.endswith("kv"))
    allowed = rules[limit.split()[-1]] if limit.split()[-1] in rules else limit
    assert '"20"' in allowed and '"1"' in allowed and '"21"' not in allowed and '"100"' not in allowed


def test_a_model_asked_for_more_than_a_bound_allows_writes_a_call_within_it(llama_model):
    reply = llama_model.bind_tools([LIMITED]).invoke([HumanMessage("Search the catalogue for HATU, 100 results.")])
    (call,) = reply.tool_calls
    assert 1 <= call["args"]["limit"] <= 20


def _shared_prompt(llama_model) -> tuple[list[int], int]:
    tools = openai_tool_schemas(TOOLS)
    prompt = llama_model.prompt_ids(CONVERSATION, tools)
    return prompt, llama_model.shared_prefix_length(CONVERSATION, prompt, tools)


def test_the_shared_prefix_is_the_system_turn_with_the_tools(llama_model):
    prompt, shared = _shared_prompt(llama_model)
    text = llama_model.weights.detokenize(prompt[:shared])
    assert text.startswith("system\nYou price chemicals") and "calculate" in text  # special tokens not shown
    assert "Find HATU" not in text and "Find HATU" in llama_model.weights.detokenize(prompt)
    assert llama_model.shared_prefix_length(CONVERSATION[1:], prompt) == 0  # no system turn, nothing shared


def test_a_stored_prefix_serves_the_next_process_with_the_same_reply_and_bad_files_are_read_again(offline_gguf,
                                                                                                 llama_model):
    from gauntlet.agents.llm.llama_runtime import PrefixStore

    prompt, shared = _shared_prompt(llama_model)
    assert shared >= 256  # long enough to be stored
    first = LlamaRuntime(offline_gguf, context=2048, threads=1)  # a process that reads the prefix and stores it
    written = first.generate(prompt, max_new_tokens=12, persist_prefix=shared)
    assert first.prefix_loads == 0
    store = PrefixStore.for_model(str(offline_gguf))
    stored = store.path(prompt[:shared])
    assert stored.exists() and list(store.folder.glob("*.tmp")) == []

    later = LlamaRuntime(offline_gguf, context=2048, threads=1)  # the next process loads it
    again = later.generate(prompt, max_new_tokens=12, persist_prefix=shared)
    assert later.prefix_loads == 1 and again.reused >= shared and again.tokens == written.tokens

    stored.write_bytes(stored.read_bytes()[:-1000])  # cut short: llama.cpp refuses the state, the prefix is read
    cut = LlamaRuntime(offline_gguf, context=2048, threads=1)
    assert cut.generate(prompt, max_new_tokens=12, persist_prefix=shared).tokens == written.tokens
    assert cut.prefix_loads == 0 and store.load(prompt[:shared]) is not None  # and stored again, whole

    other = store.path(prompt[:shared - 1])  # a file whose tokens are not this prefix's is not loaded
    other.write_bytes(stored.read_bytes())
    assert store.load(prompt[:shared - 1]) is None


def test_the_prefix_store_keeps_the_most_recently_used_files(tmp_path):
    from gauntlet.agents.llm.llama_runtime import PrefixStore

    store = PrefixStore(tmp_path / "store", kept=2)
    for length in (1, 2, 3):
        store.save(list(range(length)), b"state %d" % length)
    assert store.load([0]) is None  # the oldest of three went
    assert store.load([0, 1, 2]) == b"state 3" and store.load([0, 1]) == b"state 2"
    store.save([7], b"seven")  # [0, 1] was used after [0, 1, 2], so [0, 1, 2] goes
    assert store.load([0, 1, 2]) is None and store.load([0, 1]) == b"state 2"


def test_a_system_turn_whose_tools_changed_is_read_from_the_part_it_shares_with_a_cached_one(offline_gguf,
                                                                                           llama_model):
    tools = openai_tool_schemas(TOOLS)
    fewer = openai_tool_schemas(TOOLS[:2])  # the last tool gone, as when find_tools changes the offered set
    runtime = LlamaRuntime(offline_gguf, context=2048, threads=1)
    prompts = [llama_model.prompt_ids(CONVERSATION, offered) for offered in (tools, fewer)]
    shared = [llama_model.shared_prefix_length(CONVERSATION, prompt, offered)
              for prompt, offered in zip(prompts, (tools, fewer))]
    runtime.generate(prompts[0], max_new_tokens=4, persist_prefix=shared[0])
    read_first = runtime.prefix_tokens_read
    runtime.generate(prompts[1], max_new_tokens=4, persist_prefix=shared[1])
    common = next(i for i, (a, b) in enumerate(zip(prompts[0], prompts[1])) if a != b)
    assert read_first == shared[0] and runtime.prefix_tokens_read - read_first == shared[1] - common


def test_a_conversation_past_the_context_window_is_the_loop_s_context_full_stop(llama_model, monkeypatch):
    # The window is narrowed to the prompt itself: the check is the one a 32,768-token conversation meets.
    prompt = llama_model.prompt_ids(CONVERSATION, openai_tool_schemas(TOOLS))
    monkeypatch.setattr(llama_model.weights, "context", len(prompt) + llama_model.max_new_tokens - 1)
    with pytest.raises(ConversationTooLong, match=f"a {len(prompt)}-token prompt .* offer fewer tools"):
        llama_model.bind_tools(TOOLS).invoke(CONVERSATION)
    monkeypatch.undo()
    assert llama_model.bind_tools(TOOLS).invoke(CONVERSATION).tool_calls


def test_a_prompt_tools_binding_shows_those_tools_and_lets_the_call_use_every_bound_one(llama_model):
    # As when tools widened in the conversation: the system turn keeps two tools, buy is callable too.
    shown = openai_tool_schemas([TOOLS[0], TOOLS[2]])
    reply = llama_model.bind_tools(TOOLS, prompt_tools=shown).invoke(CONVERSATION)
    assert reply.usage_metadata["input_tokens"] == len(llama_model.prompt_ids(CONVERSATION, shown))
    assert len(llama_model.prompt_ids(CONVERSATION, shown)) < len(llama_model.prompt_ids(CONVERSATION,
                                                                                         openai_tool_schemas(TOOLS)))
    (call,) = reply.tool_calls
    assert reply.response_metadata["constrained"] and SPECS[call["name"]].argument_problem(call["args"]) is None
