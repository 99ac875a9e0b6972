"""Transformer in-context learners meta-trained for LocationFinding-v0 and RuleDiscovery-v0.

The same prior-fitted-network recipe and encoder-decoder architecture as the ActiveRegression
transformer (``transformer.py``: a self-attention encoder over [start, (x_i, y_i)...], one decoder token
per query that only cross-attends to the encoded context), with a task-specific input and output:

* ``location_finding``: designs ξ ∈ [−4, 4]² (fed as ξ / 4), real outcomes; the head gives a Gaussian
  predictive N(μ_ψ, σ²_ψ). The exact posterior predictive here is a mixture (``ParticleLearner``); a
  single Gaussian per query is the approximation this learner makes.
* ``rules``: designs are n-bit inputs (fed as 2x − 1), outcomes 0/1 (fed as 2y − 1); the head gives a
  Bernoulli logit, returned as a two-class ``CategoricalPredictive`` (probabilities clipped to
  [1e-6, 1 − 1e-6], so an answer the learner is sure of never costs an infinite loss).

Meta-training (``build``) draws tasks from the env's own prior, a context of random length
0..max_context and held-out targets, and minimises the targets' negative log-likelihood

    L(ψ) = E_{θ ~ p(θ), N} [ −(1/M) Σ_j log p_ψ(y_j | x_j, C_N) ],                             (PFN loss)

whose minimiser is the exact posterior predictive. Context designs follow the designs the envs'
random policies make: location finding mixes the uniform square (``curiosity-random``) and the sources'
prior N(0, I) (``curiosity-random-prior`` and the env's probes) half and half, point by point; rules
query distinct inputs in a random order (``curiosity-random`` never repeats an input). Targets are drawn
like the env's probes (N(0, I) clipped / uniform over inputs), and for location finding half from the
square as well.

Weights are built into the data cache (``ensure_built("curiosity-meta-icl", ...)``), deterministic given
the config; ``gauntlet data build curiosity-meta-icl --config '{"config": "location_finding"}'`` (or
``"rules"``) builds a named config.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from gauntlet.datacache import ensure_built
from gauntlet.envs.curiosity.data_versions import META_ICL as DATA_NAME
from gauntlet.envs.curiosity.data_versions import META_ICL_VERSION as DATA_VERSION
from gauntlet.envs.curiosity.learners import InContextLearner
from gauntlet.envs.curiosity.location_finding_model import DESIGN_BOUND, LOCATION_FINDING
from gauntlet.envs.curiosity.predictive import CategoricalPredictive, GaussianPredictive
from gauntlet.envs.curiosity.rule_discovery import all_inputs, rule_tables
from gauntlet.envs.curiosity.transformer import CrossAttentionBlock, meta_train

TASKS = ("location_finding", "rules")
PROBABILITY_FLOOR = 1e-6


@dataclass(frozen=True)
class MetaICLConfig:
    """Task, model and meta-training settings; the cache key of the weights."""

    task: str = "location_finding"
    d_model: int = 32
    n_heads: int = 4
    n_layers: int = 2
    n_decoder_layers: int = 2
    max_context: int = 30
    n_targets: int = 32
    batch_size: int = 64
    steps: int = 1500
    learning_rate: float = 1e-3
    seed: int = 0
    # RuleDiscovery-v0's class (LocationFinding-v0's model is LOCATION_FINDING's defaults).
    n_bits: int = 4
    rule_class: str = "conjunction"
    dfa_states: int = 3

    @property
    def design_dim(self) -> int:
        return 2 if self.task == "location_finding" else self.n_bits


CONFIGS = {
    "location_finding": MetaICLConfig("location_finding", max_context=30, steps=1500),
    "rules": MetaICLConfig("rules", max_context=16, n_targets=16, steps=1500),
    "location_finding-smoke": MetaICLConfig("location_finding", max_context=6, n_targets=8, batch_size=16, steps=40),
    "rules-smoke": MetaICLConfig("rules", n_bits=3, max_context=8, n_targets=8, batch_size=16, steps=40),
}


def check_config(config: MetaICLConfig) -> None:
    if config.task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}; got {config.task!r}")
    if config.task == "rules" and config.max_context > 2 ** config.n_bits:
        raise ValueError(f"rules: max_context ({config.max_context}) must be at most 2^n_bits = {2 ** config.n_bits}")


class InContextTransformer(nn.Module):
    """Encoder over [start, (x_i, y_i)...], cross-attending query decoder; ``n_outputs`` numbers per query."""

    def __init__(self, config: MetaICLConfig):
        super().__init__()
        self.embed_context = nn.Linear(config.design_dim + 1, config.d_model)
        self.embed_query = nn.Linear(config.design_dim, config.d_model)
        self.start = nn.Parameter(torch.zeros(1, 1, config.d_model))
        layer = nn.TransformerEncoderLayer(config.d_model, config.n_heads, 2 * config.d_model, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, config.n_layers, enable_nested_tensor=False)
        self.memory_norm = nn.LayerNorm(config.d_model)
        self.decoder = nn.ModuleList(CrossAttentionBlock(config.d_model, config.n_heads)
                                     for _ in range(config.n_decoder_layers))
        n_outputs = 2 if config.task == "location_finding" else 1
        self.head = nn.Sequential(nn.LayerNorm(config.d_model), nn.Linear(config.d_model, n_outputs))

    def forward(self, context_x: torch.Tensor, context_y: torch.Tensor, context_mask: torch.Tensor,
                queries: torch.Tensor) -> torch.Tensor:
        """Inputs already scaled (``scale_inputs``); returns ``(B, M, n_outputs)``."""
        batch = context_y.shape[0]
        tokens = torch.cat([self.start.expand(batch, 1, -1),
                            self.embed_context(torch.cat([context_x, context_y[..., None]], dim=-1))], dim=1)
        visible = torch.cat([torch.ones(batch, 1, dtype=torch.bool), context_mask], dim=1)
        memory = self.memory_norm(self.encoder(tokens, src_key_padding_mask=~visible))
        hidden = self.embed_query(queries)
        for block in self.decoder:
            hidden = block(hidden, memory, visible)
        return self.head(hidden)


def scale_inputs(config: MetaICLConfig, context_x: np.ndarray, context_y: np.ndarray, queries: np.ndarray):
    """Env units to the network's: ξ / 4 for location finding; 2x − 1 and 2y − 1 for rules."""
    if config.task == "location_finding":
        return context_x / DESIGN_BOUND, context_y, queries / DESIGN_BOUND
    return 2 * context_x - 1, 2 * context_y - 1, 2 * queries - 1


