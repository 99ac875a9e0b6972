"""A small transformer meta-trained to be an in-context learner for ActiveRegression-v0.

Architecture (a prior-fitted network in the style of Müller et al. 2022, "Transformers can do Bayesian
inference", with an encoder-decoder split for speed): the context points (x_i, y_i) and a start token
go through a self-attention encoder *once*; each query x_j is one token of a decoder that only
cross-attends to the encoded context (queries never attend to each other or to themselves through
self-attention), so a query's prediction depends on the context alone and the cost of M queries is
linear in M. A head maps each decoded query to the mean and log variance of a Gaussian predictive.
For the ICL-LP reward this matters: its 2B counterfactual contexts are encoded in one pass of ~30
tokens, and the probes cost one cross-attention each, instead of joining one self-attention of
1 + N + M tokens.

Meta-training (``build``): tasks sampled from the env's prior (w ~ N(0, s_w² I), x ~ U(−1, 1),
y = φ(x)ᵀw + ε), a random context length 0..max_context per task, and the Gaussian negative
log-likelihood of held-out targets,

    L(ψ) = E_{task, N} [ −(1/M) Σ_j log N(y_j; μ_ψ(x_j, C_N), σ²_ψ(x_j, C_N)) ]             (PFN loss)

whose minimiser is the exact posterior predictive. Weights are produced by ``build`` into the data
cache (``ensure_built``): deterministic given the config and seed, checksummed, built once;
``gauntlet data build curiosity-regression-icl`` builds the default.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from gauntlet.datacache import ensure_built
from gauntlet.envs.curiosity.active_regression import RBFFeatures
from gauntlet.envs.curiosity.data_versions import REGRESSION_ICL as DATA_NAME
from gauntlet.envs.curiosity.data_versions import REGRESSION_ICL_VERSION as DATA_VERSION
from gauntlet.envs.curiosity.learners import InContextLearner
from gauntlet.envs.curiosity.predictive import GaussianPredictive


@dataclass(frozen=True)
class TransformerConfig:
    """Model and meta-training settings; the cache key of the weights."""

    d_model: int = 32
    n_heads: int = 4
    n_layers: int = 2  # context encoder (self-attention)
    n_decoder_layers: int = 2  # query decoder (cross-attention to the encoded context)
    max_context: int = 30
    n_targets: int = 32
    batch_size: int = 64
    steps: int = 1500
    learning_rate: float = 1e-3
    seed: int = 0
    # The env's prior (ActiveRegression-v0 defaults).
    n_features: int = 8
    length_scale: float = 0.3
    weight_std: float = 1.0
    noise_std: float = 0.2


CONFIGS = {"default": TransformerConfig(), "smoke": TransformerConfig(d_model=32, n_layers=2, steps=60, batch_size=32)}


class CrossAttentionBlock(nn.Module):
    """Pre-norm decoder block without self-attention: q ← q + Attn(LN(q), K, V); q ← q + FFN(LN(q))."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.norm_query = nn.LayerNorm(d_model)
        self.query = nn.Linear(d_model, d_model)
        self.key_value = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.norm_feedforward = nn.LayerNorm(d_model)
        self.feedforward = nn.Sequential(nn.Linear(d_model, 2 * d_model), nn.ReLU(), nn.Linear(2 * d_model, d_model))

    def forward(self, queries: torch.Tensor, memory: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        """``queries (B, M, d)`` attend to ``memory (B, L, d)`` where ``visible (B, L)`` is True."""
        batch, n_queries, width = queries.shape
        heads, head_width = self.n_heads, width // self.n_heads
        q = self.query(self.norm_query(queries)).view(batch, n_queries, heads, head_width).transpose(1, 2)
        k, v = self.key_value(memory).view(batch, -1, 2, heads, head_width).permute(2, 0, 3, 1, 4)
        # Written out: at these sizes (M ≤ 64 queries, L ≤ 31 keys) two batched matmuls and an additive
        # mask are several times faster on CPU than scaled_dot_product_attention with a boolean mask.
        bias = torch.zeros(visible.shape).masked_fill_(~visible, float("-inf"))[:, None, None, :]
        scores = torch.matmul(q, k.transpose(-1, -2)) * head_width ** -0.5 + bias
        attended = torch.matmul(scores.softmax(dim=-1), v)
        queries = queries + self.out(attended.transpose(1, 2).reshape(batch, n_queries, width))
        return queries + self.feedforward(self.norm_feedforward(queries))


class RegressionTransformer(nn.Module):
    """Encoder over [start, (x_i, y_i)...]; decoder of query tokens x_j; output: mean and log variance per query.

    The start token keeps an empty context well defined (every query can attend to it). The
    context encoder's padding mask hides unused rows, so padded and unpadded contexts agree.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.embed_context = nn.Linear(2, config.d_model)
        self.embed_query = nn.Linear(1, config.d_model)
        self.start = nn.Parameter(torch.zeros(1, 1, config.d_model))
        layer = nn.TransformerEncoderLayer(config.d_model, config.n_heads, 2 * config.d_model, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, config.n_layers, enable_nested_tensor=False)
        self.memory_norm = nn.LayerNorm(config.d_model)
        self.decoder = nn.ModuleList(CrossAttentionBlock(config.d_model, config.n_heads)
                                     for _ in range(config.n_decoder_layers))
        self.head = nn.Sequential(nn.LayerNorm(config.d_model), nn.Linear(config.d_model, 2))

    def encode(self, context_x: torch.Tensor, context_y: torch.Tensor, context_mask: torch.Tensor):
        """The encoded context ``(B, 1 + N, d)`` and which of its tokens are real ``(B, 1 + N)``."""
        batch = context_y.shape[0]
        tokens = torch.cat([self.start.expand(batch, 1, -1),
                            self.embed_context(torch.stack([context_x[..., 0], context_y], dim=-1))], dim=1)
        visible = torch.cat([torch.ones(batch, 1, dtype=torch.bool), context_mask], dim=1)
        return self.memory_norm(self.encoder(tokens, src_key_padding_mask=~visible)), visible

    def forward(self, context_x: torch.Tensor, context_y: torch.Tensor, context_mask: torch.Tensor,
                queries: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        memory, visible = self.encode(context_x, context_y, context_mask)
        hidden = self.embed_query(queries)
        for block in self.decoder:
            hidden = block(hidden, memory, visible)
        mean, log_variance = self.head(hidden).unbind(-1)
        return mean, log_variance


def sample_tasks(config: TransformerConfig, rng: np.random.Generator):
    """A meta-training batch: contexts of random length and held-out targets from the prior."""
    features = RBFFeatures(config.n_features, config.length_scale)
    size = config.max_context + config.n_targets
    x = rng.uniform(-1.0, 1.0, (config.batch_size, size, 1))
    w = config.weight_std * rng.standard_normal((config.batch_size, config.n_features))
    y = np.einsum("bnf,bf->bn", features(x), w) + config.noise_std * rng.standard_normal((config.batch_size, size))
    lengths = rng.integers(0, config.max_context + 1, config.batch_size)
    mask = np.arange(config.max_context)[None] < lengths[:, None]
    as_tensor = lambda a: torch.as_tensor(a, dtype=torch.float32)
    return (as_tensor(x[:, :config.max_context]), as_tensor(y[:, :config.max_context]), torch.as_tensor(mask),
            as_tensor(x[:, config.max_context:]), as_tensor(y[:, config.max_context:]))


def gaussian_nll(mean: torch.Tensor, log_variance: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return 0.5 * (np.log(2 * np.pi) + log_variance + (y - mean) ** 2 / log_variance.exp())


def meta_train(folder: Path, model: nn.Module, config: Any, batch_loss: Callable[[], torch.Tensor]) -> None:
    """Meta-train ``model`` on ``config.steps`` batches of ``batch_loss()`` (the PFN loss of freshly drawn
    tasks) by Adam at ``config.learning_rate`` under a cosine schedule, on one thread (the same weights on
    every machine with the same torch); write ``weights.pt`` and ``training.json``."""
    optimiser = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, config.steps)
    losses, started = [], time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(config.steps):
            loss = batch_loss()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
            losses.append(float(loss.detach()))
    finally:
        torch.set_num_threads(threads)
    torch.save(model.state_dict(), Path(folder) / "weights.pt")
    (Path(folder) / "training.json").write_text(json.dumps(
        {"config": asdict(config), "final_loss_mean_last_100": float(np.mean(losses[-100:])),
         "loss_every_100": losses[::100], "seconds": time.perf_counter() - started}, indent=1))


def build(folder: Path, **params) -> None:
    """Meta-train the transformer (equation PFN loss) and write ``weights.pt`` and ``training.json``."""
    config = TransformerConfig(**params)
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    model = RegressionTransformer(config)

    def batch_loss() -> torch.Tensor:
        context_x, context_y, mask, target_x, target_y = sample_tasks(config, rng)
        mean, log_variance = model(context_x, context_y, mask, target_x)
        return gaussian_nll(mean, log_variance, target_y).mean()

    meta_train(folder, model, config, batch_loss)


class TransformerLearner(InContextLearner):
    """The meta-trained transformer as an ``InContextLearner`` (Gaussian predictive, one forward pass)."""

    design_dim = 1

    def __init__(self, config: TransformerConfig, weights: Path):
        self.config = config
        self.max_context = config.max_context
        self.model = RegressionTransformer(config)
        self.model.load_state_dict(torch.load(weights, weights_only=True))
        self.model.eval()

    def _predict(self, context_x, context_y, queries, context_mask) -> GaussianPredictive:
        # Real rows first, cut to the longest real context of the batch: padding costs attention time.
        longest = int(context_mask.sum(axis=1).max(initial=0))
        order = np.argsort(~context_mask, axis=1, kind="stable")[:, :longest]
        take = lambda a: np.take_along_axis(a, order, axis=1)
        with torch.no_grad():
            mean, log_variance = self.model(torch.as_tensor(take(context_x[..., 0])[..., None], dtype=torch.float32),
                                            torch.as_tensor(take(context_y), dtype=torch.float32),
                                            torch.as_tensor(take(context_mask)),
                                            torch.as_tensor(queries, dtype=torch.float32))
        return GaussianPredictive(mean.double().numpy(), log_variance.double().exp().numpy())


def build_named(folder: Path, config: str = "default") -> None:
    """The data builder of ``gauntlet data build curiosity-regression-icl``: ``build`` of ``CONFIGS[config]``."""
    if config not in CONFIGS:
        raise ValueError(f"config must be one of {sorted(CONFIGS)}; got {config!r}")
    build(folder, **asdict(CONFIGS[config]))


def load_transformer_learner(config: str | TransformerConfig = "default") -> TransformerLearner:
    """The meta-trained learner, trained into the data cache on first use (minutes for "default").

    A named config is cached under the same key as ``gauntlet data build`` uses (no params for
    "default", ``{"config": name}`` otherwise); a ``TransformerConfig`` under its fields.
    """
    if isinstance(config, str):
        if config not in CONFIGS:
            raise ValueError(f"config must be one of {sorted(CONFIGS)} or a TransformerConfig; got {config!r}")
        folder = ensure_built(DATA_NAME, DATA_VERSION, build_named,
                              params={} if config == "default" else {"config": config})
        return TransformerLearner(CONFIGS[config], folder / "weights.pt")
    folder = ensure_built(DATA_NAME, DATA_VERSION, build, params=asdict(config))
    return TransformerLearner(config, folder / "weights.pt")
