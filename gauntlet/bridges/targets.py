"""Find a server by name: ``env:<ENV_ID>`` (any Gymnasium env, through the env bridge) or a registered
tool server (registry kind ``server``, whose entry loads a factory returning a FastMCP server).

    resolve_server("env:CartPole-v1", expose_reward=True)
    resolve_server("chem", db_path="catalogue.sqlite")
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from mcp.server.fastmcp import FastMCP

from gauntlet.errors import UserError

ENV_PREFIX = "env:"


def resolve_server(target: str, **options: Any) -> FastMCP:
    """The FastMCP server that ``target`` names: ``env:<ENV_ID>`` or a registered server name.

    ``options`` go to the server's factory: for ``env:`` targets ``build_env_server``'s keyword
    arguments (``env_kwargs``, ``expose_reward``, ``expose_privileged``, ``record``), for a registered
    server its factory's own (chem's ``db_path``, disaster's ``families``, ...). Options given as None
    are ignored (false, 0 and empty values are passed on); an option the factory does not take, or an
    empty env id, is a ``UserError`` naming what to write instead.
    """
    requested = {key: value for key, value in options.items() if value is not None}
    if target.startswith(ENV_PREFIX):
        from gauntlet.bridges.env_server import build_env_server

        env_id = target[len(ENV_PREFIX):]
        if not env_id:
            raise UserError("empty env id: write env:<ENV_ID>, e.g. env:CartPole-v1")
        _check_options(build_env_server, requested, f"an {ENV_PREFIX}<ENV_ID> target")
        return build_env_server(env_id, **requested)
    from gauntlet.registry import UnknownEntryError, registry

    try:
        entry = registry.get("server", target)
    except UnknownEntryError as exc:
        raise UnknownEntryError(f"{exc}; to serve a Gymnasium env write env:<ENV_ID>") from None
    factory = entry.load()
    _check_options(factory, requested, f"server {target!r}")
    server = factory(**requested)
    if not isinstance(server, FastMCP):
        raise TypeError(f"server {target!r}: its factory {entry.target} returned "
                        f"{type(server).__name__}, not a FastMCP server")
    return server


def _check_options(factory: Callable[..., Any], requested: dict[str, Any], what: str) -> None:
    parameters = inspect.signature(factory).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    takes = [name for name, p in parameters.items()
             if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
             and p.default is not inspect.Parameter.empty]
    unsupported = sorted(key for key in requested if key not in takes)
    if unsupported:
        raise UserError(f"{what} does not take {', '.join(unsupported)}; it takes "
                         f"{', '.join(takes) or 'no options'}")