def sample_tasks(config: MetaICLConfig, rng: np.random.Generator, tables: np.ndarray | None = None):
    """A meta-training batch in env units: contexts ``(B, N, D)``, ``(B, N)``, their mask, and targets ``(B, M, D)``,
    ``(B, M)``."""
    batch, n, m = config.batch_size, config.max_context, config.n_targets
    lengths = rng.integers(0, n + 1, batch)
    mask = np.arange(n)[None] < lengths[:, None]
    if config.task == "location_finding":
        model = LOCATION_FINDING
        theta = rng.standard_normal((batch, model.n_sources, 2))

        def designs(count: int) -> np.ndarray:
            prior = np.clip(rng.standard_normal((batch, count, 2)), -DESIGN_BOUND, DESIGN_BOUND)
            square = rng.uniform(-DESIGN_BOUND, DESIGN_BOUND, (batch, count, 2))
            return np.where(rng.random((batch, count, 1)) < 0.5, prior, square)

        x, queries = designs(n), designs(m)

        def mean(d: np.ndarray) -> np.ndarray:  # μ(ξ, θ_b) per history, the same arithmetic as ``SourceIntensity``
            dx = d[..., None, 0] - theta[:, None, :, 0]
            dy = d[..., None, 1] - theta[:, None, :, 1]
            return np.log(model.background + (1.0 / (model.max_signal + dx * dx + dy * dy)).sum(-1))

        y = mean(x) + model.noise_std * rng.standard_normal((batch, n))
        target_y = mean(queries) + model.noise_std * rng.standard_normal((batch, m))
        return x, y, mask, queries, target_y
    if tables is None:
        tables = rule_tables(config.rule_class, config.n_bits, config.dfa_states)
    inputs = all_inputs(config.n_bits)
    rules = rng.integers(len(tables), size=batch)
    order = np.argsort(rng.random((batch, len(inputs))), axis=1)[:, :n]  # distinct inputs, random order
    target_index = rng.integers(len(inputs), size=(batch, m))
    answer = lambda index: tables[rules[:, None], index].astype(np.float64)
    return inputs[order], answer(order), mask, inputs[target_index], answer(target_index)


