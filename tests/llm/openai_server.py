"""A real OpenAI-compatible HTTP server for tests: it answers ``POST /v1/chat/completions`` from a script.

    python tests/llm/openai_server.py --script replies.json --record requests.jsonl [--port 0]

The script is a JSON list of replies, played in order, one per request:

* ``{"content": "...", "tool_calls": [{"name": "search_chemical", "arguments": {"query": "HATU"}}]}``
  answers with structured ``tool_calls`` (ids ``call_srv_<request>_<k>``), as a hosted API does;
* ``{"content": "{\\"name\\": ..., \\"arguments\\": {...}}"}`` answers with a call written as text, as
  llama.cpp or a small model behind vLLM does.
* ``{"status": 429}`` (or 500, 503, ...) answers with that HTTP status and an OpenAI-style error, as a
  rate-limited or failing server does; a script that fails N times, then replies, tests retries.

Every request body is appended to the ``--record`` file as one JSON line before the reply is sent, so
a test can check the messages and tools it was sent. The server prints ``listening on
http://127.0.0.1:<port>/v1`` once it accepts connections. A request past the end of the script, or
one asking to stream, gets an OpenAI-style error (HTTP 400), so a test that expects otherwise fails
loudly.

Tests start it with ``running_server(replies, folder)``, which runs this file as a subprocess.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def _completion(reply: dict[str, Any], index: int, model: str, prompt_tokens: int) -> dict[str, Any]:
    calls = [{"id": f"call_srv_{index}_{k}", "type": "function",
              "function": {"name": call["name"], "arguments": json.dumps(call.get("arguments", {}))}}
             for k, call in enumerate(reply.get("tool_calls", []))]
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content", "")}
    if calls:
        message["tool_calls"] = calls
    completion_tokens = len(str(reply.get("content", "")).split()) + 10 * len(calls)
    return {"id": f"chatcmpl-{index}", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


class ScriptedServer(ThreadingHTTPServer):
    def __init__(self, address: tuple[str, int], replies: list[dict[str, Any]], record: Path) -> None:
        super().__init__(address, Handler)
        self.replies = replies
        self.record = record
        self.served = 0
        self.lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    server: ScriptedServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # stderr stays quiet: the test reads the record file

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._send(status, {"error": {"message": message, "type": "invalid_request_error", "code": None}})

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._error(404, f"no route {self.path}")
            return
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        with self.server.lock:
            index = self.server.served
            self.server.served += 1
            with open(self.server.record, "a") as handle:
                handle.write(json.dumps(body) + "\n")
        if body.get("stream"):
            self._error(400, "this test server does not stream")
        elif index >= len(self.server.replies):
            self._error(400, f"the script has {len(self.server.replies)} replies and this is request {index + 1}")
        elif "status" in self.server.replies[index]:
            status = int(self.server.replies[index]["status"])
            self._error(status, f"scripted failure {status} on request {index + 1}")
        else:
            prompt_tokens = sum(len(str(message.get("content") or "").split()) for message in body.get("messages", []))
            self._send(200, _completion(self.server.replies[index], index, str(body.get("model", "")), prompt_tokens))


@dataclass(frozen=True)
class RunningServer:
    """A server started by ``running_server``: its base URL and the requests it has received."""

    base_url: str
    record: Path

    def requests(self) -> list[dict[str, Any]]:
        """The request bodies received so far, in order."""
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]


@contextmanager
def running_server(replies: list[dict[str, Any]], folder: Path) -> Iterator[RunningServer]:
    """This server in a subprocess on 127.0.0.1 (a free port), playing ``replies``; stopped on exit."""
    script, record = folder / "openai-replies.json", folder / "openai-requests.jsonl"
    script.write_text(json.dumps(replies))
    process = subprocess.Popen([sys.executable, __file__, "--script", str(script), "--record", str(record)],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("listening on "):
            raise RuntimeError(f"the test OpenAI server did not start (exit {process.wait()}): {line!r}")
        yield RunningServer(line.split()[-1], record)
    finally:
        process.terminate()
        process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--script", type=Path, required=True, help="JSON list of replies, played in order")
    parser.add_argument("--record", type=Path, required=True, help="JSONL file that receives each request body")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free one)")
    arguments = parser.parse_args()
    server = ScriptedServer(("127.0.0.1", arguments.port), json.loads(arguments.script.read_text()), arguments.record)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
