"""A GGUF model decoded by llama.cpp as a LangChain chat model that calls tools: the offline default.

``LlamaChatModel`` renders the conversation with the chat template inside the GGUF file
(``gauntlet.agents.llm.chat_template``, as transformers renders it), decodes on
``gauntlet.agents.llm.llama_runtime`` (the quantised weights as they are, both cores, the key-value
cache of the longest prefix this prompt shares with a recent one, within and across episodes), and
parses the reply with ``parse_tool_calls`` like the transformers backend (``hf:``), so the two are
interchangeable and the transformers one stays the reference.

With ``constrain_calls`` (the default) and tools bound, every token is sampled under the grammar of
one call of one of the bound tools (``gauntlet.agents.llm.call_grammar``): the reply is a single
well-formed call, never prose, never a malformed call. An agent that ends its task by calling an
answer tool (the LLM agent does) loses nothing by it; a caller that wants free text binds no tools
or sets ``constrain_calls=False``.

Repeats: a reply that only repeats one of the ``avoid_calls`` the caller passes (the LLM agent's graph
passes the idempotent calls whose results the conversation already holds) is drawn again, up to
``resample_repeats`` times, each sampled hotter than the last (``REDRAW_TEMPERATURE`` and up, among the
tokens ``REDRAW_MIN_P`` of the best one's likelihood or more; each draw seeded from the first's seed and
the draw's number; the grammar holds for every draw); a reply cut at ``max_new_tokens`` under the grammar
is drawn again the same way; the first draw that is neither a cut nor a
repeat is the reply, else the last draw. A small model that loops on one call (greedy decoding
finds the same call most likely again after its result) is steered to its next call, at the price of
a short decode per redraw. The reply's ``response_metadata["redrawn"]`` counts the draws thrown
away; their tokens count in its usage and its latency.

States for the latent monitor: each reply carries the states of watched layers (``weights.watch``)
and of ``keep_hidden_layers`` at the positions that wrote its tokens (``gauntlet.agents.llm.kept_states``),
read in the same decoding pass; and ``hidden_states`` reads a prompt and a response afresh, as
``LocalChatModel.hidden_states`` does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.tool import invalid_tool_call
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from pydantic import ConfigDict, Field

from gauntlet.agents.llm.calls import ToolSpec
from gauntlet.agents.llm.chat_template import render_messages, render_prompt
from gauntlet.agents.llm.graph import ConversationTooLong
from gauntlet.agents.llm.hf_chat import HiddenStates, sampling_seed
from gauntlet.agents.llm.kept_states import with_states
from gauntlet.agents.llm.llama_runtime import (
    ContextFullError,
    GrammarError,
    LlamaRuntime,
    RuntimeLoadError,
    Sampling,
    load_runtime,
    shared_length,
)
from gauntlet.errors import UserError
from gauntlet.agents.llm.text_calls import calls_so_far, message_from_text, openai_tool_schemas, tool_names

# A reply is one call: the longest call the chem and disaster tools take is well under this.
DEFAULT_MAX_NEW_TOKENS = 256
# Redraw n is sampled at least REDRAW_TEMPERATURE + (n - 1) x REDRAW_STEP hot: a small model's loop can hold
# most of the probability, so each redraw loosens it more (the grammar keeps every draw a well-formed call).
REDRAW_TEMPERATURE = 0.7
REDRAW_STEP = 0.3
# ...but only among plausible tokens: at 1.0-1.3 with the whole tail open, the 1.5B wrote incoherent text into
# an answer's free-form argument and submitted it (a DORA episode). Redraws keep tokens at least this share as
# likely as the best one.
REDRAW_MIN_P = 0.05


class LlamaChatModel(BaseChatModel):
    """A GGUF model on llama.cpp that answers in text and calls tools (see the module docstring).

    Args:
        model_path: a ``.gguf`` file on this machine.
        max_new_tokens: most tokens one reply may have (a reply cut there has finish_reason "length").
        threads: CPU threads for decoding; default this worker's share of the CPUs (both cores of a
            2-core machine when one episode runs at a time).
        reuse_prefix: start from the cached prefix this prompt shares with a recent one (see
            ``llama_runtime``); reused tokens are reported as ``input_token_details["cache_read"]``. False
            empties the cache before each call: the same prompt gives the same numbers whatever ran
            before (exact replays), at the price of reading every prompt whole.
        exact: with ``reuse_prefix``, reuse only the whole prompt batches an empty cache would compute
            the same way (``llama_runtime``, "Same prompt, same numbers"): the numbers of
            ``reuse_prefix=False``, to the bit, rereading about half a batch and the last reply per call.
        constrain_calls: decode under the grammar of one call of the bound tools.
        keep_hidden_layers: layers whose states each reply carries, beside any a monitor asked the
            runtime to ``watch``.
        temperature, top_p, top_k, min_p: 0 (the default) decodes greedily; above 0 samples with llama.cpp's
            generator seeded from the call's ``sampling_seed`` (run metadata) and the prompt, so the
            same episode seed and conversation give the same reply. ``min_p`` (default 0, off) keeps the
            tokens at least that share as likely as the best one; redraws use at least ``REDRAW_MIN_P``.
        resample_repeats: how often a reply that repeats one of the call's ``avoid_calls`` is drawn
            again (0: never).
        thought: under ``constrain_calls``, the reply opens with one ``Thought: ...`` line of the
            model's own words before its call (ReAct's reasoning step; ``call_grammar``).
        persist_prefix: keep the key-value state of the conversation's system turn (the system
            prompt and the tools, which every episode of a suite shares) in the data cache, so the
            next process loads it instead of reading it (``llama_runtime.PrefixStore``).
    """

    model_config = ConfigDict(extra="forbid")
    # A ``prompt_tools`` binding: the prompt shows those tools while calls may use every bound tool.
    takes_prompt_tools: ClassVar[bool] = True
    # ``reply_grammar`` and ``reply_tokens`` bindings: a reply that is not a call (an answer to a side
    # question), held to a GBNF grammar and to fewer tokens than ``max_new_tokens``.
    takes_reply_limits: ClassVar[bool] = True

    model_path: str
    max_new_tokens: int = Field(default=DEFAULT_MAX_NEW_TOKENS, ge=1)
    threads: int | None = Field(default=None, ge=1)
    reuse_prefix: bool = True
    exact: bool = False
    constrain_calls: bool = True
    thought: bool = False
    keep_hidden_layers: tuple[int, ...] = ()
    temperature: float = Field(default=0.0, ge=0.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=1)
    min_p: float = Field(default=0.0, ge=0.0, lt=1.0)
    resample_repeats: int = Field(default=3, ge=0)
    persist_prefix: bool = True

    @property
    def _llm_type(self) -> str:
        return "gauntlet-llama"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_path": self.model_path, "max_new_tokens": self.max_new_tokens, "threads": self.threads,
                "reuse_prefix": self.reuse_prefix, "exact": self.exact, "constrain_calls": self.constrain_calls,
                "thought": self.thought, "keep_hidden_layers": self.keep_hidden_layers, "temperature": self.temperature,
                "top_p": self.top_p, "top_k": self.top_k, "min_p": self.min_p,
                "resample_repeats": self.resample_repeats,
                "persist_prefix": self.persist_prefix}

    @property
    def weights(self) -> LlamaRuntime:
        """The loaded runtime (loaded on first use, once per process and file)."""
        try:
            return load_runtime(self.model_path, self.threads)
        except RuntimeLoadError as exc:
            raise UserError(f"{exc}; check the file (an offline model: gauntlet data build llm-offline-model "
                            "--config '{\"model\": \"<its pinned name>\"}' --force)") from None

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: str | None = None,
                   **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        """This model with ``tools`` shown to it on every call (LangChain tools, OpenAI function schemas
        or MCP tools). Under ``constrain_calls`` every reply calls one of them; ``tool_choice`` may
        only be None or "auto"."""
        if tool_choice not in (None, "auto"):
            raise ValueError(f"tool_choice={tool_choice!r} is not supported by the llama.cpp backend; leave it unset")
        return self.bind(tools=openai_tool_schemas(tools), **kwargs)

    def prompt_ids(self, messages: Sequence[BaseMessage],
                   tools: Sequence[Mapping[str, Any]] | None = None) -> list[int]:
        """The token ids the model reads before it replies (the assistant's turn opened)."""
        runtime = self.weights
        return runtime.tokenize(render_prompt(runtime.template, render_messages(messages, tools, runtime.template),
                                              tools))

    def shared_prefix_length(self, messages: Sequence[BaseMessage], prompt: Sequence[int],
                             tools: Sequence[Mapping[str, Any]] | None = None) -> int:
        """How many of ``prompt``'s tokens are the system turn (the system message and the tools), the
        part episodes of one suite share; 0 when the conversation does not open with a system message."""
        if not messages or messages[0].type != "system":
            return 0
        runtime = self.weights
        opening = runtime.tokenize(render_prompt(runtime.template, render_messages(messages[:1], tools,
                                                                                   runtime.template), tools))
        return shared_length(opening, prompt)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None,
                  tools: Sequence[Mapping[str, Any]] | None = None,
                  avoid_calls: Sequence[Mapping[str, Any]] = (),
                  prompt_tools: Sequence[Mapping[str, Any]] | None = None, reply_grammar: str | None = None,
                  reply_tokens: int | None = None, **kwargs: Any) -> ChatResult:
        from gauntlet.agents.llm.call_grammar import CallGrammarError, call_grammar

        runtime = self.weights
        shown = tools if prompt_tools is None else prompt_tools  # the prompt's tools; calls may use all ``tools``
        prompt = self.prompt_ids(messages, shown)
        if reply_grammar is not None and tools:
            raise ValueError("reply_grammar holds a reply that is not a call; bind it without tools (prompt_tools "
                             "shows them)")
        limit = self.max_new_tokens if reply_tokens is None else max(1, min(reply_tokens, self.max_new_tokens))
        grammar = reply_grammar
        if self.constrain_calls and tools:
            try:
                grammar = call_grammar([ToolSpec(schema["function"]["name"], schema["function"].get("description", ""),
                                                 schema["function"].get("parameters") or {"type": "object"})
                                        for schema in tools], thought=self.thought)
            except CallGrammarError as exc:
                raise UserError(f"{exc}; run the model with the option constrain_calls=false") from None
        shared = self.shared_prefix_length(messages, prompt, shown) if self.persist_prefix and self.reuse_prefix else 0
        seed = sampling_seed((run_manager.metadata if run_manager else {}).get("sampling_seed", 0), prompt)
        layers = sorted(runtime.watched | {runtime.layer_number(layer) for layer in self.keep_hidden_layers})
        avoided = [{"name": call["name"], "arguments": call["arguments"]} for call in avoid_calls]
        tokens = prompt_s = decode_s = 0.0
        for draw in range(self.resample_repeats + 1):
            temperature = self.temperature if draw == 0 else \
                max(self.temperature, REDRAW_TEMPERATURE + (draw - 1) * REDRAW_STEP)
            sampling = Sampling(temperature=temperature, top_p=self.top_p, top_k=self.top_k,
                                min_p=self.min_p if draw == 0 else max(self.min_p, REDRAW_MIN_P),
                                seed=seed if draw == 0 else sampling_seed([seed, draw], prompt))
            generation = self._draw(runtime, prompt, sampling, grammar, layers, tools, shared, limit)
            tokens, prompt_s, decode_s = (tokens + len(generation.tokens), prompt_s + generation.prompt_s,
                                          decode_s + generation.decode_s)
            if draw == 0:
                reused = generation.reused
            written = generation.tokens[:-1] if generation.finished else generation.tokens
            text = runtime.detokenize(written)
            for sequence in stop or ():
                text = text.split(sequence)[0]
            cut = grammar is not None and bool(tools) and not generation.finished
            if cut:
                # Under the grammar only a cut can leave a call unfinished: one problem, not the objects inside it.
                message = AIMessage(content=text, invalid_tool_calls=[invalid_tool_call(
                    name=None, args=None, id=f"call_{calls_so_far(messages)}",
                    error=f"the call was cut at {limit} tokens; write a shorter call")])
            else:
                message = message_from_text(text, tool_names(tools or []), calls_so_far(messages))
            # A cut reply is drawn again like a repeat: greedy decoding writes the same runaway call after the
            # error as before it (the 1.5B spent a DORA episode's 12 calls on one list of identical points).
            if not cut and not any({"name": call["name"], "arguments": call["args"]} in avoided
                                   for call in message.tool_calls):
                break
        usage = UsageMetadata(input_tokens=len(prompt), output_tokens=int(tokens),
                              total_tokens=len(prompt) + int(tokens), input_token_details={"cache_read": reused})
        metadata = {"model_name": Path(self.model_path).name, "latency_ms": round((prompt_s + decode_s) * 1000, 1),
                    "prompt_ms": round(prompt_s * 1000, 1),
                    "finish_reason": "stop" if generation.finished else "length", "text": text,
                    "constrained": grammar is not None, "redrawn": draw}
        if layers:
            metadata = with_states(metadata, runtime.reply_states(generation.states))
        message = message.model_copy(update={"usage_metadata": usage, "response_metadata": metadata})
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _draw(self, runtime: LlamaRuntime, prompt: list[int], sampling: Sampling, grammar: str | None,
              layers: list[int], tools: Sequence[Mapping[str, Any]] | None, shared: int = 0,
              limit: int | None = None) -> Any:
        try:
            return runtime.generate(prompt, max_new_tokens=limit or self.max_new_tokens, sampling=sampling,
                                    grammar=grammar, layers=layers, reuse_prefix=self.reuse_prefix,
                                    persist_prefix=shared, exact=self.exact)
        except GrammarError as exc:
            raise UserError(f"{exc} for tools {', '.join(tool_names(tools or []))}; run the model with the option "
                            "constrain_calls=false") from None
        except ContextFullError as exc:
            raise ConversationTooLong(f"{exc}; shorten the conversation or offer fewer tools (tool_scope)") from None

    def hidden_states(self, messages: Sequence[BaseMessage], response: str = "", *,
                      tools: Sequence[Any] | None = None, layers: Sequence[int] = (-1,)) -> HiddenStates:
        """The hidden states of ``layers`` over the prompt the model reads for ``messages`` (and
        ``tools``) followed by the tokens of ``response``."""
        runtime = self.weights
        prompt = self.prompt_ids(messages, openai_tool_schemas(tools) if tools else None)
        token_ids = prompt + runtime.tokenize(response)
        states = runtime.hidden_states(token_ids, layers)
        return HiddenStates(token_ids=token_ids, prompt_length=len(prompt),
                            layers={layer: states[runtime.layer_number(layer)] for layer in layers})