def negative_log_likelihood(config: MetaICLConfig, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """−log p_ψ(y | x, C) per target (env units of y); the (PFN loss) before averaging."""
    if config.task == "location_finding":
        mean, log_variance = output.unbind(-1)
        return 0.5 * (np.log(2 * np.pi) + log_variance + (target - mean) ** 2 / log_variance.exp())
    return nn.functional.binary_cross_entropy_with_logits(output[..., 0], target, reduction="none")


def build(folder: Path, **params) -> None:
    """Meta-train by the (PFN loss); write ``weights.pt`` and ``training.json``."""
    config = MetaICLConfig(**params)
    check_config(config)
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    tables = rule_tables(config.rule_class, config.n_bits, config.dfa_states) if config.task == "rules" else None
    model = InContextTransformer(config)
    as_tensor = lambda a: torch.as_tensor(a, dtype=torch.float32)

    def batch_loss() -> torch.Tensor:
        x, y, mask, queries, target = sample_tasks(config, rng, tables)
        x, y, queries = scale_inputs(config, x, y, queries)
        output = model(as_tensor(x), as_tensor(y), torch.as_tensor(mask), as_tensor(queries))
        return negative_log_likelihood(config, output, as_tensor(target)).mean()

    meta_train(folder, model, config, batch_loss)


class MetaTransformerLearner(InContextLearner):
    """A meta-trained ``InContextTransformer`` as an ``InContextLearner`` (one forward pass per call)."""

    def __init__(self, config: MetaICLConfig, weights: Path):
        check_config(config)
        self.config = config
        self.design_dim = config.design_dim
        self.max_context = config.max_context
        self.model = InContextTransformer(config)
        self.model.load_state_dict(torch.load(weights, weights_only=True))
        self.model.eval()

    def _predict(self, context_x, context_y, queries, context_mask) -> GaussianPredictive | CategoricalPredictive:
        # Real rows first, cut to the longest real context of the batch: padding costs attention time.
        longest = int(context_mask.sum(axis=1).max(initial=0))
        order = np.argsort(~context_mask, axis=1, kind="stable")[:, :longest]
        take = lambda a: np.take_along_axis(a, order.reshape(order.shape + (1,) * (a.ndim - 2)), axis=1)
        x, y, q = scale_inputs(self.config, take(context_x), take(context_y), queries)
        as_tensor = lambda a: torch.as_tensor(a, dtype=torch.float32)
        with torch.no_grad():
            output = self.model(as_tensor(x), as_tensor(y), torch.as_tensor(take(context_mask)), as_tensor(q)).double()
        if self.config.task == "location_finding":
            return GaussianPredictive(output[..., 0].numpy(), output[..., 1].exp().numpy())
        positive = torch.sigmoid(output[..., 0]).clamp(PROBABILITY_FLOOR, 1 - PROBABILITY_FLOOR).numpy()
        return CategoricalPredictive(np.stack([1 - positive, positive], axis=-1))


def build_named(folder: Path, config: str = "location_finding") -> None:
    """The data builder of ``gauntlet data build curiosity-meta-icl``: ``build`` of ``CONFIGS[config]``."""
    if config not in CONFIGS:
        raise ValueError(f"config must be one of {sorted(CONFIGS)}; got {config!r}")
    build(folder, **asdict(CONFIGS[config]))


def load_meta_learner(config: str | MetaICLConfig) -> MetaTransformerLearner:
    """The meta-trained learner of a named config (cached under ``{"config": name}``) or of a ``MetaICLConfig``,
    trained into the data cache on first use (minutes for the full configs)."""
    if isinstance(config, str):
        if config not in CONFIGS:
            raise ValueError(f"config must be one of {sorted(CONFIGS)} or a MetaICLConfig; got {config!r}")
        folder = ensure_built(DATA_NAME, DATA_VERSION, build_named, params={"config": config})
        return MetaTransformerLearner(CONFIGS[config], folder / "weights.pt")
    check_config(config)
    folder = ensure_built(DATA_NAME, DATA_VERSION, build, params=asdict(config))
    return MetaTransformerLearner(config, folder / "weights.pt")
