"""LLMAgent: the LangGraph agent in the runner's loop, one tool call per step of a ``ToolTaskEnv``.

The runner owns the tool-call boundary. The agent's graph (``gauntlet.agents.llm.graph``) pauses
before ``run_tools``; each well-formed call the model proposes becomes one step's action
(``{"name", "arguments"}``), which controllers see and may replace or halt on; the env runs it; the
next ``act`` writes the result (``info['tool_call']``, else ``observation['result']``) into the
graph as ``run_tools``'s message and resumes the graph to the next call. Each call is bounded by
the env's ``call_timeout_s``: a call that outlives it is a step with an error result, which the
model sees.

The harness, built so a small model can finish a task:

* **The answer is a typed call.** The env's answer tool is shown with an ``answer`` argument typed
  for the mode (``modes.answer_spec``: a number in ``chemcost``; in the other modes the type the task's
  grading kind fixes, found in the suite: a number or numbers for a numeric task, a list for a set or
  list task); calling it is the final action. A
  reply that calls nothing is told, in one line, to call a tool or the answer tool (a ``note``
  event ``{"no_call": true}``); no prose is ever read for an answer.
* **One call per reply** unless ``parallel_calls``: later calls of a reply are refused unrun.
* **Repeated calls** (same tool, same arguments as an earlier call) are answered with the earlier
  result and a one-line nudge, without a step (a ``note`` event ``{"repeated_call": <tool>}``).
* **Numbers from results** (``check_numbers``, on by default): a call whose arguments hold a number
  the episode never showed (not in the question, not in a result of this task; a worked example's do
  not count) is answered with an error naming the numbers, unrun (``gauntlet.agents.llm.number_check``;
  a ``note`` event ``{"ungrounded_numbers": [...]}``). A model that redraws replies (llama.cpp) is
  asked for another reply instead of a repeat (``redrawn_repeats`` note).
* **Tool scope** (``tool_scope``): ``"all"``, a number k, or ``"auto"`` (every tool of a server with
  at most 32, else the 8 nearest the task); a scoped agent also gets ``find_tools(query)``, which
  the agent answers itself by adding the tools nearest the query (``gauntlet.agents.llm.tool_scope``).
  Each offered set is a ``note`` event ``{"tools_offered": [...]}``. Where the found tools' schemas go
  (``widen_tools``): ``"in_results"`` (the default for a local model) lists them in ``find_tools``'s
  result and keeps the system turn as it was, so the model's cached prompt stays a prefix of the next
  and a widening costs only the result's tokens; ``"in_prompt"`` (the default for an API model, whose
  request carries its tools) adds them to the system turn's tools, which a local model then reads again
  from there on (a widened DORA call re-read 6-12k tokens).
* **Demonstrations** (``demonstrations``): one worked trajectory of a training-split task of the same
  suite and dimension before the task (``gauntlet.agents.llm.demonstrations``); never the task itself.
  Unset, it is on in the modes of ``MODE_DEFAULTS`` when the agent has its suite (``gauntlet eval``
  gives it), else off.
* **Verbalised confidence** (``ask_confidence``, off by default): after each reply that makes a call,
  the model is asked, beside the conversation (the question and its answer never join it), how
  likely it is to finish the task with the right answer; a ``note`` event ``{"confidence": p}``
  (``p`` in [0, 1], None when the reply is not a number from 0 to 100). The question is a model call
  of its own (a ``model_call`` event with ``requested_by: {"question": "confidence"}``), outside the
  ``max_steps`` budget. A local model reads the question with the tools its calls see, so its prefix
  cache serves all but the question, and on llama.cpp the reply is held to a whole number
  (``CONFIDENCE_GRAMMAR``, at most ``CONFIDENCE_TOKENS`` tokens). An overseer's scalar baseline
  (``gauntlet.controllers.oversight``).
* **Thoughts** (``thoughts``, off by default): each reply opens with one line, ``Thought: ...``, of
  what the results so far say and which call comes next, then its call (ReAct's reasoning step; the
  system prompt asks for it, and on llama.cpp the call grammar holds it to one line of words before
  the call: ``gauntlet.agents.llm.call_grammar``).
* **Checklist** (``checklist``; modes ``chemcost`` and ``instruction``, where it is on unless set off): in
  ``chemcost`` each ``get_reaction`` and ``select_pack`` result ends with one line of what the episode has
  priced and what is still to price; in ``instruction`` each result ends with the plan's progress, the
  steps done and the next one (or, all done, to submit); both read from the episode's own turns
  (``gauntlet.agents.llm.checklist``).
* **Answer review** (``review_answer``, off by default): the episode's first call of the answer tool
  is not submitted; its reply restates the question and asks for the next call a step still needs,
  or the same answer again if none does (a ``note`` event ``{"answer_review": <answer>}``). A small
  model that stops after the first of several parts is shown the question it has drifted from.

Malformed calls are answered inside the graph and never become actions. A spent budget
(``max_steps`` model calls, ``max_tokens``, ``wall_time_s`` since reset) ends the task with a stop
action: the env truncates the episode, unanswered, and the step carries a ``note`` event
``{"budget": <which>}``.

A replaced call: the model's own call stays in the conversation, and its tool message says which
call ran instead and what it gave.

Recorded per step: ``messages`` (the turns since the step before, ``gauntlet.agents.llm.records``),
a ``model_call`` event per model call (each attempt of a retried call is one), including the calls a
tool server asked the agent's lent model for while the step's tool call ran (``client_model()``;
their events say ``requested_by``), and a ``note`` event ``{"malformed_calls": [...]}`` for a
reply with malformed calls. ``config()`` (the episode header's agent config) holds the model spec,
mode, effective system prompt, budgets and harness options.

Revising: a controller that judges the current reply (``reply()``, before any of its calls ran) can
have it written again (``revise``): the reply leaves the conversation, the controller's notice joins
it (and, on request, the task's tool results are edited first: ``edit(result, answered)`` gives each
one's new text, ``answered`` saying whether the reply answered it, e.g. to withhold those or strip a
piece of any), the model replies again, and ``revise`` returns the step's new ``AgentOutput``, for the controller to
``replace_action`` with: the new reply's first action, and as messages the first reply, then the notice
and the new reply, as events both model calls, so the record keeps both replies. The output ``act``
returned (which the runner holds) is left as it was. The rewritten reply stands in for the first in
the ``max_steps`` budget (a correction does not shorten the agent's episode); its tokens count.
With no notice (``revise(None)``) the reply is written again from the same conversation: what an agent
with another model does when it takes over this agent's conversation (``restore`` of this agent's
snapshot) at a reply none of whose calls ran, as an online overseer's ``stronger`` does.

Branching: the agent's state is its LangGraph checkpoint (``gauntlet.agents.llm.state``): the
conversation, its counters and the episode's tools. Each call of a reply is answered by one tool
message, written into the checkpoint in call order as soon as it is known (``update_state(...,
as_node="run_tools")``), so the calls still to run, the call the env is running and the turns already
recorded are all read off the messages. ``snapshot()`` is that checkpoint (with the run config that
LangGraph keeps out of checkpoints: ``LLMAgentSnapshot``), ``restore()`` writes it into a fresh thread
and ``fork()`` gives an independent agent (same model object, its own checkpointer) standing there;
``reseed()`` changes the sampling seed from there on. A snapshot holds no model: another agent (a
stronger model, the same tools and mode) restored from it takes the conversation over.
"""

