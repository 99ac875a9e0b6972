"""The trace viewer: each episode's conversation, tool calls, monitor timeline, controller decisions and
branch links, as a real browser renders them.

The report is opened in headless Chromium (Debian's ``chromium``); the assertions read the DOM the
browser built and a screenshot it drew. Without Chromium these tests skip, unless ``CI`` is set
(``.ci/run`` installs it), where they fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image

from gauntlet.episode import (
    AgentSpec,
    Episode,
    EpisodeWriter,
    Event,
    Message,
    Outcome,
    Step,
    ToolCall,
    load_episodes,
)
from gauntlet.replay import BRANCHED_FROM
from gauntlet.report import write_report
from gauntlet.runner import rollout
from gauntlet.trace_timeline import MARKER_COLOURS, SERIES_COLOURS

CHROMIUM = shutil.which("chromium")
# What a hostile tool result or model reply tries: a script, and an image whose error handler runs one.
INJECTION = ("<script>window.__injected = 'script'; document.documentElement.setAttribute('data-injected', "
             "'script')</script><img src=x onerror=\"window.__injected = 'img'; "
             "document.documentElement.setAttribute('data-injected', 'img')\">")
# Appended by the test (never part of a report): reads the global an injection would set, into the DOM.
PROBE = ("<script>document.documentElement.setAttribute('data-probe', "
         "String(typeof window.__injected))</script>")
QUESTION = "What do 10 g of aspirin cost from the cheapest supplier?"


# Synthetic episodes -------------------------------------------------------------------------------
def _model_call(tokens_in: int, tokens_out: int) -> Event:
    return Event(source="llm", kind="model_call", data={"input_tokens": tokens_in, "output_tokens": tokens_out,
                                                        "latency_ms": 850.0, "model": "scripted", "cost_usd": 0.0002})


def _monitor(risk: float) -> Event:
    return Event(source="probe", kind="monitor", data={"risk": risk, "drift": risk / 2}, cost_ms=1.5)


def _continue() -> Event:
    return Event(source="guard", kind="decision", data={"kind": "continue", "reason": "", "scores": {}})


def _assistant_call(name: str, arguments: dict, call_id: str) -> Message:
    """An assistant turn as the LLM agent records it (``gauntlet.agents.llm.records``)."""
    return Message(role="assistant", content="", tool_calls=[{"id": call_id, "name": name, "arguments": arguments}])


def _tool_result(call_id: str, content: str, error: bool = False) -> Message:
    return Message(role="tool", content=content, tool_call_id=call_id, name="chem",
                   status="error" if error else "success")


def _llm_steps() -> list[Step]:
    """Four steps of a tool-calling agent: a search (whose result is hostile), a malformed call, a call a
    controller replaces, and a call it halts after. Each step records only its new messages."""
    catalogue = f'{{"items": [{{"sku": "A-100", "name": "aspirin {INJECTION}", "usd_per_g": 0.41}}]}}'
    search = ToolCall(server="chem", name="search_catalog", arguments={"query": "aspirin"}, result=catalogue,
                      latency_ms=12.5)
    bad = ToolCall(server="chem", name="price_of", arguments={}, is_error=True, latency_ms=0.0,
                   result="the arguments of price_of are not valid JSON (Expecting value at character 8)")
    buy = ToolCall(server="chem", name="buy", arguments={"sku": "A-100", "quantity_g": 10},
                   result={"total_usd": 4.1}, latency_ms=8.0)
    return [
        Step(index=0, action={"name": "search_catalog"}, tool_call=search, reward=0.0,
             messages=[Message(role="system", content="You buy chemicals for the lab at the lowest price."),
                       Message(role="user", content=QUESTION),
                       _assistant_call("search_catalog", {"query": "aspirin"}, "call_1")],
             events=[_model_call(412, 23), _continue(), _monitor(0.1)]),
        Step(index=1, action={"name": "price_of"}, tool_call=bad, reward=0.0,
             messages=[_tool_result("call_1", catalogue),
                       Message(role="assistant", content=f"Checking the price. {INJECTION}",
                               invalid_tool_calls=[{"id": "call_2", "name": "price_of", "args": '{"sku": ',
                                                    "error": "the arguments are not valid JSON"}])],
             events=[Event(source="llm", kind="model_call", data={"error": "RateLimitError", "latency_ms": 40.0,
                                                                  "model": "scripted"}),
                     _model_call(530, 18),
                     Event(source="llm", kind="note", data={"malformed_calls": [
                         {"name": "price_of", "problem": "the arguments are not valid JSON"}]}),
                     _continue(), _monitor(0.3)]),
        Step(index=2, action={"name": "buy", "arguments": {"sku": "A-100", "quantity_g": 10}}, tool_call=buy,
             reward=0.5,
             messages=[_tool_result("call_2", bad.result, error=True),
                       _assistant_call("buy", {"sku": "A-100", "quantity_g": 1000}, "call_3")],
             events=[_model_call(610, 25),
                     Event(source="guard", kind="decision", data={"kind": "intervene",
                                                                  "intervention": "replace_action",
                                                                  "reason": "quantity over the 10 g asked for"}),
                     Event(source="guard", kind="intervention",
                           data={"intervention": "replace_action", "reason": "quantity over the 10 g asked for",
                                 "original_action": {"name": "buy",
                                                     "arguments": {"sku": "A-100", "quantity_g": 1000}}}),
                     _monitor(0.6)]),
        Step(index=3, action={"name": "submit"}, truncated=True, reward=0.0,
             tool_call=ToolCall(server="chem", name="submit", arguments={"usd_per_g": 0.41},
                                result="recorded", latency_ms=2.0),
             messages=[_tool_result("call_3", '{"total_usd": 4.1}'),
                       _assistant_call("submit", {"usd_per_g": 0.41}, "call_4")],
             events=[_model_call(700, 12), _continue(), _monitor(0.9),
                     Event(source="guard", kind="decision", data={"kind": "intervene", "intervention": "halt",
                                                                  "reason": "risk above 0.8"}),
                     Event(source="guard", kind="intervention",
                           data={"intervention": "halt", "reason": "risk above 0.8"})]),
    ]


def _episodes() -> list[Episode]:
    agent = AgentSpec(name="llm", config={"model": "scripted:buy-aspirin.jsonl", "temperature": 0.0,
                                          "max_steps": 8})
    common = {"run_id": "trace-run", "task_id": "chem/aspirin-10g", "seed": 3, "agent": agent,
              "versions": {"gauntlet": "0.1.0"}, "initial_observation": QUESTION}
    parent = Episode(episode_id="ep-parent", steps=_llm_steps(), **common,
                     outcome=Outcome(score=0.5, success=False, metrics={"return": 0.5, "truncated": True}))
    prefix = [step.model_copy(deep=True) for step in parent.steps[:2]]
    own = Step(index=2, action={"name": "buy"}, reward=1.0, terminated=True,
               tool_call=ToolCall(server="chem", name="buy", arguments={"sku": "B-7", "quantity_g": 10},
                                  result={"total_usd": 3.2}),
               messages=[_tool_result("call_2", "error", error=True),
                         _assistant_call("buy", {"sku": "B-7", "quantity_g": 10}, "call_3b")],
               events=[_model_call(600, 20), _continue(), _monitor(0.2)])
    branch = Episode(episode_id="ep-branch", steps=[*prefix, own], **{**common, "run_id": "trace-run-b"},
                     config={BRANCHED_FROM: {"episode_id": "ep-parent", "at": 2}},
                     outcome=Outcome(score=1.0, success=True, metrics={"return": 1.0}))
    halted = Episode(episode_id="ep-halted-at-once", **common,
                     outcome=Outcome(score=0.0, metrics={"return": 0.0, "length": 0, "truncated": True},
                                     events=[Event(source="guard", kind="decision",
                                                   data={"kind": "intervene", "intervention": "halt",
                                                         "reason": "task outside policy"}),
                                             Event(source="guard", kind="intervention",
                                                   data={"intervention": "halt", "reason": "task outside policy"})]))
    oracle = Episode(episode_id="ep-oracle", **{**common, "agent": AgentSpec(name="chem-oracle")},
                     steps=[Step(index=0, action={"call": "lookup_price"}, reward=1.0, terminated=True,
                                 tool_call=ToolCall(server="chem", name="lookup_price", arguments={"sku": "A-100"},
                                                    result={"usd_per_g": 0.41}, latency_ms=3.0))],
                     outcome=Outcome(score=1.0, success=True))
    return [parent, branch, halted, oracle]


# A DOM read back from the browser ----------------------------------------------------------------
@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node] = field(default_factory=list)
    text: list[str] = field(default_factory=list)

    def walk(self):
        yield self
        for child in self.children:
            yield from child.walk()

    def find_all(self, tag: str | None = None, css: str | None = None, **attrs: str) -> list[Node]:
        return [node for node in self.walk() if (tag is None or node.tag == tag)
                and (css is None or css in node.attrs.get("class", "").split())
                and all(node.attrs.get(name.replace("_", "-")) == value for name, value in attrs.items())]

    def by_id(self, anchor: str) -> Node:
        found = self.find_all(id=anchor)
        assert len(found) == 1, f"{len(found)} elements with id {anchor!r}"
        return found[0]

    def text_content(self) -> str:
        return "".join(self.text) + "".join(child.text_content() for child in self.children)


class _TreeBuilder(HTMLParser):
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        node = Node(tag, {name: value or "" for name, value in attrs})
        self.stack[-1].children.append(node)
        if tag not in self.VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag, attrs):
        self.stack[-1].children.append(Node(tag, {name: value or "" for name, value in attrs}))

    def handle_endtag(self, tag):
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data):
        self.stack[-1].children.append(Node("#text", {}, text=[data]))


def parse(markup: str) -> Node:
    builder = _TreeBuilder()
    builder.feed(markup)
    return builder.root


def gauntlet(*args: str) -> subprocess.CompletedProcess[str]:
    """The ``gauntlet`` console script, run as a user runs it."""
    script = Path(sys.executable).with_name("gauntlet")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "gauntlet.cli"]
    return subprocess.run([*command, *args], capture_output=True, text=True)


# Chromium -----------------------------------------------------------------------------------------
def chromium(profile: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed; .ci/run installs it (apt-get install chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium); with CI set this is a failure")
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
               *arguments]
    return subprocess.run(command, capture_output=True, text=True, check=True)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("trace")
    with EpisodeWriter(folder / "episodes.jsonl") as writer:
        for episode in _episodes():
            writer.write_episode(episode)
    return write_report(folder / "episodes.jsonl", folder / "report.html")


@pytest.fixture(scope="module")
def dom(report, tmp_path_factory) -> Node:
    """The DOM Chromium built from the report, with the test's probe run after everything else."""
    probed = report.with_name("probed.html")
    probed.write_text(report.read_text().replace("</body></html>", PROBE + "</body></html>"))
    dumped = chromium(tmp_path_factory.mktemp("profile"), "--dump-dom", probed.as_uri()).stdout
    assert "<html" in dumped, "chromium returned no DOM"
    return parse(dumped)


