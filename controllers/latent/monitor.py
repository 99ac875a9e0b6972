"""The chaos score as a run-time monitor of LLM-agent episodes, and the fitted score's file.

``LatentMonitor`` (registered monitor ``latent``, config ``model=FILE``) watches an ``llm`` agent's
episode: each step's messages extend the conversation it keeps; for every model reply among them it
reads the reply's response-token states with a reader model (default: the offline model, the one the
score was fitted on) over the conversation before the reply, and records ``chaos`` (the reply's
divergence from the compliant manifold) and ``flagged`` (1 above the file's threshold). The reader sees
the conversation's turns but not the agent's tool schemas (episode records keep the tools' names,
not their schemas), as the suite the score is fitted on has none.

The reader of a ``.gguf`` file runs on llama.cpp, as the offline agent does. When the agent's model
is the reader itself (the ``offline`` default, or ``llama:`` the same file, in the same process:
one loaded runtime per file), the monitor does not read the reply again: it asks the loaded model to
keep the score's layer while it decodes (``watch``) and takes the states the agent's own decoding
wrote the reply from (``reused`` 1). Those states saw the agent's prompt as it was, tool
schemas included; a reply decoded elsewhere (another model, a replayed episode) is read by the
reader as above (``reused`` 0). A reply with tool calls is read as the bare JSON the offline model
writes them in (``{"name": ..., "arguments": ...}``, one per line), so its states are those of the call
as written.

``SHIPPED_SCORE`` (``chaos-layer12.npz`` beside this module, the default ``model``) is the score the
instruction-hierarchy study fitted on the offline model (``python experiments/latent_monitor.py --size
full --only hierarchy``: layer 12, rank 32, the threshold at the 95th percentile of compliant replies).

``save_chaos_score``/``load_chaos_score``: a fitted ``ChaosScore`` and its gate threshold in one
``.npz`` (mean, principal directions, variances, residual variance, layer, threshold, and the model
file it was fitted on), so a monitor runs without refitting.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from gauntlet.controllers.latent.detectors import ChaosScore
from gauntlet.episode import Step
from gauntlet.errors import UserError


def save_chaos_score(path: str | Path, score: ChaosScore, threshold: float, model: str) -> Path:
    """Write a fitted chaos score and its threshold (atomically)."""
    import io

    from gauntlet.fileio import write_atomically

    buffer = io.BytesIO()
    np.savez(buffer, mean=score.mean, directions=score.directions, variances=score.variances,
             residual_variance=score.residual_variance, layer=score.layer, threshold=threshold,
             model=np.array(model))
    return write_atomically(path, buffer.getvalue())


def load_chaos_score(path: str | Path) -> tuple[ChaosScore, float, str]:
    """A fitted chaos score, its threshold and the model file it was fitted on; a clear error otherwise."""
    try:
        with np.load(path) as saved:
            score = ChaosScore(int(saved["layer"]), rank=int(saved["directions"].shape[1]))
            score.mean, score.directions, score.variances = saved["mean"], saved["directions"], saved["variances"]
            score.residual_variance = float(saved["residual_variance"])
            return score, float(saved["threshold"]), str(saved["model"])
    except (OSError, KeyError, ValueError) as exc:
        raise UserError(f"monitor latent: {path} is not a fitted chaos score ({exc}); make one with "
                        "python experiments/latent_monitor.py") from None


def reply_text(message: Any) -> str:
    """What the model wrote for a reply: its text, or its calls as the bare JSON the offline model writes."""
    calls = getattr(message, "tool_calls", None) or []
    if calls:
        return "\n".join(json.dumps({"name": call["name"], "arguments": call["args"]}) for call in calls)
    return str(message.content or "")


SHIPPED_SCORE = "chaos-layer12.npz"


def shipped_score() -> Path:
    """The shipped fit (a package file: a model, not a curated input of ``data/``)."""
    return Path(__file__).resolve().parent / SHIPPED_SCORE


class LatentMonitor:
    """Records each model reply's chaos score (module doc)."""

    name = "latent"

    def __init__(self, model: str | None = None, reader: str | None = None, threads: int = 1):
        from gauntlet.agents.llm.models import local_model

        self.score, self.threshold, fitted_on = load_chaos_score(model if model is not None else shipped_score())
        if reader is None:  # the pinned offline model the score was fitted on
            from gauntlet.agents.llm.offline_model import model_path, pinned_model_of_file

            reader = str(model_path(pinned_model_of_file(fitted_on)))
        if Path(reader).name != fitted_on:
            raise UserError(f"monitor latent: {model} was fitted on {fitted_on}'s states, not {Path(reader).name}'s; "
                            "give the reader it was fitted on")
        reader_model: Any = local_model(reader, threads=threads, max_new_tokens=1)
        reader_model.weights.watch((self.score.layer,))
        self.reader = reader_model
        self._conversation: list[Any] = []

    def observe(self, step: Step) -> dict[str, float]:
        from langchain_core.messages import AIMessage

        from gauntlet.agents.llm.records import message_of

        if step.index == 0:
            self._conversation = []
        scores: dict[str, float] = {}
        for record in step.messages:
            message = message_of(record)
            if isinstance(message, AIMessage) and self._conversation:
                scores = self.reply_scores(self._conversation, message)
            self._conversation.append(message)
        return scores

    def reply_scores(self, conversation: list[Any], reply: Any) -> dict[str, float]:
        """``chaos``, ``flagged`` and ``reused`` of the model's ``reply`` to ``conversation``."""
        from gauntlet.agents.llm.kept_states import reply_key

        kept = self.reader.weights.kept_states(reply_key(reply), self.score.layer)
        if kept is not None and len(kept):
            return {**self.verdict(self.score.divergence(kept)), "reused": 1.0}
        return {**self.chaos(conversation, reply_text(reply)), "reused": 0.0}

    def verdict(self, chaos: float) -> dict[str, float]:
        return {"chaos": chaos, "flagged": float(chaos > self.threshold)}

    def chaos(self, conversation: list[Any], response: str) -> dict[str, float]:
        """The chaos score of ``response`` to ``conversation``, read by the reader model."""
        layer = self.score.layer
        states = self.reader.hidden_states(conversation, response, layers=(layer,))
        # The positions that produced the reply's tokens: the last prompt token and all but the last.
        tokens = states.layers[layer][states.prompt_length - 1:max(len(states.token_ids) - 1, states.prompt_length)]
        return self.verdict(self.score.divergence(tokens))


__all__ = ["SHIPPED_SCORE", "LatentMonitor", "load_chaos_score", "reply_text", "save_chaos_score", "shipped_score"]