from __future__ import annotations

import copy
import json
import re
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard, cast

from gymnasium import spaces
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata
from langgraph.graph.state import CompiledStateGraph

from gauntlet.agent import Agent, AgentOutput
from gauntlet.agents.llm.calls import (
    CheckedCall,
    ToolResult,
    ToolSpec,
    call_text,
    check_calls,
    earlier_result,
    WRITTEN,
    rejection,
    tool_message,
    written_split,
)
from gauntlet.agents.llm.checklist import CHECKLIST_MODES, CHECKLISTS, with_note
from gauntlet.agents.llm.graph import (
    Budget,
    LoopSettings,
    build_graph,
    last_reply,
    make_checkpointer,
    run_config,
    wants_tools,
)
from gauntlet.agents.llm.demonstrations import CALL_ID, DEMO_OPENING, demonstration_messages, demonstration_task
from gauntlet.agents.llm.modes import get_mode, user_prompt
from gauntlet.agents.llm.number_check import UNGROUNDED_PREFIX, ungrounded_message, ungrounded_numbers
from gauntlet.agents.llm.records import REQUESTED_BY, ModelCallRecorder, records
from gauntlet.agents.llm.state import (
    OFFERED,
    PROMPTED,
    EpisodeState,
    answered,
    current_reply,
    episode_state,
    offered_names,
    offered_now,
    prompted_now,
    tool_specs,
)
from gauntlet.agents.llm.tool_scope import (
    FIND_TOOLS,
    FIND_TOOLS_DEFAULT_K,
    ToolScope,
    find_tools,
    parse_tool_scope,
    scope_tools,
)
from gauntlet.bridges.tool_task_env import DEFAULT_ANSWER_TOOL, stop_action
from gauntlet.episode import Event, ToolCall
from gauntlet.errors import UserError
from gauntlet.info_keys import TASK_ID, TOOL_CALL
from gauntlet.tasks import ToolTask, load_suite


# The default tool scope: every tool of a server that has few, the nearest AUTO_SCOPE_K of a larger one
# (and find_tools for the rest). The disaster server's 132 schemas are ~28,500 prompt tokens; chem's 24
# are ~2,900. The k was chosen by the ablation in docs/agents.md.
DEMO_CALL_PREFIX = CALL_ID.split("{", 1)[0]
AUTO_SCOPE = "auto"
AUTO_SCOPE_MAX_TOOLS = 32
AUTO_SCOPE_K = 8
NO_CALL = ("Your reply called no tool. Reply with exactly one tool call: the next tool you need, or "
           "{answer_tool} with your final answer to end the task.")
ANSWER_REVIEW = "answer_review"
THOUGHTS_PROMPT = ("Before each call write one line, 'Thought: ...', saying in words what the results so far "
                   "tell you and which call comes next.")
REVIEW = ("Not submitted yet: check it against the question first. The question was:\n{question}\n"
          "If a step the question asks for has no tool result yet, make the call for the next such step now. "
          "If every step is done and the answer follows from your results, call {answer_tool} again with it.")
AUTO_WIDEN, IN_RESULTS, IN_PROMPT = "auto", "in_results", "in_prompt"
# The harness options a mode turns on when the config leaves them unset (None). ChemCost: a worked example
# and the checklist took the 1.5B from 0 of 10 (neither) and 6 of 40 (the example alone) to 31 of 40
# tasks priced within 25 %. DORA's instruction mode: the plan's progress took the 1.5B's DORA score on 15
# tasks from 0.29 to 0.82 (docs/results/agents.md).
MODE_DEFAULTS: dict[str, dict[str, bool]] = {"chemcost": {"demonstrations": True, "checklist": True},
                                             "instruction": {"checklist": True}}
WIDEN_OPTIONS = (AUTO_WIDEN, IN_RESULTS, IN_PROMPT)
WIDEN_NEEDS_LOCAL = (f'agent llm: widen_tools "{IN_RESULTS}" needs a local model (offline, llama: or hf:), whose '
                     f'prompt the agent writes; this model gets its tools with each request: use "{IN_PROMPT}"')