def section(dom: Node, position: int) -> Node:
    return dom.by_id(f"ep-{position}")


def step(dom: Node, position: int, index: int) -> Node:
    return dom.by_id(f"ep-{position}-step-{index}")


# The trace -----------------------------------------------------------------------------------------
def test_the_conversation_renders_as_chat_bubbles_by_role(dom):
    first = step(dom, 0, 0)
    roles = [bubble.attrs["class"].split()[1] for bubble in first.find_all("div", css="msg")]
    assert roles == ["system", "user", "assistant"]
    assert QUESTION in first.find_all("div", css="user")[0].text_content()
    # step 1 records only what is new: the tool's answer and the next reply
    later = [bubble.attrs["class"].split()[1] for bubble in step(dom, 0, 1).find_all("div", css="msg")]
    assert later == ["tool", "assistant"]


def test_tool_calls_show_their_name_arguments_result_and_latency(dom):
    proposed = step(dom, 0, 0).find_all("div", css="call")[0]
    assert proposed.find_all("span", css="call-name")[0].text_content() == "search_catalog"
    assert '"query": "aspirin"' in proposed.text_content()
    executed = step(dom, 0, 0).find_all("div", css="toolcall")[0]
    assert "chem / search_catalog" in executed.text_content()
    assert "12.5 ms" in executed.text_content()
    assert '"usd_per_g": 0.41' in executed.text_content()  # a JSON result is pretty-printed


