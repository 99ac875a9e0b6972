"""Episode traces for the run report: what an agent saw, said and did at each step, and what watched it.

One section per episode (anchor ``ep-<position>``, each step ``ep-<position>-step-<index>``) holds:
- a header: ids, env or task, seed, the agent with its configuration (a model's settings included),
  the episode config, versions, and the branch links: the episode it branched from and at which
  step (``BRANCHED_FROM`` in its header config), and the episodes that branched from it;
- totals: tool calls and errors, malformed calls, model calls with tokens, latency and cost (and how
  many a tool asked for), monitor and controller events;
- the timeline of monitor scores and controller decisions (``gauntlet.trace_timeline``);
- the steps: the conversation as chat bubbles (an assistant's tool calls with their arguments as
  JSON, tool results, errors highlighted), the step's tool call with result and latency, the action
  when there is no tool call, and the step's events (a model call a tool asked the agent's model for,
  MCP sampling, is marked with that tool). An intervention is highlighted where it
  happened: ``replace_action`` with the action proposed (when recorded) and the one taken, ``halt``
  after the last step taken or, when the episode was halted before its first step, in the outcome.
  A branch's shared prefix is folded, with a link to the same steps in its parent;
- the outcome.

A step whose messages repeat the conversation so far shows only the new ones. Every string from an
episode is HTML-escaped: model text and tool results are untrusted. The page needs no script.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from gauntlet.episode import Episode, Event, Message, Step, ToolCall
from gauntlet.replay import BRANCHED_FROM
from gauntlet.trace_timeline import episode_timeline, legend_html, timeline_svg

# Enough to read a run by; a page of 100 episodes of 400 plain env steps is about 6 MB.
TRACE_MAX_EPISODES = 100
TRACE_MAX_STEPS = 400
TEXT_MAX_CHARS = 20_000
OBSERVATION_MAX_CHARS = 300
ROLE_ALIASES = {"human": "user", "ai": "assistant"}
_MESSAGE_FIELDS_SHOWN = {"tool_calls", "invalid_tool_calls", "name", "tool_call_id", "status"}

TRACE_STYLE = """
section.trace { border-top: 3px solid #bbb; margin-top: 2.5rem; }
section.trace h3 { font-size: 1.1rem; } .nav { font-size: 0.85rem; }
.branch { background: #eef4ff; border-left: 4px solid #3f6fd8; padding: 0.3rem 0.7rem; margin: 0.4rem 0; }
pre { white-space: pre-wrap; word-break: break-word; margin: 0.2rem 0; padding: 0.3rem 0.5rem;
      background: #f6f6f6; font-size: 0.8rem; max-height: 24rem; overflow: auto; }
.step { border: 1px solid #e2e2e2; border-radius: 6px; padding: 0.4rem 0.7rem; margin: 0.5rem 0; }
.step:target { outline: 3px solid #3f6fd8; }
.step-head { font-size: 0.85rem; color: #444; margin-bottom: 0.3rem; }
.step-head a { font-weight: 600; } .flag { background: #eee; border-radius: 3px; padding: 0 0.3rem; }
.step.intervened { border-color: #f0a040; } .step.halted { border-color: #e53935; }
.step.branch-point { border-left: 5px solid #3f6fd8; }
details.shared > summary { cursor: pointer; color: #3f6fd8; margin: 0.5rem 0; }
.chat { display: flex; flex-direction: column; gap: 0.35rem; }
.msg { border-radius: 10px; padding: 0.35rem 0.7rem; max-width: 85%; }
.msg .text { white-space: pre-wrap; word-break: break-word; }
.msg .role { display: block; font-size: 0.75rem; font-weight: 600; color: #555; }
.msg.system { background: #efefef; max-width: 100%; font-size: 0.85rem; }
.msg.user { background: #e3efff; align-self: flex-start; }
.msg.assistant { background: #e5f5e5; align-self: flex-end; }
.msg.tool { background: #fff6dc; align-self: flex-start; }
.msg.other { background: #f3e5f5; }
.call { border: 1px solid #b9d8b9; background: #fff; border-radius: 6px; padding: 0.25rem 0.5rem; margin: 0.3rem 0; }
.call-name { font-family: monospace; font-weight: 700; }
.error, .malformed { border: 2px solid #b71c1c !important; background: #fdecea !important; }
.badge { background: #b71c1c; color: #fff; border-radius: 3px; padding: 0 0.35rem; font-size: 0.75rem; }
.toolcall { border: 1px solid #ddd; border-radius: 6px; padding: 0.3rem 0.6rem; margin: 0.35rem 0; }
.label { font-size: 0.75rem; color: #666; }
.event { font-size: 0.82rem; margin: 0.15rem 0; }
.event .tag { display: inline-block; min-width: 5.5rem; color: #666; }
.event.intervention { padding: 0.3rem 0.5rem; border-radius: 4px; background: #f3e5f5; }
.event.intervention.replace_action { background: #fff0e0; border-left: 4px solid #f0a040; }
.event.intervention.halt { background: #fdecea; border-left: 4px solid #e53935; }
.swap { display: grid; grid-template-columns: 1fr 1fr; gap: 0.5rem; }
svg.timeline { font-family: system-ui, sans-serif; } svg .tick { font-size: 10px; fill: #555; }
svg .axis { font-size: 11px; fill: #333; } svg .mark-label { font-size: 10px; font-weight: 600; }
.legend { font-size: 0.8rem; } .key { margin-right: 1rem; white-space: nowrap; }
.swatch { display: inline-block; width: 0.8rem; height: 0.8rem; margin-right: 0.3rem; vertical-align: middle; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _clip(text: str, limit: int = TEXT_MAX_CHARS) -> str:
    return text if len(text) <= limit else f"{text[:limit]}\n… ({len(text) - limit} more characters not shown)"


def _holds_json(text: str) -> bool:
    """Whether ``text`` is a JSON object or array (as tool results and call arguments often are)."""
    stripped = text.strip()
    try:
        return stripped[:1] in ("{", "[") and isinstance(json.loads(stripped), (dict, list))
    except ValueError:
        return False


def _pretty(value: Any) -> str:
    """``value`` as readable text: JSON pretty-printed, including a string that holds JSON."""
    if isinstance(value, str):
        if not _holds_json(value):
            return value
        value = json.loads(value)
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _pre(value: Any) -> str:
    return f'<pre class="json">{_e(_clip(_pretty(value)))}</pre>'


def _inline(value: Any, limit: int = OBSERVATION_MAX_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return f"<code>{_e(_clip(text, limit))}</code>"


def episode_anchor(position: int) -> str:
    return f"ep-{position}"


def step_anchor(position: int, index: int) -> str:
    return f"ep-{position}-step-{index}"


# Branches -----------------------------------------------------------------------------------------
def branch_origin(episode: Episode) -> tuple[str, int] | None:
    """(parent episode id, step index) of a branched episode, or None for an episode that is no branch."""
    origin = episode.config.get(BRANCHED_FROM)
    if isinstance(origin, dict) and isinstance(origin.get("episode_id"), str) and isinstance(origin.get("at"), int):
        return origin["episode_id"], origin["at"]
    # Branches written before the header named their origin said so only in the outcome's metrics.
    legacy = episode.outcome.metrics.get("branch") if episode.outcome is not None else None
    if isinstance(legacy, dict) and isinstance(legacy.get("from_episode"), str) and isinstance(legacy.get("at"), int):
        return legacy["from_episode"], legacy["at"]
    return None


@dataclass
class _Family:
    """Who branched from whom among the episodes shown, by position."""

    position_of: dict[str, int] = field(default_factory=dict)
    children: dict[int, list[tuple[int, int]]] = field(default_factory=dict)

    @classmethod
    def of(cls, episodes: Sequence[Episode]) -> _Family:
        family = cls()
        for position, episode in enumerate(episodes):
            family.position_of.setdefault(episode.episode_id, position)
        for position, episode in enumerate(episodes):
            origin = branch_origin(episode)
            if origin is not None and origin[0] in family.position_of:
                family.children.setdefault(family.position_of[origin[0]], []).append((position, origin[1]))
        return family

    def link(self, episode_id: str, step: int | None = None) -> str:
        position = self.position_of.get(episode_id)
        if position is None:
            return f"<code>{_e(episode_id)}</code> (not in this report)"
        target = episode_anchor(position) if step is None else step_anchor(position, step)
        return f'<a class="branch-link" href="#{target}"><code>{_e(episode_id)}</code></a>'


def _branch_html(episode: Episode, position: int, episodes: Sequence[Episode], family: _Family) -> str:
    lines = []
    origin = branch_origin(episode)
    if origin is not None:
        lines.append(f"Branched from {family.link(origin[0], origin[1])} at step {origin[1]}: steps 0 to "
                     f"{origin[1] - 1} are its prefix, step {origin[1]} is where this episode took another course.")
    branches = family.children.get(position, [])
    if branches:
        links = ", ".join(f"{family.link(episodes[child].episode_id, at)} at step {at}" for child, at in branches)
        lines.append(f"Branches: {links}.")
    return "".join(f'<p class="branch">{line}</p>' for line in lines)


# Conversation -------------------------------------------------------------------------------------
def _proposed_call(call: Any, malformed_error: Any = None) -> str:
    """One tool call an assistant message proposes (LangChain's or OpenAI's shape)."""
    if not isinstance(call, dict):
        return f'<div class="call malformed">{_pre(call)}</div>'
    nested = call.get("function")
    function: dict[str, Any] = nested if isinstance(nested, dict) else {}
    name = call.get("name", function.get("name"))
    arguments = call["args"] if "args" in call else call.get("arguments", function.get("arguments"))
    problem = malformed_error
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            problem = problem or "the arguments are not valid JSON"
    css = "call malformed" if problem else "call"
    head = f'<span class="call-name">{_e(name)}</span>'
    if call.get("id"):
        head += f' <span class="label">id {_e(call["id"])}</span>'
    if problem:
        head += f' <span class="badge">malformed</span> <span class="label">{_e(problem)}</span>'
    return f'<div class="{css}">{head}{_pre(arguments)}</div>'


def _content_html(content: Any, data: bool = False) -> str:
    """A message's content; with ``data`` (a tool's reply) text that holds JSON is pretty-printed."""
    if content is None or content == "" or content == []:
        return ""
    if isinstance(content, str):
        if data and _holds_json(content):
            return _pre(content)
        return f'<div class="text">{_e(_clip(content))}</div>'
    if isinstance(content, list):  # content blocks: text shown as text, anything else as JSON
        return "".join(f'<div class="text">{_e(_clip(block["text"]))}</div>'
                       if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
                       else _pre(block) for block in content)
    return _pre(content)


def _message_html(message: Message) -> str:
    extra = dict(message.__pydantic_extra__ or {})
    role = ROLE_ALIASES.get(message.role, message.role)
    css = role if role in ("system", "user", "assistant", "tool") else "other"
    failed = role == "tool" and (extra.get("status") == "error" or extra.get("is_error") is True)
    head = _e(role)
    if extra.get("name"):
        head += f" · {_e(extra['name'])}"
    if extra.get("tool_call_id"):
        head += f' <span class="label">for call {_e(extra["tool_call_id"])}</span>'
    if failed:
        head += ' <span class="badge">error</span>'
    calls = extra.get("tool_calls") or []
    invalid = extra.get("invalid_tool_calls") or []
    body = [_content_html(message.content, data=role == "tool")]
    body += [_proposed_call(call) for call in (calls if isinstance(calls, list) else [calls])]
    body += [_proposed_call(call, (call.get("error") if isinstance(call, dict) else None) or "could not be parsed")
             for call in (invalid if isinstance(invalid, list) else [invalid])]
    rest = {key: value for key, value in extra.items() if key not in _MESSAGE_FIELDS_SHOWN}
    if rest:
        body.append(f'<details><summary class="label">more fields</summary>{_pre(rest)}</details>')
    return f'<div class="msg {css}{" error" if failed else ""}"><span class="role">{head}</span>{"".join(body)}</div>'


def _new_messages(messages: list[Message], conversation: list[dict[str, Any]]) -> list[Message]:
    """The messages of a step not shown before; ``conversation`` (shown so far) is updated."""
    dumped = [message.model_dump() for message in messages]
    if conversation and dumped[:len(conversation)] == conversation:
        new = messages[len(conversation):]
        conversation[:] = dumped
        return new
    conversation.extend(dumped)
    return messages


def _tool_call_html(call: ToolCall) -> str:
    css = "toolcall error" if call.is_error else "toolcall"
    error = ' <span class="badge">error</span>' if call.is_error else ""
    return (f'<div class="{css}"><div>tool call <span class="call-name">{_e(call.server)} / {_e(call.name)}</span>'
            f'{error} <span class="label">{call.latency_ms:.1f} ms</span></div>'
            f'<div class="label">arguments</div>{_pre(call.arguments)}'
            f'<div class="label">result</div>{_pre(call.result)}</div>')


# Events -------------------------------------------------------------------------------------------
def _scores_text(data: dict[str, Any]) -> str:
    return ", ".join(f"{_e(key)} = {value:.4g}" if isinstance(value, float) else f"{_e(key)} = {_inline(value, 120)}"
                     for key, value in data.items())


def _intervention_html(event: Event, step: Step | None) -> str:
    name = str(event.data.get("intervention", "intervention"))
    reason = event.data.get("reason") or ""
    css = name if name in ("replace_action", "halt") else "other"
    head = f'<span class="tag">intervention</span> <b>{_e(name)}</b> by <b>{_e(event.source)}</b>'
    if reason:
        head += f": {_e(reason)}"
    detail = ""
    if name == "halt":
        detail = (" — the episode stopped after this step; the step it was asked about never ran." if step is not None
                  else " — the episode was halted before its first step.")
    elif name == "replace_action":
        # The step's action is the replacement the runner took; the proposal is on record only if the
        # controller's event kept it.
        taken = event.data.get("action", step.action if step is not None else None)
        proposed = (_pre(event.data["original_action"]) if "original_action" in event.data
                    else '<p class="label">not recorded</p>')
        detail = (f'<div class="swap"><div><div class="label">proposed</div>{proposed}</div>'
                  f'<div><div class="label">taken instead</div>{_pre(taken)}</div></div>')
    return f'<div class="event intervention {css}">{head}{detail}</div>'


def _event_html(event: Event, step: Step | None) -> str:
    cost = f' <span class="label">({event.cost_ms:.2f} ms)</span>' if event.cost_ms else ""
    source = f"<b>{_e(event.source)}</b>"
    if event.kind == "intervention":
        return _intervention_html(event, step)
    if event.kind == "monitor":
        body = f"{source}: {_scores_text(event.data)}"
    elif event.kind == "decision":
        data = dict(event.data)
        verdict = _e(data.pop("kind", "continue"))
        if data.get("intervention"):
            verdict += f" ({_e(data.pop('intervention'))})"
        reason = data.pop("reason", "")
        scores = data.pop("scores", None) or {}
        body = f"{source}: {verdict}" + (f" — {_e(reason)}" if reason else "")
        if scores:
            body += f" · {_scores_text(scores)}"
        if data:
            body += f" {_inline(data)}"
    elif event.kind == "model_call":
        data = event.data
        model = f"{source}: {_e(data.get('model') or 'model')}"
        if isinstance(data.get("requested_by"), dict):  # a tool server asked for it (MCP sampling)
            tool = data["requested_by"].get("tool")
            model += f' · <span class="flag">{f"asked by tool {_e(tool)}" if tool else "asked by a tool"}</span>'
        if "error" in data:  # a failed call (it may have been retried)
            body = f'{model} · <span class="badge">failed</span> {_e(data["error"])}'
        else:
            body = (f"{model} · {_e(data.get('input_tokens', '?'))} tokens in, "
                    f"{_e(data.get('output_tokens', '?'))} out")
        body += (f" · {_num(data.get('latency_ms'), 1)} ms"
                 + (f" · ${_num(data.get('cost_usd'), 6)}" if data.get("cost_usd") is not None else ""))
    else:
        body = f"{source}: {_inline(event.data)}"
        problems = event.data.get("malformed_calls") if event.kind == "note" else None
        if isinstance(problems, list) and problems:
            listed = "; ".join(f"{_e(p.get('name'))}: {_e(p.get('problem'))}" if isinstance(p, dict) else _e(p)
                               for p in problems)
            body = f'{source}: <span class="badge">malformed</span> {listed}'
    kind = str(event.kind)
    return f'<div class="event {_e(kind)}"><span class="tag">{_e(kind.replace("_", " "))}</span> {body}{cost}</div>'


def _num(value: Any, digits: int) -> str:
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else _e(value)


# Totals -------------------------------------------------------------------------------------------
def _malformed_calls(step: Step) -> int:
    """Malformed calls the model wrote at ``step``: as the agent counted them in a ``malformed_calls``
    note, or as its messages' ``invalid_tool_calls`` (the two may name the same calls)."""
    noted = sum(len(event.data["malformed_calls"]) for event in step.events
                if event.kind == "note" and isinstance(event.data.get("malformed_calls"), list))
    invalid = sum(len(extra.get("invalid_tool_calls") or [])
                  for extra in (message.__pydantic_extra__ for message in step.messages) if extra)
    return max(noted, invalid)


def _totals(episode: Episode) -> list[tuple[str, str]]:
    """(label, plain text) rows of what the episode adds up to."""
    events = [event for step in episode.steps for event in step.events]
    events += episode.outcome.events if episode.outcome is not None else []
    calls = [step.tool_call for step in episode.steps if step.tool_call is not None]
    malformed = sum(_malformed_calls(step) for step in episode.steps)
    model = [event.data for event in events if event.kind == "model_call"]
    rows = [("steps", str(len(episode.steps))), ("return", f"{episode.total_reward:.3f}")]
    if any(step.cost for step in episode.steps):
        rows.append(("safety cost", f"{sum(step.cost for step in episode.steps):.3f}"))
    if calls:
        errors = sum(call.is_error for call in calls)
        rows.append(("tool calls", f"{len(calls)} ({errors} error{'' if errors == 1 else 's'}, "
                                   f"{sum(call.latency_ms for call in calls):.1f} ms)"))
    if malformed:
        rows.append(("malformed calls proposed", str(malformed)))
    if model:
        def total(key: str) -> float:
            return float(sum(d[key] for d in model if isinstance(d.get(key), (int, float))))
        models = sorted({str(d["model"]) for d in model if d.get("model")})
        failed = sum("error" in d for d in model)
        asked = sum("requested_by" in d for d in model)
        rows += [("model calls", f"{len(model)}" + (f" ({', '.join(models)})" if models else "")
                  + (f", {failed} failed" if failed else "") + (f", {asked} asked by tools" if asked else "")),
                 ("tokens", f"{total('input_tokens'):.0f} in, {total('output_tokens'):.0f} out"),
                 ("model latency", f"{total('latency_ms'):.1f} ms")]
        if any(d.get("cost_usd") is not None for d in model):
            rows.append(("model cost", f"${total('cost_usd'):.6f}"))
    for kind in ("monitor", "decision", "intervention", "note"):
        count = sum(event.kind == kind for event in events)
        if count:
            rows.append((f"{kind} events", str(count)))
    return rows


# Sections -----------------------------------------------------------------------------------------
def _rows(rows: Sequence[tuple[str, str]]) -> str:
    """A two-column table whose values are HTML already escaped by the caller."""
    body = "".join(f"<tr><th>{_e(label)}</th><td>{value}</td></tr>" for label, value in rows)
    return f'<table class="fields">{body}</table>'


def _header_rows(episode: Episode) -> list[tuple[str, str]]:
    rows = [("episode id", f"<code>{_e(episode.episode_id)}</code>"), ("run id", f"<code>{_e(episode.run_id)}</code>")]
    if episode.env_id is not None:
        rows.append(("env id", _e(episode.env_id)))
    if episode.task_id is not None:
        rows.append(("task id", _e(episode.task_id)))
    rows += [("seed", _e(episode.seed)), ("agent", f"<b>{_e(episode.agent.name)}</b>")]
    if episode.agent.config:
        rows.append(("agent config", _pre(episode.agent.config)))
    config = {key: value for key, value in episode.config.items() if key != BRANCHED_FROM}
    if config:
        rows.append(("config", _pre(config)))
    observation = episode.initial_observation
    if observation is not None:
        # Text and records read best laid out; an array (an env's state) on one line.
        rows.append(("initial observation", _pre(observation) if isinstance(observation, (str, dict))
                     else _inline(observation, TEXT_MAX_CHARS)))
    rows.append(("versions", _e(", ".join(f"{name} {version}" for name, version in sorted(episode.versions.items())))))
    rows.append(("created", _e(episode.created_at)))
    return rows


def _step_html(step: Step, position: int, conversation: list[dict[str, Any]], branch_at: int | None) -> str:
    kinds = {str(event.data.get("intervention")) for event in step.events if event.kind == "intervention"}
    css = ["step"] + (["halted"] if "halt" in kinds else ["intervened"] if kinds else [])
    if branch_at is not None and step.index == branch_at:
        css.append("branch-point")
    flags = [name for name, on in (("terminated", step.terminated), ("truncated", step.truncated)) if on]
    head = (f'<a href="#{step_anchor(position, step.index)}">step {step.index}</a> · reward {step.reward:.3f}'
            + (f" · cost {step.cost:.3f}" if step.cost else "")
            + "".join(f' <span class="flag">{flag}</span>' for flag in flags)
            + (' <span class="flag">branch point</span>' if "branch-point" in css else ""))
    body = []
    new = _new_messages(step.messages, conversation)
    if new:
        body.append(f'<div class="chat">{"".join(_message_html(message) for message in new)}</div>')
    if step.tool_call is not None:
        body.append(_tool_call_html(step.tool_call))
    elif step.messages:
        body.append(f'<div><span class="label">action</span> {_inline(step.action)}</div>')
    else:  # a plain env step: what the agent did and what it saw, on one line
        body.append(f'<div><span class="label">action</span> {_inline(step.action)} · '
                    f'<span class="label">observation</span> {_inline(step.observation)}</div>')
    body += [_event_html(event, step) for event in step.events]
    return (f'<div class="{" ".join(css)}" id="{step_anchor(position, step.index)}">'
            f'<div class="step-head">{head}</div>{"".join(body)}</div>')


def _outcome_html(episode: Episode) -> str:
    outcome = episode.outcome
    if outcome is None:
        return '<p class="note">No outcome: the episode was cut short before it ended.</p>'
    rows = [("score", _e("" if outcome.score is None else f"{outcome.score:.3f}")),
            ("success", _e("not known" if outcome.success is None else str(outcome.success).lower()))]
    if outcome.metrics:
        rows.append(("metrics", _pre(outcome.metrics)))
    events = "".join(_event_html(event, None) for event in outcome.events)
    return _rows(rows) + events


def _episode_section(episode: Episode, position: int, label: str, episodes: Sequence[Episode],
                    family: _Family) -> str:
    """The trace of one episode (see the module docstring)."""
    shown = episode.steps[:TRACE_MAX_STEPS]
    origin = branch_origin(episode)
    branch_at = origin[1] if origin is not None and origin[0] in family.position_of else None
    timeline = episode_timeline(episode)
    parts = [f'<section class="trace" id="{episode_anchor(position)}">',
             f"<h3>Episode {_e(label)}: <code>{_e(episode.episode_id)}</code></h3>",
             '<p class="nav"><a href="#episodes">back to the episode table</a></p>',
             _branch_html(episode, position, episodes, family), _rows(_header_rows(episode)),
             "<h4>Totals</h4>", _rows([(label, _e(text)) for label, text in _totals(episode)]), "<h4>Timeline</h4>"]
    if timeline.empty:
        parts.append('<p class="note">No monitor scores or controller decisions were recorded.</p>')
    else:
        def href(index: int) -> str | None:
            return f"#{step_anchor(position, index)}" if index < len(shown) else None
        parts += [timeline_svg(timeline, len(episode.steps), href), legend_html(timeline)]
    parts.append("<h4>Steps</h4>")
    if not episode.steps:
        parts.append('<p class="note">No step was taken.</p>')
    conversation: list[dict[str, Any]] = []
    steps = [_step_html(step, position, conversation, branch_at) for step in shown]
    if branch_at is not None and 0 < branch_at <= len(steps) and origin is not None:
        parts.append(f'<details class="shared"><summary>Steps 0 to {branch_at - 1}: the prefix shared with '
                     f"{family.link(origin[0])} (same steps there)</summary>{''.join(steps[:branch_at])}</details>")
        steps = steps[branch_at:]
    parts += steps
    if len(episode.steps) > len(shown):
        parts.append(f'<p class="note">Steps {len(shown)} to {len(episode.steps) - 1} are not shown.</p>')
    parts += ["<h4>Outcome</h4>", _outcome_html(episode), "</section>"]
    return "".join(parts)


def render_traces(episodes: Sequence[Episode], labels: Sequence[Any]) -> str:
    """The trace sections of the first ``TRACE_MAX_EPISODES`` episodes; ``labels`` name them (run index)."""
    shown = episodes[:TRACE_MAX_EPISODES]
    family = _Family.of(shown)
    parts = [_episode_section(episode, position, str(label), shown, family)
             for position, (episode, label) in enumerate(zip(shown, labels, strict=False))]
    if len(episodes) > len(shown):
        parts.append(f'<p class="note">Traces of the first {len(shown)} of {len(episodes)} episodes; a report of '
                     "one episode file (a run keeps one per episode under episodes/) shows any other.</p>")
    return "".join(parts)


def traced(position: int) -> bool:
    """Whether the episode at ``position`` has a trace section in the report."""
    return position < TRACE_MAX_EPISODES


__all__ = ["TRACE_MAX_EPISODES", "TRACE_MAX_STEPS", "TRACE_STYLE", "branch_origin", "episode_anchor",
           "render_traces", "step_anchor", "traced"]
