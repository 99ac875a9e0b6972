"""Every tool of every registered tool server, fuzzed from its own input schema over a real stdio session.

For each server (``disaster``, ``chem`` and the env bridge ``env:<ENV_ID>``) the test starts
``gauntlet serve TARGET`` as a client would, lists its tools, and lets Hypothesis draw arguments from
each tool's listed ``inputSchema``: values valid by type (inside the declared bounds and outside them),
and hostile ones (a wrong type, a required argument missing, an argument the tool does not take, NaN
and infinities, negative and 65-bit numbers, huge strings, traversal paths, control characters and
unicode). The contract (DESIGN.md, Tool servers) is checked on every answer:

- the server answers every call, within a hang guard, with a ``tools/call`` result (never a protocol
  error, never silence, never a dead process);
- a failure is an ``isError`` result whose message is not empty and carries no traceback; nor may it
  be an ``internal error`` (a bug that escaped the tool's validation: bad input must be refused as
  the caller's to fix);
- no answer, error or result, names a folder of the server's (data root, workspaces, cache, the
  package's own source);
- after each tool's run, a cheap call of another tool still succeeds.

The client is a bare JSON-RPC line client rather than the SDK's: it sends ``NaN``, ``Infinity`` and
integers beyond 64 bits exactly as an independent client writes them (the SDK's client would turn a
NaN into ``null``), and it reports a server's own error responses instead of raising on them.

Every run tries each tool's documented example and that example with each numeric argument set to
each of ``NUMBER_EDGES``; the drawn examples come from a fixed seed (``derandomize``). Hypothesis also
mixes in literal constants of the package's modules imported so far, so the drawn set can shift with
what else the process imported before; the explicit examples do not.
"""

from __future__ import annotations

import json
import math
import os
import queue
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

import gauntlet
from gauntlet.bridges.server_process import serve_command
from gauntlet.bridges.tool_errors import example_value
from tests.shared import SMALL_CATALOGUE, SMALL_REACTIONS

# A hang guard per call, not a speed requirement: a tool that has not answered by then never will.
CALL_TIMEOUT_S = 60.0
STARTUP_TIMEOUT_S = 120.0
PROTOCOL_VERSION = "2025-06-18"

# The small data the servers run on: one disaster event at 64 x 64 cells, a small chem catalogue.
DISASTER_EVENT = "ahr-2021-flood"
# The chem server runs on the small chem data the chem tests use (built once per run in shared_data_home).
# Not fewer chemicals: on 200 the route generator finds too few two-step chains and draws all of its
# 60,000 first steps (87 s).

HUGE = 100_000
HOSTILE_STRINGS = [
    "", " ", "\x00", "\n", "a\x00b", "../../../../../../etc/passwd", "data/../../../etc/passwd",
    "ws/../../secret.geojson", "/etc/passwd", "~/.ssh/id_rsa", "C:\\Windows\\win.ini", "\\\\server\\share\\x",
    "data/%2e%2e/%2e%2e/x.tif", "file:///etc/passwd", "data/" + "a" * 300 + ".tif", "data/" + "a/" * 2000 + "x.tif",
    "x" * HUGE, "é" * 5000, "🧪" * 1000, "\u202e\ufeff\u200b", "NaN", "-1", "1e309", "null", "{}", "[]", "*",
    "' OR 1=1 --", "$(id)", "%s%s%s%n", "{0.__class__}", "<script>alert(1)</script>",
]
# Numbers every numeric argument is tried with: negative, beyond 64 bits, the smallest and the largest
# positive floats (a quotient of the two overflows), not a number, infinite.
NUMBER_EDGES = [-1, 2 ** 64 + 1, 5e-324, 1e308, math.nan, math.inf]
HOSTILE_NUMBERS = [math.nan, math.inf, -math.inf, -1, -1.5, -1e308, 1e308, 2 ** 64 + 1, -(2 ** 63) - 1, 0, -0.0,
                   5e-324]


