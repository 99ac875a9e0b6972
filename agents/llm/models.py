"""One ``--model`` spec for every chat model backend the LLM agent runs on.

=========================================  ===================================================================
``openai:<model>[@<base_url>]``            any OpenAI-compatible server (hosted API, vLLM, llama.cpp, Ollama);
                                           key from ``OPENAI_API_KEY`` (optional with a ``base_url``)
``anthropic:<model>``                      Anthropic's API; key from ``ANTHROPIC_API_KEY``
``llama:<file.gguf>``                      a GGUF model on llama.cpp, in process, decoded as quantised
``hf:<folder | file.gguf | hub id>``       a local transformers model, in process (CPU, or ``device=``);
                                           a GGUF is dequantised to fp32 (the reference runtime)
``scripted:<file>``                        a script of replies played in order (tests, demos)
``offline[:<pinned model | alias>]``       a pinned model shipped in wheels (``data/llm/models.json``), on
(default)                                  llama.cpp: the 1.5B by default, ``offline:small`` the 0.5B
=========================================  ===================================================================

Keys are read from the environment and refused as options: the agent records the spec and the
options, so nothing that reaches them may hold a secret. ``max_retries`` is refused too: the API
models' SDK retries are off (``api_chat``), so that the agent's own retry (its ``model_retries``) is
the only one and records each attempt. Nothing is downloaded at run time, and an
endpoint is not probed until the first call: a server that is down then fails that call with a
``UserError`` naming the URL.

The API backends' classes live in ``api_chat`` (errors explained, calls written as text read), the
llama.cpp one in ``llama_chat``, the transformers one in ``local_chat``, the pinned offline files in
``offline_model``; each is imported only when its backend is asked for.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from pydantic import ValidationError

from gauntlet.errors import UserError

BACKENDS = {
    "openai": "openai:<model>[@<base_url>]",
    "anthropic": "anthropic:<model>",
    "llama": "llama:<.gguf file>",
    "hf": "hf:<model folder, .gguf file or cached hub id>",
    "scripted": "scripted:<script file>",
    "offline": "offline[:<pinned model or alias, e.g. small>]",
}
KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
# A server on the user's own machine or network needs no key; the OpenAI client insists on one.
PLACEHOLDER_KEY = "no-key-needed"
_SECRET_OPTIONS = {"api_key", "openai_api_key", "anthropic_api_key"}


@dataclass(frozen=True)
class ModelSpec:
    """A parsed ``--model`` spec: the backend, the model it names ("" for the offline default) and,
    for ``openai``, the server's base URL."""

    backend: str
    model: str = ""
    base_url: str | None = None


def parse_spec(spec: str | None) -> ModelSpec:
    """The backend, model and base URL a ``--model`` spec names (None or "" is ``offline``)."""
    spec = (spec or "offline").strip()
    backend, colon, rest = spec.partition(":")
    if backend not in BACKENDS:
        forms = ", ".join(BACKENDS.values())
        raise UserError(f"unknown model backend {backend!r} in --model {spec!r}; the backends are: {forms}")
    if backend == "offline":
        return ModelSpec("offline", rest.strip())
    model, base_url = rest.strip(), None
    if backend == "openai" and "@" in model:
        model, _, base_url = model.partition("@")
        model, base_url = model.strip(), base_url.strip().rstrip("/")
        if not base_url.startswith(("http://", "https://")):
            raise UserError(f"--model {spec!r}: the base URL {base_url!r} must start with http:// or https:// "
                            f"(e.g. openai:{model or '<model>'}@http://127.0.0.1:8000/v1)")
    if not colon or not model:
        raise UserError(f"--model {spec!r} names no model; write it as {BACKENDS[backend]}")
    return ModelSpec(backend, model, base_url)


def make_chat_model(spec: str | None = None, **options: Any) -> BaseChatModel:
    """The chat model ``spec`` names (see the module docstring), built with ``options`` (e.g.
    ``temperature``, ``max_tokens`` or ``timeout`` for API models, ``max_new_tokens`` or ``device``
    for local ones). Raises ``UserError`` with the fix for a spec, option, key or file that is wrong;
    ``max_retries`` is refused (the agent's ``model_retries`` sets how often a call is retried)."""
    parsed = parse_spec(spec)
    secrets = _SECRET_OPTIONS & set(options)
    if secrets:
        raise UserError(f"model option {sorted(secrets)[0]!r} would be recorded with the run; put the key in "
                        f"{KEY_VARIABLES.get(parsed.backend, 'the environment')} instead")
    if "max_retries" in options:
        raise UserError("model option 'max_retries' is refused: the model's SDK does not retry, so each attempt "
                        "is recorded; set the agent's model_retries instead")
    try:
        return _BUILDERS[parsed.backend](parsed, options)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "options"
        raise UserError(f"the {parsed.backend} model does not accept the option {where} ({problem['msg']}); "
                        "fix the model options") from None


def _key(backend: str, required: bool) -> str:
    variable = KEY_VARIABLES[backend]
    key = os.environ.get(variable, "").strip()
    if not key and required:
        raise UserError(f"the {backend} backend needs an API key and {variable} is not set; export {variable}=... "
                        "(keys are read from the environment only, never recorded)")
    return key or PLACEHOLDER_KEY


def _openai(spec: ModelSpec, options: dict[str, Any]) -> BaseChatModel:
    from gauntlet.agents.llm.api_chat import OpenAICompatibleChat

    # OpenAI-compatible servers speak chat completions; only OpenAI's own API has the Responses API.
    extra: dict[str, Any] = {"use_responses_api": False} if spec.base_url else {}
    return OpenAICompatibleChat(model=spec.model, base_url=spec.base_url,
                                api_key=_key("openai", required=spec.base_url is None), **extra, **options)