def test_a_malformed_call_and_a_failed_tool_call_are_highlighted(dom):
    malformed = step(dom, 0, 1).find_all("div", css="malformed")
    assert len(malformed) == 1 and "price_of" in malformed[0].text_content()
    assert '{"sku": ' in malformed[0].text_content()  # the raw text the model wrote
    noted = step(dom, 0, 1).find_all("div", css="note")[0].text_content()
    assert "malformed" in noted and "price_of: the arguments are not valid JSON" in noted
    totals = section(dom, 0).find_all("table", css="fields")[1]
    assert "malformed calls proposed1" in totals.text_content()  # the note and the message name the same call
    assert step(dom, 0, 1).find_all("div", css="toolcall")[0].attrs["class"] == "toolcall error"
    assert step(dom, 0, 2).find_all("div", css="tool")[0].find_all("span", css="badge")


def test_a_tool_agent_without_messages_shows_its_tool_call(dom):
    oracle = step(dom, 3, 0)
    assert not oracle.find_all("div", css="msg")
    assert "chem / lookup_price" in oracle.find_all("div", css="toolcall")[0].text_content()


def test_model_calls_are_shown_per_step_and_totalled(dom):
    calls = step(dom, 0, 0).find_all("div", css="model_call")
    assert len(calls) == 1 and "412 tokens in, 23 out" in calls[0].text_content()
    retried = step(dom, 0, 1).find_all("div", css="model_call")
    assert "failed" in retried[0].text_content() and "RateLimitError" in retried[0].text_content()
    totals = section(dom, 0).find_all("table", css="fields")[1].text_content()
    assert "5 (scripted), 1 failed" in totals and "2252 in, 78 out" in totals and "$0.000800" in totals


