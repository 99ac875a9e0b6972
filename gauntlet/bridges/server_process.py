"""Servers in child processes, for tests and benchmarks: always through ``gauntlet serve``.

    serve_command("chem", "--server-kwargs", '{"db_path": "..."}')   # a stdio client spawns this
    with spawn_http_server("env:CartPole-v1", "--control-port", "0") as served:
        served.url, served.control_url
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

_SERVING_LINE = re.compile(r"serving \S+(?P<operator> \(operator only\))? at (?P<url>http://\S+)")


def serve_command(target: str, *options: str) -> list[str]:
    """The command line of ``gauntlet serve TARGET OPTIONS`` in this Python environment."""
    return [sys.executable, "-m", "gauntlet.cli", "serve", target, *options]


@dataclass
class ServerProcess:
    """A server running in a child process (see ``spawn_http_server``); ``stderr_lines`` is what it
    has written to stderr so far."""

    process: subprocess.Popen[str]
    url: str
    control_url: str | None = None
    stderr_lines: list[str] = field(default_factory=list)


@contextlib.contextmanager
def spawn_http_server(target: str, *options: str, startup_timeout_s: float = 60.0) -> Iterator[ServerProcess]:
    """Serve ``target`` over HTTP from a child process on a free port; yields its URLs, stops it after.

    Runs ``gauntlet serve TARGET --transport http --port 0 OPTIONS`` (add ``--control-port 0`` to
    ``options`` for a control URL) and reads the URLs it announces on stderr.
    """
    command = serve_command(target, "--transport", "http", "--port", "0", *options)
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    urls: dict[str, str] = {}
    lines: list[str] = []
    wants_control = "--control-port" in options
    found = threading.Event()

    def read_stderr(stderr: Iterator[str]) -> None:
        # Keep draining stderr for the child's whole life, so a chatty child never blocks on a full pipe.
        for line in stderr:
            lines.append(line.rstrip())
            match = _SERVING_LINE.search(line)
            if match:
                urls["control" if match.group("operator") else "main"] = match.group("url")
                if "main" in urls and ("control" in urls or not wants_control):
                    found.set()
        found.set()

    assert process.stderr is not None  # asked for with stderr=PIPE
    threading.Thread(target=read_stderr, args=(process.stderr,), name="gauntlet-server-stderr", daemon=True).start()
    try:
        if not found.wait(startup_timeout_s) or "main" not in urls:
            raise RuntimeError(f"{' '.join(command)} did not start: " + (" | ".join(lines[-5:]) or "no output"))
        yield ServerProcess(process=process, url=urls["main"], control_url=urls.get("control"), stderr_lines=lines)
    finally:
        process.terminate()
        try:
            process.wait(startup_timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
