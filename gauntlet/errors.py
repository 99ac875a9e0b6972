"""Errors a user can fix.

Raise ``UserError`` at a boundary (CLI option, file, env id) when the input is wrong and say how to
put it right; the CLI shows the message as one line and exits with status 2. Inner code trusts
validated inputs and does not raise it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


class UserError(Exception):
    """A problem with the user's input or setup; the message names it and says how to fix it."""


def check_arguments(function: Callable[..., Any], *args: Any, what: str, fix: str, **kwargs: Any) -> None:
    """Raise ``UserError`` if ``function`` cannot be called with these arguments (a user's config
    that does not fit an agent or builder); ``what`` names the callee, ``fix`` says what to change."""
    try:
        inspect.signature(function).bind(*args, **kwargs)
    except TypeError as exc:
        raise UserError(f"{what} does not accept the config {kwargs} ({exc}); {fix}") from None