def test_monitor_scores_are_drawn_as_one_line_per_score(dom):
    timeline = section(dom, 0).find_all("svg", css="timeline")
    assert len(timeline) == 1
    series = {group.attrs["data-series"]: group for group in timeline[0].find_all("g", css="series")}
    assert set(series) == {"probe · risk", "probe · drift"}
    points = series["probe · risk"].find_all("polyline")[0].attrs["points"].split()
    assert len(points) == 4
    heights = [float(point.split(",")[1]) for point in points]
    assert heights == sorted(heights, reverse=True), "a rising risk is drawn rising (SVG y grows downwards)"


def test_decisions_are_marked_on_the_timeline_and_in_the_step_list(dom):
    timeline = section(dom, 0).find_all("svg", css="timeline")[0]
    kinds = [mark.attrs["data-kind"] for mark in timeline.find_all("g", css="mark")]
    assert kinds.count("replace_action") == 1 and kinds.count("halt") == 1
    assert kinds.count("continue") == 3  # steps 0, 1 and 3
    replaced = step(dom, 0, 2)
    assert "intervened" in replaced.attrs["class"].split()
    swap = replaced.find_all("div", css="replace_action")[0].text_content()
    assert '"quantity_g": 1000' in swap and '"quantity_g": 10\n' in swap  # proposed, then taken
    halted = step(dom, 0, 3)
    assert "halted" in halted.attrs["class"].split()
    assert "risk above 0.8" in halted.find_all("div", css="halt")[0].text_content()


def test_a_halt_before_the_first_step_is_shown_in_the_outcome_and_on_the_timeline(dom):
    early = section(dom, 2)
    assert not early.find_all("div", css="step")
    assert "halted before its first step" in early.find_all("div", css="halt")[0].text_content()
    marks = early.find_all("svg", css="timeline")[0].find_all("g", css="mark")
    assert [mark.attrs["data-kind"] for mark in marks] == ["halt"]


def test_timeline_marks_link_to_their_steps(dom):
    timeline = section(dom, 0).find_all("svg", css="timeline")[0]
    replace = [link for link in timeline.find_all("a") if link.find_all("g", data_kind="replace_action")]
    assert replace[0].attrs["href"] == "#ep-0-step-2"