# The client ------------------------------------------------------------------------------------
class LineClient:
    """An MCP client speaking newline-delimited JSON-RPC to a server process over its stdin and stdout."""

    def __init__(self, command: list[str], env: dict[str, str], stderr_path: Path):
        self.stderr_path = stderr_path
        with open(stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                            env=env)
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._next_id = 0
        threading.Thread(target=self._read, name="fuzz-client-stdout", daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        # json.dumps writes NaN and Infinity as the literals an independent client would send.
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any], timeout_s: float = CALL_TIMEOUT_S) -> dict[str, Any]:
        """Send one request; return the response with its id (server notifications are skipped)."""
        self._next_id += 1
        request_id = self._next_id
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no answer to {method} within {timeout_s:.0f} s: the server hangs") from None
            if line is None:
                raise AssertionError(f"the server exited ({self.process.wait()}) while answering {method}")
            message = json.loads(line)
            if message.get("id") == request_id:
                return message

    def initialize(self) -> None:
        response = self.request("initialize", {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                                               "clientInfo": {"name": "gauntlet-fuzz", "version": "1"}},
                                timeout_s=STARTUP_TIMEOUT_S)
        assert "result" in response, response
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def list_tools(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        cursor = None
        while True:
            response = self.request("tools/list", {"cursor": cursor} if cursor else {})
            tools += response["result"]["tools"]
            cursor = response["result"].get("nextCursor")
            if not cursor:
                return tools

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.request("tools/call", {"name": name, "arguments": arguments})

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def logged_cause(self, response: dict[str, Any]) -> str:
        """For an internal error, the exception the server logged under its incident id ('' otherwise)."""
        text = " ".join(str(block.get("text", "")) for block in response.get("result", {}).get("content", []))
        incident = re.match(r"internal error ([0-9a-f]+)", text)
        log = self.stderr_path.read_text(errors="replace")
        start = log.find(f"internal error {incident.group(1)}") if incident else -1
        if start < 0:
            return ""
        # The record: a header line, "Traceback ...", indented frames, then the exception's own line.
        causes = [line for line in log[start:].splitlines()[1:] if line and not line.startswith((" ", "Traceback"))]
        return f" (server log: {causes[0]})" if causes else ""


# Strategies from a schema ----------------------------------------------------------------------
def _hostile_value() -> st.SearchStrategy[Any]:
    """Any JSON value, weighted towards the ones that break careless code."""
    scalars = st.one_of(st.sampled_from(HOSTILE_STRINGS), st.sampled_from(HOSTILE_NUMBERS), st.none(), st.booleans(),
                        st.integers(), st.floats(), st.text(max_size=20))
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.text(max_size=8), inner, max_size=3), max_leaves=8)


# Built once: Hypothesis works out a strategy's properties the first time it draws from that object.
HOSTILE_VALUE = _hostile_value()


def _bounds(schema: dict[str, Any]) -> tuple[float | None, float | None]:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    return low, high


