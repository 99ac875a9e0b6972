"""Every shell command in README.md works as written: run in a scratch folder, with small sizes.

Which commands: every line of a fenced code block whose language is ``bash``, ``sh``, ``shell`` or
``console`` (in a ``console`` block only the lines after a ``$ `` prompt). A line ending in ``\\``
continues on the next; a ``#`` comment after the command is dropped; blank and comment-only lines
are skipped. Inline code in prose and tables is not a command here (those are the figures' reproduction
commands, minutes to hours each, checked by their own suites); nor are ``python`` or ``json`` blocks.

Each README command is in exactly one of three tables, or the first test fails, so a new README
command must be handled here:

- ``RUN``: run to completion through ``bash`` in one scratch folder, in README order (later commands
  read what earlier ones wrote), with the substitutions listed beside it (each must match the README
  text, so a changed command fails loudly instead of silently running unchanged). It must exit 0
  within ``TIMEOUT_S`` (a hang fails, naming the command) and print no traceback.
- ``SERVE``: long-lived servers, started as written (port substituted), asked to answer an MCP
  ``initialize`` as a client would, then stopped.
- ``NOT_RUN``: commands the suite cannot run, each with the reason and where its machinery is tested.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
SHELL_LANGUAGES = {"bash", "sh", "shell", "console"}
# A hang guard per command, not a speed requirement.
TIMEOUT_S = 180

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "readme-check", "version": "1"}}}

# README command -> {README text: what the suite runs instead}.
RUN: dict[str, dict[str, str]] = {
    "gauntlet run CartPole-v1 --agent random -n 200 --seed 0 --out runs/cartpole": {"-n 200": "-n 4"},
    # Into the folder the previous command completed: the episodes are already there, so this checks
    # that the ray backend resumes the same run; the backend itself runs in test_eval_runner's ray test.
    "gauntlet run CartPole-v1 --agent random -n 200 --seed 0 --out runs/cartpole --backend ray "
    "[--ray-address HOST:PORT]": {"-n 200": "-n 4", " [--ray-address HOST:PORT]": ""},
    "gauntlet replay runs/cartpole": {},
    "gauntlet branch runs/cartpole/episodes/ep-000000.jsonl --at 5 --action 1 --out runs/branch.jsonl": {},
    "gauntlet report runs/cartpole": {},
    "gauntlet list": {},
    "python -c 'import secrets; print(secrets.token_urlsafe(32))' > token && chmod 600 token": {},
    "gauntlet run CartPole-v1 -n 4 --controller budget --controller-config '{\"max_steps\": 50}' --out runs/capped": {},
    "gauntlet oversight collect taxi --episodes 40 --out runs/oversight-taxi --workers 2":
        {"--episodes 40": "--episodes 8"},
    "gauntlet oversight evaluate runs/oversight-taxi": {},
    "gauntlet oversight train runs/oversight-taxi --out runs/taxi-controller.joblib": {},
    "gauntlet run Taxi-v4 --controller oversight --controller-config '{\"model\": \"runs/taxi-controller.joblib\"}' "
    "-n 2 --out runs/taxi-overseen": {},
}

# README command -> ({README text: substitute}, whether clients must send the bearer token in ./token).
SERVE: dict[str, tuple[dict[str, str], bool]] = {
    "gauntlet serve env:CartPole-v1": ({}, False),
    "gauntlet serve env:CartPole-v1 --transport http --port 8765": ({"--port 8765": "--port 0"}, False),
    "gauntlet serve env:CartPole-v1 --transport http --host 0.0.0.0 --port 8765 --auth-token-file token "
    "--allowed-host gpu-box:8765": ({"--port 8765": "--port 0"}, True),
}

SYNOPSIS = "a usage synopsis (placeholders in capitals, optional parts in brackets), not a command"
NOT_RUN: dict[str, str] = {
    "make demo": "sets up .venv and runs every family's demo, the offline LLM's included (minutes); "
                 "tests/test_cli.py runs `gauntlet demo` and checks each family's demo fails loudly",
    "make test": "runs this very suite",
    "gauntlet eval chem --agent chem-oracle --view clean --limit 300 --workers 2 --out runs/chem-oracle":
        "needs the full chem data (`gauntlet data build chem`, many minutes); the same suite runs through "
        "MCP sessions on a small catalogue in tests/chem/test_suite.py",
    "gauntlet eval disaster --agent gold --tasks ahr-2021-flood/affected_area,ahr-2021-flood/sar_flood_area "
    "--repeats 3 --out runs/ahr":
        "needs the full disaster scenes (`gauntlet data build disaster`: 1.3 GB, about 5 minutes); gold "
        "trajectories replay on small scenes in tests/disaster/test_tasks.py",
    # The synopsis spans two lines without a backslash, so the rule reads it as two.
    "gauntlet eval SUITE [--agent NAME] [--mode M] [--view V] [--tasks ID,...] [--limit N] [--repeats K] [--seed S]":
        SYNOPSIS,
    "[--workers N] [--backend local|ray] [--ray-address ADDR] [--agent-config JSON] [--out DIR]": SYNOPSIS,
    "gauntlet demo --only oversight": "about a minute of branching and training; tests/oversight/test_experiment.py "
                                      "runs this demo",
    "gauntlet demo --only llm": "one chem episode of the 1.5B offline LLM (minutes of CPU); tests/llm/test_demo.py "
                                "runs this demo with one model call",
    "gauntlet demo --only latent": "two episodes of the offline LLM (about a minute); tests/llm/test_demo.py runs "
                                   "this demo on one short episode",
    "gauntlet eval chem --agent llm --limit 3 --workers 1":
        "minutes of the offline LLM on the full chem data; tests/llm runs the LLM agent on the chem server",
    "gauntlet eval chem --agent llm --agent-config '{\"model\": \"offline:qwen2.5-coder-1.5b-instruct\", "
    "\"mode\": \"chemcost\"}' --limit 1":
        "minutes of the 1.5B offline LLM on the full chem data; tests/llm/test_llama_chat.py runs the llama.cpp "
        "backend",
    "gauntlet eval disaster --agent llm --agent-config '{\"tool_scope\": 8, \"mode\": \"instruction\"}' --limit 1":
        "needs the full disaster data and the offline LLM; tests/llm/test_tool_scope.py and test_robust_loop.py "
        "test the tool scope",
}


def without_comment(line: str) -> str:
    """``line`` without a trailing ``# comment`` (a ``#`` inside quotes is not one)."""
    for match in re.finditer(r"\s#", line):
        before = line[:match.start()]
        if before.count("'") % 2 == 0 and before.count('"') % 2 == 0:
            return before.rstrip()
    return line.rstrip()