def _anthropic(spec: ModelSpec, options: dict[str, Any]) -> BaseChatModel:
    from gauntlet.agents.llm.api_chat import AnthropicChat

    return AnthropicChat(model=spec.model, api_key=_key("anthropic", required=True), **options)


def _hf(spec: ModelSpec, options: dict[str, Any]) -> BaseChatModel:
    from gauntlet.agents.llm.local_chat import LocalChatModel

    path = Path(spec.model).expanduser()
    if not path.exists():
        path = _cached_hub_model(spec.model)
    elif path.is_file() and path.suffix != ".gguf":
        raise UserError(f"hf:{spec.model} is a file but not a .gguf model; give a .gguf file or a model folder")
    return LocalChatModel(model_path=str(path), **options)


def _cached_hub_model(model_id: str) -> Path:
    """The local snapshot of a hub model already in the Hugging Face cache (nothing is downloaded)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        return Path(snapshot_download(model_id, local_files_only=True))
    except (LocalEntryNotFoundError, HFValidationError):
        raise UserError(f"hf:{model_id} is neither a model folder nor a .gguf file on this machine, nor a model in "
                        "the local Hugging Face cache (nothing is downloaded at run time); give a local path") from None


def _script_path(spec: ModelSpec) -> Path:
    """The script file of a ``scripted:`` spec (``UserError`` when there is none)."""
    if not Path(spec.model).is_file():
        raise UserError(f"the script {spec.model} of --model scripted:{spec.model} does not exist; fix the path")
    return Path(spec.model)


def _gguf_path(spec: ModelSpec) -> Path:
    """The GGUF file of a ``llama:`` spec (``UserError`` when there is none)."""
    path = Path(spec.model).expanduser()
    if not path.is_file() or path.suffix != ".gguf":
        raise UserError(f"llama:{spec.model} is not a .gguf file on this machine; give the path of a GGUF model")
    return path


def _scripted(spec: ModelSpec, options: dict[str, Any]) -> BaseChatModel:
    from gauntlet.agents.llm.scripted import ScriptedChatModel, ScriptFormatError

    _script_path(spec)
    if options:
        raise UserError(f"the scripted model takes no options (got {', '.join(sorted(options))}); drop them")
    try:
        return ScriptedChatModel.from_file(spec.model)
    except ScriptFormatError as exc:
        raise UserError(str(exc)) from None


def _llama(spec: ModelSpec, options: dict[str, Any]) -> BaseChatModel:
    return llama_model(_gguf_path(spec), options)


def _offline(spec: ModelSpec, options: dict[str, Any]) -> BaseChatModel:
    from gauntlet.agents.llm.offline_model import model_path

    return llama_model(model_path(spec.model or None), options)


# The backends that decode on llama.cpp (the pinned offline models, a GGUF file): only they take a call
# grammar, and with it a thought line before the call.
LLAMA_BACKENDS = frozenset({"offline", "llama"})
LOCAL_BACKENDS = LLAMA_BACKENDS | {"hf"}
"""The backends whose prompt the agent writes itself (their chat models take a ``prompt_tools`` binding)."""
SAMPLING = {"temperature": 0.7, "top_p": 0.8, "top_k": 20}
"""A local model's sampling where attempts must differ (Qwen2.5's own generation settings): the offline
experiment's repeated attempts and the oversight benchmarks' base agents."""
MAX_NEW_TOKENS = 256
"""A local model's reply cap in the experiments: any call of these servers fits."""


def runs_on_llama(spec: str | None) -> bool:
    """Whether ``spec``'s model decodes on llama.cpp (see ``LLAMA_BACKENDS``)."""
    return parse_spec(spec).backend in LLAMA_BACKENDS


def check_spec(spec: str | None) -> ModelSpec:
    """``parse_spec``, plus what can be checked without loading anything: a pinned offline model's name,
    a scripted model's script and a llama.cpp model's file exist. The driver calls it, so a misspelt
    model fails in one line before a run folder or a worker exists."""
    parsed = parse_spec(spec)
    if parsed.backend == "offline":
        from gauntlet.agents.llm.offline_model import model_pin

        model_pin(parsed.model or None)
    elif parsed.backend == "scripted":
        _script_path(parsed)
    elif parsed.backend == "llama":
        _gguf_path(parsed)
    return parsed


LLAMA_MISSING = ("the llama.cpp runtime (llama-cpp-python) is not installed; run `make setup`, which builds it once "
                 "for this CPU (about 13 minutes on 2 cores), or use --model hf:<file.gguf> (transformers, slower)")


def llama_model(path: Path, options: dict[str, Any]) -> BaseChatModel:
    """The GGUF model at ``path`` on llama.cpp (``UserError`` when the runtime is not installed)."""
    try:
        from gauntlet.agents.llm.llama_chat import LlamaChatModel
    except ImportError:
        raise UserError(LLAMA_MISSING) from None
    return LlamaChatModel(model_path=str(path), **options)


def local_model(path: str | Path, **options: Any) -> BaseChatModel:
    """A local model for reading states (the latent monitor's reader): a ``.gguf`` file on llama.cpp,
    the runtime the offline agent decodes on, so a monitor and the agent share one loaded model and
    its kept states; a transformers model folder on transformers."""
    path = Path(path)
    if path.suffix == ".gguf":
        return llama_model(path, options)
    from gauntlet.agents.llm.local_chat import LocalChatModel

    return LocalChatModel(model_path=str(path), **options)


_BUILDERS = {"openai": _openai, "anthropic": _anthropic, "llama": _llama, "hf": _hf, "scripted": _scripted,
             "offline": _offline}