REPEATED_CALL = ("You made this exact call before; it was not run again. Use its result, make a different call, "
                 "or call {answer_tool} to finish. Its result was:")
CONFIDENCE_QUESTION = ("Before your call runs: how likely is it, from 0 to 100, that you will finish this task "
                       "with the right answer? Reply with the number only.")
# Held to the reply the question asks for: a whole number from 0 to 100 (digits are single tokens), then the end.
CONFIDENCE_GRAMMAR = 'root ::= "100" | [1-9]? [0-9]'
CONFIDENCE_TOKENS = 4
_CONFIDENCE = re.compile(r"\s*(\d{1,3}(?:\.\d+)?)\s*%?\s*\.?\s*")


def parse_confidence(text: str) -> float | None:
    """A reply to ``CONFIDENCE_QUESTION`` as a probability: a number from 0 to 100 (a % sign and a full stop
    allowed), and nothing else; None for any other reply."""
    found = _CONFIDENCE.fullmatch(text)
    if found is None or not 0.0 <= float(found.group(1)) <= 100.0:
        return None
    return float(found.group(1)) / 100.0


def auto_scope(tool_count: int) -> ToolScope:
    """The scope ``tool_scope="auto"`` gives a server with ``tool_count`` tools."""
    return ToolScope(None if tool_count <= AUTO_SCOPE_MAX_TOOLS else AUTO_SCOPE_K)


@dataclass(frozen=True)
class LLMAgentSnapshot:
    """A point in an LLM agent's episode: its graph checkpoint (see Branching in the module docstring).

    ``checkpoint`` and ``metadata`` are the episode thread's latest checkpoint (None before the first
    ``act``): the conversation, the counters and the tools, from which every other fact of the episode is
    read. Beside it, only what LangGraph takes per run rather than keeps in a checkpoint: the run
    config's inputs ``seed`` (the sampling seed) and ``max_call_chars`` (the graph's call length limit),
    both given by ``reset`` before the episode's first checkpoint exists, and ``elapsed_s``, the wall time
    the episode had spent (the wall-time budget's clock is process-local: ``time.monotonic``).
    """

    checkpoint: Checkpoint | None
    metadata: CheckpointMetadata | None
    seed: int | None = None
    max_call_chars: int | None = None
    elapsed_s: float = 0.0


