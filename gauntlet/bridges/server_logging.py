"""Where a server process's log goes: stderr or a file, at the level the operator sets.

Never stdout: over stdio it is the protocol channel, and one stray line breaks the client. Each
recipe server logs on ``gauntlet.server.<name>`` (refused requests at INFO, bugs at ERROR with their
traceback and incident id); the MCP SDK's own loggers stay at WARNING unless the level is DEBUG,
since at INFO they log every request.
"""

from __future__ import annotations

import logging
import os
import sys

LEVELS = ("debug", "info", "warning", "error")
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_server_logging(level: str = "warning", file: str | os.PathLike[str] | None = None) -> logging.Handler:
    """Send every log record at ``level`` or above to ``file`` (appended to) or to stderr; returns the handler.

    Call it before building the server: the SDK installs its own stderr handler when the first
    server is built in a process that has none.
    """
    if level.lower() not in LEVELS:
        raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LEVELS)}")
    numeric = getattr(logging, level.upper())
    handler: logging.Handler = (logging.FileHandler(file, mode="a", encoding="utf-8") if file is not None
                                else logging.StreamHandler(sys.stderr))
    handler.setFormatter(logging.Formatter(FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    logging.getLogger("mcp").setLevel(numeric if numeric <= logging.DEBUG else max(numeric, logging.WARNING))
    return handler