def readme_commands(text: str) -> list[str]:
    """The shell commands of a Markdown text, in order (see the module docstring for the rule)."""
    commands: list[str] = []
    language = None
    pending = ""
    for line in text.splitlines():
        fence = re.match(r"^\s*```\s*(\S*)", line)
        if fence:
            language = None if language is not None else fence.group(1).lower()
            continue
        if language not in SHELL_LANGUAGES:
            continue
        if language == "console":
            if not pending and not line.startswith("$ "):
                continue  # output, not a command
            line = line[2:] if not pending else line
        line = without_comment(line) if not line.lstrip().startswith("#") else ""
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        command = " ".join((pending + line).split())
        pending = ""
        if command:
            commands.append(command)
    return commands


def substituted(command: str, substitutions: dict[str, str]) -> str:
    for old, new in substitutions.items():
        assert old in command, f"the substitution {old!r} no longer matches the README command {command!r}"
        command = command.replace(old, new)
    return command


def shell_environment() -> dict[str, str]:
    """The user's shell after `make setup`: this environment's scripts (gauntlet, python) first on PATH."""
    env = {key: value for key, value in os.environ.items() if key != "GAUNTLET_DEBUG"}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def run_in_shell(command: str, cwd: Path) -> str | None:
    """Run ``command`` with bash in ``cwd``; what went wrong, or None."""
    process = subprocess.Popen(["bash", "-c", command], cwd=cwd, env=shell_environment(), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return f"hung: no exit within {TIMEOUT_S} s"
    if process.returncode != 0:
        return f"exit {process.returncode}: {stderr.strip()[-500:]}"
    if "Traceback" in stdout + stderr:
        return f"printed a traceback: {(stdout + stderr)[-500:]}"
    return None


def mcp_post(url: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(url, json=INITIALIZE, timeout=30, headers={
        "Accept": "application/json, text/event-stream", **(headers or {})})


def check_server(command: str, cwd: Path, with_token: bool) -> str | None:
    """Start a server command; check that it answers an MCP ``initialize`` (over stdio, or over HTTP at
    the URL it announces, with and without the bearer token); stop it. What went wrong, or None."""
    http = "--transport http" in command
    process = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=cwd, env=shell_environment(),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    # The hang guard: a server that stays silent is killed, which ends the reads below.
    watchdog = threading.Timer(TIMEOUT_S, os.killpg, (process.pid, signal.SIGKILL))
    watchdog.start()
    try:
        if not http:
            process.stdin.write(json.dumps(INITIALIZE) + "\n")
            process.stdin.flush()
            answer = json.loads(process.stdout.readline() or "{}")
            if "result" not in answer:
                return f"no initialize result over stdio within {TIMEOUT_S} s: {answer}"
            process.stdin.close()  # the client goes away: the server ends
            returncode = process.wait()
            return None if returncode == 0 else f"exit {returncode} after its client closed stdin"
        for line in process.stderr:
            announced = re.search(r" at (http://\S+)", line)
            if announced:
                break
        else:
            return f"never announced its URL within {TIMEOUT_S} s (exit {process.wait()})"
        parts = urlsplit(announced.group(1))
        url = f"http://127.0.0.1:{parts.port}{parts.path}"
        if with_token:
            token = (cwd / "token").read_text().strip()
            if mcp_post(url).status_code != 401:
                return "answered a request without the bearer token"
            answer = mcp_post(url, {"Authorization": f"Bearer {token}", "Host": "gpu-box:8765"})
        else:
            answer = mcp_post(url)
        return None if answer.status_code == 200 else f"initialize over HTTP gave {answer.status_code}: {answer.text}"
    finally:
        watchdog.cancel()
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def test_every_readme_command_is_run_or_listed_with_a_reason():
    commands = readme_commands(README.read_text())
    assert commands, "no shell commands found in README.md"
    handled = {*RUN, *SERVE, *NOT_RUN}
    unhandled = [command for command in commands if command not in handled]
    assert not unhandled, f"README commands this test neither runs nor lists with a reason: {unhandled}"
    stale = sorted(handled - set(commands))
    assert not stale, f"commands this test handles that the README no longer has: {stale}"
    assert not ({*RUN} & {*SERVE} | {*RUN, *SERVE} & {*NOT_RUN}), "a command is in more than one table"


def test_the_readme_extraction_rule():
    text = "\n".join([
        "```bash", "make demo   # a comment", "# only a comment", "", "gauntlet serve x \\", "    --port 1", "```",
        "```python", "print('not shell')", "```",
        "```console", "$ gauntlet list", "output line", "```",
        "```sh", "python -c 'a # b' > f  # trailing", "```"])
    assert readme_commands(text) == ["make demo", "gauntlet serve x --port 1", "gauntlet list",
                                     "python -c 'a # b' > f"]


@pytest.mark.starts_early
def test_readme_commands_work_as_written_with_small_sizes(tmp_path):
    problems = []
    for command in readme_commands(README.read_text()):
        if command in RUN:
            problem = run_in_shell(substituted(command, RUN[command]), tmp_path)
        elif command in SERVE:
            substitutions, with_token = SERVE[command]
            problem = check_server(substituted(command, substitutions), tmp_path, with_token)
        else:
            continue
        if problem:
            problems.append(f"{command}\n    {problem}")
    assert not problems, "README commands that do not work as written:\n" + "\n".join(problems)
