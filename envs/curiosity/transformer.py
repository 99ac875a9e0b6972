"""A small transformer meta-trained to be an in-context learner for ActiveRegression-v0.

Architecture (a prior-fitted network in the style of Müller et al. 2022, "Transformers can do Bayesian
inference"): each context point (x_i, y_i) and each query x_j is one token; context tokens attend to
the real context tokens (and a start token), query tokens attend to those and themselves only
(never to other queries), so a query's prediction depends on the context alone. A head maps each
query token to the mean and log variance of a Gaussian predictive.

Meta-training (``build``): tasks sampled from the env's prior (w ~ N(0, s_w² I), x ~ U(−1, 1),
y = φ(x)ᵀw + ε), a random context length 0..max_context per task, and the Gaussian negative
log-likelihood of held-out targets,

    L(ψ) = E_{task, N} [ −(1/M) Σ_j log N(y_j; μ_ψ(x_j, C_N), σ²_ψ(x_j, C_N)) ]             (PFN loss)

whose minimiser is the exact posterior predictive. Weights are produced by ``build`` into the data
cache (``ensure_built``): deterministic given the config and seed, checksummed, built once.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from gauntlet.datacache import ensure_built
from gauntlet.envs.curiosity.active_regression import RBFFeatures
from gauntlet.envs.curiosity.learners import InContextLearner
from gauntlet.envs.curiosity.predictive import GaussianPredictive

DATA_NAME = "curiosity-regression-icl"
DATA_VERSION = "2"


@dataclass(frozen=True)
class TransformerConfig:
    """Model and meta-training settings; the cache key of the weights."""

    d_model: int = 32
    n_heads: int = 4
    n_layers: int = 2
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


class RegressionTransformer(nn.Module):
    """Tokens: a start token, context (x, y, 1) and queries (x, 0, 0); output: mean and log variance per query.

    Every token may attend to the start token and the real context tokens; a query token also to
    itself, never to another query. The start token keeps an empty context well defined. The mask
    is one (L, L) matrix shared by the batch plus a per-context padding mask, so the batched forward
    pass costs what the attention itself costs.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.embed = nn.Linear(3, config.d_model)
        self.start = nn.Parameter(torch.zeros(1, 1, config.d_model))
        layer = nn.TransformerEncoderLayer(config.d_model, config.n_heads, 2 * config.d_model, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, config.n_layers, enable_nested_tensor=False)
        self.head = nn.Linear(config.d_model, 2)

    def forward(self, context_x: torch.Tensor, context_y: torch.Tensor, context_mask: torch.Tensor,
                queries: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        batch, length = context_y.shape
        n_queries = queries.shape[1]
        context = torch.stack([context_x[..., 0], context_y, torch.ones_like(context_y)], dim=-1)
        query = torch.stack([queries[..., 0], torch.zeros_like(queries[..., 0]),
                             torch.zeros_like(queries[..., 0])], dim=-1)
        tokens = torch.cat([self.start.expand(batch, 1, -1), self.embed(torch.cat([context, query], dim=1))], dim=1)
        size = 1 + length + n_queries
        blocked = torch.ones(size, size, dtype=torch.bool)
        blocked[:, : 1 + length] = False  # everyone sees the start token and the context ...
        blocked[1 + length:, 1 + length:] = ~torch.eye(n_queries, dtype=torch.bool)  # ... queries only themselves
        padding = torch.cat([torch.zeros(batch, 1, dtype=torch.bool), ~context_mask,
                             torch.zeros(batch, n_queries, dtype=torch.bool)], dim=1)
        hidden = self.encoder(tokens, mask=blocked, src_key_padding_mask=padding)
        mean, log_variance = self.head(hidden[:, 1 + length:]).unbind(-1)
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
    as_tensor = lambda a: torch.as_tensor(a, dtype=torch.float32)  # noqa: E731
    return (as_tensor(x[:, :config.max_context]), as_tensor(y[:, :config.max_context]), torch.as_tensor(mask),
            as_tensor(x[:, config.max_context:]), as_tensor(y[:, config.max_context:]))


def gaussian_nll(mean: torch.Tensor, log_variance: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return 0.5 * (np.log(2 * np.pi) + log_variance + (y - mean) ** 2 / log_variance.exp())


def build(folder: Path, **params) -> None:
    """Meta-train the transformer (equation PFN loss) and write ``weights.pt`` and ``training.json``."""
    config = TransformerConfig(**params)
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    model = RegressionTransformer(config)
    optimiser = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, config.steps)
    losses = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: the same weights on every machine with the same torch
    try:
        for _ in range(config.steps):
            context_x, context_y, mask, target_x, target_y = sample_tasks(config, rng)
            mean, log_variance = model(context_x, context_y, mask, target_x)
            loss = gaussian_nll(mean, log_variance, target_y).mean()
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
         "loss_every_100": losses[::100]}, indent=1))


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
        # Real rows first, so every context fits in max_context tokens whatever its padding.
        order = np.argsort(~context_mask, axis=1, kind="stable")[:, : self.max_context]
        take = lambda a: np.take_along_axis(a, order, axis=1)  # noqa: E731
        with torch.no_grad():
            mean, log_variance = self.model(torch.as_tensor(take(context_x[..., 0])[..., None], dtype=torch.float32),
                                            torch.as_tensor(take(context_y), dtype=torch.float32),
                                            torch.as_tensor(take(context_mask)),
                                            torch.as_tensor(queries, dtype=torch.float32))
        return GaussianPredictive(mean.double().numpy(), log_variance.double().exp().numpy())


def load_transformer_learner(config: str | TransformerConfig = "default") -> TransformerLearner:
    """The meta-trained learner, trained into the data cache on first use (minutes for "default")."""
    if isinstance(config, str):
        if config not in CONFIGS:
            raise ValueError(f"config must be one of {sorted(CONFIGS)} or a TransformerConfig; got {config!r}")
        config = CONFIGS[config]
    folder = ensure_built(DATA_NAME, DATA_VERSION, build, params=asdict(config))
    return TransformerLearner(config, folder / "weights.pt")
