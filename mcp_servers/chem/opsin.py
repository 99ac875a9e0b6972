"""OPSIN, the systematic-name parser, kept warm in one Java process per server process.

Starting OPSIN costs a Java start and its grammar load (0.5-2 s); a warm OPSIN parses a name in about
a millisecond. ``py2opsin`` starts a fresh Java process for every name, which put seconds on every
search that reached it. Here one process runs OPSIN's command line in its interactive mode (a name per
line on standard input, the SMILES, or an empty line when the name does not parse, per line on
standard output), started in the background when the grounder is built, so a server's first
unknown name does not wait for Java either.

A name that takes longer than ``PARSE_TIMEOUT_S`` counts as "no parse" and the process is replaced
(its late answer could otherwise be read as the next name's). A process forked from its owner starts
its own OPSIN (a pipe cannot be shared between processes). Java missing or OPSIN failing means no
parse, never an error: OPSIN is one reading among several, and the grounder says when it was not tried.
"""

from __future__ import annotations

import atexit
import os
import select
import shutil
import subprocess
import threading
import time
from pathlib import Path

PARSE_TIMEOUT_S = 5.0
START_TIMEOUT_S = 60.0
# Fast start and a small heap: OPSIN parses one short name at a time.
JAVA_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Dfile.encoding=UTF-8",
                "-Dstdout.encoding=UTF-8", "-Djava.awt.headless=true")
NICENESS = 10
# A name that warms the parser's grammar and code paths when the process starts.
WARM_UP_NAME = "2-bromo-4-methylbenzoic acid"


def opsin_jar() -> Path | None:
    """The OPSIN command-line jar that ``py2opsin`` ships, or None when the package is not installed."""
    try:
        import py2opsin
    except ImportError:
        return None
    jars = sorted(Path(py2opsin.__file__).parent.glob("opsin-cli-*-jar-with-dependencies.jar"))
    return jars[-1] if jars else None


def available() -> bool:
    """Java is on the PATH and the OPSIN jar is installed."""
    return shutil.which("java") is not None and opsin_jar() is not None


class OpsinParser:
    """One warm OPSIN process: ``parse(name)`` -> SMILES or None (see the module docstring). Thread-safe:
    one name at a time goes through the pipe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._owner_pid = 0
        self._pending = b""
        self._warm = False  # the process has answered once: later names get the short timeout
        self._warming: threading.Thread | None = None

    def start_in_background(self) -> None:
        """Start and warm the process on a thread, so the first ``parse`` finds it ready."""
        if self._warming is None or not self._warming.is_alive():
            self._warming = threading.Thread(target=self.parse, args=(WARM_UP_NAME,), name="opsin-warm-up",
                                             daemon=True)
            self._warming.start()

    def parse(self, name: str) -> str | None:
        """The SMILES OPSIN reads from ``name``, or None (no parse, no Java, or too slow)."""
        line = " ".join(name.split())
        if not line:
            return None
        with self._lock:
            try:
                process = self._running()
                assert process.stdin is not None
                process.stdin.write(line.encode("utf-8") + b"\n")
                process.stdin.flush()
                answer = self._read_line(process, PARSE_TIMEOUT_S if self._warm else START_TIMEOUT_S)
            except (OSError, ValueError, AssertionError):
                answer = None
            if answer is None:  # no answer in time, or the process died: never read a late answer
                self._stop()
                return None
            self._warm = True
            return answer.decode("utf-8", "replace").strip() or None

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _running(self) -> subprocess.Popen[bytes]:
        if self._process is not None and self._owner_pid == os.getpid() and self._process.poll() is None:
            return self._process
        if self._owner_pid != os.getpid():
            self._process = None  # a fork's copy of the parent's pipe: leave the parent's process alone
        self._stop()
        jar = opsin_jar()
        if jar is None or shutil.which("java") is None:
            raise OSError("OPSIN needs Java and the py2opsin package")
        # At a lower CPU priority where `nice` exists: Java's start then yields to the server starting beside it.
        command = ["java", *JAVA_OPTIONS, "-jar", str(jar), "-osmi"]
        if shutil.which("nice"):
            command = ["nice", "-n", str(NICENESS), *command]
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, bufsize=0)
        self._owner_pid, self._pending, self._warm = os.getpid(), b"", False
        return self._process

    def _read_line(self, process: subprocess.Popen[bytes], timeout_s: float) -> bytes | None:
        """One line of the process's output, or None when none comes within ``timeout_s``."""
        assert process.stdout is not None
        descriptor = process.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([descriptor], [], [], remaining)[0]:
                return None
            chunk = os.read(descriptor, 65536)
            if not chunk:  # the process ended
                return None
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return line

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and self._owner_pid == os.getpid():
            process.kill()
            process.wait()
        self._pending = b""


_shared: OpsinParser | None = None
_shared_guard = threading.Lock()


def shared_parser() -> OpsinParser:
    """The process's OPSIN parser (one Java process however many grounders use it), closed at exit."""
    global _shared
    with _shared_guard:
        if _shared is None:
            _shared = OpsinParser()
            atexit.register(_shared.close)
        return _shared