def typed_value(schema: dict[str, Any], definitions: dict[str, Any], strings: list[str],
                depth: int = 0) -> st.SearchStrategy[Any]:
    """Values of the type ``schema`` declares: mostly inside its bounds, sometimes at or beyond them.

    Strings come from ``strings`` (names the server knows, e.g. its data files), the schema's own
    examples, ``HOSTILE_STRINGS`` and arbitrary text: every one of them a string, as the type asks.
    """
    if "$ref" in schema:
        return typed_value(definitions.get(schema["$ref"].split("/")[-1], {}), definitions, strings, depth)
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"]) | (st.text(max_size=10) if depth == 0 else st.nothing())
    branches = [branch for key in ("anyOf", "oneOf") for branch in schema.get(key, [])]
    if branches:
        return st.one_of([typed_value(branch, definitions, strings, depth) for branch in branches])
    kinds = schema.get("type")
    if isinstance(kinds, list):
        return st.one_of([typed_value({**schema, "type": kind}, definitions, strings, depth) for kind in kinds])
    low, high = _bounds(schema)
    if kinds == "integer":
        inside = st.integers(min_value=math.ceil(low) if low is not None else None,
                             max_value=math.floor(high) if high is not None else None)
        return inside | st.sampled_from([-1, 0, 2 ** 31, -(2 ** 63), 2 ** 64 + 1])
    if kinds == "number":
        inside = st.floats(min_value=low, max_value=high, allow_nan=False, allow_infinity=False)
        return inside | st.sampled_from(HOSTILE_NUMBERS)
    if kinds == "string":
        known = [*strings, *[item for item in schema.get("examples", []) if isinstance(item, str)]]
        return st.one_of(st.sampled_from(known or ["x"]), st.sampled_from(HOSTILE_STRINGS), st.text(max_size=30))
    if kinds == "boolean":
        return st.booleans()
    if kinds == "null":
        return st.none()
    if kinds == "array":
        if depth > 3:
            return st.just([])
        low_items = int(schema.get("minItems", 0))
        high_items = min(int(schema.get("maxItems", low_items + 4)), low_items + 4)
        prefix = schema.get("prefixItems")
        if prefix:
            return st.tuples(*[typed_value(item, definitions, strings, depth + 1) for item in prefix]).map(list)
        items = typed_value(schema.get("items", {}), definitions, strings, depth + 1)
        return st.lists(items, min_size=low_items, max_size=max(low_items, high_items)) | st.lists(items, max_size=1)
    if kinds == "object" or "properties" in schema:
        if depth > 3:
            return st.just({})
        return st.fixed_dictionaries(
            {name: typed_value(prop, definitions, strings, depth + 1)
             for name, prop in schema.get("properties", {}).items() if name in schema.get("required", [])},
            optional={name: typed_value(prop, definitions, strings, depth + 1)
                      for name, prop in schema.get("properties", {}).items()
                      if name not in schema.get("required", [])})
    return HOSTILE_VALUE  # no type declared: anything goes