def test_branches_link_to_each_other_both_ways(dom):
    parent, branch = section(dom, 0), section(dom, 1)
    assert "Branches:" in parent.find_all("p", css="branch")[0].text_content()
    assert [a.attrs["href"] for a in parent.find_all("a", css="branch-link")] == ["#ep-1-step-2"]
    assert "Branched from ep-parent at step 2" in branch.find_all("p", css="branch")[0].text_content()
    assert "#ep-0-step-2" in [a.attrs["href"] for a in branch.find_all("a", css="branch-link")]
    # the shared prefix is folded; the branch point is marked
    shared = branch.find_all("details", css="shared")[0]
    assert [node.attrs["id"] for node in shared.find_all("div", css="step")] == ["ep-1-step-0", "ep-1-step-1"]
    assert "branch-point" in step(dom, 1, 2).attrs["class"].split()


def test_every_link_in_the_page_resolves_to_an_anchor(dom):
    anchors = {node.attrs["id"] for node in dom.walk() if "id" in node.attrs}
    links = [node.attrs["href"] for node in dom.find_all("a") if node.attrs.get("href", "").startswith("#")]
    assert len(links) > 20
    assert [link for link in links if link[1:] not in anchors] == []
    assert not [node for node in dom.find_all("a") if not node.attrs.get("href", "#").startswith("#")]


def test_untrusted_text_is_shown_and_never_run(dom):
    html_node = dom.find_all("html")[0]
    assert html_node.attrs.get("data-probe") == "undefined", "the probe ran, and found no injected global"
    assert "data-injected" not in html_node.attrs
    assert [node.attrs for node in dom.find_all("script")] == [{}]  # the probe alone
    assert not [node for node in dom.find_all("img") if "onerror" in node.attrs]
    assert "<script>window.__injected = 'script'" in step(dom, 0, 1).text_content()


def test_the_timeline_is_drawn_with_its_series_and_marks(report, tmp_path):
    shot = tmp_path / "report.png"
    # Tall enough for the page down to episode 0's timeline; headless Chromium draws the top of a page.
    chromium(tmp_path / "profile", "--hide-scrollbars", "--window-size=1280,6000", f"--screenshot={shot}",
             report.as_uri())
    colours = {colour for _, colour in Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 24)}

    def rgb(hex_colour: str) -> tuple[int, int, int]:
        return int(hex_colour[1:3], 16), int(hex_colour[3:5], 16), int(hex_colour[5:7], 16)

    # Only the timeline paints these colours (the plots use matplotlib's, the page's CSS others).
    for hex_colour in (SERIES_COLOURS[0], SERIES_COLOURS[1], MARKER_COLOURS["replace_action"], MARKER_COLOURS["halt"]):
        assert rgb(hex_colour) in colours, f"{hex_colour} is not drawn"


# Branches recorded by the platform -------------------------------------------------------------------
def test_gauntlet_branch_then_report_links_the_branch_and_its_parent(tmp_path):
    import gymnasium as gym

    from gauntlet.basic_agents import RandomAgent

    original, branch, page = tmp_path / "original.jsonl", tmp_path / "branch.jsonl", tmp_path / "report.html"
    rollout(gym.make("CartPole-v1"), RandomAgent(), seed=4, max_steps=12, record=original)
    parent_id = load_episodes(original)[0].episode_id
    for command in (["branch", str(original), "--at", "5", "--action", "1", "--out", str(branch)],
                    ["report", str(original), str(branch), "--out", str(page)]):
        result = gauntlet(*command)
        assert result.returncode == 0, result.stderr
    assert load_episodes(branch)[0].config[BRANCHED_FROM] == {"episode_id": parent_id, "at": 5}
    dom = parse(page.read_text())
    assert [a.attrs["href"] for a in section(dom, 0).find_all("a", css="branch-link")] == ["#ep-1-step-5"]
    assert "#ep-0-step-5" in [a.attrs["href"] for a in section(dom, 1).find_all("a", css="branch-link")]
