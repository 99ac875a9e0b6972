"""Serve one client over stdio, reading stdin in a daemon thread so that a stop signal ends the server.

The SDK's own stdio transport reads stdin in a worker thread that holds the process until stdin
closes, so a server whose client keeps stdin open could not be stopped by SIGINT or SIGTERM. Here
the lines of stdin come from ``StdinLines`` (a daemon thread on the raw descriptor) and the server
runs on the SDK's stdio streams built from them. stdout carries only the protocol: nothing else
may write to it.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import sys
import threading
from typing import Any, cast

from mcp.server.fastmcp import FastMCP

from gauntlet.bridges import mcp_compat


async def run_stdio(server: FastMCP) -> None:
    """``server.run_stdio_async()``, with stdin read by ``StdinLines``."""
    if not mcp_compat.can_run_on_streams():
        await server.run_stdio_async()
        return
    from mcp.server.stdio import stdio_server

    # stdio_server wraps stdin as an anyio AsyncFile; it only iterates over its lines.
    stdin = cast(Any, StdinLines(sys.stdin.fileno()))
    async with stdio_server(stdin=stdin) as (read_stream, write_stream):
        await mcp_compat.run_on_streams(server, read_stream, write_stream)


class StdinLines:
    """The lines of a file descriptor as an async iterator, read by a daemon thread.

    The thread reads the raw descriptor (``os.read``), not ``sys.stdin``: a daemon thread blocked
    inside a buffered reader would abort the interpreter at exit.
    """

    def __init__(self, fd: int):
        self._fd = fd
        self._queue: asyncio.Queue[str | None] | None = None

    def __aiter__(self) -> StdinLines:
        return self

    async def __anext__(self) -> str:
        if self._queue is None:
            self._queue = asyncio.Queue()
            threading.Thread(target=self._pump, args=(asyncio.get_running_loop(), self._queue),
                             name="gauntlet-stdin", daemon=True).start()
        line = await self._queue.get()
        if line is None:
            raise StopAsyncIteration
        return line

    def _pump(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pending = ""
        try:
            while chunk := os.read(self._fd, 1 << 16):
                *lines, pending = (pending + decoder.decode(chunk)).split("\n")
                for line in lines:
                    loop.call_soon_threadsafe(queue.put_nowait, line + "\n")
            pending += decoder.decode(b"", final=True)
            if pending:
                loop.call_soon_threadsafe(queue.put_nowait, pending)
            loop.call_soon_threadsafe(queue.put_nowait, None)
        except (OSError, RuntimeError):  # stdin or the loop has closed: nobody wants the input
            return
