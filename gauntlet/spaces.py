"""JSON encoding of Gymnasium space elements, and plain-language descriptions of spaces.

Episodes, the MCP bridge and replay all move actions and observations as JSON. ``to_json`` and
``from_json`` round-trip every element of the standard spaces exactly (float32 values survive the
trip through JSON doubles bit for bit), and ``from_json`` raises ``ValueError`` naming the expected
space when a value does not belong to it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces


def to_json(space: spaces.Space, value: Any) -> Any:
    """Encode an element of ``space`` as plain JSON data (lists, numbers, strings, dicts)."""
    if isinstance(space, spaces.Discrete):
        return int(value)
    if isinstance(space, (spaces.Box, spaces.MultiBinary, spaces.MultiDiscrete)):
        return np.asarray(value).tolist()
    if isinstance(space, spaces.Dict):
        return {key: to_json(sub, value[key]) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return [to_json(sub, item) for sub, item in zip(space.spaces, value, strict=True)]
    if isinstance(space, spaces.Text):
        return str(value)
    raise TypeError(f"no JSON encoding for {type(space).__name__}")


def from_json(space: spaces.Space, data: Any) -> Any:
    """Decode JSON data into an element of ``space``; ``ValueError`` if it is not one."""
    try:
        value = _decode(space, data)
    except (TypeError, ValueError, KeyError, IndexError, OverflowError) as exc:
        raise ValueError(f"{data!r} is not in {describe(space)} ({exc})") from None
    if not space.contains(value):
        raise ValueError(f"{_short(data)} is not in {describe(space)}")
    return value


def _decode(space: spaces.Space, data: Any) -> Any:
    if isinstance(space, spaces.Discrete):
        if isinstance(data, bool) or not float(data).is_integer():
            raise ValueError("expected an integer")
        return np.int64(int(data))
    if isinstance(space, (spaces.Box, spaces.MultiBinary, spaces.MultiDiscrete)):
        array = np.asarray(data, dtype=space.dtype)
        if array.shape != space.shape:
            raise ValueError(f"shape {array.shape} but the space has shape {space.shape}")
        return array
    if isinstance(space, spaces.Dict):
        if not isinstance(data, dict) or set(data) != set(space.spaces):
            raise ValueError(f"expected an object with keys {sorted(space.spaces)}")
        return {key: _decode(sub, data[key]) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_decode(sub, item) for sub, item in zip(space.spaces, data, strict=True))
    if isinstance(space, spaces.Text):
        return str(data)
    raise TypeError(f"no JSON decoding for {type(space).__name__}")


def _short(data: Any, limit: int = 120) -> str:
    text = repr(data)
    return text if len(text) <= limit else text[:limit] + "..."


def describe(space: spaces.Space) -> str:
    """A one-line description of a space and the JSON that encodes its elements."""
    if isinstance(space, spaces.Discrete):
        high = space.start + space.n - 1
        return f"Discrete({space.n}): an integer from {space.start} to {high}"
    if isinstance(space, spaces.Box):
        low, high = np.unique(space.low), np.unique(space.high)
        bounds = (f"[{low[0]:g}, {high[0]:g}]" if low.size == 1 and high.size == 1
                  else "per-element bounds low=" + _short(space.low.tolist(), 60)
                  + " high=" + _short(space.high.tolist(), 60))
        return f"Box{space.shape} {space.dtype}: nested list of numbers of shape {space.shape} in {bounds}"
    if isinstance(space, spaces.MultiBinary):
        return f"MultiBinary{space.shape}: nested list of 0/1 of shape {space.shape}"
    if isinstance(space, spaces.MultiDiscrete):
        return f"MultiDiscrete({space.nvec.tolist()}): list of integers, element i in [0, nvec[i])"
    if isinstance(space, spaces.Dict):
        parts = "; ".join(f"{key}: {describe(sub)}" for key, sub in space.spaces.items())
        return f"Dict: an object {{{parts}}}"
    if isinstance(space, spaces.Tuple):
        return "Tuple: a list [" + "; ".join(describe(sub) for sub in space.spaces) + "]"
    if isinstance(space, spaces.Text):
        return f"Text: a string of {space.min_length} to {space.max_length} characters"
    return repr(space)