class LLMAgent(Agent):
    """A LangGraph tool-calling agent for ``ToolTaskEnv`` (see the module docstring).

    ``model``: a model spec (``gauntlet.agents.llm.models.make_chat_model``: ``openai:``,
    ``anthropic:``, ``hf:``, ``scripted:<file>``, ``offline``) or a chat model; loaded at the first
    step; ``model_options`` are the backend's (``temperature``, ``timeout``, ...). ``mode``:
    ``autonomous``, ``instruction`` or ``chemcost`` (``gauntlet.agents.llm.modes``);
    ``system_prompt`` overrides the mode's. ``suite``: the task suite, for modes that read a task's
    metadata (its tool plan, its answer format). ``model_retries``: how often a model call that
    timed out or was rate-limited is retried, the first wait ``retry_backoff_s`` seconds, doubling
    up to 30 s. ``price_usd_per_mtok``: ``[input, output]`` US dollars per million tokens, for
    ``cost_usd``. ``checkpointer``: ``memory`` or ``sqlite:PATH``. ``tools``: the names of the
    server's tools the model is shown (default: all of them); a call of any other tool is malformed,
    and a name the server does not have ends the episode's first step with a ``UserError``. A small
    model reads thousands of tokens of schemas per call, so a short list is the cheapest speed-up a
    local model has. A bad config is a ``UserError`` here, before any episode (the model itself loads
    at the first step).
    """

    name = "llm"

    def __init__(self, model: str | BaseChatModel = "offline", model_options: dict[str, Any] | None = None,
                 mode: str = "autonomous", system_prompt: str | None = None, max_steps: int = 30,
                 max_tokens: int | None = None, wall_time_s: float | None = None, model_retries: int = 2,
                 retry_backoff_s: float = 1.0, price_usd_per_mtok: Sequence[float] | None = None,
                 checkpointer: str = "memory", suite: str | None = None, tools: Sequence[str] | None = None,
                 tool_scope: Any = AUTO_SCOPE, demonstrations: bool | None = None, parallel_calls: bool = False,
                 check_numbers: bool = True, review_answer: bool = False, thoughts: bool = False,
                 widen_tools: str = AUTO_WIDEN, checklist: bool | None = None, ask_confidence: bool = False):
        if tools is not None and (isinstance(tools, str) or not all(isinstance(name, str) for name in tools)
                                  or not tools):
            raise UserError("agent llm: tools is a non-empty list of tool names; fix the agent config")
        if isinstance(model, str):
            from gauntlet.agents.llm.models import LOCAL_BACKENDS, check_spec

            backend = check_spec(model).backend  # a spec the backends cannot read fails here, not in every worker
            if widen_tools == IN_RESULTS and backend not in LOCAL_BACKENDS:
                raise UserError(WIDEN_NEEDS_LOCAL)
        try:
            self._mode = get_mode(mode)
            self._budget = Budget(max_steps=max_steps, max_tokens=max_tokens, wall_time_s=wall_time_s)
            self._saver = make_checkpointer(checkpointer)
            self._scope = None if tool_scope == AUTO_SCOPE else parse_tool_scope(tool_scope)
        except ValueError as exc:
            raise UserError(f"agent llm: {exc}; fix the agent config") from None
        defaults = MODE_DEFAULTS.get(mode, {}) if isinstance(mode, str) else {}
        if demonstrations is None:  # a demonstration comes from the suite's training split: none without it
            demonstrations = defaults.get("demonstrations", False) and suite is not None
        if checklist is None:
            checklist = defaults.get("checklist", False)
        for option, value in (("demonstrations", demonstrations), ("parallel_calls", parallel_calls),
                              ("check_numbers", check_numbers), ("review_answer", review_answer),
                              ("thoughts", thoughts), ("checklist", checklist), ("ask_confidence", ask_confidence)):
            if not isinstance(value, bool):
                raise UserError(f"agent llm: {option} is true or false, not {value!r}; fix the agent config")
        if checklist and mode not in CHECKLIST_MODES:
            raise UserError(f"agent llm: checklist is for modes {', '.join(CHECKLIST_MODES)} (the components of a "
                            f"reaction to price, the steps of a plan shown), not {mode!r}; fix the agent config")
        if widen_tools not in WIDEN_OPTIONS:
            raise UserError(f"agent llm: widen_tools is {', '.join(map(repr, WIDEN_OPTIONS))}, not {widen_tools!r}; "
                            "fix the agent config")
        if price_usd_per_mtok is not None and len(price_usd_per_mtok) != 2:
            raise UserError("agent llm: price_usd_per_mtok is [input, output] US dollars per million tokens; "
                            "fix the agent config")
        self._kwargs: dict[str, Any] = dict(
            model=model, model_options=model_options, mode=mode, system_prompt=system_prompt, max_steps=max_steps,
            max_tokens=max_tokens, wall_time_s=wall_time_s, model_retries=model_retries,
            retry_backoff_s=retry_backoff_s, price_usd_per_mtok=price_usd_per_mtok, checkpointer=checkpointer,
            suite=suite, tools=list(tools) if tools is not None else None, tool_scope=tool_scope,
            demonstrations=demonstrations, parallel_calls=parallel_calls, check_numbers=check_numbers,
            review_answer=review_answer, thoughts=thoughts, widen_tools=widen_tools, checklist=checklist,
            ask_confidence=ask_confidence)
        if demonstrations and suite is None:
            raise UserError("agent llm: demonstrations come from the training split of the task suite; "
                            "give its file too (\"suite\": \"<suite.jsonl>\"; gauntlet eval gives it by itself)")
        self._demonstrations, self._parallel_calls = demonstrations, parallel_calls
        self._check_numbers, self._review_answer = check_numbers, review_answer
        self._ask_confidence = ask_confidence
        self._shown = tuple(tools) if tools is not None else None
        self._model: BaseChatModel | None = model if isinstance(model, BaseChatModel) else None
        self._lent: Any = None
        self._system_prompt = system_prompt if system_prompt is not None else self._mode.system_prompt
        if thoughts:
            self._system_prompt = f"{self._system_prompt} {THOUGHTS_PROMPT}"
        self._model_retries, self._retry_backoff_s = model_retries, retry_backoff_s
        self._suite = load_suite(suite) if suite is not None else []
        self._tasks = {task.id: task for task in self._suite}
        self._recorder = ModelCallRecorder(self.name, price_usd_per_mtok)
        self._graphs: dict[str, CompiledStateGraph] = {}
        self._thread: str | None = None
        self._max_call_chars: int | None = None
        self._seed: int | None = None
        self._clear_episode()

    def config(self) -> dict[str, Any]:
        model = self._kwargs["model"]
        return {**self._kwargs, "model": model if isinstance(model, str) else _describe(model),
                "system_prompt": self._system_prompt}

    def client_model(self) -> Any:
        """This agent's chat model, lent to tool servers that ask their client to write (MCP sampling)."""
        from gauntlet.agents.llm.sampling import sampling_callback

        if self._lent is None:  # one callback for all episodes: the env keeps its client while the callback is the same
            recorder = ModelCallRecorder(self.name, self._kwargs["price_usd_per_mtok"], deliver=self._record_lent_call)
            self._lent = sampling_callback(self._chat_model(), self.config()["model"], callbacks=[recorder],
                                           settings=LoopSettings(model_retries=self._model_retries,
                                                                 retry_initial_s=self._retry_backoff_s))
        return self._lent

    def _record_lent_call(self, event: Event) -> None:
        """A call of the lent model happens while the env runs this agent's last action (the tool that
        asked): its event joins that step's, which the runner reads when it builds the step."""
        (self._output.events if self._output is not None else self._events).append(event)

    def _chat_model(self) -> BaseChatModel:
        if self._model is None:
            from gauntlet.agents.llm.models import make_chat_model, runs_on_llama

            options = dict(self._kwargs["model_options"] or {})
            if self._kwargs["thoughts"] and runs_on_llama(self._kwargs["model"]):
                options.setdefault("thought", True)  # the call grammar lets a thought line precede the call
            self._model = make_chat_model(self._kwargs["model"], **options)
        return self._model

    # Episode state -------------------------------------------------------------------------------
    def _clear_episode(self) -> None:
        """Forget the episode. Its state is its checkpoint (``gauntlet.agents.llm.state``); beside it the
        agent keeps only what no other process could use or what LangGraph takes per run: the checkpointer
        thread's id, a cache of the checkpoint's values, the wall-time clock and reset's run config (see
        ``LLMAgentSnapshot``), and the recording buffers of the step under way (events not yet handed to the
        runner, and the output it holds, which a lent model's calls join while the step's tool call runs).
        Neither buffer belongs in a snapshot: the events go out with each step's output, and the output is
        that step's record, not the episode's state."""
        if self._thread is not None:
            self._saver.delete_thread(self._thread)
        self._thread = None
        self._values: EpisodeState | None = None
        self._events: list[Event] = []
        self._output: AgentOutput | None = None
        self._started_at = time.monotonic()

    def reset(self, *, seed: int | None, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        self._clear_episode()
        self._seed = seed
        self._max_call_chars = action_space.max_length if isinstance(action_space, spaces.Text) else None

    def _settings(self) -> LoopSettings:
        # A model that can redraw a reply (the llama.cpp backend) is told which calls would only repeat.
        redraws = getattr(self._chat_model(), "resample_repeats", 0)
        return LoopSettings(budget=self._budget, model_retries=self._model_retries,
                            retry_initial_s=self._retry_backoff_s, max_call_chars=self._max_call_chars,
                            parallel_calls=self._parallel_calls, avoid_repeats=isinstance(redraws, int) and redraws > 0)

    def _graph(self, state: EpisodeState) -> CompiledStateGraph:
        """The graph offering the state's tools (a ``find_tools`` answer may have widened them since the
        last reply); graphs share the checkpointer, so any of them continues the episode's thread."""
        specs = self._specs(state)
        prompted = prompted_now(state)
        shown = None if prompted == list(state["offered"]) else self._specs(state, prompted)
        key = json.dumps([[spec.name, spec.description, spec.input_schema] for spec in specs]) + \
            f"|{self._max_call_chars}|{json.dumps(prompted)}"
        if key not in self._graphs:
            self._graphs[key] = build_graph(self._chat_model(), specs, self._settings(), checkpointer=self._saver,
                                            pause_before_tools=True, state_schema=EpisodeState, prompt_tools=shown)
        return self._graphs[key]

    def _widens_in_results(self) -> bool:
        """Whether found tools' schemas go into ``find_tools``'s result (the system turn kept; see
        ``widen_tools`` in the module docstring)."""
        option = self._kwargs["widen_tools"]
        takes = getattr(self._chat_model(), "takes_prompt_tools", False)
        if option == IN_RESULTS and not takes:
            raise UserError(WIDEN_NEEDS_LOCAL)
        return option == IN_RESULTS or (option == AUTO_WIDEN and takes)

    def _specs(self, state: EpisodeState, offered: Sequence[str] | None = None) -> tuple[ToolSpec, ...]:
        """The specs of the tools ``offered`` (default: the state's)."""
        return tool_specs(state, state["offered"] if offered is None else offered, self._mode)

    def _spec_map(self, state: EpisodeState, offered: Sequence[str] | None = None) -> dict[str, ToolSpec]:
        return {spec.name: spec for spec in self._specs(state, offered)}

    def _config(self) -> RunnableConfig:
        if self._thread is None:
            raise RuntimeError("the agent has not started an episode; call act() after reset()")
        config = run_config(self._thread, self._settings(), started_at=self._started_at)
        config["callbacks"] = [self._recorder]
        config["metadata"] = {"sampling_seed": self._seed}  # a sampling model draws from the episode's seed
        return config

    def _thread_config(self) -> RunnableConfig:
        """The config that names the episode's thread to the checkpointer."""
        return RunnableConfig(configurable={"thread_id": self._thread, "checkpoint_ns": ""})

    def _state(self) -> EpisodeState:
        """The graph's state now: its checkpoint's values (cached until the agent writes the next one)."""
        if self._values is None:
            if self._thread is None:
                raise RuntimeError("the agent has not started an episode; call act() after reset()")
            found = self._saver.get_tuple(self._thread_config())
            if found is None:
                raise RuntimeError("the agent's episode has no checkpoint")
            values = found.checkpoint["channel_values"]
            self._values = cast(EpisodeState, {key: values[key] for key in EpisodeState.__annotations__
                                               if key in values})
        return self._values

    def _write(self, update: dict[str, Any]) -> None:
        """Write ``update`` into the checkpoint as ``run_tools``'s: the graph's next node is ``call_model``."""
        self._graph(self._state()).update_state(self._config(), update, as_node="run_tools")
        self._values = None

    def _checked(self, state: EpisodeState, reply_at: int) -> list[CheckedCall]:
        """The calls of the reply at ``reply_at``, checked against the tools it was written for."""
        return check_calls(cast(AIMessage, state["messages"][reply_at]), self._spec_map(state),
                           max_call_chars=self._max_call_chars, parallel_calls=self._parallel_calls)

    def _running(self, state: EpisodeState) -> CheckedCall | None:
        """The call the env is running (the last action's): the current reply's first unanswered call."""
        reply_at = current_reply(state["messages"])
        if reply_at is None or state["stop_reason"] is not None:
            return None
        calls = self._checked(state, reply_at)[answered(state["messages"], reply_at):]
        return calls[0] if calls else None

    # Acting --------------------------------------------------------------------------------------
    def act(self, observation: Any, info: dict[str, Any]) -> AgentOutput:
        if self._thread is None:
            start, action = 0, self._begin(observation, info)
        else:
            start = len(self._state()["messages"])  # every message in the checkpoint is on record already
            action = self._receive(observation, info)
        if self._ask_confidence and self._state()["stop_reason"] is None:
            self._events.append(Event(source=self.name, kind="note", data={"confidence": self._confidence()}))
        self._output = AgentOutput(action=action, messages=records(self._state()["messages"][start:]),
                                   events=self._drain_events())
        return self._output

    def _confidence(self) -> float | None:
        """The model's answer to ``CONFIDENCE_QUESTION`` after the conversation so far, asked beside it."""
        state = self._state()
        messages = [*state["messages"], HumanMessage(CONFIDENCE_QUESTION)]
        config = RunnableConfig(callbacks=[self._recorder],
                                metadata={"sampling_seed": self._seed, REQUESTED_BY: {"question": "confidence"}})
        model: Any = self._chat_model()
        # A local model reads the question after the prompt of the reply it just wrote, tools and all, so its
        # prefix cache serves all but the question; without the tools the system turn differs, and the whole
        # conversation is read again twice a step (for the question, then for the next call).
        if getattr(model, "takes_prompt_tools", False):
            limits = ({"reply_grammar": CONFIDENCE_GRAMMAR, "reply_tokens": CONFIDENCE_TOKENS}
                      if getattr(model, "takes_reply_limits", False) else {})
            model = model.bind(prompt_tools=[spec.as_openai() for spec in self._specs(state, prompted_now(state))],
                               **limits)
        reply = model.invoke(messages, config)
        return parse_confidence(reply.content if isinstance(reply.content, str) else "")

    def _drain_events(self) -> list[Event]:
        events = self._recorder.drain() + self._events
        self._events = []
        return events

    def _begin(self, observation: Any, info: dict[str, Any]) -> str:
        answer_tool = str(info.get("answer_tool") or DEFAULT_ANSWER_TOOL)
        offered = [tool for tool in info.get("tools", []) if tool["name"] != answer_tool]
        if self._shown is not None:
            missing = sorted(set(self._shown) - {tool["name"] for tool in offered})
            if missing:
                raise UserError(f"agent llm: tools names {', '.join(missing)}, which the server does not have; "
                                f"its tools are {', '.join(tool['name'] for tool in offered)}")
            offered = [tool for tool in offered if tool["name"] in self._shown]
        task = self._tasks.get(str(info.get(TASK_ID)))
        text = observation["task"] if isinstance(observation, dict) else str(observation)
        messages: list[Any] = [SystemMessage(self._system_prompt)]
        # Tools the prompt itself names (the plan shown in instruction mode, the demonstration's calls)
        # are offered whatever the scope: a model told to call a tool must be able to.
        named = [str(step["call"]) for step in _metadata(task).get("tool_plan", [])] if self._mode.shows_plan else []
        if self._demonstrations:
            if task is None:
                raise UserError(f"agent llm: task {info.get(TASK_ID)!r} is not in the suite the agent was given, so "
                                "it has no demonstration; give the agent the suite the env runs")
            try:
                shown = demonstration_task(task, self._suite, answer_tool, mode=self._mode)
            except ValueError:  # no training task of its kind fits a demonstration (DORA's long T5 reports)
                self._events.append(Event(source=self.name, kind="note", data={"demonstration": None}))
            else:
                messages += demonstration_messages(shown, answer_tool, mode=self._mode)
                named += [call.call for call in shown.gold_trajectory]
                self._events.append(Event(source=self.name, kind="note", data={"demonstration": shown.id}))
        scope = self._scope if self._scope is not None else auto_scope(len(offered))
        names = scope_tools(text, offered, scope)
        names += [name for name in dict.fromkeys(named) if name not in names and name != answer_tool]
        search = len(names) < len(offered)
        known = {tool["name"] for tool in offered}
        shown_tools = self._offer([name for name in names if name in known], search=search, answer_tool=answer_tool)
        messages.append(HumanMessage(user_prompt(self._mode, text, _metadata(task))))
        self._thread = uuid.uuid4().hex
        self._load_weights()
        return self._advance(episode_state(messages, offered, answer_tool, shown_tools,
                                           task.eval_spec.kind if task is not None else None))

    def _offer(self, names: Sequence[str], *, search: bool, answer_tool: str) -> list[str]:
        """The names offered: the server tools ``names`` (in that order), ``find_tools`` when ``search``
        (some tools are left out) and the answer tool (none in a mode whose tasks end by themselves, a text
        game's); recorded as a ``tools_offered`` note."""
        offered = offered_names(names, search=search, answer_tool=answer_tool)
        if self._mode.answer == "none":
            offered = [name for name in offered if name != answer_tool]
        self._events.append(Event(source=self.name, kind="note", data={"tools_offered": offered}))
        return offered

    def _internal_answer(self, call: CheckedCall, conversation: Sequence[AnyMessage], state: EpisodeState,
                         offered: Sequence[str]) -> ToolMessage | None:
        """The agent's own answer to ``call``, when it is not one for the env: ``find_tools`` (the tools
        found join the offered set: the answer's artifact holds the set), or a call identical to an
        earlier one (its earlier result again, with a nudge); None for a call the env runs."""
        answer_tool, server_tools = state["answer_tool"], state["server_tools"]
        if call.name == FIND_TOOLS:
            shown = [name for name in offered if name not in (FIND_TOOLS, answer_tool)]
            in_results = self._widens_in_results()
            found = find_tools(str(call.arguments["query"]), server_tools, shown,
                               int(call.arguments.get("k", FIND_TOOLS_DEFAULT_K)), schemas=in_results)
            widened = self._offer(found.offered, search=len(found.offered) < len(server_tools),
                                  answer_tool=answer_tool)
            message = tool_message(call, ToolResult(found.result))
            message.artifact = {OFFERED: widened, **({PROMPTED: prompted_now(state)} if in_results else {})}
            return message
        if self._check_numbers:
            ungrounded = ungrounded_numbers(call.arguments, _shown_numbers(conversation))
            if ungrounded:
                self._events.append(Event(source=self.name, kind="note", data={"ungrounded_numbers": ungrounded}))
                text = ungrounded_message(ungrounded, answer_tool)
                return ToolMessage(content=text, tool_call_id=call.id, name=call.name, status="error",
                                   artifact={"unrun": "ungrounded_numbers", WRITTEN: len(text)})
        if call.name == answer_tool and self._review_answer and not _reviewed(conversation):
            self._events.append(Event(source=self.name, kind="note",
                                      data={"answer_review": call.arguments.get("answer")}))
            text = review_message(_question(conversation), answer_tool)
            return ToolMessage(content=text, tool_call_id=call.id, name=call.name, status="error",
                               artifact={"unrun": ANSWER_REVIEW, "may_repeat": True, WRITTEN: len(text)})
        earlier = earlier_result(conversation, call, self._spec_map(state, offered))
        if earlier is None:
            return None
        self._events.append(Event(source=self.name, kind="note", data={"repeated_call": call.name}))
        # The notice is the agent's own text, and so is any of the earlier answer's (a notice again).
        own, returned = written_split(earlier)
        notice = f"{REPEATED_CALL.format(answer_tool=answer_tool)} {own}"
        return ToolMessage(content=notice + returned, tool_call_id=call.id, name=call.name, status=earlier.status,
                           artifact={WRITTEN: len(notice)})

    def _load_weights(self) -> None:
        """Load a local model's weights before its first call, so that call's latency is the call's: the
        load is a ``note`` event ``{"model_load_s": ...}`` of the step where it happened."""
        model = self._chat_model()
        if "weights" in dir(type(model)):
            start = time.perf_counter()
            getattr(model, "weights")  # noqa: B009 - a property that loads once per process
            seconds = time.perf_counter() - start
            if seconds > 0.5:
                self._events.append(Event(source=self.name, kind="note", data={"model_load_s": round(seconds, 1)}))

    def _receive(self, observation: Any, info: dict[str, Any]) -> str:
        state = self._state()
        running = self._running(state)
        if running is None:
            raise RuntimeError("act() was called again after the agent's final action; reset() starts a new task")
        message = _result_message(running, observation, info)
        if self._kwargs["checklist"]:
            note = CHECKLISTS[self._mode.name]([*state["messages"], message])
            if note is not None:
                message.content = with_note(str(message.content), note)
        action = self._answer_calls(state, message)
        return action if action is not None else self._advance(None)

    def _answer_calls(self, state: EpisodeState, result: ToolMessage | None = None) -> str | None:
        """Answer the current reply's calls in call order, from its first unanswered one: ``result`` (what
        the env gave for the call it ran), then the agent's own answers (a malformed call's rejection, a
        call answered without the env) up to the next call for the env. The answers are written into the
        checkpoint; the action of that next call is returned, or None once every call is answered (the
        reply's ``find_tools`` answers then widen the offered tools)."""
        messages = state["messages"]
        reply_at = cast(int, current_reply(messages))
        offered = offered_now(state, reply_at)
        answers = [] if result is None else [result]
        ask: CheckedCall | None = None
        for call in self._checked(state, reply_at)[answered(messages, reply_at) + len(answers):]:
            if call.problem is not None:
                answers.append(rejection(call, self._spec_map(state, offered)))
                continue
            answer = self._internal_answer(call, messages[:reply_at], state, offered)
            if answer is None:
                ask = call
                break
            answers.append(answer)
            if isinstance(answer.artifact, dict) and OFFERED in answer.artifact:
                offered = list(answer.artifact[OFFERED])
        update: dict[str, Any] = {"messages": answers} if answers else {}
        if ask is None and offered != state["offered"]:
            update[OFFERED] = offered
        if update:
            self._write(update)
        return call_text(ask.name, ask.arguments) if ask is not None else None

    def _advance(self, start: EpisodeState | None) -> str:
        """Run the graph (from ``start``, else from its checkpoint) to its next pause (a reply with calls)
        or its end; the action that follows."""
        config = self._config()
        while True:
            graph = self._graph(start if start is not None else self._state())
            state = self._values = cast(EpisodeState, graph.invoke(start, config))
            start = None
            if state["stop_reason"] is not None:
                return self._stop_action(state["stop_reason"])
            if not wants_tools(state):
                # The answer is a typed call of the answer tool, never prose read for one.
                self._events.append(Event(source=self.name, kind="note", data={"no_call": True}))
                self._write({"messages": [HumanMessage(NO_CALL.format(answer_tool=state["answer_tool"]))]})
                continue
            redrawn = last_reply(state).response_metadata.get("redrawn")
            if redrawn:
                self._events.append(Event(source=self.name, kind="note", data={"redrawn_repeats": redrawn}))
            malformed = [{"name": call.name, "problem": call.problem}
                         for call in self._checked(state, len(state["messages"]) - 1) if call.problem]
            if malformed:
                self._events.append(Event(source=self.name, kind="note", data={"malformed_calls": malformed}))
            action = self._answer_calls(state)
            if action is not None:
                return action

    # Revising ------------------------------------------------------------------------------------
    def reply(self) -> tuple[list[AnyMessage], AIMessage] | None:
        """The conversation before the current reply, and the reply, while none of its calls has run
        (the reply can still be revised); None otherwise (between calls of one reply, or ended by a budget)."""
        if self._thread is None:
            return None
        state = self._state()
        messages = list(state["messages"])
        reply_at = current_reply(messages)
        if reply_at is None or state["stop_reason"] is not None:
            return None
        calls = self._checked(state, reply_at)
        done = answered(messages, reply_at)
        # Only rejections of malformed calls may be written yet: none of the reply's calls has run.
        if done >= len(calls) or any(call.problem is None for call in calls[:done]):
            return None
        return messages[:reply_at], cast(AIMessage, messages[reply_at])

    def revise(self, notice: AnyMessage | None, *,
               edit: Callable[[ToolMessage, bool], str] | None = None) -> AgentOutput:
        """Write the current reply again after ``notice`` (None: none; see Revising in the module doc); with
        ``edit``, every tool result of the task's turns (not a worked example's) is first replaced by
        ``edit(result, answered)`` where that differs from its text (``answered``: one of the results just
        before the reply). Returns the step's new output: the last ``act``'s, then the revision's turns and
        events, and the new reply's action; the output ``act`` returned is left as it was."""
        found = self.reply()
        if found is None:
            raise RuntimeError("there is no reply to revise: a call of it already ran, or the episode ended")
        before, _ = found
        state = self._state()
        # The reply leaves, with the rejections of its malformed calls already written after it.
        edits: list[Any] = [RemoveMessage(id=str(message.id)) for message in state["messages"][len(before):]]
        if edit is not None:
            latest = len(before)
            while latest and isinstance(before[latest - 1], ToolMessage):
                latest -= 1
            for at, message in enumerate(before):
                if task_result(message):
                    text = edit(message, at >= latest)
                    if text != message.content:
                        edits.append(message.model_copy(update={"content": text}))
        if notice is not None:
            edits.append(notice)
        # The rewritten reply stands in for the first one: one reply of the agent's budget of model calls.
        self._write({"messages": edits, "model_calls": state["model_calls"] - 1})
        action = self._advance(None)
        first = self._output if self._output is not None else AgentOutput(action=None)
        # The runner records the returned output; a lent model's calls while its action runs join it.
        self._output = AgentOutput(action=action, tool_call=first.tool_call,
                                   messages=[*first.messages, *records(self._state()["messages"][len(before):])],
                                   events=[*first.events, *self._drain_events()])
        return self._output

    def _stop_action(self, reason: str) -> str:
        self._events.append(Event(source=self.name, kind="note", data={"budget": reason}))
        return stop_action(reason)

    # Branching -----------------------------------------------------------------------------------
    def snapshot(self) -> LLMAgentSnapshot:
        """This point of the episode (see Branching in the module docstring)."""
        found = self._saver.get_tuple(self._thread_config()) if self._thread is not None else None
        return LLMAgentSnapshot(checkpoint=copy.deepcopy(found.checkpoint) if found else None,
                                metadata=copy.deepcopy(found.metadata) if found else None, seed=self._seed,
                                max_call_chars=self._max_call_chars, elapsed_s=time.monotonic() - self._started_at)

    def restore(self, snapshot: LLMAgentSnapshot) -> None:
        """Stand at ``snapshot``: its checkpoint copied into a fresh thread of this agent's checkpointer."""
        self._clear_episode()
        self._seed, self._max_call_chars = snapshot.seed, snapshot.max_call_chars
        self._started_at = time.monotonic() - snapshot.elapsed_s
        if snapshot.checkpoint is not None and snapshot.metadata is not None:
            self._thread = uuid.uuid4().hex
            checkpoint = copy.deepcopy(snapshot.checkpoint)
            self._saver.put(self._thread_config(), checkpoint, copy.deepcopy(snapshot.metadata),
                            checkpoint["channel_versions"])

    def reseed(self, seed: int) -> None:
        """Draw from ``seed`` from here on: a sampling model's next replies are another draw (each call's
        generator is seeded from the episode's seed and the prompt); greedy decoding draws nothing. The
        prefix branching protocol's repeated draws and rollbacks use it (``BranchableAgent``)."""
        self._seed = seed

    def fork(self, snapshot: LLMAgentSnapshot) -> LLMAgent:
        """An independent agent standing at ``snapshot`` (same configuration and model object)."""
        twin = type(self)(**{**self._kwargs, "model": self._model or self._kwargs["model"]})
        twin._kwargs = dict(self._kwargs)
        twin.restore(snapshot)
        return twin


def task_result(message: AnyMessage) -> TypeGuard[ToolMessage]:
    """Whether ``message`` is the result of one of the task's own calls (not of a worked example's)."""
    return isinstance(message, ToolMessage) and not str(message.tool_call_id).startswith(DEMO_CALL_PREFIX)


def _shown_numbers(conversation: Sequence[AnyMessage]) -> list[str]:
    """The texts of the episode a call's numbers may come from: the task (every user message but a
    worked example's) and the results of its own calls (not the example's, not the agent's own
    rejections of ungrounded numbers)."""
    texts = []
    for message in conversation:
        text = message.content if isinstance(message.content, str) else json.dumps(message.content, default=str)
        if isinstance(message, HumanMessage) and not text.startswith(DEMO_OPENING):
            texts.append(text)
        elif task_result(message) and not text.startswith(UNGROUNDED_PREFIX):
            texts.append(text)
    return texts


def review_message(question: str, answer_tool: str) -> str:
    """The reply to a first answer under ``review_answer``: the question again, and what to do next."""
    return REVIEW.format(question=question, answer_tool=answer_tool)


def _reviewed(conversation: Sequence[AnyMessage]) -> bool:
    """Whether an answer of this episode was already held back for review (one review per episode)."""
    return any(isinstance(message, ToolMessage) and isinstance(message.artifact, dict)
               and message.artifact.get("unrun") == ANSWER_REVIEW for message in conversation)


def _question(conversation: Sequence[AnyMessage]) -> str:
    """The task as the model was given it: the first user message that is not a worked example."""
    for message in conversation:
        if isinstance(message, HumanMessage) and isinstance(message.content, str) \
                and not message.content.startswith(DEMO_OPENING):
            return message.content
    return ""


def _metadata(task: ToolTask | None) -> dict[str, Any]:
    return task.metadata if task is not None else {}


def _describe(model: BaseChatModel) -> str:
    source = getattr(model, "source", None)
    return f"{model._llm_type}:{source}" if source else model._llm_type


def _result_message(proposed: CheckedCall, observation: Any, info: dict[str, Any]) -> ToolMessage:
    """The tool message for ``proposed`` from what the env ran (``info['tool_call']``, else the
    observation's ``result`` JSON); when a controller replaced the call, the message says so."""
    call = info.get(TOOL_CALL)
    arguments: dict[str, Any] | None
    if isinstance(call, ToolCall):
        result, name, arguments = ToolResult(call.result, call.is_error), call.name, call.arguments
    else:
        reported = json.loads(observation["result"])
        result = ToolResult(reported.get("result"), bool(reported.get("is_error")))
        name, arguments = str(reported.get("tool") or ""), None
    message = tool_message(proposed, result)
    if name != proposed.name or (arguments is not None and arguments != proposed.arguments):
        what = call_text(name, arguments or {}) if name else "an action that is not a tool call"
        message.content = f"Your call was replaced before it ran by {what}. Its result: {message.content}"
    return message