def tool_arguments(schema: dict[str, Any], strings: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments for a tool with ``schema``: valid by type, or with one argument hostile, missing or extra."""
    definitions = schema.get("$defs", {})
    properties: dict[str, Any] = schema.get("properties", {})
    required = [name for name in schema.get("required", []) if name in properties]
    typed = st.fixed_dictionaries(
        {name: typed_value(properties[name], definitions, strings) for name in required},
        optional={name: typed_value(prop, definitions, strings) for name, prop in properties.items()
                  if name not in required})
    changes = ["none", "extra"] + ["hostile value"] * bool(properties) + ["missing"] * bool(required)
    extra_name = st.text(min_size=1, max_size=12).filter(lambda name: name not in properties)

    @st.composite
    def draw_arguments(draw: st.DrawFn) -> dict[str, Any]:
        arguments = draw(typed)
        change = draw(st.sampled_from(changes))
        if change == "hostile value":
            arguments[draw(st.sampled_from(sorted(properties)))] = draw(HOSTILE_VALUE)
        elif change == "missing":
            arguments.pop(draw(st.sampled_from(required)), None)
        elif change == "extra":
            arguments[draw(extra_name)] = draw(HOSTILE_VALUE)
        return arguments

    return draw_arguments()


# The servers -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class FuzzedServer:
    """How to serve one target for fuzzing, what it must never show, and a call that must keep working."""

    target: str
    options: tuple[str, ...] = ()
    private_folders: tuple[Path, ...] = ()
    strings: tuple[str, ...] = ()
    probe: tuple[str, dict[str, Any]] = ("reset", {"seed": 0})
    examples_per_tool: int = 20


def disaster_server(home: Path, shared: Path) -> FuzzedServer:
    from gauntlet.mcp_servers.disaster.scenes import build_scenes

    root = home / "disaster-data"
    build_scenes(root, events=[DISASTER_EVENT], size_px=64, seed=0)
    event_files = sorted(path.name for path in (root / "scenes" / DISASTER_EVENT).iterdir())
    strings = [f"data/{DISASTER_EVENT}/{name}" for name in event_files]
    strings += [DISASTER_EVENT, f"data/{DISASTER_EVENT}", "ws/out.tif", "ws/out.geojson", "type", "kind", "occupants",
                "capacity", "material", "name"]
    return FuzzedServer("disaster", ("--server-kwargs", json.dumps({"data_root": str(root / "scenes")})),
                        private_folders=(root,), strings=tuple(strings), probe=("calc_add", {"a": 1, "b": 2}),
                        examples_per_tool=25)


def chem_server(home: Path, shared: Path) -> FuzzedServer:
    from gauntlet.mcp_servers.chem.build import catalogue_path
    from gauntlet.mcp_servers.chem.reaction_data import reactions_dir
    from gauntlet.mcp_servers.chem.store import CatalogueStore

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GAUNTLET_HOME", str(shared))
        database = catalogue_path(**SMALL_CATALOGUE)
        reactions = reactions_dir(**SMALL_REACTIONS)
    store = CatalogueStore(database)
    try:
        chemicals = [store.chemical(chemical_id) for chemical_id in range(1, 11)]
    finally:
        store.close()
    strings = [text for chemical in chemicals for text in (chemical.name, chemical.smiles, chemical.cas or "")]
    strings += ["g", "mg", "kg", "mol", "mmol", "mL", "L", "clean", "noisy-high", "1 + 2", "(12.5 + 3.2) / 0.85",
                "1/0", "2**2**2**2**2", "__import__('os')"]
    options = {"db_path": str(database), "reactions_dir": str(reactions)}
    return FuzzedServer("chem", ("--server-kwargs", json.dumps(options)),
                        private_folders=(database.parent, reactions, shared), strings=tuple(strings),
                        probe=("calculate", {"expression": "1 + 2"}), examples_per_tool=40)


SERVERS = {
    "disaster": disaster_server,
    "chem": chem_server,
    "env:CartPole-v1": lambda home, shared: FuzzedServer("env:CartPole-v1", examples_per_tool=100),
    # A Box action and a Dict observation, with the reward shown: the other step tool.
    "env:gauntlet/LocationFinding-v0": lambda home, shared: FuzzedServer("env:gauntlet/LocationFinding-v0",
                                                                 ("--expose-reward",), examples_per_tool=100),
}


@pytest.fixture(scope="module")
def fuzz_home(tmp_path_factory) -> Iterator[Path]:
    """One data cache for every server of this module (the small data are built once). Hypothesis keeps
    its own files there too, not in the working folder."""
    home = tmp_path_factory.mktemp("fuzz-home")
    set_hypothesis_home_dir(home / "hypothesis")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GAUNTLET_HOME", str(home))
        yield home
    set_hypothesis_home_dir(None)


def problem_with(response: dict[str, Any], private: list[str]) -> str | None:
    """What breaks the contract in one ``tools/call`` response (None: nothing)."""
    if "result" not in response:
        return f"a protocol error instead of a tool result: {response.get('error')}"
    result = response["result"]
    text = " ".join(str(block.get("text", "")) for block in result.get("content", []))
    shown = text + json.dumps(result.get("structuredContent"))
    leaked = [folder for folder in private if folder in shown]
    if leaked:
        return f"the answer shows the server's folder {leaked[0]}: {text[:300]}"
    if not result.get("isError"):
        return None
    if not text.strip():
        return "an error without a message"
    if "Traceback" in text:
        return f"an error carrying a traceback: {text[:300]}"
    if text.startswith("internal error"):
        return f"an internal error (the input reached code that did not expect it): {text[:300]}"
    return None


def clip(value: Any, limit: int = 300) -> str:
    shown = repr(value)
    return shown if len(shown) <= limit else shown[:limit] + f"... ({len(shown)} characters)"


def fuzz_tool(client: LineClient, tool: dict[str, Any], server: FuzzedServer, private: list[str]) -> None:
    """Call ``tool`` with Hypothesis-drawn arguments; raise on the first answer that breaks the contract."""
    schema = tool.get("inputSchema", {})

    @settings(max_examples=server.examples_per_tool, deadline=None, derandomize=True, database=None,
              phases=(Phase.explicit, Phase.generate), suppress_health_check=list(HealthCheck))
    @given(tool_arguments(schema, list(server.strings)))
    def call_once(arguments: dict[str, Any]) -> None:
        answer = client.call(tool["name"], arguments)
        problem = problem_with(answer, private)
        assert problem is None, f"{tool['name']}({clip(arguments)}): {problem}{client.logged_cause(answer)}"

    for explicit in explicit_examples(schema):
        call_once = example(explicit)(call_once)
    call_once()


def explicit_examples(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The arguments a server's own refusals offer as "a valid example" (when it can build them all),
    and that example with each numeric argument in turn set to each of ``NUMBER_EDGES``: every run
    tries these, whatever it draws."""
    properties = schema.get("properties", {})
    definitions = schema.get("$defs", {})
    documented = {name: example_value(properties[name], definitions)
                  for name in schema.get("required", []) if name in properties}
    try:
        json.dumps(documented)
    except TypeError:  # an argument with no example to build (free text): the drawn examples cover it
        return []
    numeric = [name for name, prop in properties.items() if admits_numbers(prop, definitions)]
    return [documented] + [{**documented, name: edge} for name in numeric for edge in NUMBER_EDGES]


def admits_numbers(schema: dict[str, Any], definitions: dict[str, Any]) -> bool:
    if "$ref" in schema:
        return admits_numbers(definitions.get(schema["$ref"].split("/")[-1], {}), definitions)
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    return bool({"integer", "number"} & set(kinds)) or any(
        admits_numbers(branch, definitions) for key in ("anyOf", "oneOf") for branch in schema.get(key, []))


@pytest.fixture(params=sorted(SERVERS))
def server(request, fuzz_home, shared_data_home) -> FuzzedServer:
    """Each server to fuzz, its small data built (in setup, so the fuzzing's own time shows apart)."""
    return SERVERS[request.param](fuzz_home, shared_data_home)


@pytest.mark.starts_early
def test_every_tool_answers_fuzzed_input_with_a_result_or_a_clean_refusal_and_the_server_keeps_answering(
        server, fuzz_home, tmp_path):
    private = sorted({str(folder) for path in (*server.private_folders, fuzz_home, Path(gauntlet.__file__).parent)
                      for folder in (path, path.resolve())}, key=len, reverse=True)
    env = {key: value for key, value in os.environ.items() if key != "GAUNTLET_DEBUG"}
    env["GAUNTLET_HOME"] = str(fuzz_home)
    command = serve_command(server.target, *server.options)
    client = LineClient(command, env, tmp_path / "server-stderr.log")
    broken: list[str] = []
    try:
        client.initialize()
        tools = client.list_tools()
        assert tools, f"{server.target} lists no tools"
        for tool in tools:
            try:
                fuzz_tool(client, tool, server, private)
            except AssertionError as exc:
                broken.append(str(exc).splitlines()[0])
            probe_tool, probe_arguments = server.probe
            answer = client.call(probe_tool, probe_arguments)
            assert not answer.get("result", {}).get("isError", True), (
                f"after fuzzing {tool['name']}, {probe_tool} fails: {answer}")
        assert client.process.poll() is None, "the server exited"
    finally:
        client.close()
    assert not broken, f"{len(broken)} of {len(tools)} tools broke the contract:\n" + "\n".join(broken)
